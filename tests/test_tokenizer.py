"""The tokenizer encodes text as Whisper writes it, also from a converted file that lost a merge."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
from tokenizers import Tokenizer as HFTokenizer

from stenoflow.bench.datasets import streams
from stenoflow.tokenizer import restore_missing_merges

if TYPE_CHECKING:
    from stenoflow.api import Model


def test_restoring_a_lost_merge_changes_nothing_else(tiny: Model) -> None:
    path = tiny.tokenizer.path
    assert path is not None
    data = json.loads(path.read_text(encoding="utf-8"))
    assert restore_missing_merges(json.loads(json.dumps(data))) == []  # a complete file is left alone
    broken = json.loads(json.dumps(data))
    first = broken["model"]["merges"].pop(0)  # what the broken multilingual files lack ("Ġ t")
    text = " Then they told the truth to the court, didn't they? 42 times."
    hf_broken = HFTokenizer.from_str(json.dumps(broken))
    assert hf_broken.encode(text, add_special_tokens=False).ids != tiny.tokenizer.encode(text)
    assert restore_missing_merges(broken) == ["".join(first.split(" ") if isinstance(first, str) else first)]
    assert HFTokenizer.from_str(json.dumps(broken)).encode(text, add_special_tokens=False).ids == tiny.tokenizer.encode(text)


@pytest.mark.slow
def test_base_encodes_its_own_transcript_as_it_wrote_it(base: Model) -> None:
    # The prompt of the next window and the reference of beam pruning are encoded from text: they
    # must be the tokens the decoder itself writes (the file shipped with base lost "Ġ t").
    audio = streams(1, 5.0)[0].load_audio()[: 25 * 16000]
    segments, _ = base.transcribe(audio, language="en", without_timestamps=True)
    tokens = [t for s in segments for t in s.tokens if t < base.tokenizer.eot]
    assert any(base.tokenizer.decode([t]).startswith(" t") for t in tokens)  # what the lost merge breaks
    assert base.tokenizer.encode(base.tokenizer.decode(tokens)) == tokens
    assert base.tokenizer.encode(" to the") == [base.tokenizer.encode(" to")[0], base.tokenizer.encode(" the")[0]]
