"""Decoding rules as pure logic: logit filters, beam bookkeeping, segment splitting, ranking."""

from __future__ import annotations

import pytest
import torch

from stenoflow.decoding.logit_filters import (
    ApplyTimestampRules,
    NoEndBefore,
    SuppressBlank,
    SuppressTokens,
)
from stenoflow.decoding.options import DecodingOptions, verify_options
from stenoflow.decoding.repetition import LoopRule, StopLoops
from stenoflow.decoding.strategies import GreedyDecoder, MaximumLikelihoodRanker
from stenoflow.decoding.transcribe import split_segments

EOT, NO_TS, TB, V = 10, 11, 12, 40  # a toy vocabulary: text 0..9, eot, <|notimestamps|>, timestamps 12..39


def rules(sample_begin: int = 2, max_initial: int | None = 5) -> ApplyTimestampRules:
    return ApplyTimestampRules(EOT, NO_TS, TB, sample_begin, max_initial)


def test_first_token_is_an_early_timestamp() -> None:
    logits = torch.zeros(1, V)
    rules().apply(logits, torch.tensor([[0, 1]]))
    allowed = torch.isfinite(logits[0]).nonzero().flatten().tolist()
    assert allowed == list(range(TB, TB + 6))


def allowed_after(tokens: list[int], max_index: int) -> set[int]:
    logits = torch.zeros(1, V)
    logits[0, EOT] = 10.0  # end-of-text likelier than any text: the rules alone decide
    ApplyTimestampRules(EOT, NO_TS, TB, 2, 5, max_index).apply(logits, torch.tensor([tokens]))
    return set(torch.isfinite(logits[0]).nonzero().flatten().tolist())


def test_no_timestamp_after_the_audio_ends() -> None:
    assert allowed_after([0, 1], 3) == set(range(TB, TB + 3))  # the first segment opens before the end
    # inside a segment: text, or a closing timestamp up to the end itself
    assert allowed_after([0, 1, TB, 4], 20) == set(range(EOT + 1)) | set(range(TB + 1, TB + 20 + 1))
    # a closed segment: the next opens before the end, or the text ends
    assert allowed_after([0, 1, TB, 4, TB + 7], 20) == {EOT} | set(range(TB + 7, TB + 20))
    # a segment closed at the end: nothing more can follow
    assert allowed_after([0, 1, TB, 4, TB + 20], 20) == {EOT}


def test_timestamp_pairs_and_monotonic() -> None:
    # a lone timestamp after text closes a segment: next comes a timestamp >= 7 or end-of-text
    logits = torch.zeros(1, V)
    logits[0, EOT] = 10.0
    rules().apply(logits, torch.tensor([[0, 1, TB + 3, 4, TB + 7]]))
    allowed = set(torch.isfinite(logits[0]).nonzero().flatten().tolist())
    assert allowed == {EOT} | set(range(TB + 7, V))
    # after a closed pair "<|7|><|7|>" the next token must be text (timestamps suppressed)
    logits = torch.zeros(1, V)
    rules().apply(logits, torch.tensor([[0, 1, TB + 3, 4, TB + 7, TB + 7]]))
    allowed = set(torch.isfinite(logits[0]).nonzero().flatten().tolist())
    assert allowed and all(t <= EOT for t in allowed)
    # inside a segment, timestamps smaller than the last one are not allowed
    logits = torch.zeros(1, V)
    rules().apply(logits, torch.tensor([[0, 1, TB + 3, 4]]))
    assert torch.isinf(logits[0, TB : TB + 4]).all() and torch.isfinite(logits[0, TB + 4 :]).all()


def test_timestamps_win_when_likelier_than_any_text() -> None:
    logits = torch.zeros(1, V)
    logits[0, TB:] = 1.0  # 28 timestamps, each as likely as e^1 vs text e^0
    rules().apply(logits, torch.tensor([[0, 1, TB + 1, 5]]))
    assert torch.isinf(logits[0, :TB]).all()


def test_rules_are_per_row() -> None:
    logits = torch.zeros(2, V)
    logits[:, :EOT] = 5.0  # text is likelier than all timestamps together
    rules().apply(logits, torch.tensor([[0, 1, TB + 3, 4, TB + 7], [0, 1, TB + 3, 4, 5]]))
    assert torch.isinf(logits[0, :EOT]).all()
    assert torch.isfinite(logits[1, :EOT]).all()


def test_suppress_blank_only_at_start_and_suppress_tokens_always() -> None:
    f = SuppressBlank([3, EOT], sample_begin=2)
    logits = torch.zeros(1, V)
    f.apply(logits, torch.tensor([[0, 1]]))
    assert torch.isinf(logits[0, [3, EOT]]).all()
    logits = torch.zeros(1, V)
    f.apply(logits, torch.tensor([[0, 1, 5]]))
    assert torch.isfinite(logits).all()
    logits = torch.zeros(1, V)
    SuppressTokens([4, 7]).apply(logits, torch.tensor([[0, 1, 5]]))
    assert torch.isinf(logits[0, [4, 7]]).all() and torch.isfinite(logits).sum() == V - 2


