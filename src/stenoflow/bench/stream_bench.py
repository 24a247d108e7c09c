"""``stenoflow bench stream``: latency and accuracy of streaming configurations on long streams.

Every configuration is a name, a factory of ``StreamingSession`` and a driver mode, so our own
policies and peers (``stenoflow.bench.peers``) are measured by the same loop, on the same
synthesized streams, against the same gold word times. The offline whole-file transcription is
the accuracy reference. Results: ``stream.md`` (table), ``stream.json`` (machine, options, every
figure per clip), ``stream.png`` (latency vs WER) and one word-emission log per run.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import zlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from stenoflow.api import Model, load_model
from stenoflow.bench import mixing
from stenoflow.bench.datasets import Clip, streams
from stenoflow.bench.gold import GoldWord, gold_words
from stenoflow.bench.latency import (
    LatencyStats,
    encoder_gflops_per_audio_s,
    timed_latencies,
    word_latencies,
)
from stenoflow.bench.lost import LostPhrase, blame, lost_phrases
from stenoflow.bench.machine import machine_record, resident_mb
from stenoflow.bench.metrics import wer
from stenoflow.bench.recorded import recorded_available, recorded_stream
from stenoflow.bench.varied import sparse_streams, varied_streams
from stenoflow.decoding.transcribe import TranscribeOptions
from stenoflow.model.compute import cpu_compute
from stenoflow.streaming.drivers import StreamRun, run_stream, write_word_log
from stenoflow.streaming.events import StreamingSession
from stenoflow.streaming.offline import OfflineSession
from stenoflow.streaming.options import StreamOptions
from stenoflow.streaming.threads import stored_split, with_stored_split
from stenoflow.streaming.variants import ABLATION, Stage

log = logging.getLogger(__name__)

SAME_DECODING = "offline-default-decoding"  # the line that decodes whole files as the default does
TRANSCRIBE_DEFAULT = "offline-transcribe"  # the line that decodes whole files as `stenoflow transcribe` does
# how the plot draws and names each offline line (any other: the beam 5 float32 reference)
OFFLINE_LINES = {SAME_DECODING: (":", "the default's decoding"), TRANSCRIBE_DEFAULT: ("-.", "as transcribe runs")}


@dataclass(frozen=True)
class BenchLine:
    """A line beside the default: ``stenoflow stream`` with the options ``flags`` (as typed, for
    the table) on ``model``, which they resolve to ``options`` at ``compute``."""

    model: str
    name: str
    flags: str
    compute: str
    options: StreamOptions

    @property
    def label(self) -> str:
        return f"{self.model}/{self.name}" + (f": {self.flags}" if self.flags else "")


@dataclass(frozen=True)
class StreamBenchOptions:
    models: tuple[str, ...] = ("tiny.en", "base")
    stages: tuple[str, ...] = tuple(s.label for s in ABLATION)  # ablation lines to run (labels)
    variants: tuple[str, ...] = ()  # more variants, at the default's compute, step and beam
    peers: bool = True  # WhisperLiveKit's LocalAgreement and SimulStreaming in the same run
    streams: int = 2  # continuous read prose ...
    minutes: float = 3.0
    varied: int = 2  # ... and varied streams: short items, pauses, lists, numbers, voices
    varied_minutes: float = 1.5
    sparse: int = 0  # ... and sparse ones: the same kind of items, 4 to 12 s apart
    sparse_minutes: float = 1.5
    recorded: bool = True  # ... and the stream of recorded human speech (when setup.sh unpacked it)
    real: bool = False  # ... and the real-speech development set (scripts/build_real_speech.py)
    # room noise at this level (dBFS RMS) over every stream, pauses and all (None: as recorded):
    # where Whisper writes words that nobody said ("you.", the last sentence again)
    noise_db: float | None = None
    drift_minutes: float = 20.0  # one long stream for the default configuration only (0: none)
    chunk_s: float = 0.1  # audio arrives in pieces this long
    threads: int = 2
    gold_model: str = "base"  # aligns the reference text for gold word times
    configs: tuple[str, ...] = ()  # name patterns to run (fnmatch); empty: all
    lines: tuple[BenchLine, ...] = ()  # the default with options changed, each beside it

    def __post_init__(self) -> None:
        if self.noise_db is not None and not self.noise_db <= 0:
            raise ValueError(f"noise_db is a level in dBFS, at most 0, got {self.noise_db}")


@dataclass(frozen=True)
class BenchConfig:
    """One line of the table: how to make a session, and which clock drives it."""

    name: str
    factory: Callable[[], StreamingSession]
    mode: str = "realtime"
    model: str | None = None  # model name, for encoder GFLOPs from reported mel frames
    params: dict[str, object] = field(default_factory=dict)  # echoed into stream.json


class ModelCache:
    """Models loaded on first use (per name and compute type) and shared by the whole run."""

    def __init__(self) -> None:
        self._models: dict[tuple[str, str], Model] = {}

    def get(self, name: str, compute: str = "float32") -> Model:
        if (name, compute) not in self._models:
            self._models[name, compute] = load_model(name, compute=compute)
        return self._models[name, compute]


def stage_options(stage: Stage, model: str) -> StreamOptions:
    """The stream options of an ablation stage (a ``+pipe`` stage uses the stored thread split
    of ``model``, or one thread per executor if none was stored)."""
    split = stored_split(model, stage.compute)
    return stage.options(split if isinstance(split, tuple) else None)


def default_configs(options: StreamBenchOptions, models: ModelCache) -> list[BenchConfig]:
    configs: list[BenchConfig] = []
    stages = {s.label: s for s in ABLATION}
    unknown = [label for label in options.stages if label not in stages]
    if unknown:
        raise ValueError(f"unknown ablation stage(s) {unknown}; known: {list(stages)}")
    default, default_compute = StreamOptions(), cpu_compute()  # what `stenoflow stream` runs here
    transcribe_beam = TranscribeOptions().beam_size or 1  # what `stenoflow transcribe` runs
    extra = [Stage(v, v, default_compute, default.step, default.beam_size, default.context_s, default.commit_confident)
             for v in options.variants]
    for name in options.models:
        configs.append(BenchConfig(f"{name}/offline", lambda n=name: OfflineSession(models.get(n), 5),
                                   "offline", name, {"beam_size": 5, "compute": "float32"}))
        # The whole file as `stenoflow transcribe` decodes it here (its beam, the CPU's compute): the
        # offline command a user holds the stream against, which int8 puts below float32.
        configs.append(BenchConfig(
            f"{name}/{TRANSCRIBE_DEFAULT}",
            lambda n=name: OfflineSession(models.get(n, default_compute), transcribe_beam),
            "offline", name, {"beam_size": transcribe_beam, "compute": default_compute}))
        # The whole file decoded as the default decodes (its beam and compute): what the
        # streaming itself costs, apart from what its decoding gives up against beam 5 in float32.
        configs.append(BenchConfig(
            f"{name}/{SAME_DECODING}",
            lambda n=name: OfflineSession(models.get(n, default_compute), default.beam_size),
            "offline", name, {"beam_size": default.beam_size, "compute": default_compute}))
        default_options = with_stored_split(default, name, default_compute)
        lines = [(f"{name}/default", default_compute, default_options)]
        for s in [*(stages[label] for label in options.stages), *extra]:
            stage = stage_options(s, name)
            label = f"{name}/{s.label}: {s.variant}/{s.compute}/step{s.step:g}/beam{s.beam_size}"
            if (s.compute, stage.resolved(models.get(name))) == (default_compute,
                                                                 default_options.resolved(models.get(name))):
                lines[0] = (f"{label} = default", *lines[0][1:])  # measured once, under both names
                continue
            lines.append((label, s.compute, stage))
        lines += [(line.label, line.compute, line.options) for line in options.lines if line.model == name]
        for label, compute, stream_options in lines:
            if stream_options.hush and models.get(name).hush is None:
                log.warning("%s has no hush word: %s is left out", name, label)
                continue
            configs.append(BenchConfig(
                label, lambda n=name, c=compute, o=stream_options: models.get(n, c).stream(o),  # type: ignore[misc]
                "realtime", name, {"compute": compute, **asdict(stream_options)}))
    if options.peers:  # last: once a peer ran, CTranslate2's thread pools slow the rounds of any later line
        configs += [c for name in options.models for c in peer_configs(name, options)]
    return configs


def peer_configs(model_name: str, options: StreamBenchOptions) -> list[BenchConfig]:
    """WhisperLiveKit's policies on the same model, threads and beam, driven by the same clock."""
    from stenoflow.bench.peers import peer_factories

    factories = peer_factories([model_name], threads=options.threads)
    return [BenchConfig(f"{name}/realtime", factory, "realtime", None, {"peer": name})
            for name, factory in factories.items()]


