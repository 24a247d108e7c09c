"""Beam pruning with the previous round's transcript: the matching logic alone, verification on a toy
decoder, then prune and verify modes on real speech against plain greedy and beam search."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import Tensor

from stenoflow.api import Model
from stenoflow.decoding.guided import UNSURE, DraftVerifier, ReferenceGuidedDecoder
from stenoflow.decoding.logit_filters import prefix_lengths
from stenoflow.decoding.options import DecodingOptions, DecodingResult, verify_options
from stenoflow.decoding.reference import (
    ALIGN_FAILED,
    EXHAUSTED,
    MISMATCH,
    STALLED,
    ReferenceMatcher,
    Verdict,
    is_punctuation,
    reference_tokens,
)
from stenoflow.decoding.strategies import BeamSearchDecoder, GreedyDecoder, TokenDecoder
from stenoflow.decoding.task import DecodingTask

N_SAMPLES = 480000

# A toy vocabulary: words 0..7, a comma 8, end-of-text 10, timestamps from 12.
COMMA, EOT, TB, V = 8, 10, 12, 30


def skippable(token: int) -> bool:
    return token == COMMA or token >= EOT


# --- the matcher, no model ------------------------------------------------------------------
def test_alignment_searches_the_first_word_and_skips_punctuation_and_timestamps() -> None:
    m = ReferenceMatcher((0, 1, 2, 3, 4), skippable)
    assert m.observe(TB) is Verdict.SKIP and not m.aligned  # the initial timestamp aligns nothing
    assert m.observe(2) is Verdict.MATCH and m.cursor == 3  # the buffer lost its first words
    assert m.observe(COMMA) is Verdict.SKIP and m.cursor == 3  # neither breaks nor advances
    assert m.observe(TB + 5) is Verdict.SKIP and m.cursor == 3
    assert m.draft(10) == (3, 4) and m.draft(1) == (3,)
    assert m.observe(3) is Verdict.MATCH and m.observe(4) is Verdict.MATCH
    assert m.observe(EOT) is Verdict.SKIP
    assert m.observe(5) is Verdict.FALLBACK and m.reason == EXHAUSTED and not m.aligned


def test_alignment_failure_mismatch_and_realignment() -> None:
    m = ReferenceMatcher((0, 1, 2, 1, 3), skippable)
    assert m.observe(7) is Verdict.FALLBACK and m.reason == ALIGN_FAILED and m.draft(5) == ()
    assert m.observe(1) is Verdict.MATCH and m.cursor == 2  # the first occurrence
    assert m.observe(5) is Verdict.FALLBACK and m.reason == MISMATCH
    assert m.observe(1) is Verdict.MATCH and m.cursor == 4  # searched from where it broke
    m.restart()
    assert not m.aligned and m.observe(1) is Verdict.MATCH and m.cursor == 2


def test_a_run_of_punctuation_without_words_stalls_the_match() -> None:
    m = ReferenceMatcher((0, 1, 2), skippable, max_skips=3)
    assert m.observe(COMMA) is Verdict.SKIP  # not aligned yet: nothing to stall
    assert m.observe(0) is Verdict.MATCH
    assert [m.observe(COMMA) for _ in range(3)] == [Verdict.SKIP] * 3
    assert m.observe(1) is Verdict.MATCH  # a word resets the run
    assert [m.observe(t) for t in (COMMA, TB, COMMA)] == [Verdict.SKIP] * 3
    assert m.observe(COMMA) is Verdict.FALLBACK and m.reason == STALLED and not m.aligned
    assert m.observe(2) is Verdict.MATCH  # realigns from where it broke


def test_reference_ignores_skippable_tokens_and_compares_keys() -> None:
    m = ReferenceMatcher((TB, 0, COMMA, 1, EOT), skippable, key=lambda t: t % 4)
    assert m.reference == (0, 1)
    assert m.observe(4) is Verdict.MATCH and m.observe(5) is Verdict.MATCH  # same key: 4 ~ 0, 5 ~ 1


def test_punctuation_tokens(tiny: Model) -> None:
    assert is_punctuation(",") and is_punctuation(" ...") and is_punctuation("") and is_punctuation(" ¿")
    assert not is_punctuation(" you") and not is_punctuation("'s")
    tok = tiny.tokenizer
    ts = tok.timestamp_begin
    hypothesis = [ts, *tok.encode(" Hello, world. Don't stop!"), ts + 50, tok.eot]
    assert tok.decode(list(reference_tokens(hypothesis, tok))) == " Hello world Don't stop"


def test_reference_options_are_validated() -> None:
    with pytest.raises(ValueError, match="reference_mode must be"):
        verify_options(DecodingOptions(reference=(1,), reference_mode="collapse"), False)
    with pytest.raises(ValueError, match="both or neither"):
        verify_options(DecodingOptions(reference=(1,)), False)
    with pytest.raises(ValueError, match="both or neither"):
        verify_options(DecodingOptions(reference_mode="verify"), False)
    with pytest.raises(ValueError, match="temperature 0"):
        verify_options(DecodingOptions(reference=(1,), reference_mode="prune", temperature=0.4), False)
    with pytest.raises(ValueError, match="tuple"):
        bad = DecodingOptions(reference=[1, 2], reference_mode="prune")  # type: ignore[arg-type]
        verify_options(bad, False)


# --- the strategy on a toy decoder ----------------------------------------------------------
class ToyInference:
    """Stands in for ``Inference``: a 'decoder' whose next token is always ``target[position]``
    (end-of-text after it), with a cache length that verification grows and rolls back."""

    class Cache:
        max_len = 64

    def __init__(self, target: list[int], prompt_len: int) -> None:
        self.target, self.prompt_len = target, prompt_len
        self.cache = self.Cache()
        self.length = 0
        self.forward_passes = 0
        self.rolled_back_to: list[int] = []

    def _next(self, length: int) -> Tensor:
        i = length - self.prompt_len
        logits = torch.zeros(V)
        logits[self.target[i] if i < len(self.target) else EOT] = 5.0
        return logits

    def logits(self, tokens: Tensor) -> Tensor:
        self.forward_passes += 1
        self.length = tokens.shape[1]
        return self._next(self.length)[None].expand(tokens.shape[0], -1).clone()

    def all_logits(self, tokens: Tensor) -> Tensor:
        self.forward_passes += 1
        start, self.length = self.length, tokens.shape[1]
        return torch.stack([self._next(n) for n in range(start + 1, self.length + 1)])[None]

    def rollback(self, length: int) -> None:
        assert length <= self.length
        self.rolled_back_to.append(length)
        self.length = length


class PrefixRecorder:
    """A logit filter that only records, per call, the prefix lengths its rows follow and the
    length of the tokens it was given."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[int], int]] = []

    def apply(self, logits: Tensor, tokens: Tensor) -> None:
        self.calls.append(([tokens.shape[1]] * logits.shape[0], tokens.shape[1]))

    def apply_positions(self, logits: Tensor, tokens: Tensor, start: int) -> None:
        self.calls.append((list(prefix_lengths(logits, start)), tokens.shape[1]))


