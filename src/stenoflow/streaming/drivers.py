"""Feeding a session from a recording, on a clock you choose, and timing every committed word.

The same loop serves three questions:

* ``realtime``: audio arrives at 1x and rounds cost real time, so a slow round delays the next
  audio it sees. With ``WallClock`` it really waits (the CLI); with ``ComputeAwareClock`` it
  skips the idle waits but advances by each call's measured compute time, which reproduces the
  same schedule much faster (benchmarks, tests).
* ``unaware``: time advances only with the audio, as if compute were free: the latency floor
  that the algorithm itself imposes, and a deterministic run for tests.
* ``offline``: the whole recording is there at once (pushed in one call when it ends): the
  accuracy reference when the session is a whole-file transcriber.

A word's ``emitted_at`` is the clock reading when the call that committed it returned.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Protocol, TextIO, TypeVar

import numpy as np

from stenoflow.audio.io import validate_samples
from stenoflow.streaming.events import Dropped, StreamingSession, StreamUpdate

SAMPLE_RATE = 16000
MODES = ("realtime", "unaware", "offline")
T = TypeVar("T")


@dataclass(frozen=True)
class EmittedWord:
    """One line of the word-emission log (the contract in architecture.md)."""

    word: str
    start: float  # position in the audio, seconds
    end: float
    emitted_at: float  # feed-clock seconds since the stream began
    language: str | None = None  # the language it was heard in, where the stream detects it

    def to_json(self) -> str:
        doc: dict[str, object] = {"word": self.word, "start": round(float(self.start), 3),
                                  "end": round(float(self.end), 3), "emitted_at": round(float(self.emitted_at), 3)}
        if self.language is not None:
            doc["language"] = self.language
        return json.dumps(doc, ensure_ascii=False)


@dataclass
class StreamRun:
    mode: str
    words: list[EmittedWord] = field(default_factory=list)
    rounds: list[dict[str, float]] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)  # words set aside, with their rules
    audio_s: float = 0.0
    compute_s: float = 0.0  # time spent inside push() and finish()
    wall_time: float = 0.0  # real time the whole run took

    @property
    def text(self) -> str:
        return "".join(w.word for w in self.words)

    @property
    def rtf(self) -> float:
        """Real-time factor: compute seconds per second of audio."""
        return self.compute_s / self.audio_s if self.audio_s else float("nan")


# --- clocks --------------------------------------------------------------------------------


class Clock(Protocol):
    def start(self, at: float = 0.0) -> None:
        """Set the clock to ``at`` seconds (the stream begins at 0)."""

    def now(self) -> float: ...

    def wait_until(self, t: float) -> None:
        """Idle until the clock reads ``t`` (returns at once if it is past)."""

    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` (a push or finish); the clock advances as its kind says."""


class WallClock:
    """Real time: waits really sleep and calls take what they take."""

    def __init__(self) -> None:
        self._origin = time.perf_counter()

    def start(self, at: float = 0.0) -> None:
        self._origin = time.perf_counter() - at

    def now(self) -> float:
        return time.perf_counter() - self._origin

    def wait_until(self, t: float) -> None:
        delay = t - self.now()
        if delay > 0:
            time.sleep(delay)

    def call(self, fn: Callable[[], T]) -> T:
        return fn()


class ComputeAwareClock:
    """Simulated real time: idle waits are skipped, compute advances the clock by its duration."""

    def __init__(self) -> None:
        self._t = 0.0

    def start(self, at: float = 0.0) -> None:
        self._t = at

    def now(self) -> float:
        return self._t

    def wait_until(self, t: float) -> None:
        self._t = max(self._t, t)

    def call(self, fn: Callable[[], T]) -> T:
        t0 = time.perf_counter()
        out = fn()
        self._t += time.perf_counter() - t0
        return out


class ScheduledClock(ComputeAwareClock):
    """Simulated real time in which each call costs a duration drawn from a seeded uniform
    range, whatever it really took: a schedule of rounds like the realtime clock's that repeats
    exactly, so that a word lost under one schedule can be found again (tests)."""

    def __init__(self, seed: int, low_s: float = 0.05, high_s: float = 1.6) -> None:
        if not 0 <= low_s <= high_s:
            raise ValueError(f"need 0 <= low_s <= high_s, got {low_s}, {high_s}")
        super().__init__()
        self._rng = random.Random(seed)
        self._low, self._high = low_s, high_s

    def call(self, fn: Callable[[], T]) -> T:
        out = fn()
        self._t += self._rng.uniform(self._low, self._high)
        return out


class UnawareClock(ComputeAwareClock):
    """Audio time only: computing takes no time at all."""

    def call(self, fn: Callable[[], T]) -> T:
        return fn()