def select(configs: Sequence[BenchConfig], patterns: Sequence[str]) -> list[BenchConfig]:
    if not patterns:
        return list(configs)
    chosen = [c for c in configs if any(fnmatch.fnmatchcase(c.name, p) for p in patterns)]
    if not chosen:
        raise ValueError(f"no configuration matches {list(patterns)}; known: {[c.name for c in configs]}")
    return chosen


def run_stream_bench(options: StreamBenchOptions, out_dir: Path,
                     extra_configs: Sequence[BenchConfig] = ()) -> str:
    """Run the configurations on the evaluation streams; write the results; return the table."""
    torch.set_num_threads(options.threads)
    models = ModelCache()
    configs = select([*default_configs(options, models), *extra_configs], options.configs)
    clips = [*streams(options.streams, options.minutes), *varied_streams(options.varied, options.varied_minutes),
             *sparse_streams(options.sparse, options.sparse_minutes), *recorded_streams(options.recorded),
             *real_streams(options.real)]
    audios = {c.name: c.load_audio() for c in clips}
    gold = {c.name: gold_words(c, models.get(options.gold_model), audios[c.name]) for c in clips}
    if options.noise_db is not None:  # gold times come from the clean audio
        audios = {name: with_room_noise(audio, options.noise_db, name) for name, audio in audios.items()}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "logs").mkdir(exist_ok=True)
    rows = []
    done: dict[str, list[tuple[Clip, StreamRun]]] = {}
    for config in configs:
        runs = []
        for clip in clips:
            log.info("%s on %s (%.0f s)", config.name, clip.name, clip.duration)
            run = run_stream(config.factory, audios[clip.name], config.mode, options.chunk_s)
            write_word_log(run.words, out_dir / "logs" / f"{_file_name(config.name)}-{clip.name}.jsonl")
            runs.append((clip, run))
        row = summarize(config, runs, gold)
        if config.mode != "offline":
            add_lost_phrases(row, runs, reference_runs(config, done))
        done[config.name] = runs
        log.info("%s: WER %.2f%%, latency mean %.2f s, RTF %.2f", config.name, 100 * row["wer"],
                 row["latency"]["mean"], row["rtf"])  # type: ignore[index]
        rows.append(row)
    drift = None
    defaults = [c for c in configs if c.name.endswith("default")]
    if options.drift_minutes > 0 and defaults:
        drift = run_drift(defaults[-1], options, models, out_dir)
    record = {"machine": machine_record(), "options": asdict(options),
              "clips": [{"name": c.name, "duration": c.duration, "voices": c.voice} for c in clips],
              "configs": rows, "drift": drift}
    (out_dir / "stream.json").write_text(json.dumps(record, indent=1, default=str), encoding="utf-8")
    table = format_table(rows)
    if drift is not None:
        table += "\n\n" + format_drift(drift)
    (out_dir / "stream.md").write_text(_markdown(table, record), encoding="utf-8")
    plot(rows, out_dir / "stream.png")
    return table


