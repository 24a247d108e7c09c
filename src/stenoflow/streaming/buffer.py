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
SOUND_FRAME_S = 0.02  # frame of the sound detector
ONSET_LEAD_S = 0.3  # audio a cut that drops silence keeps before the first sound after it


class AudioBuffer:
    """Samples from absolute time ``offset`` (seconds since the stream began) onwards."""

    def __init__(self, sample_rate: int = SAMPLE_RATE) -> None:
        self.sample_rate = sample_rate
        self._joined = np.zeros(0, dtype=np.float32)
        self._pending: list[np.ndarray] = []
        self._pending_len = 0
        self._start = 0  # absolute index of the first buffered sample
        # Sound flags of whole frames, keyed by (first sample, frames) they were computed for.
        self._sound: tuple[tuple[int, int], np.ndarray] | None = None

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

    def first_sound(self, lo: float, hi: float) -> float | None:
        """Absolute time where the first sound between ``lo`` and ``hi`` begins, or None if quiet."""
        first, loud = self._sound_frames(lo, hi)
        hits = np.flatnonzero(loud)
        return None if hits.size == 0 else self.offset + (first + int(hits[0])) * SOUND_FRAME_S

    def last_sound(self, lo: float, hi: float) -> float | None:
        """Absolute time where the last sound between ``lo`` and ``hi`` ends, or None if quiet."""
        first, loud = self._sound_frames(lo, hi)
        hits = np.flatnonzero(loud)
        return None if hits.size == 0 else self.offset + (first + int(hits[-1]) + 1) * SOUND_FRAME_S

    def sound_seconds(self, lo: float, hi: float) -> float:
        """Seconds of sound between absolute times ``lo`` and ``hi``."""
        _, loud = self._sound_frames(lo, hi)
        return float(loud.sum()) * SOUND_FRAME_S

    def onset_after_pause(self, lo: float, hi: float) -> float | None:
        """Absolute time where the first sound after a quiet frame between ``lo`` and ``hi``
        begins: something said anew, not the rest of a sound already under way at ``lo``."""
        start, loud = self._after_pause(lo, hi)
        hits = np.flatnonzero(loud)
        return None if hits.size == 0 else self.offset + (start + int(hits[0])) * SOUND_FRAME_S

    def sound_after_pause(self, lo: float, hi: float) -> float:
        """Seconds of sound between absolute times ``lo`` and ``hi`` after the first quiet frame:
        what was said after a pause, not the rest of a sound already under way at ``lo``."""
        return float(self._after_pause(lo, hi)[1].sum()) * SOUND_FRAME_S

    def _after_pause(self, lo: float, hi: float) -> tuple[int, np.ndarray]:
        """Index of the first quiet frame between ``lo`` and ``hi`` and the sound flags from it
        to ``hi`` (none if no frame there is quiet)."""
        first, loud = self._sound_frames(lo, hi)
        quiet = np.flatnonzero(~loud)
        return (first, loud[:0]) if quiet.size == 0 else (first + int(quiet[0]), loud[quiet[0]:])

    def _sound_frames(self, lo: float, hi: float) -> tuple[int, np.ndarray]:
        """Index of the first frame at or after ``lo`` and the sound flags of frames up to ``hi``.

        A 20 ms frame is sound when its power is 12 dB over the buffer's noise floor (its 10th
        percentile frame), within 30 dB of its loud frames (95th percentile) and over -70 dBFS:
        speech onsets count whatever the recording's level, a steady noise floor does not.
        """
        frame = round(SOUND_FRAME_S * self.sample_rate)
        n = len(self) // frame
        if n == 0:
            return 0, np.zeros(0, dtype=bool)
        if self._sound is None or self._sound[0] != (self._start, n):
            samples = self.samples[: n * frame].astype(np.float64)
            power = (samples.reshape(n, frame) ** 2).mean(axis=1)
            floor, loud = np.percentile(power, [10, 95])
            threshold = max(floor * 10 ** 1.2, loud * 10 ** -3.0, 1e-7)
            self._sound = ((self._start, n), power > threshold)
        flags = self._sound[1]
        first = min(n, max(0, round((lo - self.offset) * self.sample_rate) // frame))
        last = min(n, max(first, int(np.ceil((hi - self.offset) * self.sample_rate / frame))))
        return first, flags[first:last]

    def trim_to(self, time: float) -> float:
        """Drop the samples before absolute ``time`` (clamped to the buffer); return the new offset."""
        index = min(max(round(time * self.sample_rate), self._start), self._start + len(self))
        drop = index - self._start
        if drop:
            self._joined = self.samples[drop:].copy()
            self._start = index
        return self.offset
