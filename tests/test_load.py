"""The server's own measure of its streams (word latency from arrival, backlog, compute) and the
admission it bases on them, on a clock the test moves."""

from __future__ import annotations

import pytest

from stenoflow.server.load import (
    BUSY_WINDOW_S,
    MARGINAL_SHARE,
    MAX_BUSY,
    PROBATION_S,
    Load,
    quantile,
)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def feed(load: Load, clock: Clock, streams: list, seconds: float, compute_share: float, step: float = 0.5) -> None:
    """Real-time audio for ``seconds`` on every stream, a job per ``step`` costing
    ``compute_share`` of it."""
    for _ in range(round(seconds / step)):
        clock.now += step
        for stream in streams:
            load.arrived(stream, stream.received_s + step)
            load.ran(stream, step, compute_share * step)


def test_a_word_is_as_late_as_the_time_since_the_audio_up_to_its_end_arrived() -> None:
    clock = Clock()
    load = Load(1.5, clock)
    s = load.open()
    for t in (0.5, 1.0, 1.5, 2.0):  # half a second of audio arrives every half second
        clock.now = 100.0 + t
        load.arrived(s, t)
    clock.now = 102.7
    load.committed(s, [0.9, 1.4, 0.2])  # arrived with the pushes ending 1.0, 1.5 and 0.5 s
    assert list(s.latencies) == pytest.approx([1.7, 1.2, 2.2])
    assert (s.misses, load.misses_total, load.words_total) == (2, 2, 3)
    assert s.p90_s() == pytest.approx(2.2) and quantile([], 0.9) == 0.0
    load.ran(s, 1.0, 0.3)  # a round heard the first second: the oldest unheard audio came at 1.5 s
    assert s.lag_s() == pytest.approx(102.7 - 101.5)
    load.ran(s, 1.0, 0.3)
    assert s.lag_s() == 0.0


def test_admission_measures_streams_one_by_one_then_fills_up_to_the_busy_share() -> None:
    clock = Clock()
    load = Load(1.5, clock)
    assert load.admit() is None
    first = load.open()
    assert load.admit() == "measuring"  # nothing known of what a stream costs yet
    feed(load, clock, [first], PROBATION_S + 1, 0.5)
    assert load.admit() is None  # 0.5 busy + 0.6 * 0.5 for one more
    second = load.open()
    assert load.admit() == "full"  # 0.5 busy + 0.3 for the unmeasured second + 0.3 > MAX_BUSY
    feed(load, clock, [first, second], BUSY_WINDOW_S, 0.4)
    assert load.busy_share() + MARGINAL_SHARE * load.stream_share() > MAX_BUSY and load.admit() == "full"
    load.close(second)
    clock.now += BUSY_WINDOW_S
    assert load.admit() is None  # the second stream's compute left the window
    assert load.refused == {"measuring": 1, "full": 2}


def test_a_stream_late_against_the_target_closes_admission() -> None:
    clock = Clock()
    load = Load(1.0, clock)
    s = load.open()
    feed(load, clock, [s], PROBATION_S + 1, 0.1)
    assert load.admit() is None
    ends = [s.received_s - 1.5 + 0.1 * i for i in range(10)]  # words sent 0.6-1.5 s after their audio came
    load.committed(s, ends)
    assert s.p90_s() > 1.0 and load.admit() == "behind"
    text = "\n".join(load.render())
    assert 'stenoflow_stream_latency_p90_seconds{stream="1"}' in text
    assert 'stenoflow_admission_refused_total{reason="behind"} 1' in text
    assert "stenoflow_target_misses_total" in text and "stenoflow_target_latency_seconds 1" in text