def toy_decode(decoder: TokenDecoder, inference: ToyInference, prompt: list[int]) -> list[int]:
    """The task's loop in miniature: one row, no filters but the recorder's."""
    tokens, sums = torch.tensor([prompt]), torch.zeros(1)
    while True:
        step = decoder.update(tokens, inference.logits(tokens), sums)
        tokens, sums = step.tokens, step.sum_logprobs
        if step.done or tokens.shape[1] >= 40:
            return tokens[0, len(prompt):].tolist()


def test_verification_accepts_what_the_model_confirms_and_equals_greedy() -> None:
    prompt = [20, 21]
    # The hypothesis: a timestamp, the words 1 2, a comma, 3 4 5, a timestamp pair, 6 7, an extra 9.
    target = [TB, 1, 2, COMMA, 3, 4, 5, TB + 9, TB + 9, 6, 7, 9]
    greedy_inf = ToyInference(target, len(prompt))
    expected = toy_decode(GreedyDecoder(0.0, EOT), greedy_inf, prompt)
    assert expected == [*target, EOT]

    inference, recorder = ToyInference(target, len(prompt)), PrefixRecorder()
    matcher = ReferenceMatcher((0, 1, 2, 3, 4, 5, 6, 7), skippable)  # starts one word earlier
    verifier = DraftVerifier(inference, [recorder])  # type: ignore[arg-type]
    decoder = ReferenceGuidedDecoder(matcher, GreedyDecoder(0.0, EOT), 1, EOT, verifier, max_length=40)
    assert toy_decode(decoder, inference, prompt) == expected
    assert inference.forward_passes < greedy_inf.forward_passes
    assert decoder.fallbacks == [EXHAUSTED]  # the word 9 is past the reference's end
    stats = decoder.stats()
    # 2; 3 4 5; 6 7: only the first word is matched on its own, and a pass that rejects a draft
    # token also checks the next draft, after the model's own token.
    assert stats["draft_accepted"] == 6
    assert stats["matched_tokens"] == 7 and stats["fallback_reference_exhausted"] == 1
    # Each position is filtered with its own prefix: a verification's rows follow one prefix
    # longer each, up to the whole draft.
    assert any(len(lengths) > 1 for lengths, _ in recorder.calls)
    assert all(lengths == list(range(n - len(lengths) + 1, n + 1)) for lengths, n in recorder.calls)
    assert all(n <= inference.length + 1 for n in inference.rolled_back_to)


