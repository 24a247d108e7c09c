"""``stenoflow bench transcribe``: our engine against faster-whisper in one run.

Same model files, same threads, same beam size and same precision on both sides. Speed figures
are the best of ``repeats`` runs; ratios (ours / theirs) are what carries to other machines.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from stenoflow.api import Model, load_model
from stenoflow.audio.io import load_audio
from stenoflow.bench.datasets import Clip, jfk, long_form
from stenoflow.bench.machine import machine_record
from stenoflow.bench.metrics import wer
from stenoflow.decoding.options import DecodingOptions
from stenoflow.decoding.task import DecodingTask

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BenchOptions:
    models: tuple[str, ...] = ("tiny.en", "base")
    computes: tuple[str, ...] = ("float32", "int8")
    threads: int = 2
    beam_size: int = 5
    long_minutes: float = 2.0
    repeats: int = 3


def best_time(fn: Callable[[], object], repeats: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def _faster_whisper(model: Model, compute: str, threads: int):  # type: ignore[no-untyped-def]
    from faster_whisper import WhisperModel

    if model.weights_info["format"] != "ctranslate2":
        raise ValueError("the faster-whisper peer needs a CTranslate2 model directory")
    return WhisperModel(str(model.weights_info["source"]), device="cpu", compute_type=compute,
                        cpu_threads=threads, num_workers=1)


def _ours_text(model: Model, audio: np.ndarray, beam: int) -> str:
    segments, _ = model.transcribe(audio, beam_size=beam, language="en")
    return "".join(s.text for s in segments)


def _theirs_text(fw, audio: np.ndarray, beam: int) -> str:  # type: ignore[no-untyped-def]
    segments, _ = fw.transcribe(audio, beam_size=beam, language="en", vad_filter=False)
    return "".join(s.text for s in segments)


def _encoder_times(model: Model, fw, audio: np.ndarray, repeats: int) -> dict[str, float]:  # type: ignore[no-untyped-def]
    import ctranslate2

    out: dict[str, float] = {}
    for seconds in (30, 10):
        mel = model.features(audio[: seconds * 16000], padding=max(0, seconds * 16000 - len(audio)))
        mel = mel[:, : seconds * 100]
        out[f"ours_encoder_{seconds}s_ms"] = 1000 * best_time(lambda mel=mel: model.encode(mel), repeats)[0]
        padded = torch.nn.functional.pad(mel, (0, 3000 - mel.shape[-1]))  # CTranslate2 needs 30 s
        sv = ctranslate2.StorageView.from_array(np.ascontiguousarray(padded[None].numpy()))
        out[f"theirs_encoder_{seconds}s_ms"] = 1000 * best_time(lambda sv=sv: fw.model.encode(sv, to_cpu=True), repeats)[0]
    return out


def _decoder_ms_per_token(model: Model, fw, audio: np.ndarray, repeats: int) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """Greedy decoding of one 30 s window from a precomputed encoder output, per token."""
    import ctranslate2

    mel = model.features(audio[: 30 * 16000], padding=480000)[:, :3000]
    features = model.encode(mel)
    options = DecodingOptions(language="en", without_timestamps=True)
    task = DecodingTask(model.context, options)
    t_ours, result = best_time(lambda: task.run(features), repeats)
    n_ours = len(result.tokens) + 1  # type: ignore[attr-defined]
    sv = ctranslate2.StorageView.from_array(np.ascontiguousarray(mel[None].numpy()))
    encoded = fw.model.encode(sv, to_cpu=True)
    tok = model.tokenizer.with_options("en" if model.is_multilingual else None, "transcribe")
    prompt = task.initial_tokens(tok)
    t_theirs, res = best_time(lambda: fw.model.generate(encoded, [prompt], beam_size=1,
                                                        suppress_tokens=task.suppress_ids(tok)), repeats)
    n_theirs = len(res[0].sequences_ids[0]) + 1  # type: ignore[index]
    return {"ours_decoder_ms_per_token": 1000 * t_ours / n_ours, "theirs_decoder_ms_per_token": 1000 * t_theirs / n_theirs,
            "ours_tokens": n_ours, "theirs_tokens": n_theirs}


def run_transcribe_bench(options: BenchOptions, out_path: Path) -> str:
    torch.set_num_threads(options.threads)
    clips: list[Clip] = [jfk(), long_form(minutes=options.long_minutes)]
    audios = {c.audio_path.name: (load_audio(c.audio_path), c.text) for c in clips}
    rows: list[dict[str, object]] = []
    for name in options.models:
        for compute in options.computes:
            model = load_model(name, compute=compute, threads=options.threads)
            fw = _faster_whisper(model, compute, options.threads)
            long_audio = audios[clips[1].audio_path.name][0]
            row: dict[str, object] = {"model": name, "compute": compute}
            row |= _encoder_times(model, fw, long_audio, options.repeats)
            row |= _decoder_ms_per_token(model, fw, long_audio, options.repeats)
            for clip_name, (audio, ref) in audios.items():
                reps = options.repeats if len(audio) < 60 * 16000 else 1
                t_ours, text_ours = best_time(lambda m=model, a=audio: _ours_text(m, a, options.beam_size), reps)
                t_theirs, text_theirs = best_time(lambda f=fw, a=audio: _theirs_text(f, a, options.beam_size), reps)
                row[f"{clip_name}:ours_s"] = t_ours
                row[f"{clip_name}:theirs_s"] = t_theirs
                row[f"{clip_name}:ours_wer"] = wer([ref], [str(text_ours)]).wer
                row[f"{clip_name}:theirs_wer"] = wer([ref], [str(text_theirs)]).wer
                row[f"{clip_name}:audio_s"] = len(audio) / 16000
            log.info("%s", row)
            rows.append(row)
    record = {"machine": machine_record(), "options": asdict(options), "rows": rows}
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(record, indent=1))
    return format_table(rows, [c.audio_path.name for c in clips])


def format_table(rows: list[dict[str, object]], clip_names: list[str]) -> str:
    head = ["model", "compute", "enc30 ms ours/fw", "enc10 ms ours/fw", "dec ms/tok ours/fw (ratio)"]
    for c in clip_names:
        head.append(f"{c} s ours/fw (ratio)")
        head.append(f"{c} WER ours/fw")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [str(r["model"]), str(r["compute"]),
                 f"{r['ours_encoder_30s_ms']:.0f}/{r['theirs_encoder_30s_ms']:.0f}",
                 f"{r['ours_encoder_10s_ms']:.0f}/{r['theirs_encoder_10s_ms']:.0f}",
                 (f"{r['ours_decoder_ms_per_token']:.2f}/{r['theirs_decoder_ms_per_token']:.2f} "
                 f"({float(r['ours_decoder_ms_per_token']) / float(r['theirs_decoder_ms_per_token']):.2f}x)")]  # type: ignore[arg-type]
        for c in clip_names:
            o, t = float(r[f"{c}:ours_s"]), float(r[f"{c}:theirs_s"])  # type: ignore[arg-type]
            cells.append(f"{o:.2f}/{t:.2f} ({o / t:.2f}x)")
            cells.append(f"{100 * float(r[f'{c}:ours_wer']):.1f}/{100 * float(r[f'{c}:theirs_wer']):.1f}")  # type: ignore[arg-type]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
