"""Speculative decoding with a draft model: the vocabulary bridge, the lookahead, and exactness.

Exactness: at beam width 1 the main model keeps only tokens its own argmax chooses, so the
output must be its plain greedy output token for token, in fewer main-model passes.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from stenoflow.api import Model, load_model
from stenoflow.decoding.options import DecodingOptions
from stenoflow.decoding.speculative import DraftModel, DraftWindow, Lookahead, LookaheadControl
from stenoflow.decoding.task import DecodingTask
from stenoflow.decoding.token_bridge import TokenBridge, token_bytes
from stenoflow.tokenizer import Tokenizer
from stenoflow.weights.registry import bundled_tokenizer_file, resolve_model


def tokenizer(name: str) -> Tokenizer:
    weights = resolve_model(name)
    path = weights.tokenizer_file or bundled_tokenizer_file(weights.dims.n_vocab)
    return Tokenizer.from_file(path, multilingual=weights.dims.is_multilingual)


@pytest.fixture(scope="module")
def english() -> Tokenizer:
    return tokenizer("tiny.en")


@pytest.fixture(scope="module")
def multilingual() -> Tokenizer:
    return tokenizer("base").with_options("en", "transcribe")


# Texts the two vocabularies split differently: numbers, punctuation, leading and double spaces,
# rare words, accents and typographic quotes, a script English text rarely holds.
SPLIT_DIFFERENTLY = [
    " 1,234.56 dollars and 7.5%",
    " It costs $17.67, doesn't it?",
    " antidisestablishmentarianism",
    "  double  spaces",
    " naïve café — “quoted”",
    " Schrödinger's cat",
    " 中文",
    "...",
]


@pytest.mark.parametrize("text", SPLIT_DIFFERENTLY)
def test_text_runs_keep_their_text_both_ways(text: str, english: Tokenizer, multilingual: Tokenizer) -> None:
    to_english, to_multi = TokenBridge(multilingual, english), TokenBridge(english, multilingual)
    ids = multilingual.encode(text)
    mapped = to_english.convert(ids)
    assert english.decode(mapped) == text
    assert mapped == english.encode(text)  # as the other tokenizer writes it, not token by token
    assert to_multi.convert(mapped) == ids


def test_the_vocabularies_differ_where_the_bridge_matters(english: Tokenizer, multilingual: Tokenizer) -> None:
    differs = [t for t in SPLIT_DIFFERENTLY if english.encode(t) != multilingual.encode(t)]
    assert len(differs) >= 4  # otherwise the tests above would prove nothing
    assert not TokenBridge(multilingual, english).identity


def test_a_run_cut_inside_a_character_keeps_its_bytes(english: Tokenizer, multilingual: Tokenizer) -> None:
    ids = multilingual.encode(" 中文")
    bridge = TokenBridge(multilingual, english)
    for cut in range(1, len(ids) + 1):
        prefix = ids[:cut]
        mapped = bridge.convert(prefix)
        assert b"".join(token_bytes(english, t) for t in mapped) == b"".join(
            token_bytes(multilingual, t) for t in prefix)


def test_special_tokens_map_by_role(english: Tokenizer, multilingual: Tokenizer) -> None:
    bridge = TokenBridge(multilingual, english)
    tb_m, tb_e = multilingual.timestamp_begin, english.timestamp_begin
    assert tb_m != tb_e  # the ids differ: a timestamp must move
    seq = [tb_m, *multilingual.encode(" Hello."), tb_m + 50, tb_m + 50, *multilingual.encode(" Bye"), tb_m + 75,
           multilingual.eot]
    assert bridge.convert(seq) == [tb_e, *english.encode(" Hello."), tb_e + 50, tb_e + 50, *english.encode(" Bye"),
                                   tb_e + 75, english.eot]
    assert bridge.special(multilingual.transcribe) == english.transcribe
    assert bridge.special(multilingual.sot) == english.sot
    assert bridge.special(multilingual.no_speech) == english.no_speech  # by name, at another id
    # A special token the other vocabulary lacks maps to nothing rather than to a wrong token.
    hebrew = multilingual.language_token("he")
    assert english.hf.token_to_id("<|he|>") is None
    assert bridge.special(hebrew) is None
    assert bridge.convert([hebrew, *multilingual.encode(" a")]) == english.encode(" a")


def test_the_same_vocabulary_is_the_identity(english: Tokenizer) -> None:
    bridge = TokenBridge(english, tokenizer("tiny.en"))
    assert bridge.identity
    ids = [*english.encode(" x"), english.timestamp_begin + 3, english.eot]
    assert bridge.convert(ids) == ids


def test_lookahead_follows_acceptance_and_cost() -> None:
    la = Lookahead(initial=4, minimum=2, maximum=10, adaptive=True)
    assert la.best(0.98, cost=0.1) == 10  # a draft nearly always right and cheap: as long as allowed
    assert la.best(0.3, cost=0.3) == 2  # mostly wrong: never under the minimum
    assert la.best(0.8, cost=0.1) > la.best(0.8, cost=0.5)  # a dearer draft pass: shorter drafts
    assert la.best(0.9, cost=0.2) > la.best(0.6, cost=0.2)


def test_lookahead_control_learns_from_drafts() -> None:
    adaptive = LookaheadControl(Lookahead(initial=4, adaptive=True))
    for _ in range(6):
        adaptive.update(proposed=adaptive.k, accepted=adaptive.k, cost=0.15)
    long_k = adaptive.k
    assert long_k > 4
    for _ in range(6):
        adaptive.update(proposed=adaptive.k, accepted=0, cost=0.15)
    assert adaptive.k < long_k and adaptive.acceptance < 0.7
    fixed = LookaheadControl(Lookahead(initial=5))
    fixed.update(5, 0, 0.2)
    assert fixed.k == 5
    with pytest.raises(ValueError, match="lookahead"):
        Lookahead(initial=0)


# --- exactness on real models -------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_int8() -> Model:
    return load_model("tiny.en", compute="int8")


def window(model: Model, audio: np.ndarray):  # type: ignore[no-untyped-def]
    mel = model.features(audio, padding=30 * 16000)[:, :3000]
    return model.whisper.decoder.cross_kv(model.encode(mel))


LOOKAHEADS = [Lookahead(), Lookahead(initial=2, adaptive=True), Lookahead(initial=6)]


@pytest.mark.parametrize("lookahead", LOOKAHEADS, ids=["fixed4", "adaptive", "fixed6"])
@pytest.mark.parametrize("main_name", ["base", "tiny"])
def test_speculative_greedy_equals_greedy_on_jfk(main_name: str, lookahead: Lookahead, request: pytest.FixtureRequest,
                                                 tiny_int8: Model, jfk_audio: np.ndarray) -> None:
    """base with the tiny.en draft is the cross-version case (other vocabulary, other special ids);
    tiny.en with its int8 self is a same-tokenizer pair."""
    main: Model = request.getfixturevalue(main_name)
    options = DecodingOptions(language="en")
    cross = window(main, jfk_audio)
    greedy = DecodingTask(main.context, options).run(cross)
    pair = DraftModel.pair(tiny_int8.context, main.tokenizer, lookahead)
    fast = DecodingTask(main.context, options).run(cross, draft=DraftWindow(pair, window(tiny_int8, jfk_audio)))
    assert fast.tokens == greedy.tokens
    assert fast.text == greedy.text
    assert fast.stats["forward_passes"] < greedy.stats["forward_passes"] / 2
    assert fast.stats["draft_accepted"] > 0
    assert fast.avg_logprob == pytest.approx(greedy.avg_logprob, abs=1e-3)


def test_a_prompt_reaches_the_draft_model_in_its_own_vocabulary(base: Model, tiny_int8: Model,
                                                                 jfk_audio: np.ndarray) -> None:
    options = DecodingOptions(language="en", prompt=" Remarks by the President. Ask: what?")
    cross = window(base, jfk_audio)
    greedy = DecodingTask(base.context, options).run(cross)
    pair = DraftModel.pair(tiny_int8.context, base.tokenizer)
    with_ids = replace(options, prompt=base.tokenizer.encode(" Remarks by the President. Ask: what?"))
    for opts in (options, with_ids):
        fast = DecodingTask(base.context, opts).run(cross, draft=DraftWindow(pair, window(tiny_int8, jfk_audio)))
        assert fast.tokens == greedy.tokens


def test_sampling_with_a_draft_is_refused(tiny: Model, tiny_int8: Model, jfk_audio: np.ndarray) -> None:
    pair = DraftModel.pair(tiny_int8.context, tiny.tokenizer)
    with pytest.raises(ValueError, match="temperature 0"):
        DecodingTask(tiny.context, DecodingOptions(temperature=0.5)).run(
            window(tiny, jfk_audio), draft=DraftWindow(pair, window(tiny_int8, jfk_audio)))


LONG_FORM_OPTIONS = {"beam_size": 1, "temperature": 0.0, "language": "en"}


@pytest.fixture(scope="module")
def long_form_greedy(base: Model) -> tuple[str, list, dict]:
    """A synthesized two-minute file (several voices, pauses, noise) and base's greedy transcription of it."""
    from stenoflow.bench.datasets import long_form

    path = str(long_form(minutes=2.0).audio_path)
    segments, info = base.transcribe(path, **LONG_FORM_OPTIONS)
    return path, list(segments), info.stats


