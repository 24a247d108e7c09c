"""``stenoflow bench batch``: archive throughput, Ray replicas against one process and faster-whisper.

One archive of synthesized files (several voices, 5-25 s each) is transcribed, per model, by:
the plain loop of ``stenoflow transcribe`` (one process, one model, all threads); the Ray batch
job at 1 replica x all threads and at one replica per CPU x 1 thread; and faster-whisper's
batched pipeline (``BatchedInferencePipeline``, its VAD-cut chunks batched through the encoder)
on the same CTranslate2 weights, compute type and threads. Figures: hours of audio per hour of
wall time (model loading and replica start included: an archive job pays them once), WER over
the archive, and the Ray start-up (paid once per job) recorded beside them.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from stenoflow.bench.clips import Clip
from stenoflow.bench.machine import write_results
from stenoflow.bench.metrics import wer
from stenoflow.model.compute import cpu_compute

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchBenchOptions:
    models: tuple[str, ...] = ("tiny.en", "base")
    compute: str = field(default_factory=cpu_compute)  # what transcribe-batch runs by default
    files: int = 32
    beam_size: int = 5
    threads: int = 2  # the machine's cores the configurations share
    fw_batch_size: int = 8
    seed: int = 11


def run_batch_bench(options: BatchBenchOptions, out_dir: Path) -> str:
    from stenoflow.bench.datasets import short_clips
    from stenoflow.cluster.runtime import connect

    clips = short_clips(options.files, min_s=5.0, max_s=25.0, seed=options.seed)
    audio_s = sum(c.duration for c in clips)
    t0 = time.perf_counter()
    connect(None)
    ray_start_s = time.perf_counter() - t0
    rows: list[dict[str, object]] = []
    for model in options.models:
        runs: list[tuple[str, Callable[[], tuple[float, list[str]]]]] = [
            (f"transcribe loop (1 process x {options.threads} threads)", partial(_loop, model, clips, options)),
            (f"ray: 1 replica x {options.threads} threads", partial(_ray, model, clips, options, 1, options.threads)),
            (f"ray: {options.threads} replicas x 1 thread", partial(_ray, model, clips, options, options.threads, 1)),
            (f"faster-whisper batched ({options.threads} threads, batch {options.fw_batch_size})",
             partial(_faster_whisper, model, clips, options)),
        ]
        for label, run in runs:
            wall, texts = run()
            rows.append({"model": model, "config": label, "wall_s": round(wall, 2),
                         "speed": round(audio_s / wall, 2), "wer": wer([c.text for c in clips], texts).wer})
            log.info("%s", rows[-1])
    table = format_table(rows, audio_s)
    write_results(out_dir, "batch", "Batch benchmark", options, [*rows, {"ray_start_s": ray_start_s}], table,
                  f"{len(clips)} synthesized files, {audio_s / 60:.1f} min of audio, beam {options.beam_size}, "
                  f"{options.compute}. Speed: seconds of audio per second of wall time (= hours per hour), model "
                  f"loading and replica start included; starting the local Ray took {ray_start_s:.1f} s more, once "
                  "per job.")
    plot(rows, out_dir / "batch.png")
    return table


def _loop(model: str, clips: Sequence[Clip], options: BatchBenchOptions) -> tuple[float, list[str]]:
    from stenoflow.api import load_model

    t0 = time.perf_counter()
    m = load_model(model, compute=options.compute, threads=options.threads)
    texts = []
    for clip in clips:
        segments, _ = m.transcribe(clip.audio_path, beam_size=options.beam_size)
        texts.append("".join(s.text for s in segments))
    return time.perf_counter() - t0, texts


def _ray(model: str, clips: Sequence[Clip], options: BatchBenchOptions, actors: int,
         threads: int) -> tuple[float, list[str]]:
    from stenoflow.cluster.batch import BatchOptions, read_manifest, run_batch
    from stenoflow.cluster.inputs import BatchInput

    with tempfile.TemporaryDirectory() as tmp:
        inputs = [BatchInput(str(c.audio_path.resolve()), f"{i:04d}") for i, c in enumerate(clips)]
        summary = run_batch(inputs, BatchOptions(model=model, compute=options.compute, actors=actors,
                                                 threads=threads, beam_size=options.beam_size, formats=("txt",),
                                                 output_dir=Path(tmp)))
        rows = read_manifest(Path(tmp))
        return summary.wall_s, [rows[i.source].text for i in inputs]


def _faster_whisper(model: str, clips: Sequence[Clip], options: BatchBenchOptions) -> tuple[float, list[str]]:
    from faster_whisper import BatchedInferencePipeline, WhisperModel

    from stenoflow.weights.registry import model_source

    fmt, source = model_source(model)
    if fmt != "ctranslate2":
        raise ValueError(f"the faster-whisper peer needs a CTranslate2 model directory, {model} is {fmt}")
    t0 = time.perf_counter()
    fw = WhisperModel(str(source), device="cpu", compute_type=options.compute,
                      cpu_threads=options.threads, num_workers=1)
    pipeline = BatchedInferencePipeline(fw)
    texts = []
    for clip in clips:
        segments, _ = pipeline.transcribe(str(clip.audio_path), beam_size=options.beam_size,
                                          batch_size=options.fw_batch_size)
        texts.append("".join(s.text for s in segments))
    return time.perf_counter() - t0, texts


def format_table(rows: Sequence[dict[str, object]], audio_s: float) -> str:
    lines = [f"Archive: {audio_s / 60:.1f} min of audio.", "",
             "| model | configuration | wall (s) | speed (h of audio per h) | WER |", "|---|---|---|---|---|"]
    lines += [f"| {r['model']} | {r['config']} | {r['wall_s']} | {r['speed']} | {100 * float(r['wer']):.2f}% |"  # type: ignore[arg-type]
              for r in rows]
    return "\n".join(lines)


def plot(rows: Sequence[dict[str, object]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys(str(r["model"]) for r in rows))
    configs = list(dict.fromkeys(str(r["config"]) for r in rows))
    fig, ax = plt.subplots(figsize=(10, 4.5))
    width = 0.8 / len(configs)
    for j, config in enumerate(configs):
        speeds = [next((float(r["speed"]) for r in rows if r["model"] == m and r["config"] == config), 0.0)  # type: ignore[arg-type]
                  for m in models]
        ax.bar([i + j * width for i in range(len(models))], speeds, width, label=config)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(models))], models)
    ax.set_ylabel("hours of audio per hour")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