def with_room_noise(audio: np.ndarray, level_db: float, name: str) -> np.ndarray:
    """``audio`` with room noise at ``level_db`` dBFS RMS over all of it, the same for a stream's
    name in every run."""
    return mixing.with_noise(audio, level_db, np.random.default_rng(zlib.crc32(name.encode())))


def real_streams(wanted: bool) -> list[Clip]:
    """The streams of the real-speech development set if wanted (built on first use)."""
    if not wanted:
        return []
    from stenoflow.bench.real_speech import real_streams as build

    return build()


def reference_runs(config: BenchConfig, done: dict[str, list[tuple[Clip, StreamRun]]]
                   ) -> list[tuple[Clip, StreamRun]] | None:
    """The offline runs of ``config``'s model that ran before it (beam 5 in float32 first, then as
    ``stenoflow transcribe`` decodes, then as the default decodes), if any."""
    for name in (f"{config.model}/offline", f"{config.model}/{TRANSCRIBE_DEFAULT}", f"{config.model}/{SAME_DECODING}"):
        if name in done:
            return done[name]
    return None


def add_lost_phrases(row: dict[str, object], runs: Sequence[tuple[Clip, StreamRun]],
                     offline: Sequence[tuple[Clip, StreamRun]] | None) -> None:
    """Put the stream's lost phrases against the offline runs (see :mod:`stenoflow.bench.lost`)
    into ``row``: per clip, in all, and by the rule that lies over each."""
    if offline is None:
        return
    reference = {clip.name: run for clip, run in offline}
    lost: list[LostPhrase] = []
    for clip_row, (clip, run) in zip(row["per_clip"], runs, strict=True):  # type: ignore[call-overload]
        phrases = lost_phrases(reference[clip.name].words, run.words, run.dropped)
        clip_row["lost_phrases"] = [asdict(p) for p in phrases]
        clip_row["dropped"] = [asdict(d) for d in run.dropped]
        lost += phrases
    row["lost_phrases"] = len(lost)
    row["lost_by_rule"] = blame(lost)


