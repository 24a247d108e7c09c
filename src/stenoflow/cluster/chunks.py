"""Long recordings cut into parts that replicas transcribe side by side.

A part ends at the quietest half second near every ``chunk_s`` seconds (a pause, in speech), so
no word is cut; each part is transcribed as a long-form file of its own and the parts' segments,
moved to the recording's clock, are joined in order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from stenoflow.decoding.transcribe import Segment

SAMPLE_RATE = 16000
FRAME = 320  # 20 ms energy frames
QUIET_FRAMES = 25  # the quietest 0.5 s window is where a part ends
SEARCH_FRACTION = 0.2  # a cut is looked for within this share of chunk_s before each target


def cut_points(samples: np.ndarray, chunk_s: float) -> list[int]:
    """Sample indices where parts end (the last is ``len(samples)``): the centre of the quietest
    0.5 s in the ``SEARCH_FRACTION * chunk_s`` before every multiple of ``chunk_s`` from the
    last cut. One part when the recording is shorter than 1.5 ``chunk_s`` (or chunk_s <= 0)."""
    n = len(samples)
    size = round(chunk_s * SAMPLE_RATE)
    if size <= 0 or n < 1.5 * size:
        return [n]
    frames = n // FRAME
    energy = np.square(samples[: frames * FRAME].astype(np.float64)).reshape(frames, FRAME).mean(axis=1)
    window = np.convolve(energy, np.ones(QUIET_FRAMES), mode="valid")  # window[i]: frames i .. i+24
    cuts: list[int] = []
    start = 0
    while n - start >= 1.5 * size:
        hi = (start + size) // FRAME - QUIET_FRAMES
        lo = max(start // FRAME + 1, hi - round(SEARCH_FRACTION * size) // FRAME)
        best = lo + int(np.argmin(window[lo : hi + 1]))
        start = (best + QUIET_FRAMES // 2) * FRAME
        cuts.append(start)
    return [*cuts, n]


def join_parts(parts: Sequence[tuple[float, Sequence[Segment]]]) -> list[Segment]:
    """The segments of parts (each with its offset in seconds), moved to the recording's clock
    and numbered anew."""
    out: list[Segment] = []
    for offset, segments in parts:
        for s in segments:
            words = None if s.words is None else [replace(w, start=w.start + offset, end=w.end + offset)
                                                  for w in s.words]
            out.append(replace(s, id=len(out), seek=s.seek + round(offset * 100), start=s.start + offset,
                               end=s.end + offset, words=words))
    return out
