"""Streaming drivers (clocks, emission log) and streaming metrics, without a model."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict

import numpy as np
import pytest

from stenoflow.bench.gold import GoldWord, check_monotonic, pack_windows
from stenoflow.bench.latency import (
    LatencyStats,
    encoder_gflops_per_audio_s,
    expand_normalized,
    word_latencies,
)
from stenoflow.model.dims import ModelDims
from stenoflow.streaming.drivers import (
    EmittedWord,
    ScheduledClock,
    StreamRun,
    run_stream,
    write_word_log,
)
from stenoflow.streaming.events import StreamUpdate, TimedWord

SR = 16000


# --- drivers ---------------------------------------------------------------------------------


class ChunkSession:
    """Commits one word per push, spanning the pushed audio; each push costs ``cost_s``."""

    def __init__(self, cost_s: float = 0.0) -> None:
        self.cost_s = cost_s
        self.t = 0.0
        self.pushes: list[float] = []

    def push(self, samples: np.ndarray) -> StreamUpdate:
        if self.cost_s:
            time.sleep(self.cost_s)
        self.pushes.append(samples.size / SR)
        word = TimedWord(" w", self.t, self.t + samples.size / SR)
        self.t += samples.size / SR
        return StreamUpdate(committed=(word,))

    def finish(self) -> StreamUpdate:
        return StreamUpdate(committed=(TimedWord(" end", self.t, self.t),))


def recording(cost_s: float = 0.0) -> tuple[list[ChunkSession], Callable[[], ChunkSession]]:
    sessions: list[ChunkSession] = []

    def factory() -> ChunkSession:
        sessions.append(ChunkSession(cost_s))
        return sessions[-1]

    return sessions, factory


def test_unaware_driver_emits_at_audio_time() -> None:
    sessions, factory = recording()
    run = run_stream(factory, np.zeros(SR + SR // 2, dtype=np.float32), "unaware", chunk_s=0.5)
    assert [w.emitted_at for w in run.words] == [0.5, 1.0, 1.5, 1.5]
    assert sessions[0].pushes == [0.5, 0.5, 0.5]
    assert run.audio_s == 1.5 and run.text == " w w w end"


def test_compute_aware_driver_delivers_what_arrived_during_a_slow_push() -> None:
    sessions, factory = recording(cost_s=0.25)
    run = run_stream(factory, np.zeros(SR, dtype=np.float32), "realtime", chunk_s=0.1)
    pushes = sessions[0].pushes
    assert sum(pushes) == pytest.approx(1.0)
    assert pushes[0] == pytest.approx(0.1) and max(pushes[1:]) >= 0.2  # 0.25 s of audio arrived meanwhile
    assert len(pushes) < 10
    emitted = [w.emitted_at for w in run.words]
    assert emitted == sorted(emitted) and emitted[0] >= 0.35  # 0.1 s of audio + 0.25 s of compute
    assert run.compute_s >= 0.25 * len(pushes)


def test_a_scheduled_clock_repeats_its_schedule_of_round_costs() -> None:
    """The realtime feed on seeded costs: slow calls batch the audio that arrived meanwhile, as
    on the compute-aware clock, and the same seed gives the same pushes and emission times."""
    runs = []
    for seed in (3, 3, 4):
        sessions, factory = recording()
        run = run_stream(factory, np.zeros(4 * SR, dtype=np.float32), "realtime", chunk_s=0.1,
                         clock=ScheduledClock(seed, 0.1, 0.9))
        runs.append((sessions[0].pushes, [w.emitted_at for w in run.words]))
        assert sum(sessions[0].pushes) == pytest.approx(4.0) and len(sessions[0].pushes) < 40
    assert runs[0] == runs[1] != runs[2]
    with pytest.raises(ValueError, match="low_s"):
        ScheduledClock(0, 1.0, 0.5)


def test_offline_driver_pushes_everything_at_the_end() -> None:
    sessions, factory = recording()
    run = run_stream(factory, np.zeros(SR * 3, dtype=np.float32), "offline")
    assert sessions[0].pushes == [3.0]
    assert all(w.emitted_at >= 3.0 for w in run.words)
    with pytest.raises(ValueError, match="mode"):
        run_stream(factory, np.zeros(10, dtype=np.float32), "later")


def test_word_log_lines_follow_the_contract(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "w.jsonl"
    write_word_log([EmittedWord(" Hi", 0.1, 0.5, 1.0), EmittedWord(" there.", 0.5, np.float64(0.9), 2.0)], out)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines[0] == {"word": " Hi", "start": 0.1, "end": 0.5, "emitted_at": 1.0}
    assert all(set(d) == {"word", "start", "end", "emitted_at"} for d in lines)
    assert StreamRun("unaware", audio_s=2.0, compute_s=1.0).rtf == 0.5


# --- metrics ---------------------------------------------------------------------------------


def test_word_latency_pairs_equal_and_substituted_words() -> None:
    gold = [GoldWord("Ask", 0.0, 0.5), GoldWord("not,", 0.5, 1.0), GoldWord("what", 1.0, 1.5),
            GoldWord("your", 1.5, 2.0)]
    emitted = [EmittedWord(" ask", 0, 0, 2.0), EmittedWord(" knot", 0, 0, 2.0),
               EmittedWord(" uh", 0, 0, 3.0), EmittedWord(" what", 0, 0, 3.0)]
    # "your" was never emitted (a deletion); "knot" substitutes "not"; "uh" is dropped by the normaliser.
    assert word_latencies(gold, emitted) == [1.5, 1.0, 1.5]  # emitted_at - gold end
    stats = LatencyStats.of([1.0, 2.0, 3.0, 10.0])
    assert (stats.words, stats.mean, stats.median) == (4, 4.0, 2.5)
    assert np.isnan(LatencyStats.of([]).mean)


def test_normalisation_can_expand_a_word() -> None:
    tokens, owners = expand_normalized(["It", "costs", "$5."])
    assert tokens == ["it", "costs", "5", "dollars"] and owners == [0, 1, 2, 2]


def test_encoder_flops_formula() -> None:
    dims = ModelDims(80, 1500, 384, 6, 4, 51864, 448, 384, 6, 4)  # tiny
    f = dims.encoder_flops(3000)
    n, d = 1500, 384
    expected = 2 * 3000 * 80 * d * 3 + 2 * n * d * d * 3 + 4 * (8 * n * d * d + 4 * n * n * d + 16 * n * d * d)
    assert f == expected
    assert 10e9 < f < 40e9  # tiny's encoder: ~22 GFLOPs per 30 s window
    assert dims.encoder_flops(1000) < f / 3


def test_encoder_work_per_second_counts_every_pass_and_none_in_skipped_rounds() -> None:
    rounds = [{"encoder_gflop": 2.0}, {"skipped": 1.0}, {"encoder_gflop": 1.0, "retry_encoder_gflop": 3.0}]
    assert encoder_gflops_per_audio_s(rounds, 3.0) == 2.0
    assert np.isnan(encoder_gflops_per_audio_s([{"round_ms": 5.0}], 3.0))  # a peer that reports none


def test_gold_windows_pack_sentences_under_30s_and_monotonic_check() -> None:
    sentences = [(i * 4.0 + 0.5, i * 4.0 + 3.5, f"s{i}") for i in range(20)]
    windows = pack_windows(sentences, 80.0)
    assert [s for group, _ in windows for s in group] == sentences
    for group, (lo, hi) in windows:
        assert hi - lo <= 28.0 and lo <= group[0][0] and hi >= group[-1][1]
    check_monotonic([GoldWord("a", 0, 1), GoldWord("b", 1, 1)])
    with pytest.raises(RuntimeError):
        check_monotonic([GoldWord("a", 0, 1), GoldWord("b", 0.5, 0.8)])


def test_round_means_keep_the_prompt_pass_out_of_other() -> None:
    from stenoflow.bench.stream_bench import format_table, round_means

    rounds = [{"encoder_ms": 200.0, "prefill_ms": 40.0, "decoder_ms": 80.0, "alignment_ms": 10.0, "round_ms": 350.0},
              {"encoder_ms": 100.0, "decoder_ms": 60.0, "alignment_ms": 10.0, "round_ms": 190.0}]  # no prompt pass
    # A pipelined round's time overlaps the next round's encoding: no sum of stages gives it.
    pipelined = {"encoder_ms": 200.0, "decoder_ms": 250.0, "alignment_ms": 10.0, "round_ms": 280.0, "pipelined": 1.0}
    skipped = {"round_ms": 0.5, "skipped": 1.0}  # an idle round: counted, not averaged
    means = round_means([*rounds, pipelined, skipped])
    assert means["prefill_ms"] == 40.0  # the mean over the rounds that had one
    assert means["other_ms"] == pytest.approx((20.0 + 20.0) / 2)
    assert means["round_ms"] == pytest.approx((350.0 + 190.0 + 280.0) / 3)
    assert means["skipped_rounds"] == pytest.approx(1 / 4)
    means = round_means(rounds)
    row = {"name": "x", "wer": 0.1, "latency": asdict(LatencyStats.of([1.0, 2.0])), "rtf": 0.5,
           "encoder_gflops_per_audio_s": 1.0, "rounds": 2, "per_round": means}
    head, _, cells = format_table([row]).splitlines()
    columns = dict(zip(head.strip("| ").split(" | "), cells.strip("| ").split(" | "), strict=True))
    assert (columns["enc ms/round"], columns["prompt ms/round"], columns["other ms/round"]) == ("150", "40", "20")
