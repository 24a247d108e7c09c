"""Where a stream holds speech: Silero VAD over every sample that enters the buffer.

The buffer's own sound detector (energy over the buffer's noise floor) finds pauses to cut in,
but it takes a breath, a click or the hiss after a word for sound. A live session hears audio
without prompt or draft when a round seems deaf to sound, and once more at the end of the
stream; alone, a breath becomes "players." and padded hiss "Thanks for watching.". Those
decisions ask this track instead: seconds of speech, by a voice activity model.

Silero VAD hears less and less of speech below about -45 dBFS (at -63 dBFS, 0.5 of 7.5 s), and
a quiet microphone is not silence. The track raises a quiet stream before the model hears it:
each chunk is scaled so that the loudest chunk so far would sit at ``QUIET_PEAK`` (never down,
at most by ``MAX_GAIN``). A stream at speaking level is heard as it is.
"""

from __future__ import annotations

import numpy as np

from stenoflow.audio.vad import CHUNK, SAMPLE_RATE, SileroVad

CHUNK_S = CHUNK / SAMPLE_RATE
SPEECH_PROB = 0.5  # a 32 ms chunk at least this probable is speech
QUIET_PEAK = 0.0316  # RMS (-30 dBFS) that the loudest chunk of a quiet stream is raised to
MAX_GAIN = 100.0  # at most +40 dB


class SpeechTrack:
    """Speech flags of a stream, one per 32 ms from its start; fed in order, pruned from the front."""

    def __init__(self) -> None:
        self._vad = SileroVad()
        self._flags = np.zeros(0, dtype=bool)
        self._first = 0  # chunk index of _flags[0]
        self._fed = 0  # samples fed so far
        self._pending = np.zeros(0, dtype=np.float32)  # samples of a chunk not complete yet
        self._peak = 0.0  # RMS of the loudest chunk so far

    @property
    def fed_s(self) -> float:
        return self._fed / SAMPLE_RATE

    def feed(self, samples: np.ndarray) -> None:
        """The next samples of the stream (16 kHz), right after the ones fed before."""
        self._fed += samples.size
        audio = np.concatenate([self._pending, np.asarray(samples, dtype=np.float32)])
        n = audio.size // CHUNK
        self._pending = audio[n * CHUNK :].copy()
        probs = self._vad(self._raised(audio[: n * CHUNK].reshape(n, CHUNK)).reshape(-1))
        if probs.size:
            self._flags = np.concatenate([self._flags, probs >= SPEECH_PROB])

    def _raised(self, chunks: np.ndarray) -> np.ndarray:
        """``chunks`` (n, CHUNK) scaled, each by the gain the loudest chunk up to it calls for:
        the same whatever blocks the samples came in."""
        rms = np.sqrt(np.mean(chunks.astype(np.float64) ** 2, axis=1))
        peaks = np.maximum.accumulate(np.concatenate([[self._peak], rms]))[1:]
        if peaks.size:
            self._peak = float(peaks[-1])
        gains = np.clip(QUIET_PEAK / np.maximum(peaks, 1e-9), 1.0, MAX_GAIN)
        return (chunks * gains[:, None]).astype(np.float32)

    def _span(self, lo: float, hi: float) -> tuple[int, np.ndarray]:
        """Chunk index of the first flag between absolute times ``lo`` and ``hi``, and the flags
        from it to ``hi`` (what was fed of them)."""
        first = max(self._first, int(lo / CHUNK_S))
        last = min(self._first + self._flags.size, int(np.ceil(hi / CHUNK_S)))
        return first, self._flags[first - self._first : max(first, last) - self._first]

    def seconds(self, lo: float, hi: float) -> float:
        """Seconds of speech between absolute times ``lo`` and ``hi`` (what was fed of them)."""
        return float(self._span(lo, hi)[1].sum()) * CHUNK_S

    def last_end(self, lo: float, hi: float) -> float | None:
        """Absolute end of the last speech between ``lo`` and ``hi`` (None: no speech there)."""
        first, flags = self._span(lo, hi)
        found = np.flatnonzero(flags)
        return None if not found.size else min(hi, (first + int(found[-1]) + 1) * CHUNK_S)

    def runs(self, lo: float, hi: float) -> list[tuple[float, float]]:
        """The stretches of speech between absolute times ``lo`` and ``hi`` (what was fed of
        them), in order, as (start, end) in absolute seconds."""
        first, flags = self._span(lo, hi)
        edges = np.flatnonzero(np.diff(np.concatenate([[0], flags.astype(np.int8), [0]])))
        return [(max(lo, (first + int(a)) * CHUNK_S), min(hi, (first + int(b)) * CHUNK_S))
                for a, b in zip(edges[::2], edges[1::2], strict=True)]

    def forget(self, before: float) -> None:
        """Drop the flags of chunks that end before absolute time ``before``."""
        drop = min(self._flags.size, int(before / CHUNK_S) - self._first)
        if drop > 0:
            self._flags = self._flags[drop:]
            self._first += drop
