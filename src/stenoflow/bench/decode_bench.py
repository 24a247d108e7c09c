"""``stenoflow bench decode``: how decoding strategies spend the decoder, with faster-whisper beside them.

Every method transcribes the same files end to end (``Model.transcribe``, temperature 0, English):
plain greedy and beam search, greedy with a draft model — the main model's own int8 copy
(same tokenizer) and another model (``tiny.en`` for ``base``: another vocabulary), each at a fixed
and an adaptive lookahead — and greedy with the model's Medusa-Linear and Medusa-Block heads, each
greedy-exact and with typical acceptance. Reported per file: decoder seconds and tokens/s, main-model decoder
passes, acceptance rate and mean accepted length per verification, the decoder speed-up over our
greedy, whether the tokens equal greedy's, end-to-end time and WER. faster-whisper runs the same
files at the same beam sizes, threads and precision. Results: ``decode.md``, ``decode.json``
(machine, options, rows), ``decode.png``.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from stenoflow.api import Model, load_model
from stenoflow.audio.io import load_audio
from stenoflow.bench.datasets import Clip, jfk, long_form
from stenoflow.bench.machine import write_results
from stenoflow.bench.metrics import wer
from stenoflow.decoding.options import TYPICAL_PUBLISHED
from stenoflow.decoding.transcribe import Segment, TranscriptionInfo

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DecodeBenchOptions:
    model: str = "base"
    compute: str | None = None  # None: what the commands load (int8 on the CPU)
    draft: str = "tiny.en"  # the cross-vocabulary draft (the same-vocabulary one is the model in int8)
    threads: int = 2
    beam_size: int = 5
    lookahead: int = 4
    long_minutes: float = 5.0
    medusa: tuple[str, ...] = ("linear", "block")  # Medusa kinds to run (the model's shipped heads)
    only: tuple[str, ...] = ()  # run the methods whose names start with one of these ("" : all); greedy always


@dataclass(frozen=True)
class Method:
    name: str
    beam_size: int
    draft: str | None = None  # "self": the main model in int8; else a model name
    adaptive: bool = False
    medusa: str | None = None  # the model's shipped heads of this kind
    typical: bool = False  # typical acceptance (as published) instead of greedy-exact


def methods(options: DecodeBenchOptions) -> list[Method]:
    every = [
        Method("greedy", 1),
        Method(f"beam {options.beam_size}", options.beam_size),
        Method("draft: self int8, fixed K", 1, "self"),
        Method("draft: self int8, adaptive K", 1, "self", adaptive=True),
        Method(f"draft: {options.draft}, fixed K", 1, options.draft),
        Method(f"draft: {options.draft}, adaptive K", 1, options.draft, adaptive=True),
        *(Method(f"Medusa-{kind.capitalize()}, {'typical' if typical else 'greedy-exact'}", 1, medusa=kind,
                 typical=typical)
          for kind in options.medusa for typical in (False, True)),
    ]
    return [m for m in every if m.name == "greedy" or not options.only or m.name.startswith(options.only)]


def run_decode_bench(options: DecodeBenchOptions, out_dir: Path) -> str:
    torch.set_num_threads(options.threads)
    clips: list[Clip] = [jfk(), long_form(f"longform-{options.long_minutes:g}min", minutes=options.long_minutes)]
    model = load_model(options.model, compute=options.compute, threads=options.threads)
    options = replace(options, compute=model.compute)  # recorded as it ran
    drafts: dict[str, Model] = {}
    # One untimed run of every method on a short piece first: an int8 layer packs its weights at
    # its first few-row product, and drafts and heads load at their first use.
    warm = load_audio(clips[0].audio_path)[: 5 * 16000]
    for method in methods(options):
        _transcribe(model, drafts, options, method, warm)
    rows: list[dict[str, object]] = []
    for clip in clips:
        audio = load_audio(clip.audio_path)
        greedy_tokens: list[list[int]] | None = None
        greedy_decode_s = float("nan")
        for method in methods(options):
            listed, info, total_s = _transcribe(model, drafts, options, method, audio)
            tokens = [s.tokens for s in listed]
            if method.name == "greedy":
                greedy_tokens, greedy_decode_s = tokens, info.stats["decode_s"]
            rows.append(_row(clip, method, info.stats, total_s, "".join(s.text for s in listed),
                             tokens == greedy_tokens, greedy_decode_s))
            log.info("%s", rows[-1])
        rows += _peer_rows(model, options, clip, audio)
    table = format_table(rows)
    write_results(out_dir, "decode", "Decoding benchmark", options, rows, table,
                  "Decoder s: time in decoding (encoders excluded; a draft model's decoder included). Speed-up: our "
                  "greedy's decoder time over the method's. Passes: main-model decoder forward passes. Acceptance: "
                  "draft tokens kept / offered; accepted/pass: draft tokens kept per verification pass.")
    plot(rows, out_dir / "decode.png")
    return table


def _transcribe(model: Model, drafts: dict[str, Model], options: DecodeBenchOptions, method: Method,
                audio: np.ndarray) -> tuple[list[Segment], TranscriptionInfo, float]:
    """``audio`` transcribed by ``method``: its segments, info and wall time (s)."""
    draft = None
    if method.draft is not None:
        name = options.model if method.draft == "self" else method.draft
        draft = drafts.get(name) or drafts.setdefault(name, model.draft_model(name))
    started = time.perf_counter()
    segments, info = model.transcribe(audio, draft=draft, medusa=method.medusa, beam_size=method.beam_size,
                                      temperature=(0.0,), language="en", lookahead=options.lookahead,
                                      adaptive_lookahead=method.adaptive,
                                      typical=TYPICAL_PUBLISHED if method.typical else None)
    listed = list(segments)
    return listed, info, time.perf_counter() - started


def _row(clip: Clip, method: Method, stats: dict[str, float], total_s: float, text: str, equal: bool,
         greedy_decode_s: float) -> dict[str, object]:
    decode_s = stats.get("decode_s", float("nan"))
    offered, kept = stats.get("draft_tokens", 0.0), stats.get("draft_accepted", 0.0)
    passes = stats.get("verify_passes", 0.0)
    return {
        "clip": clip.audio_path.name, "audio_s": clip.duration, "method": method.name, "engine": "stenoflow",
        "total_s": total_s, "decode_s": decode_s, "encode_s": stats.get("encode_s", float("nan")),
        "tokens": stats.get("tokens", 0.0), "tokens_per_s": stats.get("tokens", 0.0) / decode_s,
        "main_passes": stats.get("forward_passes", float("nan")),
        "draft_passes": stats.get("draft_model_passes", 0.0) + stats.get("medusa_drafts", 0.0),
        "acceptance": kept / offered if offered else None,
        "accepted_per_pass": kept / passes if passes else None,
        "speedup": greedy_decode_s / decode_s, "equals_greedy": equal if method.beam_size == 1 else None,
        "wer": wer([clip.text], [text]).wer,
    }


def _peer_rows(model: Model, options: DecodeBenchOptions, clip: Clip, audio: np.ndarray) -> list[dict[str, object]]:
    from faster_whisper import WhisperModel

    if model.weights_info["format"] != "ctranslate2":
        log.warning("faster-whisper needs a CTranslate2 model directory: no peer rows")
        return []
    fw = WhisperModel(str(model.weights_info["source"]), device="cpu", compute_type=model.compute,
                      cpu_threads=options.threads, num_workers=1)
    rows: list[dict[str, object]] = []
    for beam in (1, options.beam_size):
        started = time.perf_counter()
        segments, _ = fw.transcribe(audio, beam_size=beam, language="en", temperature=0.0, vad_filter=False)
        text = "".join(s.text for s in segments)
        rows.append({"clip": clip.audio_path.name, "audio_s": clip.duration, "engine": "faster-whisper",
                     "method": f"faster-whisper {'greedy' if beam == 1 else f'beam {beam}'}",
                     "total_s": time.perf_counter() - started, "wer": wer([clip.text], [text]).wer})
    return rows


def format_table(rows: list[dict[str, object]]) -> str:
    head = ["file", "method", "decoder s", "tokens/s", "speed-up", "passes", "draft passes", "acceptance",
            "accepted/pass", "equals greedy", "total s", "WER %"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [str(r["clip"]), str(r["method"]), _f(r.get("decode_s"), ".2f"), _f(r.get("tokens_per_s"), ".1f"),
                 _f(r.get("speedup"), ".2f", "x"), _f(r.get("main_passes"), ".0f"), _f(r.get("draft_passes"), ".0f"),
                 _f(r.get("acceptance"), ".2f"), _f(r.get("accepted_per_pass"), ".2f"),
                 {True: "yes", False: "no", None: "–"}[r.get("equals_greedy")],  # type: ignore[index]
                 _f(r.get("total_s"), ".2f"), _f(100 * float(r["wer"]), ".2f")]  # type: ignore[arg-type]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _f(value: object, spec: str, suffix: str = "") -> str:
    if not isinstance(value, (int, float)) or math.isnan(value):
        return "–"
    return f"{value:{spec}}{suffix}"


def plot(rows: list[dict[str, object]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ours = [r for r in rows if r["engine"] == "stenoflow"]
    clips = list(dict.fromkeys(str(r["clip"]) for r in ours))
    names = list(dict.fromkeys(str(r["method"]) for r in ours))
    fig, ax = plt.subplots(figsize=(9, 4.5))
    width = 0.8 / max(len(clips), 1)
    for i, clip in enumerate(clips):
        speed = {str(r["method"]): float(r["speedup"]) for r in ours if r["clip"] == clip}  # type: ignore[arg-type]
        ax.bar([k + i * width for k in range(len(names))], [speed.get(n, 0.0) for n in names], width, label=clip)
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xticks([k + width * (len(clips) - 1) / 2 for k in range(len(names))], names, rotation=20, ha="right",
                  fontsize=8)
    ax.set_ylabel("decoder speed-up over greedy")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
