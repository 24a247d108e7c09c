"""Feeding an utterance session from a recording or a live source, and timing each utterance.

The clocks are the streaming drivers' (see :mod:`stenoflow.streaming.drivers`): ``realtime`` on a
compute-aware clock reproduces when each text would reach the user, ``unaware`` counts audio time
only. An utterance's latency is the clock reading when the call that produced it returned, minus
its endpoint (the moment the endpointer knew the person had stopped: the paper's end of ingestion),
and minus its end of speech (the hang time included).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from stenoflow.audio.io import validate_samples
from stenoflow.streaming.drivers import Clock, WallClock, default_clock, feed, feed_live
from stenoflow.utterance.session import Utterance, UtteranceSession

SAMPLE_RATE = 16000
CHUNK_S = 0.032  # a microphone callback's worth: one detector chunk


@dataclass(frozen=True)
class HeardUtterance:
    utterance: Utterance
    emitted_at: float  # clock seconds since the stream began

    @property
    def after_endpoint(self) -> float:
        return self.emitted_at - self.utterance.endpoint

    @property
    def after_speech(self) -> float:
        return self.emitted_at - self.utterance.end

    def to_dict(self) -> dict[str, object]:
        return {**self.utterance.to_dict(), "emitted_at": round(self.emitted_at, 4),
                "latency_after_endpoint": round(self.after_endpoint, 4),
                "latency_after_speech": round(self.after_speech, 4)}


@dataclass
class UtteranceRun:
    mode: str
    heard: list[HeardUtterance] = field(default_factory=list)
    audio_s: float = 0.0
    compute_s: float = 0.0  # time spent inside push() and finish()
    wall_time: float = 0.0

    @property
    def rtf(self) -> float:
        return self.compute_s / self.audio_s if self.audio_s else float("nan")


HeardCallback = Callable[[HeardUtterance], None]


class _Recorder:
    def __init__(self, run: UtteranceRun, clock: Clock, on_heard: HeardCallback | None) -> None:
        self.run, self.clock, self.on_heard = run, clock, on_heard

    def __call__(self, fn: Callable[[], list[Utterance]]) -> None:
        t0 = time.perf_counter()
        utterances = self.clock.call(fn)
        self.run.compute_s += time.perf_counter() - t0
        now = self.clock.now()
        for u in utterances:
            heard = HeardUtterance(u, now)
            self.run.heard.append(heard)
            if self.on_heard is not None:
                self.on_heard(heard)


def run_utterances(session: UtteranceSession, audio: np.ndarray, mode: str = "realtime", clock: Clock | None = None,
                   chunk_s: float = CHUNK_S, on_heard: HeardCallback | None = None) -> UtteranceRun:
    """Feed a recording (16 kHz mono) to ``session`` in ``chunk_s`` pieces on ``mode``'s clock."""
    samples = validate_samples(audio)
    clock = clock or default_clock(mode)
    run = UtteranceRun(mode, audio_s=samples.size / SAMPLE_RATE)
    wall0 = time.perf_counter()
    call = _Recorder(run, clock, on_heard)
    feed(samples, mode, clock, chunk_s, lambda piece: call(partial(session.push, piece)), lambda: call(session.finish))
    run.wall_time = time.perf_counter() - wall0
    return run


def run_live_utterances(session: UtteranceSession, chunks: Iterable[np.ndarray],
                        on_heard: HeardCallback | None = None) -> UtteranceRun:
    """Feed a live source (microphone, stdin) as it delivers, on the wall clock."""
    clock = WallClock()
    run = UtteranceRun("live")
    wall0 = time.perf_counter()
    call = _Recorder(run, clock, on_heard)
    run.audio_s = feed_live(chunks, clock, lambda chunk: call(partial(session.push, chunk)),
                            lambda: call(session.finish))
    run.wall_time = time.perf_counter() - wall0
    return run