def default_clock(mode: str) -> Clock:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    return UnawareClock() if mode == "unaware" else ComputeAwareClock()


# --- the feed loop ---------------------------------------------------------------------------

UpdateCallback = Callable[[StreamUpdate, float], None]


class _Recorder:
    """Runs a push/finish on the clock and stamps the words it committed with the clock time."""

    def __init__(self, run: StreamRun, clock: Clock, on_update: UpdateCallback | None) -> None:
        self.run, self.clock, self.on_update = run, clock, on_update

    def __call__(self, fn: Callable[[], StreamUpdate]) -> None:
        t0 = time.perf_counter()
        update = self.clock.call(fn)
        self.run.compute_s += time.perf_counter() - t0
        emitted_at = self.clock.now()
        self.run.words.extend(EmittedWord(w.word, w.start, w.end, emitted_at, w.language)
                              for w in update.committed)
        self.run.rounds.extend(dict(r) for r in update.rounds)
        self.run.dropped.extend(update.dropped)
        if self.on_update is not None:
            self.on_update(update, emitted_at)


def run_stream(session_factory: Callable[[], StreamingSession], audio: np.ndarray, mode: str = "unaware",
               chunk_s: float = 0.1, clock: Clock | None = None,
               on_update: UpdateCallback | None = None) -> StreamRun:
    """Feed ``audio`` (16 kHz mono) to a new session in ``chunk_s`` pieces on ``mode``'s clock.

    In ``realtime``/``unaware`` a chunk becomes available when its last sample has arrived, and
    each push hands over everything that arrived since the previous one (so a slow round is
    followed by one larger push, as a live audio callback would deliver it).
    """
    samples = validate_samples(audio)
    clock = clock or default_clock(mode)
    session = session_factory()
    run = StreamRun(mode=mode, audio_s=samples.size / SAMPLE_RATE)
    wall0 = time.perf_counter()
    call = _Recorder(run, clock, on_update)
    feed(samples, mode, clock, chunk_s, lambda piece: call(partial(session.push, piece)),
         lambda: call(session.finish))
    run.wall_time = time.perf_counter() - wall0
    return run


def feed(samples: np.ndarray, mode: str, clock: Clock, chunk_s: float, push: Callable[[np.ndarray], object],
         finish: Callable[[], object]) -> None:
    """The feed loop of a recording: ``push`` what arrived by the clock, in whole chunks, then ``finish``.

    ``push`` and ``finish`` run the session's call on the clock (``clock.call``) themselves.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if not chunk_s > 0:
        raise ValueError(f"chunk_s must be > 0, got {chunk_s}")
    total = samples.size
    clock.start(total / SAMPLE_RATE if mode == "offline" else 0.0)
    chunk = max(1, round(chunk_s * SAMPLE_RATE))
    fed = 0
    while fed < total:
        arrived = min(total, math.floor(clock.now() * SAMPLE_RATE + 1e-3))
        available = total if arrived >= total else arrived - arrived % chunk
        if available <= fed:
            clock.wait_until(min(total, fed + chunk - fed % chunk) / SAMPLE_RATE)
            continue
        push(samples[fed:available])
        fed = available
    clock.wait_until(total / SAMPLE_RATE)
    finish()


def run_live(session_factory: Callable[[], StreamingSession], chunks: Iterable[np.ndarray],
             clock: Clock | None = None, on_update: UpdateCallback | None = None) -> StreamRun:
    """Feed a live source (microphone, stdin) as it delivers: wall clock, one push per delivery."""
    clock = clock or WallClock()
    session = session_factory()
    run = StreamRun(mode="live")
    wall0 = time.perf_counter()
    call = _Recorder(run, clock, on_update)
    run.audio_s = feed_live(chunks, clock, lambda chunk: call(partial(session.push, chunk)),
                            lambda: call(session.finish))
    run.wall_time = time.perf_counter() - wall0
    return run


def feed_live(chunks: Iterable[np.ndarray], clock: Clock, push: Callable[[np.ndarray], object],
              finish: Callable[[], object]) -> float:
    """The feed loop of a live source: ``push`` each delivery as it comes, then ``finish`` (on Ctrl-C
    too: what was heard still gets its text). Returns the seconds of audio delivered."""
    clock.start(0.0)
    audio_s = 0.0
    try:
        for chunk in chunks:
            audio_s += chunk.size / SAMPLE_RATE
            push(chunk)
    finally:
        finish()
    return audio_s


def write_word_log(words: Iterable[EmittedWord], out: TextIO | Path) -> None:
    """The word-emission log: one JSON object per committed word, in commit order."""
    if isinstance(out, Path):
        with out.open("w", encoding="utf-8") as f:
            write_word_log(words, f)
        return
    for w in words:
        out.write(w.to_json() + "\n")


