"""What each stream costs and how late its words are, measured by the server; admission by it.

The server knows when every piece of a stream's audio arrived, so it measures a committed word's
latency itself: the moment the word is sent, minus the moment the audio up to the word's end
arrived (what a client would see, less the network). It also knows each stream's backlog (audio
received and not yet heard by a round) and the compute its rounds took.

With ``--max-sessions auto`` a new stream is admitted only while the server keeps its target:

* every open stream's recent words (p90) and lag are within the target;
* the model's measured busy share, plus what one more stream would add, stays under
  ``MAX_BUSY``: past it, the rounds of every stream wait behind one another and their latency
  grows together. A stream that shares the model costs less than it did alone (its rounds wait
  longer, take in more audio and are fewer), so one more adds ``MARGINAL_SHARE`` of what a stream
  costs now (the mean of the streams that ran long enough to measure): on base, 2 cores, the
  second stream added 0.29 to the 0.51 busy share of the first;
* no stream admitted in the last ``PROBATION_S`` is still unmeasured: a burst of new streams is
  admitted one by one, as each shows what it costs (until the server has measured any stream at
  all; after that, a burst is admitted up to the estimate).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from stenoflow.server.metrics import prometheus_labelled, prometheus_metric

RECENT_WORDS = 50  # words a stream's latency figures are taken over
BUSY_WINDOW_S = 10.0  # the model's busy share is measured over this much wall time
PROBATION_S = 5.0  # a new stream's cost is known after this long
MARGINAL_SHARE = 0.6  # what one more stream adds to the busy share, over what a stream costs now
MAX_ARRIVALS = 6000  # arrivals a stream keeps (10 minutes of 0.1 s messages) while no word commits
MAX_BUSY = 0.85  # most model busy share (compute seconds per wall second) admission plans for
REFUSALS = {  # why a stream is refused, by the code /metrics counts it under
    "behind": "open streams are past the server's latency target",
    "full": "another stream would not fit within the server's latency target",
    "measuring": "the server is still measuring what the streams it just admitted cost",
}


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank; 0 when empty)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class StreamLoad:
    """One stream's arrivals, backlog, word latencies and compute."""

    ident: int
    target_s: float
    clock: Callable[[], float] = time.monotonic
    opened: float = 0.0
    received_s: float = 0.0  # audio that arrived
    heard_s: float = 0.0  # audio handed to the session
    words: int = 0
    misses: int = 0  # words committed later than the target
    compute_s: float = 0.0
    latencies: deque[float] = field(default_factory=lambda: deque(maxlen=RECENT_WORDS))
    # (audio received up to, when), from the last committed word on (at most MAX_ARRIVALS)
    _arrivals: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=MAX_ARRIVALS))
    _jobs: deque[tuple[float, float]] = field(default_factory=deque)  # (when it ended, compute seconds)

    def __post_init__(self) -> None:
        self.opened = self.clock()

    def arrived(self, received_s: float) -> None:
        """The stream's audio now reaches ``received_s`` seconds."""
        if received_s > self.received_s:
            self.received_s = received_s
            self._arrivals.append((received_s, self.clock()))

    def ran(self, heard_s: float, compute_s: float) -> None:
        """A job of ``compute_s`` seconds heard ``heard_s`` more seconds of the stream's audio."""
        self.heard_s += heard_s
        self.compute_s += compute_s
        self._jobs.append((self.clock(), compute_s))

    def committed(self, ends: Sequence[float]) -> list[float]:
        """Note words sent now, ending at ``ends`` (seconds of the stream's audio); their latencies."""
        now = self.clock()
        lats = [max(0.0, now - self.arrival(end)) for end in ends]
        self.latencies.extend(lats)
        self.words += len(lats)
        self.misses += sum(lat > self.target_s for lat in lats)
        if ends:  # arrivals before the last committed word are not needed again
            while len(self._arrivals) > 1 and self._arrivals[1][0] <= max(ends):
                self._arrivals.popleft()
        return lats

    def arrival(self, t: float) -> float:
        """When the audio up to ``t`` seconds had arrived (now, if it has not)."""
        for upto, when in self._arrivals:
            if upto >= t:
                return when
        return self.clock()

    def lag_s(self) -> float:
        """How long the oldest audio no round has heard has waited (0: none waits)."""
        if self.received_s <= self.heard_s + 1e-6:
            return 0.0
        return max(0.0, self.clock() - self.arrival(self.heard_s + 1e-6))

    def p90_s(self) -> float:
        return quantile(list(self.latencies), 0.9)

    def busy(self, since: float) -> float:
        """Compute seconds of this stream's jobs that ended after ``since``."""
        while self._jobs and self._jobs[0][0] < since - BUSY_WINDOW_S:
            self._jobs.popleft()
        return sum(s for at, s in self._jobs if at >= since)

    def measured(self) -> bool:
        return self.clock() - self.opened >= PROBATION_S