@pytest.mark.slow
@pytest.mark.parametrize("adaptive", [False, True], ids=["fixed", "adaptive"])
def test_long_form_transcription_with_a_draft_equals_greedy(base: Model, tiny_int8: Model, adaptive: bool,
                                                             long_form_greedy: tuple[str, list, dict]) -> None:
    """Every window's tokens, drafted by tiny.en, are greedy's."""
    path, plain_segments, plain_stats = long_form_greedy
    fast, fast_info = base.transcribe(path, draft=tiny_int8, adaptive_lookahead=adaptive, **LONG_FORM_OPTIONS)
    fast_segments = list(fast)
    assert [s.tokens for s in fast_segments] == [s.tokens for s in plain_segments]
    assert len(plain_segments) >= 10
    assert fast_info.draft is not None and fast_info.draft["name"] == "tiny.en"
    assert fast_info.stats["forward_passes"] < plain_stats["forward_passes"] / 2


def test_a_model_draft_restarts_at_its_prompt(base: Model, tiny_int8: Model, jfk_audio: np.ndarray) -> None:
    from stenoflow.decoding.speculative import SpeculativeDraft

    pair = DraftModel.pair(tiny_int8.context, base.tokenizer)
    task = DecodingTask(base.context, DecodingOptions(language="en"))
    proposer = task.draft_proposer(DraftWindow(pair, window(tiny_int8, jfk_audio)), "en")
    draft = SpeculativeDraft(proposer, base.tokenizer.eot, strict=False)
    first = draft.draft(4)
    assert len(first) == 4 and base.tokenizer.decode(list(first)).strip().startswith("And")
    for token in first:
        draft.observe(token)
    after = draft.draft(4)
    assert after and after != first
    draft.restart()
    assert draft.draft(4) == first