def test_no_end_before_a_length_unless_nothing_else_may_follow() -> None:
    f = NoEndBefore(EOT, length=4)
    logits = torch.zeros(2, V)
    logits[1, :] = float("-inf")
    logits[1, EOT] = 0.0  # a loop or a segment closed at the audio's end: end-of-text alone
    f.apply(logits, torch.tensor([[0, 1, 5], [0, 1, 5]]))
    assert torch.isinf(logits[0, EOT]) and torch.isfinite(logits[0]).sum() == V - 1
    assert torch.isfinite(logits[1, EOT])
    logits = torch.zeros(1, V)
    f.apply(logits, torch.tensor([[0, 1, 5, 6]]))
    assert torch.isfinite(logits).all()


def test_greedy_keeps_finished_rows_finished() -> None:
    g = GreedyDecoder(0.0, EOT)
    tokens = torch.tensor([[0, EOT], [0, 3]])
    logits = torch.zeros(2, V)
    logits[:, 5] = 10.0
    total = torch.zeros(2)
    step = g.update(tokens, logits, total)
    assert step.tokens[:, -1].tolist() == [EOT, 5] and not step.done and step.parents is None
    assert step.sum_logprobs[0] == 0.0 and step.sum_logprobs[1] < 0.0


def test_split_segments_at_timestamp_pairs() -> None:
    toks = [TB + 0, 1, 2, TB + 50, TB + 50, 3, 4, TB + 100]  # two segments, single timestamp ending
    segs, advance = split_segments(toks, TB, time_offset=10.0, segment_frames=3000)
    assert [(s, e) for s, e, _ in segs] == [(10.0, 11.0), (11.0, 12.0)]
    assert advance == 3000
    toks = [TB + 0, 1, TB + 50, TB + 50, 3, 4]  # the last segment is unfinished: seek to its start
    segs, advance = split_segments(toks, TB, time_offset=0.0, segment_frames=3000)
    assert len(segs) == 1 and advance == 100


def test_ranker_length_normalisation() -> None:
    r = MaximumLikelihoodRanker(None)
    assert r.rank([2, 10], [-2.0, -5.0]) == 1  # -1.0 vs -0.5 per token
    r = MaximumLikelihoodRanker(1.0)
    assert r.score(-6.0, 1) == pytest.approx(-6.0)


def test_option_validation() -> None:
    with pytest.raises(ValueError, match="best_of"):
        verify_options(DecodingOptions(beam_size=5, best_of=5), True)
    with pytest.raises(ValueError, match="English-only"):
        verify_options(DecodingOptions(task="translate"), False)
    with pytest.raises(ValueError, match="patience"):
        verify_options(DecodingOptions(patience=2.0), True)


@pytest.mark.parametrize("max_index", [None, 9])
def test_filtering_all_positions_at_once_equals_one_row_at_a_time(max_index: int | None) -> None:
    """Draft verification filters a whole draft in one call; each row must come out exactly as
    the one-token step after its own prefix would have it (timestamps opening, closing, going
    back, at the end; blanks at the start; loops)."""
    gen = torch.Generator().manual_seed(0)
    sample_begin = 2
    filters = [SuppressBlank([3, EOT], sample_begin), SuppressTokens([4]),
               ApplyTimestampRules(EOT, NO_TS, TB, sample_begin, 5, max_index),
               StopLoops(LoopRule(), EOT, sample_begin), NoEndBefore(EOT, sample_begin + 6)]
    for trial in range(60):
        length = int(torch.randint(1, 14, (1,), generator=gen))
        # Text, timestamps and repeats of one token, so that pairs, regressions and loops occur.
        pool = torch.tensor([0, 1, 5, 5, 5, 7, TB, TB + 2, TB + 6, TB + 9, TB + 12])
        tail = pool[torch.randint(0, len(pool), (length,), generator=gen)]
        if trial % 3 == 0:  # a two-token phrase four times over, a timestamp between two copies
            tail = torch.cat([tail[:3], torch.tensor([7, 1, 7, 1, TB + 12, 7, 1, 7, 1, 0])])
        seq = torch.cat([torch.tensor([0, 1]), tail])
        start = int(torch.randint(1, seq.numel(), (1,), generator=gen))  # the cached prefix
        logits = torch.randn(seq.numel() - start, V, generator=gen) * 3
        logits[trial % logits.shape[0], TB:] += 4  # sometimes timestamps together beat any text
        for f in filters:
            one_by_one = logits.clone()
            for j in range(one_by_one.shape[0]):
                f.apply(one_by_one[j : j + 1], seq[None, : start + j + 1])
            together = logits.clone()
            f.apply_positions(together, seq[None], start)
            assert torch.equal(together, one_by_one), (type(f).__name__, seq.tolist(), start)
