"""``stenoflow bench hush``: what to put after short speech instead of 30 s of padding.

For each clip and each input scheme (pad to 30 s, no padding, 1 s / 5 s of zeros, 1 s / 5 s of
white noise, the hush word) the encoder runs on the scheme's input and greedy decoding runs
without timestamps. Reported per scheme: encoder GFLOPs per clip, WER, and the share of
runaway outputs. A runaway is counted on raw tokens (no end-of-text before the token limit,
or more than twice the reference's tokens), since the English normaliser deletes symbol runs
such as ``// // //`` and would hide them from WER.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from stenoflow.api import Model, load_model
from stenoflow.bench.datasets import Clip, jfk, short_clips
from stenoflow.bench.latency import encoder_flops
from stenoflow.bench.machine import machine_record
from stenoflow.bench.metrics import wer
from stenoflow.decoding.options import DecodingOptions

log = logging.getLogger(__name__)

SR = 16000
N_SAMPLES = 30 * SR


@dataclass(frozen=True)
class HushBenchOptions:
    models: tuple[str, ...] = ("tiny.en", "base")
    clips: int = 20  # synthesized evaluation clips (2-25 s), plus jfk.wav
    threads: int = 2
    seed: int = 0


def schemes(model: Model, rng: np.random.Generator) -> dict[str, Callable[[np.ndarray], np.ndarray]]:
    """Encoder input (samples) for each way of ending the speech."""
    def noise(seconds: float) -> Callable[[np.ndarray], np.ndarray]:
        return lambda a: np.concatenate([a, (0.01 * rng.standard_normal(int(seconds * SR))).astype(np.float32)])

    def zeros(seconds: float) -> Callable[[np.ndarray], np.ndarray]:
        return lambda a: np.concatenate([a, np.zeros(int(seconds * SR), np.float32)])

    table: dict[str, Callable[[np.ndarray], np.ndarray]] = {
        "pad 30 s": lambda a: np.concatenate([a, np.zeros(max(0, N_SAMPLES - len(a)), np.float32)]),
        "no padding": lambda a: a,
        "1 s zeros": zeros(1.0),
        "5 s zeros": zeros(5.0),
        "1 s noise": noise(1.0),
        "5 s noise": noise(5.0),
    }
    if model.hush is not None:
        table["hush word"] = model.hush.append
    return table


def run_clip(model: Model, samples: np.ndarray, ref_tokens: int) -> tuple[str, bool, int]:
    """Greedy transcript, whether it ran away, and the mel frames the encoder saw."""
    mel = model.features(samples)[:, :3000]
    limit = min(224, 2 * ref_tokens + 10)
    result = model.decode(mel, DecodingOptions(language="en", without_timestamps=True, sample_len=limit))
    runaway = len(result.tokens) >= limit or len(result.tokens) > 2 * ref_tokens
    return result.text, runaway, mel.shape[-1]


def run_hush_bench(options: HushBenchOptions, out_dir: Path) -> str:
    import torch

    torch.set_num_threads(options.threads)
    clips: list[Clip] = [*short_clips(options.clips, pool="eval", min_s=2.0, max_s=25.0, seed=options.seed), jfk()]
    rows: list[dict[str, object]] = []
    for name in options.models:
        model = load_model(name, threads=options.threads)
        rng = np.random.default_rng(options.seed)
        table = schemes(model, rng)
        if model.hush is None:
            log.warning("%s has no hush word: its row is left out", name)
        for scheme, build in table.items():
            hyps, refs, runaways, flops = [], [], 0, 0.0
            for clip in clips:
                audio = clip.load_audio()
                ref_tokens = len(model.tokenizer.encode(" " + clip.text))
                text, runaway, frames = run_clip(model, build(audio), ref_tokens)
                hyps.append(text)
                refs.append(clip.text)
                runaways += int(runaway)
                flops += encoder_flops(model.dims, frames)
            row = {"model": name, "scheme": scheme, "clips": len(clips),
                   "encoder_gflops_per_clip": flops / 1e9 / len(clips),
                   "wer": wer(refs, hyps).wer, "runaway_share": runaways / len(clips)}
            log.info("%s", row)
            rows.append(row)
    out_dir.mkdir(parents=True, exist_ok=True)
    record = {"machine": machine_record(), "options": asdict(options), "rows": rows}
    (out_dir / "hush.json").write_text(json.dumps(record, indent=1))
    md = format_table(rows)
    (out_dir / "hush.md").write_text(md + "\n")
    return md


def format_table(rows: list[dict[str, object]]) -> str:
    lines = ["| model | input scheme | encoder GFLOPs/clip | vs pad 30 s | WER % | runaways % |", "|---|---|---|---|---|---|"]
    padded = {r["model"]: float(r["encoder_gflops_per_clip"]) for r in rows if r["scheme"] == "pad 30 s"}  # type: ignore[arg-type]
    for r in rows:
        g = float(r["encoder_gflops_per_clip"])  # type: ignore[arg-type]
        lines.append(f"| {r['model']} | {r['scheme']} | {g:.1f} | {padded[r['model']] / g:.2f}x fewer | "
                     f"{100 * float(r['wer']):.1f} | {100 * float(r['runaway_share']):.0f} |")  # type: ignore[arg-type]
    return "\n".join(lines)