def test_fallback_expands_the_single_row_into_a_fresh_beam() -> None:
    prompt = [20, 21]
    logits = torch.log_softmax(torch.linspace(0, 3, V), dim=-1)[None]  # best: 29, 28, 27, ...
    logits[0, 5] = 10.0  # the best token is 5, not the reference's 0
    matcher = ReferenceMatcher((0, 1), skippable)
    decoder = ReferenceGuidedDecoder(matcher, BeamSearchDecoder(3, EOT), 3, EOT, None, max_length=40)
    tokens = torch.tensor([prompt])
    step = decoder.update(tokens, logits, torch.zeros(1))
    assert decoder.fallbacks == [ALIGN_FAILED] and step.parents is not None
    assert step.parents.tolist() == [0, 0, 0]  # the task grows the cache from one row to three
    fresh = BeamSearchDecoder(3, EOT).update(tokens.repeat(3, 1), logits.repeat(3, 1), torch.zeros(3))
    assert torch.equal(step.tokens, fresh.tokens) and torch.equal(step.sum_logprobs, fresh.sum_logprobs)
    assert sorted(step.tokens[:, -1].tolist()) == [5, 28, 29]


def test_the_gate_opens_the_beam_where_the_draft_is_unsure() -> None:
    """The draft says 0 then 1. The model agrees both times, surely at the first token (its
    best leads by 4 nats) and barely at the second (0.2 nats): the gate keeps one row for the
    first and opens the full beam at the second, where a draft alone would have stayed."""
    prompt = [20, 21]
    sure = torch.zeros(1, V)
    sure[0, 0] = 4.0
    unsure = torch.zeros(1, V)
    unsure[0, 1], unsure[0, 6] = 2.0, 1.8
    gated = ReferenceGuidedDecoder(ReferenceMatcher((0, 1), skippable), BeamSearchDecoder(3, EOT), 3, EOT, None,
                                   max_length=40, gate=1.0)
    step = gated.update(torch.tensor([prompt]), sure, torch.zeros(1))
    assert step.tokens.tolist() == [[*prompt, 0]] and gated.guided
    step = gated.update(step.tokens, unsure, step.sum_logprobs)
    assert not gated.guided and gated.fallbacks == [UNSURE]
    assert step.parents is not None and step.tokens.shape[0] == 3  # the full beam, rooted at the prefix
    assert {1, 6} <= set(step.tokens[:, -1].tolist())  # the runner-up the single row would have lost

    ungated = ReferenceGuidedDecoder(ReferenceMatcher((0, 1), skippable), BeamSearchDecoder(3, EOT), 3, EOT, None,
                                     max_length=40)
    step = ungated.update(torch.tensor([prompt]), sure, torch.zeros(1))
    step = ungated.update(step.tokens, unsure, step.sum_logprobs)
    assert ungated.guided and step.tokens.tolist() == [[*prompt, 0, 1]]


