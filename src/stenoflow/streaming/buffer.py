"""The audio buffer of a stream: the samples a round transcribes and where they sit in time.

Rounds re-read the whole buffer, so it is kept as one contiguous array; appends are gathered in
a list and joined only when a round asks for the samples, which keeps many small pushes cheap.

Cuts are placed by word times from DTW, which are often a frame or ten off at the edges of what
was transcribed; ``quietest`` moves a cut to the pause next to it, so it neither clips the onset
of the next word nor leaves the ending of the last one to be heard as a word of its own.
"""

from __future__ import annotations

import numpy as np

SAMPLE_RATE = 16000


class AudioBuffer:
    """Samples from absolute time ``offset`` (seconds since the stream began) onwards."""

    def __init__(self, sample_rate: int = SAMPLE_RATE) -> None:
        self.sample_rate = sample_rate
        self._joined = np.zeros(0, dtype=np.float32)
        self._pending: list[np.ndarray] = []
        self._pending_len = 0
        self._start = 0  # absolute index of the first buffered sample

    def append(self, samples: np.ndarray) -> None:
        if samples.size:
            self._pending.append(samples)
            self._pending_len += samples.size

    @property
    def samples(self) -> np.ndarray:
        if self._pending:
            self._joined = np.concatenate([self._joined, *self._pending])
            self._pending, self._pending_len = [], 0
        return self._joined

    def __len__(self) -> int:
        return self._joined.size + self._pending_len

    @property
    def offset(self) -> float:
        """Absolute time of the first buffered sample."""
        return self._start / self.sample_rate

    @property
    def duration(self) -> float:
        return len(self) / self.sample_rate

    @property
    def end(self) -> float:
        """Absolute time just after the last buffered sample."""
        return (self._start + len(self)) / self.sample_rate

    def quietest(self, lo: float, hi: float, frame_s: float = 0.02) -> float:
        """Absolute time of the quietest ``frame_s`` of buffered audio between ``lo`` and ``hi``.

        Frames within 2x of the quietest count as quiet; the middle of the longest quiet run is
        taken, so a cut lands in the middle of a pause rather than at its edge or in the short
        closure of a stop consonant ("faul|ts"), which can be as quiet as the pause itself.
        """
        sr = self.sample_rate
        first = max(self._start, round(lo * sr))
        last = min(self._start + len(self), round(hi * sr))
        frame = max(1, round(frame_s * sr))
        hop = max(1, frame // 2)
        if last - first < frame:
            return min(max((lo + hi) / 2, self.offset), self.end)
        piece = self.samples[first - self._start: last - self._start].astype(np.float64)
        power = np.concatenate([[0.0], np.cumsum(piece * piece)])
        starts = np.arange(0, piece.size - frame + 1, hop)
        energy = (power[starts + frame] - power[starts]) / frame
        quiet = np.concatenate([[False], energy <= 2 * energy.min() + 1e-12, [False]])
        edges = np.flatnonzero(np.diff(quiet.astype(np.int8)))  # run starts and ends, paired
        runs = edges.reshape(-1, 2)
        longest = runs[np.argmax(runs[:, 1] - runs[:, 0])]
        best = starts[(longest[0] + longest[1] - 1) // 2]
        return (first + best + frame / 2) / sr

    def trim_to(self, time: float) -> float:
        """Drop the samples before absolute ``time`` (clamped to the buffer); return the new offset."""
        index = min(max(round(time * self.sample_rate), self._start), self._start + len(self))
        drop = index - self._start
        if drop:
            self._joined = self.samples[drop:].copy()
            self._start = index
        return self.offset
