"""Where a stream holds speech: Silero VAD over every sample that enters the buffer.

The buffer's own sound detector (energy over the buffer's noise floor) finds pauses to cut in,
but it takes a breath, a click or the hiss after a word for sound. A live session hears audio
without prompt or draft when a round seems deaf to sound, and once more at the end of the
stream; alone, a breath becomes "players." and padded hiss "Thanks for watching.". Those
decisions ask this track instead: seconds of speech, by a voice activity model.
"""

from __future__ import annotations

import numpy as np

from stenoflow.audio.vad import CHUNK, SAMPLE_RATE, SileroVad

CHUNK_S = CHUNK / SAMPLE_RATE
SPEECH_PROB = 0.5  # a 32 ms chunk at least this probable is speech


class SpeechTrack:
    """Speech flags of a stream, one per 32 ms from its start; fed in order, pruned from the front."""

    def __init__(self) -> None:
        self._vad = SileroVad()
        self._flags = np.zeros(0, dtype=bool)
        self._first = 0  # chunk index of _flags[0]
        self._fed = 0  # samples fed so far

    @property
    def fed_s(self) -> float:
        return self._fed / SAMPLE_RATE

    def feed(self, samples: np.ndarray) -> None:
        """The next samples of the stream (16 kHz), right after the ones fed before."""
        self._fed += samples.size
        probs = self._vad(samples)
        if probs.size:
            self._flags = np.concatenate([self._flags, probs >= SPEECH_PROB])

    def seconds(self, lo: float, hi: float) -> float:
        """Seconds of speech between absolute times ``lo`` and ``hi`` (what was fed of them)."""
        first = max(self._first, int(lo / CHUNK_S))
        last = min(self._first + self._flags.size, int(np.ceil(hi / CHUNK_S)))
        if last <= first:
            return 0.0
        return float(self._flags[first - self._first : last - self._first].sum()) * CHUNK_S

    def forget(self, before: float) -> None:
        """Drop the flags of chunks that end before absolute time ``before``."""
        drop = min(self._flags.size, int(before / CHUNK_S) - self._first)
        if drop > 0:
            self._flags = self._flags[drop:]
            self._first += drop