def recorded_streams(wanted: bool) -> list[Clip]:
    """The recorded stream if it is wanted; if its recordings are missing, none (with a warning)."""
    if not wanted:
        return []
    if not recorded_available():
        log.warning("recorded speech is missing (run `bash scripts/setup.sh`): the recorded stream is left out")
        return []
    return [recorded_stream()]


def _file_name(config: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "+-." else "_" for ch in config)


DRIFT_WINDOW_S = 300.0  # the drift check compares the first and the last this many seconds


def run_drift(config: BenchConfig, options: StreamBenchOptions, models: ModelCache, out_dir: Path) -> dict[str, object]:
    """One long stream through ``config``: latency of the first and last five minutes, and the
    process's resident memory as the stream goes on (it must stay flat)."""
    clip = streams(1, options.drift_minutes, seed=20)[0]
    audio = clip.load_audio()
    gold = gold_words(clip, models.get(options.gold_model), audio)
    memory: list[tuple[float, float]] = []

    def on_update(_update: object, at: float) -> None:
        if not memory or at - memory[-1][0] >= 30.0:
            memory.append((at, resident_mb()))

    log.info("drift: %s on %s (%.0f s)", config.name, clip.name, clip.duration)
    run = run_stream(config.factory, audio, config.mode, options.chunk_s, on_update=on_update)
    write_word_log(run.words, out_dir / "logs" / f"drift-{_file_name(config.name)}.jsonl")
    timed = timed_latencies(gold, run.words)
    first = LatencyStats.of([lat for end, lat in timed if end <= DRIFT_WINDOW_S])
    last = LatencyStats.of([lat for end, lat in timed if end >= clip.duration - DRIFT_WINDOW_S])
    settled = [mb for at, mb in memory if at >= 60.0] or [mb for _, mb in memory]
    return {"config": config.name, "clip": clip.name, "duration": clip.duration,
            "wer": wer(clip.text, run.text).wer, "rtf": run.rtf,
            "first": asdict(first), "last": asdict(last),
            "p90_ratio": last.p90 / first.p90 if first.p90 > 0 else float("nan"),
            "rss_mb": memory, "rss_growth_mb": settled[-1] - settled[0] if settled else float("nan")}


def format_drift(drift: dict[str, object]) -> str:
    first, last = drift["first"], drift["last"]
    assert isinstance(first, dict) and isinstance(last, dict)
    return (f"Drift, {drift['config']} on {drift['clip']} ({float(drift['duration']) / 60:.0f} min): "  # type: ignore[arg-type]
            f"WER {100 * float(drift['wer']):.2f}%, RTF {float(drift['rtf']):.2f}; "  # type: ignore[arg-type]
            f"latency first 5 min mean {first['mean']:.2f} s / p90 {first['p90']:.2f} s, "
            f"last 5 min mean {last['mean']:.2f} s / p90 {last['p90']:.2f} s "
            f"(p90 ratio {float(drift['p90_ratio']):.2f}); "  # type: ignore[arg-type]
            f"resident memory grew {float(drift['rss_growth_mb']):+.0f} MB after the first minute.")


