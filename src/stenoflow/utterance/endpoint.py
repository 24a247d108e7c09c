"""Endpointing: where an utterance starts and ends, from a stream of speech probabilities.

Hysteresis as in Silero's own iterator: speech starts at the first chunk at or above
``threshold``; a chunk below ``threshold - 0.15`` (``neg_threshold``) is a *pause*, which ends the
utterance once the silence after it lasts ``hang_s`` (the end-of-speech hang time). Speech before
the hang runs out resumes the same utterance. Utterances shorter than ``min_speech_s`` of voiced
audio (a click, a cough) are dropped; one longer than ``max_utterance_s`` is ended where it is.

Pure logic on probabilities and sample positions: tested without a model.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

SAMPLE_RATE = 16000


@dataclass(frozen=True)
class EndpointOptions:
    threshold: float = 0.5  # speech probability that starts (or resumes) speech
    neg_threshold: float | None = None  # below this a chunk is silence (None: threshold - 0.15)
    hang_s: float = 0.5  # silence after speech that ends the utterance
    min_speech_s: float = 0.25  # shorter utterances are dropped
    max_utterance_s: float = 20.0  # longer ones are ended where they are (the encoder hears <= 30 s)
    # Audio decoded before the detected start and after the end of speech: the detector is a chunk
    # or two late on soft onsets, and the model hears a word's start better with a little lead-in.
    pre_s: float = 0.3
    post_s: float = 0.2

    def __post_init__(self) -> None:
        if not 0 < self.threshold < 1:
            raise ValueError(f"threshold must be in (0, 1), got {self.threshold}")
        if self.neg_threshold is not None and not 0 <= self.neg_threshold <= self.threshold:
            raise ValueError(f"neg_threshold must be in [0, threshold], got {self.neg_threshold}")
        if not self.hang_s > 0:
            raise ValueError(f"hang_s must be > 0 seconds, got {self.hang_s}")
        if self.min_speech_s < 0:
            raise ValueError(f"min_speech_s must be >= 0, got {self.min_speech_s}")
        if not 1.0 <= self.max_utterance_s <= 29.0:
            raise ValueError(f"max_utterance_s must be in [1, 29] seconds, got {self.max_utterance_s}")
        for name in ("pre_s", "post_s"):
            if not 0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1] seconds, got {getattr(self, name)}")
        if self.post_s >= self.hang_s:
            raise ValueError(f"post_s ({self.post_s} s) must be shorter than the hang time ({self.hang_s} s)")

    @property
    def silence_below(self) -> float:
        return self.neg_threshold if self.neg_threshold is not None else max(self.threshold - 0.15, 0.01)


class Kind(Enum):
    START = "start"  # speech began at ``start``
    PAUSE = "pause"  # speech paused at ``end`` (the utterance may still go on)
    RESUME = "resume"  # speech came back before the hang ran out
    END = "end"  # the utterance [start, end) is over (the hang ran out, or it grew too long)
    DROP = "drop"  # what began at ``start`` was too short to be an utterance


@dataclass(frozen=True)
class Mark:
    kind: Kind
    start: int  # sample where the utterance's speech began
    end: int  # sample where its speech (last) stopped; for START and RESUME: the current position
    at: int  # sample position of the chunk that decided it


class Endpointer:
    """Feeds on (position, probability) of consecutive chunks; returns what each chunk decided."""

    def __init__(self, options: EndpointOptions, chunk: int) -> None:
        self.options = options
        self.chunk = chunk
        self.start: int | None = None  # speech start of the open utterance
        self.pause: int | None = None  # where its speech last paused (None: speaking)
        self.voiced = 0  # voiced samples in the open utterance

    @property
    def open(self) -> bool:
        return self.start is not None

    def update(self, position: int, probability: float) -> Mark | None:
        """Chunk [position, position + chunk) has speech probability ``probability``."""
        o = self.options
        end_of_chunk = position + self.chunk
        if self.start is None:
            if probability >= o.threshold:
                self.start, self.pause, self.voiced = position, None, self.chunk
                return Mark(Kind.START, position, end_of_chunk, end_of_chunk)
            return None
        if self.pause is None:
            if probability < o.silence_below:
                self.pause = position
                return Mark(Kind.PAUSE, self.start, position, end_of_chunk)
            self.voiced += self.chunk
            if end_of_chunk - self.start >= o.max_utterance_s * SAMPLE_RATE:
                return self._close(end_of_chunk, end_of_chunk)
            return None
        if probability >= o.threshold:
            self.pause = None
            self.voiced += self.chunk
            return Mark(Kind.RESUME, self.start, end_of_chunk, end_of_chunk)
        if end_of_chunk - self.pause >= o.hang_s * SAMPLE_RATE:
            return self._close(self.pause, end_of_chunk)
        return None

    def flush(self, position: int) -> Mark | None:
        """The stream ended at ``position``: close an open utterance there."""
        if self.start is None:
            return None
        return self._close(self.pause if self.pause is not None else position, position)

    def _close(self, end: int, at: int) -> Mark:
        start, voiced = self.start, self.voiced
        assert start is not None
        self.start, self.pause, self.voiced = None, None, 0
        kind = Kind.END if voiced >= self.options.min_speech_s * SAMPLE_RATE else Kind.DROP
        return Mark(kind, start, end, at)