def test_a_closing_beam_goes_back_to_one_row_once_its_best_row_is_sure() -> None:
    """The draft says 0 1 2 3. The model is unsure between 1 and 6 at the second token (the gate
    opens a beam of three); after 1 it is sure of 2 (5 nats ahead), after anything else of
    nothing. The best row then leads by more than the gate: it goes on alone, under the draft
    again, with the log probabilities of the tokens the beam chose."""
    prompt = [20, 21]
    sure = torch.zeros(1, V)
    sure[0, 0] = 4.0
    unsure = torch.zeros(1, V)
    unsure[0, 1], unsure[0, 6] = 2.0, 1.8

    def after(tokens: Tensor) -> Tensor:
        logits = torch.zeros(tokens.shape[0], V)
        logits[tokens[:, -1] == 1, 2] = 5.0
        return logits

    def opened(close: bool) -> tuple[ReferenceGuidedDecoder, object]:
        matcher = ReferenceMatcher((0, 1, 2, 3), skippable)
        decoder = ReferenceGuidedDecoder(matcher, BeamSearchDecoder(3, EOT), 3, EOT, None, max_length=40,
                                         gate=1.0, close=close)
        step = decoder.update(torch.tensor([prompt]), sure, torch.zeros(1))
        step = decoder.update(step.tokens, unsure, step.sum_logprobs)
        assert not decoder.guided and step.tokens.shape[0] == 3
        return decoder, decoder.update(step.tokens, after(step.tokens), step.sum_logprobs)

    decoder, step = opened(close=True)
    assert decoder.guided and step.tokens.tolist() == [[*prompt, 0, 1, 2]]
    assert step.parents is not None and step.parents.shape == (1,)  # the task keeps that row's cache
    assert step.logprobs is not None and len(step.logprobs) == 2  # for 1 and 2, chosen by the beam
    assert step.logprobs[0] == pytest.approx(float(torch.log_softmax(unsure[0], -1)[1]))
    assert step.sum_logprobs.item() == pytest.approx(float(torch.log_softmax(sure[0], -1)[0]) + sum(step.logprobs))
    assert decoder.matcher.aligned and decoder.matcher.draft(5) == (3,)  # following the draft again
    assert decoder.stats()["beam_closed"] == 1.0

    still_open, step = opened(close=False)
    assert not still_open.guided and step.tokens.shape[0] == 3


# --- real speech ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def jfk_features(tiny: Model, jfk_audio: np.ndarray) -> Tensor:
    return tiny.encode(tiny.features(jfk_audio, padding=N_SAMPLES)[:, :3000])


def decode(model: Model, features: Tensor, **options: object) -> DecodingResult:
    options.setdefault("without_timestamps", True)
    opts = DecodingOptions(language="en", **options)  # type: ignore[arg-type]
    return DecodingTask(model.context, opts).run(features)


@pytest.fixture(scope="module")
def greedy(tiny: Model, jfk_features: Tensor) -> DecodingResult:
    return decode(tiny, jfk_features)


@pytest.fixture(scope="module")
def beam(tiny: Model, jfk_features: Tensor) -> DecodingResult:
    return decode(tiny, jfk_features, beam_size=5)


def test_greedy_reference_gives_greedy_tokens_in_fewer_passes(
        tiny: Model, jfk_features: Tensor, greedy: DecodingResult, beam: DecodingResult) -> None:
    tok = tiny.tokenizer
    ref = reference_tokens(greedy.tokens, tok)
    assert len(ref) == 22  # the words of "And so my fellow Americans ... for your country"
    # The hypothesis has punctuation ("for you," "country.") that the reference lacks.
    assert {*tok.encode(","), *tok.encode(".")} <= set(greedy.tokens) - set(ref)
    for beam_size in (None, 5):
        prune = decode(tiny, jfk_features, beam_size=beam_size, reference=ref, reference_mode="prune")
        verify = decode(tiny, jfk_features, beam_size=beam_size, reference=ref, reference_mode="verify")
        for r in (prune, verify):
            assert r.tokens == greedy.tokens and r.fallbacks == []
            assert r.stats["beam_width_avg"] == 1.0 and r.stats["matched_tokens"] == len(ref)
        assert prune.stats["forward_passes"] == greedy.stats["forward_passes"] <= beam.stats["forward_passes"]
        assert verify.stats["forward_passes"] < greedy.stats["forward_passes"] / 3
        assert verify.stats["draft_accepted"] >= len(ref) - 3
    assert prune.stats["reduced_beam_share"] == 1.0 and prune.stats["beam_size"] == 5.0