# --- exactness in the default precision (int8) on real speech ---------------------------------
def real_clip(name: str, jfk_audio: np.ndarray) -> np.ndarray:
    """jfk.wav, or one of the pocketsphinx recordings (skipped where they are not unpacked)."""
    if name == "jfk":
        return jfk_audio
    from stenoflow.bench.recorded import _pieces, recorded_available

    if not recorded_available():
        pytest.skip("the pocketsphinx recordings are not unpacked (scripts/setup.sh)")
    return next(audio for label, _, audio in _pieces() if label == name)


@pytest.mark.parametrize("clip", ["jfk", "cards:004", "librivox:0920"])
def test_int8_speculative_greedy_equals_greedy(clip: str, base_default: Model, tiny_int8: Model,
                                               jfk_audio: np.ndarray) -> None:
    """base in the precision the commands load it (int8 decoder) drafted by tiny.en: greedy's tokens,
    segment by segment (before each row was rounded by its own scale, jfk.wav lost its comma)."""
    audio = real_clip(clip, jfk_audio)
    plain, _ = base_default.transcribe(audio, beam_size=1, temperature=0.0, language="en")
    fast, info = base_default.transcribe(audio, draft=tiny_int8, beam_size=1, temperature=0.0, language="en")
    assert [s.tokens for s in fast] == [s.tokens for s in plain]
    assert info.stats["draft_accepted"] > 0


def test_transcribe_says_where_drafting_may_part_from_greedy(caplog: pytest.LogCaptureFixture, tiny: Model,
                                                              jfk_audio: np.ndarray) -> None:
    from stenoflow.decoding.transcribe import TranscribeOptions, speculation_inexact

    greedy = TranscribeOptions(beam_size=1)
    assert speculation_inexact("int8", greedy, medusa=False) is None
    assert speculation_inexact("int8_bfloat16", greedy, medusa=True) is None  # the decoder is int8
    assert "float32" in (speculation_inexact("float32", greedy, medusa=True) or "")
    assert "lookahead" in (speculation_inexact("int8", TranscribeOptions(beam_size=1, lookahead=20), False) or "")
    assert speculation_inexact("int8", TranscribeOptions(beam_size=1, lookahead=20), medusa=True) is None
    assert speculation_inexact("float32", TranscribeOptions(beam_size=5), medusa=False) is None  # never meant to be
    with caplog.at_level("WARNING", logger="stenoflow.decoding.transcribe"):
        tiny.transcribe(jfk_audio[: 16000 * 3], draft="tiny.en", beam_size=1, temperature=0.0)
    assert any("greedy's text" in r.getMessage() for r in caplog.records)  # tiny is float32 here
