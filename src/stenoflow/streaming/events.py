"""What a streaming session reports: committed words (final) and the unconfirmed tail."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

SENTENCE_END = (".", "?", "!", "。", "？", "！")  # what a word ending a sentence ends with


@dataclass(frozen=True)
class TimedWord:
    word: str  # as decoded, usually with its leading space
    start: float  # seconds from the start of the stream
    end: float
    probability: float = float("nan")
    language: str | None = None  # the language it was heard in, where the stream detects it


@dataclass(frozen=True)
class Dropped:
    """Words a session heard and set aside for good, and the rule that set them aside: the
    word accounting of a stream (every stretch of speech ends up committed or named here)."""

    rule: str  # the rule's name (see stenoflow.streaming.rules)
    text: str
    start: float  # seconds from the start of the stream
    end: float
    final: bool = False  # set aside by the stream's final hearing, which no later round repeats


@dataclass(frozen=True)
class StreamUpdate:
    """The result of one push() or finish().

    ``committed`` are the words that became final during this call, in order; they are never
    changed or repeated later. ``tail`` is the current unconfirmed hypothesis after them
    (it may change on the next round). ``rounds`` describes each processing round run
    during the call (encoder frames, beam widths, decoder passes, timings). ``dropped`` names
    the words its rounds heard and set aside, with the rule that did (a later round may still
    hear and commit the same speech).
    """

    committed: tuple[TimedWord, ...] = ()
    tail: tuple[TimedWord, ...] = ()
    rounds: tuple[dict[str, float], ...] = field(default_factory=tuple)
    dropped: tuple[Dropped, ...] = ()


class StreamingSession(Protocol):
    """Anything the streaming drivers can feed: our sessions and the benchmark's peers."""

    def push(self, samples: np.ndarray) -> StreamUpdate:
        """Append float32 16 kHz mono samples (any chunk size); run the rounds that are due."""

    def finish(self) -> StreamUpdate:
        """End of stream: process what is left and commit the rest of the hypothesis."""
