"""``stenoflow bench hush``: what to put after short speech instead of 30 s of padding.

For each clip and each input scheme (pad to 30 s, no padding, 1 s / 5 s of zeros, 1 s / 5 s of
white noise, the hush word) the encoder runs on the scheme's input and greedy decoding runs
without timestamps. Reported per scheme: encoder GFLOPs per clip, WER, and the share of
runaway outputs. A runaway is counted on raw tokens (no end-of-text before the token limit,
or more than twice the reference's tokens), since the English normaliser deletes symbol runs
such as ``// // //`` and would hide them from WER. The paper's Table 1 and Fig. 11 on our models.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from stenoflow.api import Model, load_model
from stenoflow.bench.datasets import Clip, jfk, short_clips
from stenoflow.bench.machine import machine_record
from stenoflow.bench.metrics import wer
from stenoflow.training.hush_train import decode_greedy

log = logging.getLogger(__name__)

SR = 16000
N_SAMPLES = 30 * SR
NOISE_RMS = 0.01  # white noise padding: -40 dBFS, 20 dB under our speech level


@dataclass(frozen=True)
class HushBenchOptions:
    models: tuple[str, ...] = ("tiny.en", "base")
    clips: int = 40  # synthesized evaluation clips (2-25 s), plus jfk.wav
    threads: int = 2
    compute: str = "float32"  # the precision the models run in (each uses its hush word for it)
    seed: int = 0


Scheme = Callable[[np.ndarray], np.ndarray]


def schemes(model: Model, rng: np.random.Generator) -> dict[str, Scheme]:
    """Encoder input (samples) for each way of ending the speech."""
    def noise(seconds: float) -> Scheme:
        return lambda a: np.concatenate([a, (NOISE_RMS * rng.standard_normal(int(seconds * SR))).astype(np.float32)])

    def zeros(seconds: float) -> Scheme:
        return lambda a: np.concatenate([a, np.zeros(int(seconds * SR), np.float32)])

    table: dict[str, Scheme] = {
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
    samples = samples[:N_SAMPLES]
    limit = min(224, 2 * ref_tokens + 10)
    text, n = decode_greedy(model, samples, limit)
    runaway = n >= limit or n > 2 * ref_tokens
    return text, runaway, len(samples) // 160


def run_hush_bench(options: HushBenchOptions, out_dir: Path) -> str:
    import torch

    torch.set_num_threads(options.threads)
    clips: list[Clip] = [*short_clips(options.clips, pool="eval", min_s=2.0, max_s=25.0, seed=options.seed), jfk()]
    audios = [c.load_audio() for c in clips]
    rows: list[dict[str, object]] = []
    hush_records: dict[str, object] = {}
    for name in options.models:
        model = load_model(name, compute=options.compute, threads=options.threads)
        hush_records[name] = model.hush.record if model.hush is not None else None
        table = schemes(model, np.random.default_rng(options.seed))
        if model.hush is None:
            log.warning("%s has no hush word: its row is left out", name)
        for scheme, build in table.items():
            rows.append(scheme_row(model, scheme, build, clips, audios))
            log.info("%s / %s: WER %.2f%%, runaways %.0f%%", name, scheme, 100 * float(rows[-1]["wer"]),  # type: ignore[arg-type]
                     100 * float(rows[-1]["runaway_share"]))  # type: ignore[arg-type]
    out_dir.mkdir(parents=True, exist_ok=True)
    record = {"machine": machine_record(), "options": asdict(options), "hush_words": hush_records,
              "clips": [{"name": c.name, "duration": c.duration, "voice": c.voice} for c in clips], "rows": rows}
    (out_dir / "hush.json").write_text(json.dumps(record, indent=1))
    md = format_table(rows)
    (out_dir / "hush.md").write_text(md + "\n")
    plot(rows, out_dir / "hush.png")
    return md


def scheme_row(model: Model, scheme: str, build: Scheme, clips: Sequence[Clip],
               audios: Sequence[np.ndarray]) -> dict[str, object]:
    hyps, runaways, flops = [], 0, 0.0
    per_clip = []
    for clip, audio in zip(clips, audios):
        ref_tokens = len(model.tokenizer.encode(" " + clip.text))
        text, runaway, frames = run_clip(model, build(audio), ref_tokens)
        hyps.append(text)
        runaways += int(runaway)
        flops += model.dims.encoder_flops(frames)
        per_clip.append({"clip": clip.name, "frames": frames, "runaway": runaway, "text": text})
    return {"model": model.name, "scheme": scheme, "clips": len(clips),
            "encoder_gflops_per_clip": flops / 1e9 / len(clips), "wer": wer([c.text for c in clips], hyps).wer,
            "runaway_share": runaways / len(clips), "per_clip": per_clip}


def format_table(rows: Sequence[dict[str, object]]) -> str:
    lines = ["| model | input scheme | encoder GFLOPs/clip | vs pad 30 s | WER % | Δ WER vs pad | runaways % |",
             "|---|---|---|---|---|---|---|"]
    padded = {r["model"]: r for r in rows if r["scheme"] == "pad 30 s"}
    for r in rows:
        base = padded[r["model"]]
        g = float(r["encoder_gflops_per_clip"])  # type: ignore[arg-type]
        w = 100 * float(r["wer"])  # type: ignore[arg-type]
        lines.append(f"| {r['model']} | {r['scheme']} | {g:.1f} | "
                     f"{float(base['encoder_gflops_per_clip']) / g:.2f}x fewer | {w:.2f} | "  # type: ignore[arg-type]
                     f"{w - 100 * float(base['wer']):+.2f} | {100 * float(r['runaway_share']):.0f} |")  # type: ignore[arg-type]
    return "\n".join(lines)


def plot(rows: Sequence[dict[str, object]], path: Path) -> None:
    """Encoder GFLOPs and WER per input scheme, one panel per model (the paper's Fig. 11)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys(str(r["model"]) for r in rows))
    fig, axes = plt.subplots(1, len(models), figsize=(6 * len(models), 4.2), squeeze=False)
    for ax, model in zip(axes[0], models):
        mine = [r for r in rows if r["model"] == model]
        names = [str(r["scheme"]) for r in mine]
        x = np.arange(len(mine))
        ax.bar(x - 0.2, [float(r["encoder_gflops_per_clip"]) for r in mine], 0.4, label="encoder GFLOPs / clip")  # type: ignore[arg-type]
        ax.set_xticks(x, names, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("GFLOPs per clip")
        twin = ax.twinx()
        wers = [100 * float(r["wer"]) for r in mine]  # type: ignore[arg-type]
        twin.bar(x + 0.2, wers, 0.4, color="tab:orange", label="WER %")
        for xi, r, w in zip(x, mine, wers):
            share = float(r["runaway_share"])  # type: ignore[arg-type]
            if share:
                twin.annotate(f"{100 * share:.0f}% run", (xi + 0.2, w), fontsize=7, ha="center", va="bottom")
        twin.set_ylabel("WER %")
        ax.set_title(f"{model}: input after the speech")
        handles = ax.get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
        ax.legend(handles, ["encoder GFLOPs / clip", "WER %"], fontsize=8, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