def test_with_timestamps_verification_equals_greedy(tiny: Model, jfk_features: Tensor) -> None:
    """The reference has no timestamps; where the model wants one, verification takes it and resumes."""
    greedy = decode(tiny, jfk_features, without_timestamps=False)
    assert sum(t >= tiny.tokenizer.timestamp_begin for t in greedy.tokens) >= 4
    ref = reference_tokens(greedy.tokens, tiny.tokenizer)
    verify = decode(tiny, jfk_features, without_timestamps=False, reference=ref, reference_mode="verify")
    assert verify.tokens == greedy.tokens and verify.fallbacks == []
    assert verify.stats["forward_passes"] < greedy.stats["forward_passes"] / 3
    prune = decode(tiny, jfk_features, without_timestamps=False, beam_size=5, reference=ref,
                   reference_mode="prune")
    assert prune.tokens == greedy.tokens and prune.stats["reduced_beam_share"] == 1.0


def test_a_closing_gate_beam_searches_only_where_the_model_is_unsure(tiny: Model, jfk_features: Tensor,
                                                                    greedy: DecodingResult) -> None:
    """A draft with a wrong word ("friend" for "fellow"), the gate at 1 nat, five beams: a beam that
    closes again once its best row is settled spends far fewer passes than one that runs to the
    end. Both report the chosen row's token log probabilities and attention exactly as decoding
    those tokens at one row does: the closing beam ends at one row, the open one goes back to one
    row over the tokens it chose, in one pass."""
    tok = tiny.tokenizer
    draft = list(greedy.tokens)
    draft[draft.index(tok.encode(" fellow")[0])] = tok.encode(" friend")[0]
    kw: dict[str, object] = {"beam_size": 5, "reference": tuple(draft), "reference_mode": "draft", "beam_gate": 1.0,
                             "record_alignment": True}
    opened = decode(tiny, jfk_features, **kw)
    closing = decode(tiny, jfk_features, **kw, beam_close=True)
    assert closing.fallbacks and closing.stats["beam_closed"] >= 1 and opened.stats["beam_closed"] == 0
    assert closing.stats["forward_passes"] < 0.75 * opened.stats["forward_passes"]
    assert "fellow" in closing.text and "friend" not in closing.text
    for result in (closing, opened):
        same = decode(tiny, jfk_features, reference=tuple(result.tokens), reference_mode="draft",
                      record_alignment=True)
        assert same.tokens == result.tokens
        assert result.token_logprobs is not None and same.token_logprobs is not None
        assert np.allclose(result.token_logprobs, same.token_logprobs, atol=1e-4)
        assert result.alignment is not None and same.alignment is not None
        assert torch.allclose(result.alignment, same.alignment, atol=1e-4)


def test_a_held_draft_keeps_the_beam_shut_and_decodes_greedily_where_it_is_held(
        tiny: Model, jfk_features: Tensor, greedy: DecodingResult) -> None:
    """The draft has a wrong word ("friend" for "fellow") where the gate opens a beam. Held up to
    before that word, the beam still opens there and puts "fellow" back; held through it, the
    decoding never leaves one row and gives greedy's tokens."""
    tok = tiny.tokenizer
    draft = list(greedy.tokens)
    at = draft.index(tok.encode(" fellow")[0])
    draft[at] = tok.encode(" friend")[0]
    kw: dict[str, object] = {"beam_size": 5, "reference": tuple(draft), "reference_mode": "draft", "beam_gate": 1.0,
                             "beam_close": True, "record_alignment": True}
    before = decode(tiny, jfk_features, **kw, reference_hold=at)
    assert before.stats["fallback_unsure"] + before.stats["fallback_mismatch"] >= 1
    assert "fellow" in before.text and "friend" not in before.text
    through = decode(tiny, jfk_features, **kw, reference_hold=len(draft))
    assert through.tokens == greedy.tokens and through.stats["fallback_unsure"] == 0
    assert through.stats["beam_width_avg"] == 1.0 and through.stats["fallback_mismatch"] == 1
    with pytest.raises(ValueError, match="draft reference"):
        verify_options(DecodingOptions(reference=(1,), reference_mode="verify", reference_hold=1), False)


