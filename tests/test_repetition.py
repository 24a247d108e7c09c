"""Repetition loops: where one begins, and the filter that ends a looping row."""

from __future__ import annotations

import pytest
import torch

from stenoflow.decoding.repetition import LoopRule, StopLoops, text_loop_start

TS = 100  # toy timestamps: ids from 100
EOT = 50
RULE = LoopRule()


def is_timestamp(token: int) -> bool:
    return token >= TS


def test_short_units_loop_at_four_copies_and_keep_the_first() -> None:
    assert RULE.loop_start([1, 2, 3, 7, 7, 7, 7, 7, 7]) == 4
    assert RULE.loop_start([1, 2, 3, 7, 7, 7]) is None  # three copies: "no, no, no" is speech
    assert RULE.loop_start([1, 3, 4, 3, 4, 3, 4]) is None
    assert RULE.loop_start([1, 3, 4, 3, 4, 3, 4, 3, 4, 9]) == 3


def test_a_long_unit_loops_at_two_copies() -> None:
    sentence = list(range(20, 32))  # 12 tokens
    assert RULE.loop_start([1, *sentence, *sentence, 5]) == 1 + len(sentence)
    assert RULE.loop_start([1, *sentence[:5], *sentence[:5], 5]) is None  # a short phrase said twice


def test_a_phrase_loop_is_found_across_its_timestamps() -> None:
    phrase = [5, 6, 9]
    tokens = [1, 2, TS, *phrase, TS + 10, TS + 10, *phrase, TS + 20, TS + 20, *phrase, TS + 30, TS + 30, *phrase]
    cut = RULE.loop_start(tokens, is_timestamp)
    assert cut is not None and tokens[:cut] == [1, 2, TS, *phrase, TS + 10, TS + 10]
    assert RULE.loop_start(tokens) is None  # with the timestamps compared, the copies differ
    assert text_loop_start(tokens, EOT) == cut  # ids from end-of-text on are never compared


def test_the_earliest_loop_wins_and_ordinary_text_has_none() -> None:
    assert RULE.loop_start([3, 4, 3, 4, 3, 4, 3, 4, 8, 8, 8, 8]) == 2
    assert RULE.loop_start(list(range(40))) is None
    assert RULE.loop_start([]) is None
    with pytest.raises(ValueError, match="loop rule"):
        LoopRule(short_copies=1)


def test_stop_loops_leaves_only_end_of_text_to_a_looping_row() -> None:
    filt = StopLoops(RULE, EOT, sample_begin=1)
    tokens = torch.tensor([[0, 1, 2, TS, 7, 7, TS + 3, TS + 3, 7, 7],  # four copies of 7, timestamps between
                           [0, 1, 2, 3, 7, 7, 7, 8, 9, 10]])  # no loop at the end
    logits = torch.zeros(2, TS + 10)
    filt.apply(logits, tokens)
    assert torch.isfinite(logits[0]).nonzero().flatten().tolist() == [EOT]
    assert torch.isfinite(logits[1]).all()