class Load:
    """Every open stream's load, the model's busy share, and admission (see the module)."""

    def __init__(self, target_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        if not target_s > 0:
            raise ValueError(f"the latency target must be > 0 seconds, got {target_s}")
        self.target_s = target_s
        self.clock = clock
        self.lock = threading.Lock()
        self.streams: dict[int, StreamLoad] = {}
        self.started = clock()
        self._next = 0
        self._share: float | None = None  # busy share of one stream, from streams measured so far
        self.refused: dict[str, int] = {}
        self.words_total = 0
        self.misses_total = 0

    def open(self) -> StreamLoad:
        with self.lock:
            self._next += 1
            stream = StreamLoad(self._next, self.target_s, self.clock)
            self.streams[stream.ident] = stream
            return stream

    def close(self, stream: StreamLoad) -> None:
        with self.lock:
            self.streams.pop(stream.ident, None)

    def committed(self, stream: StreamLoad, ends: Sequence[float]) -> None:
        """Words of ``stream`` ending at ``ends`` were sent now."""
        with self.lock:
            before = stream.misses
            self.words_total += len(stream.committed(ends))
            self.misses_total += stream.misses - before

    def ran(self, stream: StreamLoad, heard_s: float, compute_s: float) -> None:
        with self.lock:
            stream.ran(heard_s, compute_s)

    def arrived(self, stream: StreamLoad, received_s: float) -> None:
        with self.lock:
            stream.arrived(received_s)

    def render(self) -> list[str]:
        """Prometheus text: the target, the model's busy share, the words of all streams and those
        later than the target, each open stream's lag, recent p90 and misses, and the streams
        refused, by reason."""
        with self.lock:
            streams = {str(s.ident): s for s in self.streams.values()}
            return [
                prometheus_metric("target_latency_seconds", "gauge", "per-word latency the server keeps streams within",
                                  self.target_s),
                prometheus_metric("model_busy_share", "gauge",
                                  f"model compute seconds per wall second, last {BUSY_WINDOW_S:g} s", self.busy_share()),
                prometheus_metric("stream_words_total", "counter", "words committed to stream clients",
                                  self.words_total),
                prometheus_metric("target_misses_total", "counter", "words committed later than the latency target",
                                  self.misses_total),
                prometheus_labelled("stream_lag_seconds", "gauge", "how long an open stream's oldest unheard audio "
                                    "has waited", "stream", {k: s.lag_s() for k, s in streams.items()}),
                prometheus_labelled("stream_latency_p90_seconds", "gauge", f"an open stream's p90 word latency, last "
                                    f"{RECENT_WORDS} words", "stream", {k: s.p90_s() for k, s in streams.items()}),
                prometheus_labelled("stream_target_misses", "gauge", "an open stream's words committed later than the "
                                    "target", "stream", {k: s.misses for k, s in streams.items()}),
                prometheus_labelled("admission_refused_total", "counter", "streams --max-sessions auto refused, by "
                                    "reason", "reason", dict(sorted(self.refused.items()))),
            ]

    def busy_share(self) -> float:
        """Compute seconds per wall second of the streams' jobs over the last ``BUSY_WINDOW_S``."""
        now = self.clock()
        since = now - BUSY_WINDOW_S
        span = min(BUSY_WINDOW_S, now - self.started) or 1.0
        return sum(s.busy(since) for s in self.streams.values()) / span

    def stream_share(self) -> float | None:
        """What one stream costs (busy share), from the streams open long enough to tell; None
        before any was."""
        measured = [s for s in self.streams.values() if s.measured()]
        if measured:
            now = self.clock()
            spans = [min(BUSY_WINDOW_S, now - s.opened) for s in measured]
            shares = [s.busy(now - span) / span for s, span in zip(measured, spans)]
            self._share = sum(shares) / len(shares)
        return self._share

    def admit(self) -> str | None:
        """None to admit a new stream, or why not (a key of ``REFUSALS``)."""
        with self.lock:
            reason = self._refusal()
            if reason is not None:
                self.refused[reason] = self.refused.get(reason, 0) + 1
            return reason

    def _refusal(self) -> str | None:
        streams = list(self.streams.values())
        if not streams:
            return None
        bound = self.target_s
        late = [s for s in streams if s.lag_s() > bound or (len(s.latencies) >= 10 and s.p90_s() > bound)]
        if late:
            return "behind"
        share = self.stream_share()
        unmeasured = [s for s in streams if not s.measured()]
        if share is None:
            return "measuring" if unmeasured else None
        if self.busy_share() + MARGINAL_SHARE * share * (len(unmeasured) + 1) > MAX_BUSY:
            return "full"
        return None
