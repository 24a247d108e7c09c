#!/usr/bin/env python3
"""Check that speculative greedy decoding gives greedy's tokens, clip by clip.

Transcribes every clip of the chosen sets greedily (beam 1, temperature 0, English) and with each
chosen drafter — a draft model (``draft:tiny.en``) or the model's Medusa heads (``medusa:linear``,
``medusa:block``) — and counts the clips whose segments' tokens are greedy's. Sets: ``jfk``,
``long`` (the synthesized two-minute file), ``recorded`` (the twelve pocketsphinx and jfk
recordings, one by one), ``streams`` (the real-speech streams), ``pieces`` (every ``--step``-th
recording of the real-speech set, one by one).

    PYTHONPATH=src .venv/bin/python scripts/check_speculative_exact.py --compute int8 \\
        --sets jfk,recorded --drafters draft:tiny.en,medusa:linear

Writes a JSON line per clip and drafter to ``--out`` (and the tally to the log).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

try:
    import stenoflow  # noqa: F401
except ModuleNotFoundError:  # not installed: run from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from stenoflow.api import Model, load_model
from stenoflow.audio.io import load_audio

logger = logging.getLogger("check_speculative_exact")


def clips(name: str, step: int) -> Iterator[tuple[str, np.ndarray]]:
    """(label, samples) of every clip of the set ``name``."""
    from stenoflow.bench.datasets import jfk, long_form

    if name == "jfk":
        yield "jfk", load_audio(jfk().audio_path)
    elif name == "long":
        yield "longform-2min", load_audio(long_form(minutes=2.0).audio_path)
    elif name == "recorded":
        from stenoflow.bench.recorded import _pieces

        for label, _text, audio in _pieces():
            yield label, audio
    elif name == "streams":
        from stenoflow.bench.real_speech import real_streams

        for clip in real_streams():
            yield clip.audio_path.stem, load_audio(clip.audio_path)
    elif name == "pieces":
        from stenoflow.bench.real_speech import recordings

        for rec in recordings()[::step]:
            yield rec.label, rec.load()
    else:
        raise ValueError(f"unknown set {name!r}")


def tokens(model: Model, audio: np.ndarray, drafter: str | None) -> tuple[list[list[int]], str, float]:
    """Each segment's tokens, the text and the seconds a transcription with ``drafter`` takes."""
    kind, _, what = (drafter or "").partition(":")
    started = time.perf_counter()
    segments, _ = model.transcribe(audio, beam_size=1, temperature=0.0, language="en",
                                   draft=what if kind == "draft" else None,
                                   medusa=what if kind == "medusa" else None)
    listed = list(segments)
    return [s.tokens for s in listed], "".join(s.text for s in listed), time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="base")
    parser.add_argument("--compute", default="int8")
    parser.add_argument("--sets", default="jfk,recorded")
    parser.add_argument("--drafters", default="draft:tiny.en")
    parser.add_argument("--step", type=int, default=10, help="every step-th recording of the pieces set")
    parser.add_argument("--out", type=Path, default=Path("speculative-exact.jsonl"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    model = load_model(args.model, compute=args.compute)
    drafters = [d for d in args.drafters.split(",") if d]
    tally = {d: [0, 0] for d in drafters}
    with args.out.open("a", encoding="utf-8") as out:
        for name in args.sets.split(","):
            for label, audio in clips(name, args.step):
                plain, text, plain_s = tokens(model, audio, None)
                for drafter in drafters:
                    fast, fast_text, fast_s = tokens(model, audio, drafter)
                    equal = fast == plain
                    tally[drafter][0] += equal
                    tally[drafter][1] += 1
                    row = {"compute": args.compute, "set": name, "clip": label, "drafter": drafter, "equal": equal,
                           "greedy_s": round(plain_s, 3), "drafted_s": round(fast_s, 3)}
                    if not equal:
                        row |= {"greedy": text, "drafted": fast_text}
                    out.write(json.dumps(row) + "\n")
                    out.flush()
                    logger.info("%s %s %s: %s (%.1f s / %.1f s)%s", args.compute, label, drafter,
                                "equal" if equal else "DIFFERENT", plain_s, fast_s,
                                "" if equal else f"\n  greedy:  {text}\n  drafted: {fast_text}")
    for drafter, (same, total) in tally.items():
        logger.info("%s %s: %d of %d clips equal greedy's tokens", args.compute, drafter, same, total)
    return 0


if __name__ == "__main__":
    sys.exit(main())