def summarize(config: BenchConfig, runs: Sequence[tuple[Clip, StreamRun]],
              gold: dict[str, list[GoldWord]]) -> dict[str, object]:
    latencies: list[float] = []
    per_clip = []
    for clip, run in runs:
        lat = word_latencies(gold[clip.name], run.words)
        latencies += lat
        per_clip.append({"clip": clip.name, "wer": wer(clip.text, run.text).wer, "rtf": run.rtf,
                         "latency": asdict(LatencyStats.of(lat)), "rounds": len(run.rounds),
                         "words": len(run.words), "text": run.text})
    audio_s = sum(run.audio_s for _, run in runs)
    gflops = encoder_gflops_per_audio_s([r for _, run in runs for r in run.rounds], audio_s)
    return {
        "name": config.name, "mode": config.mode, "model": config.model, "params": config.params,
        "wer": wer([c.text for c, _ in runs], [run.text for _, run in runs]).wer,
        "latency": asdict(LatencyStats.of(latencies)),
        "rtf": sum(run.compute_s for _, run in runs) / audio_s if audio_s else float("nan"),
        "encoder_gflops_per_audio_s": gflops,
        "rounds": sum(len(run.rounds) for _, run in runs),
        "per_round": round_means([r for _, run in runs for r in run.rounds]),
        "per_clip": per_clip,
    }


STAGE_KEYS = ("encoder_ms", "prefill_ms", "decoder_ms", "alignment_ms")  # a round's measured stages
ROUND_KEYS = (*STAGE_KEYS, "round_ms", "forward_passes", "beam_width_avg", "fallbacks", "other_ms",
              "reduced_beam_share")


def round_means(rounds: Sequence[dict[str, float]]) -> dict[str, float]:
    """Per-round means of the timing and decoding figures (NaN where a session reports none),
    the share of rounds whose beam was reduced below the full width (the paper's Table 4), and the
    share of rounds skipped."""
    out = {}
    # A skipped round (nothing to hear: see StreamOptions.skip_idle) ran no stage: it is counted,
    # not averaged.
    out["skipped_rounds"] = float(np.mean([bool(r.get("skipped")) for r in rounds])) if rounds else float("nan")
    rounds = [r for r in rounds if not r.get("skipped")]
    # Other: what no stage measured (a retried hearing, committing, the session's own work). A
    # pipelined round encoded the next round beside its decoding, so its time is not a sum of
    # stages and it has no "other".
    rounds = [{**r, "other_ms": r["round_ms"] - sum(r.get(k, 0.0) for k in STAGE_KEYS)}
              if {"round_ms", "encoder_ms", "decoder_ms", "alignment_ms"} <= r.keys() and not r.get("pipelined")
              else r for r in rounds]
    for key in ROUND_KEYS:
        values = [r[key] for r in rounds if key in r]
        out[key] = float(np.mean(values)) if values else float("nan")
    widths = [(r["beam_width_avg"], r["beam_size"]) for r in rounds if "beam_width_avg" in r and "beam_size" in r]
    out["reduced_beam_rounds"] = float(np.mean([w < full for w, full in widths])) if widths else float("nan")
    return out