def test_wrong_reference_falls_back_to_full_beam_search(tiny: Model, jfk_features: Tensor,
                                                        beam: DecodingResult) -> None:
    tok = tiny.tokenizer
    wrong = reference_tokens(tok.encode(" The quick brown fox jumps over the lazy dog."), tok)
    for mode in ("prune", "verify"):
        r = decode(tiny, jfk_features, beam_size=5, reference=wrong, reference_mode=mode)
        assert r.fallbacks == [ALIGN_FAILED] and r.stats["fallback_align_failed"] == 1.0
        assert r.tokens == beam.tokens and r.sum_logprob == pytest.approx(beam.sum_logprob, abs=1e-4)
        assert r.stats["forward_passes"] == beam.stats["forward_passes"]


def test_mismatch_falls_back_where_the_reference_breaks(tiny: Model, jfk_features: Tensor,
                                                        greedy: DecodingResult) -> None:
    tok = tiny.tokenizer
    ref = list(reference_tokens(greedy.tokens, tok))
    at = ref.index(tok.encode(" country")[0])
    ref[at] = tok.encode(" nation")[0]  # the previous round heard another word
    prune = decode(tiny, jfk_features, beam_size=5, reference=tuple(ref), reference_mode="prune")
    verify = decode(tiny, jfk_features, beam_size=5, reference=tuple(ref), reference_mode="verify")
    assert prune.fallbacks == verify.fallbacks == [MISMATCH]
    assert verify.tokens == prune.tokens and prune.tokens[:at] == greedy.tokens[:at]
    assert 1.0 < prune.stats["beam_width_avg"] < 5.0
    # At beam width 1, verification loses the reference at the changed word and finds it again.
    greedy_verify = decode(tiny, jfk_features, reference=tuple(ref), reference_mode="verify")
    assert greedy_verify.tokens == greedy.tokens and greedy_verify.fallbacks == [MISMATCH]
    assert greedy_verify.stats["matched_tokens"] == len(ref) - 1


def test_reference_from_a_longer_buffer_is_aligned(tiny: Model, jfk_audio: np.ndarray,
                                                   greedy: DecodingResult) -> None:
    """The buffer was trimmed at the front: the reference starts with words this round no longer hears."""
    ref = reference_tokens(greedy.tokens, tiny.tokenizer)
    trimmed = tiny.encode(tiny.features(jfk_audio[16000 * 4 :], padding=N_SAMPLES)[:, :3000])  # from "not"
    trimmed_greedy = decode(tiny, trimmed)
    assert trimmed_greedy.text.startswith(" not what your country")
    for beam_size, mode in ((5, "prune"), (None, "verify")):
        r = decode(tiny, trimmed, beam_size=beam_size, reference=ref, reference_mode=mode)
        assert r.tokens == trimmed_greedy.tokens and r.fallbacks == []
    assert r.stats["forward_passes"] < trimmed_greedy.stats["forward_passes"] / 3


def test_reference_missing_its_first_words(tiny: Model, jfk_features: Tensor, greedy: DecodingResult,
                                           beam: DecodingResult) -> None:
    ref = reference_tokens(greedy.tokens, tiny.tokenizer)[3:]  # " fellow Americans ask ..."
    # At beam width 1, verification keeps looking for the reference and finds it at " fellow".
    r = decode(tiny, jfk_features, reference=ref, reference_mode="verify")
    assert r.tokens == greedy.tokens and r.fallbacks == [ALIGN_FAILED]  # one record for " And so my"
    assert r.stats["matched_tokens"] == len(ref)
    assert r.stats["forward_passes"] < greedy.stats["forward_passes"] / 2
    # With the beam, an alignment failure is final: the full beam search decodes it all.
    pruned = decode(tiny, jfk_features, beam_size=5, reference=ref, reference_mode="prune")
    assert pruned.fallbacks == [ALIGN_FAILED] and pruned.tokens == beam.tokens
