"""``transcribe-batch``: an archive transcribed by a pool of model replicas on Ray.

Ray Data runs the job: a map stage reads and decodes each input (local path or URI) to 16 kHz
samples, and an actor pool of :class:`Transcriber` replicas (one loaded model each, a fixed
number of threads each) transcribes them. The driver writes each result as it arrives, the
``transcribe`` formats under ``output_dir`` and a row of ``manifest.jsonl``, so a job stopped at
any point keeps what it finished and a rerun does only the rest. A file that cannot be read or
decoded is an error row, never a failed job; a replica that dies (a killed process, a lost node)
is restarted by Ray and its file transcribed again, written once.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from stenoflow.cluster.inputs import BatchInput, is_uri
from stenoflow.cluster.runtime import cluster_cpus, connect
from stenoflow.model.compute import cpu_compute
from stenoflow.output import FORMATS

log = logging.getLogger(__name__)

MANIFEST = "manifest.jsonl"
SAMPLE_RATE = 16000
DECODERS_PER = 8  # replicas one decoder keeps fed


@dataclass(frozen=True)
class BatchOptions:
    model: str = "base"
    compute: str = field(default_factory=cpu_compute)  # replicas run on CPUs
    actors: int | None = None  # replicas; None: as many as the cluster's CPUs hold at ``threads`` each
    threads: int = 1  # torch threads per replica (and the CPUs each one reserves)
    beam_size: int = 5
    language: str | None = None
    word_timestamps: bool = False
    formats: tuple[str, ...] = ("txt", "json")
    output_dir: Path = Path("transcripts")
    ray_address: str | None = None  # None or "local": a local Ray; "auto" or host:port: a cluster
    chunk_s: float = 600.0  # recordings longer than 1.5x this are cut at pauses into parts replicas share (0: never)
    dashboard: bool = False  # a local Ray starts its dashboard (a cluster has its own)

    def __post_init__(self) -> None:
        if self.chunk_s < 0:
            raise ValueError(f"chunk_s must be >= 0, got {self.chunk_s}")
        if self.actors is not None and self.actors < 1:
            raise ValueError(f"actors must be >= 1, got {self.actors}")
        if self.threads < 1 or self.beam_size < 1:
            raise ValueError("threads and beam_size must be >= 1")
        unknown = sorted(set(self.formats) - set(FORMATS))
        if unknown:
            raise ValueError(f"unknown output format(s) {unknown}; expected {', '.join(FORMATS)}")


@dataclass(frozen=True)
class ManifestRow:
    """One input's outcome, as a line of ``manifest.jsonl``."""

    path: str
    key: str
    duration: float = 0.0  # seconds of audio
    language: str | None = None
    text: str = ""
    seconds: float = 0.0  # wall time the replica spent on it, decoding included
    outputs: list[str] = field(default_factory=list)
    error: str | None = None
    worker: str = ""  # node and process that transcribed it

    @property
    def done(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class BatchSummary:
    files: int  # inputs given
    skipped: int  # already done by an earlier run
    done: int
    failed: int
    audio_s: float  # seconds of audio transcribed in this run
    wall_s: float  # the job's wall time in this run: replicas starting, models loading, every file
    actors: int
    threads: int

    @property
    def speed(self) -> float:
        """Seconds of audio per second of wall time (hours of audio per hour)."""
        return self.audio_s / self.wall_s if self.wall_s > 0 else 0.0


# --- the stages (run on Ray workers) -----------------------------------------------------------
def read_source(source: str) -> bytes:
    if is_uri(source):
        import pyarrow.fs

        fs, path = pyarrow.fs.FileSystem.from_uri(source)
        with fs.open_input_stream(path) as f:
            return bytes(f.read())
    return Path(source).read_bytes()


class Decoder:
    """Reads and decodes inputs: a long-lived process, so the audio libraries load once."""

    def __init__(self, chunk_s: float) -> None:
        import stenoflow.audio.io  # noqa: F401

        self.chunk_s = chunk_s

    def __call__(self, row: dict[str, Any]) -> list[dict[str, Any]]:
        return decode_parts(row, self.chunk_s)


def decode_parts(row: dict[str, Any], chunk_s: float) -> list[dict[str, Any]]:
    """Read and decode one input and cut it into parts (see ``chunks``); a failure becomes the
    error of a single, empty part."""
    import numpy as np

    from stenoflow.audio.io import load_audio
    from stenoflow.cluster.chunks import cut_points

    t0 = time.perf_counter()
    try:
        source = row["source"]
        samples = load_audio(read_source(source) if is_uri(source) else Path(source))
        error = ""
    except (OSError, ValueError) as e:
        samples, error = np.zeros(0, dtype="float32"), str(e) or type(e).__name__
    cuts = [0, *cut_points(samples, chunk_s)]
    decode_s = time.perf_counter() - t0
    return [{**row, "part": i, "parts": len(cuts) - 1, "offset": cuts[i] / SAMPLE_RATE,
             "samples": np.ascontiguousarray(samples[cuts[i] : cuts[i + 1]]), "error": error,
             "decode_s": decode_s / (len(cuts) - 1)} for i in range(len(cuts) - 1)]


class Transcriber:
    """One model replica: loads the model once and transcribes one decoded input per call."""

    def __init__(self, model: str, compute: str, threads: int, transcribe: dict[str, Any]) -> None:
        from stenoflow.api import load_model

        self.model = load_model(model, compute=compute, threads=threads)
        self.options = transcribe
        self.worker = f"{os.uname().nodename}:{os.getpid()}"

    def __call__(self, row: dict[str, Any]) -> dict[str, Any]:
        t0 = time.perf_counter()
        samples, error, result = row["samples"], row["error"], b""
        if not error:
            try:
                segments, info = self.model.transcribe(samples, **self.options)
                result = pickle.dumps((list(segments), info))
            except (ValueError, RuntimeError) as e:
                error = f"transcription failed: {e}"
        return {"source": row["source"], "key": row["key"], "part": row["part"], "parts": row["parts"],
                "offset": row["offset"], "duration": len(samples) / SAMPLE_RATE, "error": error, "result": result,
                "worker": self.worker, "seconds": row["decode_s"] + time.perf_counter() - t0}


# --- the driver ----------------------------------------------------------------------------------
def read_manifest(output_dir: Path) -> dict[str, ManifestRow]:
    """The last row per input of an earlier run's manifest (empty if there is none)."""
    rows: dict[str, ManifestRow] = {}
    path = output_dir / MANIFEST
    if not path.exists():
        return rows
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = ManifestRow(**json.loads(line))
        except (ValueError, TypeError):
            log.warning("%s: skipping an unreadable line", path)
            continue
        rows[row.path] = row
    return rows


def pending_inputs(inputs: Sequence[BatchInput], output_dir: Path) -> list[BatchInput]:
    """The inputs an earlier run did not finish: no manifest row without error, or outputs gone."""
    done = {p for p, r in read_manifest(output_dir).items()
            if r.done and all((output_dir / o).exists() for o in r.outputs)}
    return [i for i in inputs if i.source not in done]


def run_batch(inputs: Sequence[BatchInput], options: BatchOptions,
              progress: Callable[[ManifestRow], None] | None = None) -> BatchSummary:
    """Transcribe ``inputs`` on Ray; each result is written (and ``progress`` called) as it
    arrives. Returns the run's totals."""
    from stenoflow.decoding.transcribe import Segment, TranscriptionInfo  # noqa: F401 (unpickled below)

    options.output_dir.mkdir(parents=True, exist_ok=True)
    todo = pending_inputs(inputs, options.output_dir)
    skipped = len(inputs) - len(todo)
    if skipped:
        log.info("%d of %d inputs already done (%s): skipped", skipped, len(inputs), options.output_dir / MANIFEST)
    ray = connect(options.ray_address, options.dashboard)
    actors = options.actors or max(1, cluster_cpus(ray) // options.threads)
    if not todo:
        return BatchSummary(len(inputs), skipped, 0, 0, 0.0, 0.0, actors, options.threads)
    done = failed = 0
    audio_s = 0.0
    parts: dict[str, dict[int, dict[str, Any]]] = {}  # the parts of each input that arrived so far
    t0 = time.perf_counter()
    with (options.output_dir / MANIFEST).open("a", encoding="utf-8") as manifest:
        for result in _results(ray, todo, options, actors):
            # A part arriving twice (a retried task) is kept once; an input is written once, whole.
            mine = parts.setdefault(result["source"], {})
            if result["part"] in mine or len(mine) == result["parts"]:
                continue
            mine[result["part"]] = result
            if len(mine) < result["parts"]:
                continue
            row = _write([mine[i] for i in range(result["parts"])], options)
            for part in mine.values():  # the audio and results are written: keep only the count
                part.clear()
            manifest.write(json.dumps(asdict(row), ensure_ascii=False) + "\n")
            manifest.flush()
            if row.done:
                done += 1
                audio_s += row.duration
            else:
                failed += 1
                log.error("%s: %s", row.path, row.error)
            if progress is not None:
                progress(row)
    _compact(options.output_dir)
    return BatchSummary(len(inputs), skipped, done, failed, audio_s, time.perf_counter() - t0, actors,
                        options.threads)


def _results(ray: Any, todo: Sequence[BatchInput], options: BatchOptions, actors: int) -> Iterator[dict[str, Any]]:
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False  # the command shows its own, per file
    transcribe = {"beam_size": options.beam_size, "language": options.language,
                  "word_timestamps": options.word_timestamps}
    ds = ray.data.from_items([{"source": i.source, "key": i.key} for i in todo], override_num_blocks=len(todo))
    # Decoding is light next to transcription: a few long-lived decoders that reserve no CPU, so
    # they never wait for the replicas (a task per file would start a process per file).
    ds = ds.flat_map(Decoder, fn_constructor_kwargs={"chunk_s": options.chunk_s},
                     compute=ray.data.ActorPoolStrategy(size=max(1, -(-actors // DECODERS_PER))), num_cpus=0)
    ds = ds.map(Transcriber, fn_constructor_kwargs={"model": options.model, "compute": options.compute,
                                                    "threads": options.threads, "transcribe": transcribe},
                compute=ray.data.ActorPoolStrategy(size=actors), num_cpus=options.threads)
    yield from ds.iter_rows()


def _write(results: Sequence[dict[str, Any]], options: BatchOptions) -> ManifestRow:
    """Write an input's transcripts from the results of its parts, in order; its manifest row."""
    first = results[0]
    common = {"path": first["source"], "key": first["key"],
              "duration": round(sum(float(r["duration"]) for r in results), 3),
              "seconds": round(sum(float(r["seconds"]) for r in results), 3),
              "worker": ",".join(dict.fromkeys(str(r["worker"]) for r in results))}
    errors = [str(r["error"]) for r in results if r["error"]]
    if errors:
        return ManifestRow(**common, error="; ".join(errors))
    from stenoflow.cluster.chunks import join_parts
    from stenoflow.output import write_outputs

    decoded = [pickle.loads(r["result"]) for r in results]  # our own replicas' output
    segments = join_parts([(float(r["offset"]), segs) for r, (segs, _) in zip(results, decoded, strict=True)])
    info = replace(decoded[0][1], duration=float(common["duration"]))
    key = Path(first["key"])
    written = write_outputs(segments, info, key, options.output_dir / key.parent, options.formats)
    return ManifestRow(**common, language=info.language, text="".join(s.text for s in segments).strip(),
                       outputs=[p.relative_to(options.output_dir).as_posix() for p in written])


def _compact(output_dir: Path) -> None:
    """Rewrite the manifest with one row per input, its latest."""
    rows = read_manifest(output_dir)
    tmp = output_dir / (MANIFEST + ".tmp")
    tmp.write_text("".join(json.dumps(asdict(r), ensure_ascii=False) + "\n" for r in rows.values()), encoding="utf-8")
    tmp.replace(output_dir / MANIFEST)