def format_table(rows: Sequence[dict[str, object]]) -> str:
    head = ["configuration", "WER %", "latency mean s", "median s", "p90 s", "RTF", "enc GFLOPs / audio s",
            "rounds", "words timed", "lost phrases", "enc ms/round", "prompt ms/round", "dec ms/round", "align ms/round",
            "other ms/round",
            "dec passes/round", "avg beam", "reduced-beam steps %", "reduced-beam rounds %"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        lat = r["latency"]
        assert isinstance(lat, dict)
        cells = [str(r["name"]), f"{100 * float(r['wer']):.2f}",  # type: ignore[arg-type]
                 f"{lat['mean']:.2f}", f"{lat['median']:.2f}", f"{lat['p90']:.2f}",
                 f"{float(r['rtf']):.2f}", f"{float(r['encoder_gflops_per_audio_s']):.1f}",  # type: ignore[arg-type]
                 str(r["rounds"]), str(lat["words"]), str(r.get("lost_phrases", "–"))]
        pr = r.get("per_round", {})
        assert isinstance(pr, dict)
        cells += [*(_fmt(pr.get(k), "{:.0f}") for k in STAGE_KEYS), _fmt(pr.get("other_ms"), "{:.0f}"),
                  _fmt(pr.get("forward_passes"), "{:.1f}"),
                  _fmt(pr.get("beam_width_avg"), "{:.2f}"), _percent(pr.get("reduced_beam_share")),
                  _percent(pr.get("reduced_beam_rounds"))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _percent(value: object) -> str:
    return _fmt(None if value is None else 100 * float(value), "{:.0f}")  # type: ignore[arg-type]


def _fmt(value: object, spec: str) -> str:
    """A number in a table cell; blank where the session does not report it."""
    if value is None or not np.isfinite(float(value)):  # type: ignore[arg-type]
        return "–"
    return spec.format(float(value))  # type: ignore[arg-type]


def _markdown(table: str, record: dict[str, object]) -> str:
    machine = record["machine"]
    assert isinstance(machine, dict)
    clips = record["clips"]
    assert isinstance(clips, list)
    streams_line = ", ".join(f"{c['name']} ({c['duration']:.0f} s)" for c in clips)
    return (
        "# Streaming benchmark\n\n"
        f"Machine: {machine.get('cpu')}, {machine.get('cores')} cores; versions {machine.get('versions')}.\n\n"
        f"Streams: {streams_line}.\n"
        f"Options: {json.dumps(record['options'])}.\n"
        "Latency = emitted_at - gold word end over recognised reference words; RTF = compute / audio; "
        "realtime rows use the compute-aware simulated clock.\n\n"
        f"{table}\n\n![latency vs WER](stream.png)\n"
        f"{_lost_section(record)}"
    )


def _lost_section(record: dict[str, object]) -> str:
    """Every lost phrase of every configuration, with the rules over it (see bench.lost)."""
    lines = []
    for row in record["configs"]:  # type: ignore[attr-defined]
        if not row.get("lost_phrases"):
            continue
        lines.append(f"\n### {row['name']}: {row['lost_phrases']} lost phrases, by rule {row['lost_by_rule']}\n")
        for c in row["per_clip"]:
            for p in c.get("lost_phrases", []):
                rules = ", ".join(p["rules"]) or "no rule"
                lines.append(f"- {c['clip']} {p['start']:.1f}-{p['end']:.1f} s: \"{p['text']}\" "
                             f"(stream: \"{p['instead']}\"; {rules})")
    return ("\n## Lost phrases (offline has them, the stream does not)\n" + "\n".join(lines) + "\n") if lines else ""


def plot(rows: Sequence[dict[str, object]], path: Path) -> None:
    """Mean latency against WER, one point per streaming configuration; offline WER as a line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    colours: dict[str, str] = {}
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for r in rows:
        model = str(r["model"])
        colour = colours.setdefault(model, palette[len(colours) % len(palette)])
        lat = r["latency"]
        assert isinstance(lat, dict)
        y = 100 * float(r["wer"])  # type: ignore[arg-type]
        if r["mode"] == "offline":
            line = str(r["name"]).removeprefix(model + "/")
            style, said = OFFLINE_LINES.get(line, ("--", "beam 5, float32"))
            ax.axhline(y, color=colour, linestyle=style, linewidth=1, label=f"{model} offline, {said}")
            continue
        if np.isfinite(lat["mean"]):
            ax.scatter([lat["mean"]], [y], color=colour)
            label = str(r["name"]).removeprefix(model + "/").split(": ")[0]  # the stage, not its spelling
            ax.annotate(label + (" (default)" if str(r["name"]).endswith("default") else ""), (lat["mean"], y), fontsize=7,
                        xytext=(4, 3), textcoords="offset points")
    ax.set_xlabel("mean per-word latency (s)")
    ax.set_ylabel("WER (%)")
    ax.set_title("Streaming: latency vs accuracy")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
