"""Live streaming logic without a model: commit policies, drafts, the draft matcher, varied text."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from stenoflow.bench.normalize import normalize_text
from stenoflow.bench.varied import cards, groceries, number, spell
from stenoflow.decoding.reference import DraftMatcher, Verdict
from stenoflow.streaming.agreement import spoken_keys
from stenoflow.streaming.buffer import AudioBuffer
from stenoflow.streaming.commit import (
    AgreementCommit,
    AttentionCommit,
    commit_policy,
    joins_previous,
    spoken_prefix,
)
from stenoflow.streaming.events import TimedWord
from stenoflow.streaming.live import prompt_tokens
from stenoflow.streaming.live_round import Heard, HeardWord, heard_copies, unheard_run
from stenoflow.streaming.options import StreamOptions
from stenoflow.streaming.word_rules import (
    copies_prompt,
    echo_at,
    echo_length,
    final_words,
    instant_in_silence_at,
    is_variant,
    new_words,
    on_speech,
    restart_length,
    silent_copy_at,
    spoken_length,
    stretched_at,
    unfinished_at,
    where_spoken,
    without_silent_copies,
    without_silent_runs,
)

TB = 1000  # timestamp tokens in these tests: ids >= TB


def hw(text: str, start: float, end: float, heard_at: float | None = None, p: float = 0.95,
       tokens: tuple[int, ...] = (), span: tuple[int, int] = (0, 0)) -> HeardWord:
    return HeardWord(TimedWord(text, start, end, p), tokens, end if heard_at is None else heard_at, span)


def heard(words: list[HeardWord], end: float, ended: bool = False) -> Heard:
    return Heard(tuple(words), end, ended, False)


# --- LocalAgreement-n --------------------------------------------------------------------------
def test_agreement_commits_the_common_prefix_heard_long_enough() -> None:
    policy = AgreementCommit(frames=25)  # 0.5 s
    previous = [hw(" go", 0.0, 0.3), hw(" forward", 0.3, 0.8), hw(" ten", 0.8, 1.1)]
    now = heard([hw(" Go", 0.0, 0.3), hw(" forward,", 0.3, 0.8), hw(" ten", 0.8, 1.2), hw(" meters", 1.2, 1.6)], 1.6)
    # "ten" agrees but was heard 0.4 s before the end: not yet.
    assert policy.commit(previous, now) == 2


def test_agreement_stops_at_the_first_disagreement() -> None:
    previous = [hw(" the", 0.0, 0.2), hw(" night", 0.2, 0.6), hw(" of", 0.6, 0.8)]
    now = heard([hw(" the", 0.0, 0.2), hw(" knight", 0.2, 0.6), hw(" of", 0.6, 0.8)], 5.0)
    assert AgreementCommit().commit(previous, now) == 1


def test_agreement_over_more_rounds_needs_all_of_them() -> None:
    policy = AgreementCommit(rounds=3)
    a = [hw(" one", 0, 1), hw(" two", 1, 2)]
    b = [hw(" one", 0, 1), hw(" too", 1, 2)]
    c = heard([hw(" one", 0, 1), hw(" two", 1, 2)], 9.0)
    assert policy.commit([], heard(a, 5.0)) == 0  # first round: nothing to agree with
    assert policy.commit(a, heard(b, 6.0)) == 0  # two rounds only
    assert policy.commit(b, c) == 1  # "two" differs in the middle round


def test_unsure_words_wait_for_more_audio_after_them() -> None:
    policy = AgreementCommit(frames=10, sure=0.8, unsure_s=1.0)
    previous = [hw(" cereal", 0.0, 0.5, p=0.4)]
    assert policy.commit(previous, heard([hw(" cereal", 0.0, 0.5, p=0.4)], 1.2)) == 0
    assert policy.commit(previous, heard([hw(" cereal", 0.0, 0.5, p=0.4)], 1.6)) == 1
    assert policy.commit(previous, heard([hw(" cereal", 0.0, 0.5, p=0.9)], 1.2)) == 1


def test_confident_words_need_no_second_round() -> None:
    policy = AgreementCommit(frames=10, confident=0.9)
    first = heard([hw(" set", 0.0, 0.3, p=0.97), hw(" a", 0.3, 0.4, p=0.95), hw(" timer", 0.4, 0.8, p=0.6),
                   hw(" for", 0.8, 1.0, p=0.99)], 1.1)
    # The first round commits the confident words up to the first unsure one; "for" is
    # confident but last (it may still grow), and heard too close to the end anyway.
    assert policy.commit([], first) == 2
    assert AgreementCommit(frames=10).commit([], first) == 0  # plain LocalAgreement waits
    ended = heard([hw(" stop", 0.0, 0.3, p=0.99)], 1.0, ended=True)
    assert AgreementCommit(frames=10, confident=0.9).commit([], ended) == 1  # complete: end-of-text follows
    with pytest.raises(ValueError, match="confident"):
        AgreementCommit(confident=1.5)


def test_a_word_spelled_anew_every_round_is_final_once_the_words_after_it_agree() -> None:
    def items(first: str, end: float = 24.0) -> Heard:
        return heard([hw(first, 21.5, 21.7, p=0.3), hw(" coffee,", 22.0, 22.2, p=0.6), hw(" apples", 22.5, 22.8, p=0.6),
                      hw(" and", 22.9, 23.0, p=0.6), hw(" milk.", 23.1, 23.4, p=0.6)], end)

    previous = list(items(" Agus,").words)
    now = items(" Eggers,")
    assert AgreementCommit(frames=20).commit(previous, now) == 0  # everything waits for "Egg"
    # Two agreed words after it, heard before the margin: it is final, and so is what agrees.
    assert AgreementCommit(frames=20, flanked=2).commit(previous, now) == 5
    # Not while the words after it are too close to the end of the audio to be final.
    assert AgreementCommit(frames=20, flanked=2).commit(previous, items(" Eggers,", 22.9)) == 0
    # Nor where the words after it disagree too.
    other = [*previous[:2], hw(" apple", 22.5, 22.8), *previous[3:]]
    assert AgreementCommit(frames=20, flanked=2).commit(other, now) == 0
    with pytest.raises(ValueError, match="flanked"):
        AgreementCommit(flanked=0)


def test_a_stretch_the_rounds_split_differently_is_final_once_the_words_after_it_agree() -> None:
    tail = [hw(" coffee,", 22.0, 22.2, p=0.6), hw(" apples", 22.5, 22.8, p=0.6), hw(" and", 22.9, 23.0, p=0.6),
            hw(" milk.", 23.1, 23.4, p=0.6)]
    previous = [hw(" Egg,", 21.5, 21.6, p=0.3), hw(" us,", 21.6, 21.7, p=0.3), *tail]
    now = heard([hw(" Eggers,", 21.5, 21.7, p=0.3), *tail], 24.0)
    assert AgreementCommit(frames=20).commit(previous, now) == 0
    assert AgreementCommit(frames=20, flanked=2).commit(previous, now) == 5
    # Agreement goes on past the stretch at the shifted place: a later disagreement still stops it.
    changed = heard([hw(" Eggers,", 21.5, 21.7, p=0.3), *tail[:3], hw(" silk.", 23.1, 23.4, p=0.6)], 24.0)
    assert AgreementCommit(frames=20, flanked=2).commit(previous, changed) == 4
    # The same words elsewhere in time are not where the rounds meet again ("of" in a list of cards).
    moved = [hw(" Egg,", 21.5, 21.6, p=0.3), hw(" us,", 21.6, 21.7, p=0.3),
             *(hw(w.word.word, w.word.start + 0.4, w.word.end + 0.4, p=0.6) for w in tail)]
    assert AgreementCommit(frames=20, flanked=2).commit(moved, now) == 0


def test_a_confident_word_after_one_the_round_skipped_waits_for_agreement() -> None:
    policy = AgreementCommit(frames=10, confident=0.9)
    previous = [hw(" diamonds,", 25.12, 25.44), hw(" king", 25.96, 26.08), hw(" on", 26.08, 26.28)]
    skipped = heard([hw(" King", 25.96, 26.08, p=0.94), hw(" of", 26.08, 26.26), hw(" Globes", 26.26, 26.78)], 27.2)
    # The previous round heard "diamonds" before "King": this one may have missed it.
    assert policy.commit(previous, skipped) == 0
    # Where the previous round heard nothing more before it, "King" is final at once, whatever
    # that round heard there; a word it heard ending just before (times move between rounds) is
    # not one more.
    assert policy.commit([hw(" queen", 25.96, 26.1)], skipped) == 2
    assert policy.commit([hw(" Three", 25.5, 25.9), hw(" queen", 25.96, 26.1)], skipped) == 2
    # Agreement still commits what both rounds heard, and a confident word after it.
    assert policy.commit(previous, heard([hw(" diamonds,", 25.12, 25.5), *skipped.words], 27.2)) == 3


def test_words_heard_with_little_audio_before_them_wait_for_more_after_them() -> None:
    policy = AgreementCommit(frames=10, cold_s=1.5, cold_margin_s=1.2)
    previous = [hw(" Mister", 0.3, 0.7), hw(" John", 0.7, 1.0), hw(" Dashwood", 1.0, 1.6), hw(" had", 1.6, 1.8)]
    # A stream's first words: "Mister" and "John" start within 1.5 s of the buffer's start and
    # were heard less than 1.2 s before its end, so they wait, and so does all that follows.
    now = heard([hw(" Mister", 0.3, 0.7), hw(" John", 0.7, 1.0), hw(" Dashwood", 1.0, 1.6), hw(" had", 1.6, 1.8)], 1.8)
    assert policy.commit(previous, now) == 0
    assert policy.commit(previous, heard(list(now.words), 2.0)) == 1  # 1.3 s after "Mister", 1.0 after "John"
    # Words after enough audio of the buffer need only the usual margin.
    later = [hw(w.word.word, w.word.start + 3, w.word.end + 3) for w in previous]
    assert AgreementCommit(frames=10, cold_s=1.5, cold_margin_s=1.2).commit(later, heard(later, 5.5)) == 4


# --- AlignAtt -----------------------------------------------------------------------------------
def test_alignatt_commits_words_heard_before_the_margin_and_complete() -> None:
    policy = AttentionCommit(frames=20)  # 0.4 s
    words = [hw(" turn", 0.0, 0.3, 0.3), hw(" left", 0.3, 0.7, 0.7), hw(" now", 0.7, 1.0, 1.0)]
    assert policy.commit([], heard(words, 1.2)) == 2  # "now" was heard 0.2 s before the end
    assert policy.commit([], heard(words[:2], 1.2)) == 1  # "left" is last and the decoder did not end
    assert policy.commit([], heard(words[:2], 1.2, ended=True)) == 2  # end-of-text completes it


def test_no_policy_commits_part_of_a_spoken_word_while_its_rest_is_unsure() -> None:
    """A round whose audio ended inside "supercomputer" heard "super" and "-complete.": the
    rounds agree on "super", but it is final only with the rest of its word."""
    previous = [hw(" generation.", 38.6, 39.6), hw(" Super.", 39.2, 39.9), hw(" Future.", 39.8, 39.9)]
    split = [hw(" generation", 38.6, 38.8), hw(" super", 39.2, 39.6), hw("-complete.", 39.9, 40.6)]
    assert AgreementCommit(frames=20).commit(previous, heard(split, 40.2)) == 1
    assert AgreementCommit(frames=20).commit(previous, heard(split[:2], 40.2)) == 2  # a word of its own
    assert AttentionCommit(frames=20).commit([], heard(split, 40.2)) == 1
    assert AttentionCommit(frames=20).commit([], heard(split, 41.2)) == 1  # "-complete." is last: it may grow
    assert AttentionCommit(frames=20).commit([], heard(split, 41.2, ended=True)) == 3
    both = [hw(" ex", 38.4, 38.5), hw("-generation", 38.6, 38.8), hw(" super", 39.2, 39.6), hw("-computer", 39.6, 40.0)]
    assert AttentionCommit(frames=20).commit([], heard(both, 41.0, ended=True)) == 4
    assert [spoken_prefix(both, n) for n in range(5)] == [0, 0, 2, 2, 4]
    assert spoken_prefix([hw(" $17", 0.0, 0.5), hw(".67", 0.5, 0.9), hw(" each", 1.0, 1.2)], 1) == 1
    assert not joins_previous(" -") and not joins_previous("dollars") and joins_previous("\u2013ray")


def test_commit_policy_by_name() -> None:
    assert isinstance(commit_policy("alignatt", 10), AttentionCommit)
    assert isinstance(commit_policy("agreement", 10, rounds=3), AgreementCommit)
    with pytest.raises(ValueError, match="unknown commit policy"):
        commit_policy("majority", 10)


# --- drafts ------------------------------------------------------------------------------------
def test_a_draft_starts_at_the_buffer_start_with_timestamps_moved() -> None:
    # tokens: <0.00> a b <1.00><1.00> c d <2.00>, words a b c d at 0.0, 0.5, 1.0, 1.5 s
    tokens = (TB, 1, 2, TB + 50, TB + 50, 3, 4, TB + 100)
    words = [hw(" a", 10.0, 10.5, span=(1, 2)), hw(" b", 10.5, 11.0, span=(2, 3)),
             hw(" c", 11.0, 11.5, span=(5, 6)), hw(" d", 11.5, 12.0, span=(6, 7))]
    h = Heard(tuple(words), 12.0, True, False, offset=10.0, tokens=tokens)
    assert h.draft(10.0, TB, 10.0)[0] == tokens
    # The buffer now starts at 11.0 s: the draft starts with c's segment, timestamps 1 s earlier.
    assert h.draft(11.0, TB, 11.0)[0] == (TB, 3, 4, TB + 50)
    # Starting at d, mid-segment: a timestamp opens the draft.
    assert h.draft(11.5, TB, 11.5)[0] == (TB, 4, TB + 25)
    assert h.draft(12.5, TB, 12.5)[0] == ()
    # The words a round whose audio allows commits up to ``until`` may commit: the draft's tokens
    # before the first word that ends after it (timestamps included, an opening one too).
    assert h.draft(11.0, TB, 11.6) == ((TB, 3, 4, TB + 50), 2)  # <1.00> c
    assert h.draft(11.5, TB, 12.0) == ((TB, 4, TB + 25), 3)  # all of it
    assert h.draft(11.5, TB, 11.9) == ((TB, 4, TB + 25), 1)  # the opening timestamp only
    assert h.draft(10.0, TB, 10.2) == (tokens, 1)


def test_draft_matcher_follows_text_and_tolerates_timestamps() -> None:
    m = DraftMatcher((TB, 5, 6, TB + 40, TB + 40, 7), TB)
    assert m.observe(TB) is Verdict.MATCH
    assert m.observe(5) is Verdict.MATCH and m.observe(6) is Verdict.MATCH
    assert m.observe(TB + 42) is Verdict.MATCH  # a timestamp one step off still follows
    assert m.draft(5) == (TB + 40, 7)
    assert m.observe(7) is Verdict.MATCH  # the draft's second timestamp is passed over
    assert m.observe(8) is Verdict.FALLBACK and m.reason == "reference-exhausted"


def test_draft_matcher_realigns_after_a_mismatch() -> None:
    m = DraftMatcher((1, 2, 3, 4, 5), TB)
    assert m.observe(1) is Verdict.MATCH
    assert m.observe(9) is Verdict.FALLBACK and m.reason == "mismatch" and not m.aligned
    assert m.observe(4) is Verdict.MATCH and m.draft(3) == (5,)
    assert m.observe(TB + 3) is Verdict.SKIP  # an extra timestamp in the hypothesis
    assert DraftMatcher((), TB).aligned is False


# --- new words in a hearing ------------------------------------------------------------------
COMMITTED = [hw(" three", 8.0, 8.2), hw(" of", 8.2, 8.3), hw(" clubs.", 8.3, 8.6), hw(" Open", 8.9, 9.1),
             hw(" the", 9.1, 9.2), hw(" front", 9.2, 9.5), hw(" door.", 9.5, 9.7)]


def test_a_hearing_of_committed_words_adds_nothing_even_where_their_times_ran_early() -> None:
    # The committed words' times ran early (they end at 9.7 s); a hearing of the audio after
    # them hears the command again, at its true time, then a new word.
    again = [hw(" Open", 9.7, 10.0), hw(" the", 10.0, 10.1), hw(" front", 10.1, 10.4), hw(" door.", 10.4, 10.8)]
    stop = hw(" Stop.", 11.2, 11.6)
    assert new_words(again, COMMITTED[-4:], 9.7) == []
    assert new_words([*again, stop], COMMITTED[-4:], 9.7) == [stop]
    # Compared by time alone (no committed words to align with), all of it would pass as new.
    assert new_words(again, [], 9.7) == again


def test_a_hearing_that_only_resembles_the_committed_end_is_new() -> None:
    seven = [hw(" seven", 9.8, 10.1), hw(" of", 10.1, 10.2), hw(" clubs.", 10.2, 10.6)]
    assert new_words(seven, COMMITTED[:3], 8.6) == seven
    # A word heard again where it was committed is not new; the next one is.
    assert new_words([hw(" clubs.", 8.35, 8.6), *seven], COMMITTED[:3], 8.6) == seven


def test_the_word_left_unconfirmed_heard_first_is_new_wherever_dtw_puts_it() -> None:
    # The buffer starts with the committed "Hello." (27.5-28.4 s); the decoder skipped it and
    # wrote "Down. Enter.", and DTW, which starts at the buffer's start, laid "Down." over it.
    hello = [hw(" Hello.", 27.5, 28.4)]
    down, enter = hw(" Down.", 27.0, 28.5, heard_at=31.0), hw(" Enter.", 31.3, 33.3)
    runs = [(27.5, 28.4), (30.6, 31.0), (33.0, 33.5)]
    pending = [hw(" Down.", 29.4, 30.8)]
    # By time alone it re-transcribes the committed word, and is lost ...
    assert new_words([down, enter], hello, 28.4, runs=runs) == [enter]
    # ... but it is the word the last round left unconfirmed, laid over the first speech after
    # the committed words.
    fresh = new_words([down, enter], hello, 28.4, runs=runs, pending=pending)
    assert [w.word.word for w in fresh] == [" Down.", " Enter."]
    assert (fresh[0].word.start, fresh[0].word.end) == (30.6, 31.0)
    # A first word said as a committed one is still judged by time ("Hello." heard again).
    assert new_words([hw(" Hello.", 27.0, 28.5), enter], hello, 28.4, runs=runs, pending=[hw(" Hello.", 29.0, 30.0)]) == [enter]


def test_an_echo_is_the_longest_verbatim_repeat_of_the_committed_end() -> None:
    echo = [hw(" Open", 9.9, 10.0), hw(" the", 10.0, 10.0), hw(" front", 10.0, 10.0), hw(" door", 10.0, 10.0)]
    assert echo_length(echo, COMMITTED) == 4  # punctuation and case aside
    assert echo_length([*echo[2:], hw(" Stop.", 10.1, 10.4)], COMMITTED) == 2
    assert echo_length(echo[:3], COMMITTED) == 0  # "Open the front" is not how the committed words end
    # One word is an echo only as all there is: the decoder looping on it ("Enter. Enter.").
    assert echo_length(echo[3:], COMMITTED) == 1
    assert echo_length([hw(" 7.", 10.0, 10.3), hw(" 7.", 10.3, 10.6)], [hw(" Seven", 9.5, 9.9)]) == 1
    assert echo_length([*echo[3:], hw(" Stop.", 10.1, 10.4)], COMMITTED) == 0  # "door. Door. Stop."
    assert echo_length([hw(" 70", 10.0, 10.3)], [hw(" Seven", 9.5, 9.9)]) == 0
    assert echo_length(echo, []) == 0 and echo_length([], COMMITTED) == 0


def bursts(*spans: tuple[float, float], total_s: float = 4.0) -> AudioBuffer:
    """A buffer of faint noise with a loud voiced-like tone over each ``(start, end)`` span."""
    rng = np.random.default_rng(3)
    audio = 0.001 * rng.standard_normal(round(total_s * 16000)).astype(np.float32)
    t = np.arange(audio.size) / 16000
    for lo, hi in spans:
        inside = (t >= lo) & (t < hi)
        audio[inside] += 0.3 * np.sin(2 * np.pi * 180 * t[inside]).astype(np.float32)
    buffer = AudioBuffer()
    buffer.append(audio)
    return buffer


def test_an_echo_over_the_rest_of_the_committed_saying_is_dropped_and_a_saying_after_a_pause_kept() -> None:
    # "cart" sounds over 1.0-1.7 s; DTW ended the committed word at 1.3 s, and the next round
    # wrote it again over the rest of that same sound: an echo, though 0.4 s of sound lie after
    # the committed end (the plain sound count kept such echoes: "cart cart", "pepper pepper").
    cart = [hw(" cart", 1.0, 1.3)]
    again = [hw(" cart", 1.3, 1.7)]
    one_saying = bursts((1.0, 1.7))
    assert one_saying.sound_seconds(1.3, 1.7) >= 0.3
    assert echo_at(again, cart, 1.3, 2.5, one_saying.sound_after_pause, one_saying.sound_seconds) == 1
    # Said again after a pause, however short ("you, you know"), it is speech.
    two_sayings = bursts((1.0, 1.4), (1.5, 1.9))
    assert echo_at([hw(" cart", 1.5, 1.9)], cart, 1.3, 2.5, two_sayings.sound_after_pause, two_sayings.sound_seconds) == 0
    # The last sentence started over is judged alike: over the rest of its sound, an echo;
    # over a saying of its own, speech.
    opened = [hw(" Open", 0.2, 0.5), hw(" the", 0.5, 0.6), hw(" door.", 0.6, 1.3)]
    restarted = [hw(" Open", 1.3, 1.5)]
    whole, apart = bursts((0.2, 1.6)), bursts((0.2, 1.4), (1.8, 2.2))
    assert echo_at(restarted, opened, 1.3, 2.5, whole.sound_after_pause, whole.sound_seconds) == 1
    assert echo_at(restarted, opened, 1.3, 2.5, apart.sound_after_pause, apart.sound_seconds) == 0
    assert echo_at([hw(" Stop.", 1.8, 2.2)], opened, 1.3, 2.5, one_saying.sound_after_pause, one_saying.sound_seconds) == 0


def test_a_word_said_again_and_again_without_a_pause_is_not_an_echo() -> None:
    # "more words words words words" said without a pause: "words" committed over 1.0-1.4 s,
    # the sound runs on to 2.6 s, and a round writes three copies over it, each over its own
    # sound: speech, though no pause comes before them.
    words = [hw(" words", 1.0, 1.4)]
    copies = [hw(" words", 1.4, 1.8), hw(" words", 1.8, 2.2), hw(" words", 2.2, 2.6), hw(" and", 2.8, 3.0)]
    fluent = bursts((1.0, 2.6), (2.8, 3.0))
    assert fluent.sound_after_pause(1.4, 2.8) < 0.2
    assert echo_at(copies, words, 1.4, 3.2, fluent.sound_after_pause, fluent.sound_seconds) == 0
    # Two copies over the rest of one saying (DTW ended the committed word early) are the
    # decoder looping, as one is: they hold no more sound than the committed word did twice
    # (each is dropped in turn).
    early = bursts((1.0, 1.9))
    looped = [hw(" words", 1.4, 1.65), hw(" words", 1.65, 1.9)]
    assert echo_at(looped, words, 1.4, 2.5, early.sound_after_pause, early.sound_seconds) == 1
    assert echo_at(looped[1:], words, 1.4, 2.5, early.sound_after_pause, early.sound_seconds) == 1


def test_the_start_of_the_last_committed_sentence_alone_is_a_restart() -> None:
    start = [hw(" Open", 10.9, 11.3), hw(" the", 11.3, 11.3)]
    assert restart_length(start[:1], COMMITTED) == 1 and restart_length(start, COMMITTED) == 2
    assert restart_length([*start, hw(" window.", 11.3, 11.6)], COMMITTED) == 0  # another sentence
    assert restart_length([hw(" the", 10.9, 11.3)], COMMITTED) == 0
    assert restart_length([], COMMITTED) == 0 and restart_length(start, []) == 0


def test_punctuation_read_off_the_silence_a_stream_ends_in_does_not_hold_its_word_back() -> None:
    def speech_in(*spans: tuple[float, float]) -> Callable[[float, float], float]:
        return lambda lo, hi: sum(max(0.0, min(hi, b) - max(lo, a)) for a, b in spans)

    hair = HeardWord(TimedWord(" hair.", 36.34, 36.6, 0.9), (1, 2), 37.8, (0, 2), spoken_at=36.44)
    his = hw(" his", 35.98, 36.34, 36.16)
    # The period attended to 37.8 s, in the silence after the speech, and the audio ends in silence.
    words = where_spoken([his, hair], speech_in((35.0, 36.7)), 38.0, 0.4)
    assert [w.heard_at for w in words] == [36.16, 36.44]
    # Speech near the end of the audio: the punctuation may be waiting for it ("$17.67." for "cents").
    assert where_spoken([his, hair], speech_in((35.0, 36.7), (37.7, 38.0)), 38.0, 0.4)[1].heard_at == 37.8
    # Punctuation read off speech counts, wherever the audio ends.
    cents = HeardWord(TimedWord(".67.", 30.36, 31.38, 0.9), (3, 4), 31.8, (2, 4), spoken_at=30.88)
    assert where_spoken([cents], speech_in((29.5, 31.4), (31.57, 32.07)), 33.0, 0.4)[0].heard_at == 31.8
    # A word with no punctuation read later is left as it is.
    assert where_spoken([his], speech_in(), 38.0, 0.4) == [his]


# --- varied streams -------------------------------------------------------------------------
@pytest.mark.parametrize(("n", "words"), [(0, "zero"), (13, "thirteen"), (40, "forty"), (42, "forty two"),
                                          (305, "three hundred and five"), (1005, "one thousand and five"),
                                          (2310, "two thousand three hundred and ten")])
def test_spelled_numbers_normalise_to_their_digits(n: int, words: str) -> None:
    assert spell(n) == words
    assert normalize_text(words) == str(n)


def test_varied_items_are_reproducible_sentences() -> None:
    for make in (cards, groceries, number):
        a, b = make(np.random.default_rng(7)), make(np.random.default_rng(7))
        assert a == b and a[0].isupper() and a.endswith(".")


def test_a_variant_of_the_last_committed_word_over_its_audio_is_not_new() -> None:
    last = [hw(" queen", 7.9, 8.2), hw(" of", 8.2, 8.3), hw(" hearts,", 8.3, 8.5), hw(" knock", 8.76, 8.92)]
    on = [hw(" on", 8.95, 9.13), hw(" diamonds.", 9.13, 9.4)]
    # The same audio written another way: "knock" again as "knack", mostly inside "knock".
    assert new_words([hw(" knack", 8.81, 8.95), *on], last, 8.92) == on
    eight = [hw(" eight", 73.98, 74.12)]
    of = [hw(" of", 74.14, 74.3), hw(" spades.", 74.32, 74.6)]
    assert new_words([hw(" 8", 73.96, 74.14), *of], eight, 74.12) == of
    # DTW ended "$17.67" before "seven" was over: heard alone, its ending is a digit of its own.
    dollars = [hw(" costs", 29.34, 29.56), hw(" $17.67", 29.56, 31.36)]
    cents = [hw(" cents.", 31.57, 31.85)]
    assert new_words([hw(" 7", 31.31, 31.57), *cents], dollars, 31.36) == cents
    # A variant after the committed word is a word of its own ("knock, knack"), as is a word
    # over the committed one's audio that is not a variant of it.
    assert new_words([hw(" knack", 8.95, 9.2), *on], last, 8.92) == [hw(" knack", 8.95, 9.2), *on]
    assert new_words([hw(" dog", 8.84, 8.97), *on], last, 8.92) == [hw(" dog", 8.84, 8.97), *on]


def test_a_last_word_heard_anew_and_stretched_over_the_pause_after_it_is_not_new() -> None:
    # "Play some jazz." committed as "Play some shots." (laid over its speech, 1.3-2.4 s); after
    # the pause a round hears it as "charts." and DTW stretches that over the silence to 3.44 s.
    # Most of the stretched span lies after the committed end, but not of its span over speech.
    committed = [hw(" Play", 1.34, 1.86), hw(" some", 1.86, 2.12), hw(" shots.", 2.12, 2.58)]
    louder = hw(" Loud.", 5.04, 5.18)
    heard = [hw(" Play", 0.0, 1.86), hw(" some", 1.86, 2.12), hw(" charts.", 2.12, 3.44), louder]
    runs = [(1.3, 2.4), (5.0, 5.7)]
    assert new_words(heard, committed, 2.58, runs=runs) == [louder]
    assert new_words(heard, committed, 2.58) == heard[2:]  # by its DTW span alone it looked new
    # A word said after the committed one, over speech of its own, is new.
    said = [hw(" Play", 0.0, 1.86), hw(" some", 1.86, 2.12), hw(" jazz.", 2.6, 3.44), louder]
    assert new_words(said, committed, 2.58, runs=[(1.3, 2.4), (2.6, 3.3), (5.0, 5.7)]) == said[2:]


class Ear:
    """Seconds of sound said after a pause: the same for any span; remembers the spans asked about."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.spans: list[tuple[float, float]] = []

    def __call__(self, lo: float, hi: float) -> float:
        self.spans.append((lo, hi))
        return self.seconds


def test_the_last_committed_word_again_is_new_only_with_a_word_of_sound_after_a_pause() -> None:
    go = [hw(" stop.", 4.02, 4.28), hw(" Go,", 5.82, 6.22)]
    again, one = hw(" go.", 6.49, 6.59), hw(" One", 7.35, 8.6)
    ear = Ear(0.26)
    assert new_words([again, one], go, 6.22, ear) == [again, one]  # "Go. ... Go."
    assert ear.spans == [(6.22, 7.35)]  # from the committed end to the next word
    assert new_words([again, one], go, 6.22, Ear(0.1)) == [one]  # the end of "Go," heard again
    assert new_words([again, one], go, 6.22) == [one]  # with no ear for sound, never new
    four, five = [hw(" 3,", 8.84, 9.04), hw(" 4,", 9.24, 9.3)], hw(" five.", 9.38, 9.5)
    assert new_words([hw(" four,", 9.26, 9.3), five], four, 9.3, Ear(0.0)) == [five]  # spelled or in digits


@pytest.mark.parametrize(("words", "keys"), [
    ([" $42", ".50."], [("42", "dollars"), ("50", "cents")]),
    ([" $1.01"], [("1", "dollar", "1", "cent")]),
    ([" £3.50", " €1,000."], [("3", "pounds", "50", "pence"), ("1000", "euros")]),
    ([" 30%."], [("30", "percent")]),
    ([" 42", ".50", " 3.5"], [("42",), ("50",), ("35",)]),  # no currency: as written
])
def test_amounts_compare_as_they_are_said(words: list[str], keys: list[tuple[str, ...]]) -> None:
    assert spoken_keys(words) == keys


def test_an_amount_written_another_way_is_not_new() -> None:
    costs = [hw(" The", 0.34, 0.64), hw(" ticket", 0.64, 0.92), hw(" costs", 0.92, 1.34)]
    rest = [hw(" and", 2.4, 2.8), hw(" 50", 2.8, 3.2), hw(" cents.", 3.2, 3.66)]
    # "$42" committed; a later round writes its speech as "42 dollars": the "dollars" is in it.
    again = [*costs, hw(" 42", 1.34, 1.9), hw(" dollars", 2.04, 2.4)]
    assert new_words([*again, *rest], [*costs, hw(" $42", 1.34, 2.04)], 2.04) == rest
    assert new_words([*again, *rest], [*costs, hw(" 42", 1.34, 2.04)], 2.04) == [hw(" dollars", 2.04, 2.4), *rest]
    # "$42" ".50." committed, DTW ending ".50." before "cents" was over: heard alone, "cents"
    # is no word of its own, unless said again after a pause.
    split = [*costs, hw(" $42", 1.34, 2.04), hw(".50.", 2.04, 3.12)]
    cents = hw(" cents.", 3.2, 3.7)
    assert new_words([cents], split, 3.12) == []
    assert new_words([cents], split, 3.12, Ear(0.3)) == [cents]
    assert new_words([cents], [*costs, hw(" 42", 1.34, 2.04), hw(".50.", 2.04, 3.12)], 3.12) == [cents]
    # "42 dollars and 50" committed, the rounds after write "$42.50.": the rest of it is new.
    fifty = [*costs, hw(" 42", 1.34, 1.9), hw(" dollars", 2.04, 2.4), *rest[:2]]
    (word,) = new_words([*costs, hw(" $42.50.", 1.34, 3.7)], fifty, 3.2)
    assert (word.word.word, word.word.start, word.word.end, word.tokens) == (" cents.", 3.2, 3.7, ())
    # ... where there is speech for it: "947" committed, a later round's "$947." adds no
    # "dollars", whether it ends with the committed word or over the silence after it.
    said = [*costs, hw(" 947", 1.34, 2.6)]
    assert new_words([*costs, hw(" $947.", 1.3, 2.6)], said, 2.6) == []
    stretched = [*costs, hw(" $947.", 1.3, 3.4), hw(" Rice,", 3.4, 3.8)]
    assert new_words(stretched, said, 2.6, runs=[(0.3, 2.6), (3.45, 3.8)]) == stretched[-1:]


@pytest.mark.parametrize(("a", "b", "same"), [
    ("knock", "knack", True), ("trap", "strap", True), ("eight", "8", True), ("risk", "risks", True),
    ("the", "a", False), ("on", "an", False), ("cat", "cut", False), ("seven", "7000", False),
    ("spades", "fades", False), ("two", "to", False),
])
def test_variants_are_one_word_written_two_ways(a: str, b: str, same: bool) -> None:
    assert is_variant(a, b) is same


def test_every_revised_committed_word_is_left_out_not_only_the_first() -> None:
    committed = [hw(" cheese", 30.6, 31.0), hw(" in", 31.0, 31.2), hw(" a", 31.2, 31.33), hw(" maus", 31.45, 31.75),
                 hw(" trap", 31.75, 31.99)]
    the = hw(" The", 35.02, 35.58)
    revised = [hw(" in", 31.0, 31.2), hw(" a", 31.2, 31.33), hw(" mouth", 31.44, 31.66), hw(" strap.", 31.66, 31.99)]
    assert new_words([*revised, the], committed, 31.99) == [the]
    # Past the committed audio, the words that follow a revision are new.
    games = hw(" games", 31.95, 32.4)
    assert new_words([*revised[:3], games, the], committed, 31.99) == [games, the]


def test_the_last_committed_word_is_matched_where_it_was_heard() -> None:
    # A card list heard again and written another way: its text matches the committed end as
    # well at its second card ("free on clums, queen on parts") as at its last ("free on cades,
    # six on parts"), but only the last lies where "parts." was committed.
    said = [("Free", 6.2, 6.7), ("off", 6.7, 6.9), ("clubs,", 6.9, 7.4), ("Queen", 7.8, 7.9), ("of", 7.9, 8.2),
            ("Hearts,", 8.2, 8.6), ("Jack", 8.9, 9.0), ("of", 9.0, 9.3), ("Diamonds,", 9.3, 10.1), ("free", 10.1, 10.3),
            ("on", 10.3, 10.5), ("trades,", 10.5, 10.9), ("six", 11.2, 11.5), ("on", 11.5, 11.8), ("parts.", 11.8, 12.1)]
    heard_again = [("Free", 6.2, 6.7), ("on", 6.7, 6.9), ("clums,", 6.9, 7.4), ("queen", 7.8, 7.9), ("on", 7.9, 8.2),
                   ("parts,", 8.2, 8.55), ("jack", 8.9, 9.0), ("on", 9.0, 9.2), ("diamans,", 9.2, 9.8),
                   ("free", 10.1, 10.3), ("on", 10.3, 10.5), ("cades,", 10.5, 10.9), ("six", 11.2, 11.5),
                   ("on", 11.5, 11.8), ("parts.", 11.8, 12.13)]
    committed = [hw(f" {w}", a, b) for w, a, b in said]
    again = [hw(f" {w}", a, b) for w, a, b in heard_again]
    stop = hw(" Stop!", 13.0, 13.3)
    assert new_words([*again, stop], committed, 12.1) == [stop]
    # Said again after the committed end, the same words are new.
    later = [hw(" six", 12.6, 12.9), hw(" on", 12.9, 13.0), hw(" parts.", 13.0, 13.4)]
    assert new_words([*again[-3:], *later], committed, 12.1) == later


def test_words_at_one_instant_before_the_end_of_the_audio_were_not_heard() -> None:
    costs = [hw(" It", 28.9, 29.5), hw(" costs", 29.5, 29.9), hw(" $17", 29.9, 30.4), hw(" .67.", 30.4, 31.6)]
    copy = [hw(w, 32.38, 32.38) for w in (" It", " costs", " $17", " .67.")]
    assert unheard_run([*costs, *copy], lambda at: at < 33.0) == (4, 8)
    # Squeezed against the end of the audio, they are speech heard in part; one or two words
    # without length are common ("I" in "am I").
    assert unheard_run([*costs, *copy], lambda at: at < 32.38) is None
    short = [hw(" am", 30.08, 30.46), hw(" I", 30.46, 30.46), hw(" fellow", 30.46, 30.78)]
    assert unheard_run([*short, hw(" a", 31.0, 31.0), hw(" b", 31.0, 31.0), *costs], lambda at: at < 40.0) is None
    # Three words at one instant, then more at another: the first run counts.
    run = [hw(w, 31.25, 31.25) for w in (" ask", " not.", " And")]
    assert unheard_run([*short, *run, hw(" ask", 31.25, 32.87)], lambda at: at < 33.6) == (3, 6)


def test_a_committed_word_stretched_over_unheard_audio_is_not_new() -> None:
    # The buffer starts at "day." (71.55 s); the decoder writes it and stops, and DTW stretches
    # it to the end of the audio, past three seconds of speech it did not hear. Most of it lies
    # after the committed end, but it starts deep inside the committed audio: not new.
    committed = [hw(" queen", 74.06, 74.14), hw(" on", 74.14, 74.4), hw(" hearts,", 74.4, 74.76)]
    day = hw(" day.", 71.55, 78.07)
    assert new_words([day], committed, 74.76) == []
    # A new word whose start DTW squeezed a little into the committed audio is still new.
    knock = hw(" knock", 74.7, 75.2)
    assert new_words([knock], committed, 74.76) == [knock]


def test_a_word_said_alone_lies_over_its_speech_and_the_next_one_is_new() -> None:
    # "Five. ... Nine." said at 3.1-3.58 s and 6.08-6.5 s, with seconds of silence around them.
    runs = [(3.1, 3.58), (6.08, 6.5)]
    five, nine = hw(" 5", 2.0, 5.58, heard_at=3.18), hw(" 9", 3.7, 7.52)
    placed = on_speech([five, nine], runs)
    assert [(w.word.start, w.word.end) for w in placed] == [pytest.approx((2.9, 3.78)), pytest.approx((5.88, 6.7))]
    assert placed[0].heard_at == five.heard_at and placed[0].tokens == five.tokens
    # Committed where DTW laid it, "5" hides "9" behind it; laid over its speech, it does not.
    assert new_words([nine], [five], five.word.end) == []
    assert new_words([nine], placed[:1], placed[0].word.end) == [nine]
    # A word at the end of a command, stretched over the pause after it, ends where it was said.
    light, off = hw(" Light", 7.58, 7.98), hw(" off", 7.98, 9.24)
    assert [w.word.end for w in on_speech([light, off], [(7.78, 8.51)])] == [7.98, pytest.approx(8.71)]
    # Words in running speech, and words over no speech at all, stay where they are.
    running = [hw(" ace", 4.3, 4.6), hw(" of", 4.6, 4.75), hw(" spades.", 4.75, 5.3)]
    assert on_speech(running, [(4.32, 5.38)]) == running
    assert on_speech([hw(" you.", 8.0, 9.0)], runs) == [hw(" you.", 8.0, 9.0)]


def test_the_last_words_with_no_speech_near_them_were_not_said() -> None:
    # Speech (by the voice activity model) from 10 to 13.3 s, then room noise to the end at 20 s.
    def speech(lo: float, hi: float) -> float:
        return max(0.0, min(hi, 13.3) - max(lo, 10.0))

    said = [hw(" for", 12.55, 12.77), hw(" your", 12.77, 12.95), hw(" country.", 12.95, 13.33)]
    over_noise = [hw(" And", 17.2, 17.34), hw(" so", 17.34, 17.82), hw(" my", 17.82, 18.8)]
    assert spoken_length([*said, *over_noise], speech, 20.0) == 3
    assert spoken_length(over_noise, speech, 20.0) == 0
    # A word just after the speech, where DTW may put the last one, is kept.
    assert spoken_length([*said, hw(" you.", 13.5, 13.7)], speech, 20.0) == 4
    # A word DTW placed in the pause before a spoken one was said too: only the last go.
    the = hw(" The", 6.6, 7.7)
    most = hw(" most", 7.7, 10.2)
    assert spoken_length([the, most, *said], speech, 20.0) == 5
    # Speech after the end of the audio a round heard does not count.
    assert spoken_length([hw(" Go", 8.9, 9.3)], speech, 9.4) == 0


def test_words_from_one_laid_over_a_whole_sentence_wait_for_a_round_that_hears_them() -> None:
    # Speech (by the voice activity model) from 22.5 to 22.9 s, a pause, then a command from
    # 23.6 to 25.4 s. Heard alone, Whisper writes "The" and stops; DTW lays it over the command.
    def speech(lo: float, hi: float) -> float:
        return sum(max(0.0, min(hi, b) - max(lo, a)) for a, b in ((22.5, 22.9), (23.6, 25.4)))

    hearts, the = hw(" hearts.", 22.5, 22.9), hw(" The", 22.9, 25.37)
    assert stretched_at([hearts, the], speech) == 1
    assert stretched_at([the, hw(" volume", 25.37, 25.4)], speech) == 0
    # Slow words, and a word DTW stretched over a pause rather than speech, are words.
    slow = [hw(" Turn", 23.6, 24.5), hw(" the", 24.5, 24.7), hw(" volume.", 24.7, 25.4)]
    assert stretched_at(slow, speech) == 3
    assert stretched_at([hw(" Turn", 22.9, 24.5), *slow[1:]], speech) == 3


def test_a_copy_of_a_word_laid_over_silence_waits_for_a_round_that_hears_it() -> None:
    # "Again." said at 0.54-0.93 s and at 3.94-4.42 s; the decoder wrote it three times, and DTW
    # laid the third copy over the silence after the second saying.
    def speech(lo: float, hi: float) -> float:
        return sum(max(0.0, min(hi, b) - max(lo, a)) for a, b in ((0.54, 0.93), (3.94, 4.42)))

    first, second, third = hw(" Again.", 0.0, 0.72), hw(" Again.", 1.8, 4.16), hw(" Again.", 4.84, 5.98)
    assert silent_copy_at([first, second, third], speech) == 2
    assert silent_copy_at([first, second], speech) == 2
    # A number spelled and in digits is one word; a copy's start over silence is not enough.
    assert silent_copy_at([hw(" Seven.", 0.5, 0.9), hw(" 7.", 1.0, 2.0)], speech) == 1
    assert silent_copy_at([hw(" very", 3.6, 3.9), hw(" very", 3.9, 4.2), hw(" good.", 4.2, 4.4)], speech) == 3
    # Only a word repeated right after itself counts: a word alone over silence is another rule's.
    assert silent_copy_at([first, hw(" Stop.", 2.0, 2.5)], speech) == 2
    # The first new word is judged against the last committed one: the third copy, new after
    # the committed two, waits; the second, new after the first, was said.
    assert silent_copy_at([third], speech, before=[first, second]) == 0
    assert silent_copy_at([second, third], speech, before=[first]) == 1


def test_a_last_word_with_speech_running_on_to_the_end_of_the_audio_waits() -> None:
    # "... finalize. ... finalization": a round whose audio ended at 220.6 s, inside
    # "finalization" (said 219.9-220.9 s), wrote its start as "Finalize" (219.9-220.2 s).
    def speech(lo: float, hi: float) -> float:
        return sum(max(0.0, min(hi, b) - max(lo, a)) for a, b in ((217.9, 218.6), (219.9, 220.9)))

    before, part = hw(" Finalize", 217.9, 218.6), hw(" Finalize", 219.9, 220.2)
    assert unfinished_at([before, part], speech, 220.6) == 1
    # Once a pause follows it, or a word is written after it, the last word is complete.
    assert unfinished_at([before, part], speech, 221.4) == 2
    assert unfinished_at([before], speech, 219.4) == 1
    assert unfinished_at([before], speech, 218.6) == 1
    assert unfinished_at([], speech, 220.6) == 0


def test_a_word_written_at_an_instant_in_silence_waits_for_a_round_that_hears_it() -> None:
    # "Red, green, blue. ... Yellow. ... Purple.": prompted with the list, two rounds agreed on
    # "Yellow, blue,", the "blue," at 20 ms of the silence after "Yellow." (said at 4.48-4.93 s).
    def speech(lo: float, hi: float) -> float:
        return sum(max(0.0, min(hi, b) - max(lo, a)) for a, b in ((4.48, 4.93), (6.98, 7.42)))

    yellow, blue = hw(" Yellow,", 4.28, 4.8), hw(" blue,", 5.36, 5.38)
    assert instant_in_silence_at([yellow, blue, hw(" purple,", 6.78, 7.32)], speech) == 1
    # A short word is a word where speech lies near it (fast speech, or a word DTW squeezed
    # against the next); so is a word over silence that DTW gave audio of its own.
    assert instant_in_silence_at([yellow, hw(" and", 4.9, 4.92)], speech) == 2
    assert instant_in_silence_at([yellow, hw(" to", 6.8, 6.82), hw(" purple,", 6.82, 7.32)], speech) == 3
    assert instant_in_silence_at([yellow, hw(" blue,", 5.36, 6.2)], speech) == 2


def test_a_streams_first_word_said_again_after_a_pause_is_new() -> None:
    # One word alike is no proof of a re-hearing: "Again." committed alone, the next saying of
    # it, 2.7 s later in a buffer cut in the pause, was taken for it in every round.
    def sound(lo: float, hi: float) -> float:
        return max(0.0, min(hi, 4.42) - max(lo, 3.94)) if lo < 3.94 else 0.0

    committed = [hw(" again.", 0.0, 1.22)]
    again = hw(" Again.", 3.6, 4.5)
    assert new_words([again], committed, 1.22, sound) == [again]
    # The one committed word heard again where it was is not new.
    hello, world = hw(" Hello", 0.55, 0.95), hw(" world", 1.0, 1.3)
    assert new_words([hello, world], [hw(" Hello", 0.5, 0.9)], 0.9, sound) == [world]


def test_the_final_hearing_drops_words_written_at_one_instant_over_silence() -> None:
    # tiny.en's final hearing of "Down. ... Enter." with 0.25 s of silence after it.
    def speech(lo: float, hi: float) -> float:
        return sum(max(0.0, min(hi, b) - max(lo, a)) for a, b in ((30.62, 30.98), (32.99, 33.44)))

    said = [hw(" Power.", 28.56, 30.99), hw(" Enter.", 33.01, 33.35)]
    copies = [hw(w, 33.67, 33.67) for w in (" Power.", " Enter.", " Power.", " Power.")]
    assert without_silent_runs([*said, *copies], speech) == said
    # Only the run goes: a word after it stays.
    between = [hw(w, 31.8, 31.8) for w in (" Down.", " Down.", " Down.")]
    assert without_silent_runs([said[0], *between, said[1]], speech) == said
    # Over speech the stream ended in, words squeezed at one instant were said in part.
    squeezed = [hw(w, 33.3, 33.3) for w in (" and", " then", " we")]
    assert without_silent_runs([said[0], *squeezed], speech) == [said[0], *squeezed]
    # After the last sound, one word at an instant is run enough ("That's all." heard alone as
    # "All right."); one at the speech, or one DTW gave audio of its own, stays.
    assert without_silent_runs([*said, hw(" right.", 33.7, 33.7)], speech) == said
    assert without_silent_runs([*said, hw(" right.", 33.4, 33.4)], speech) == [*said, hw(" right.", 33.4, 33.4)]
    assert without_silent_runs([*said, hw(" right.", 33.5, 33.7)], speech) == [*said, hw(" right.", 33.5, 33.7)]


def test_the_final_hearing_drops_a_copy_of_a_word_laid_over_silence() -> None:
    # base's final hearing of "... Snooze. Stop." (said at 8.93-9.49 s): "stop. stop.", the second
    # at an instant after the first; no later round can hear it again, so it goes.
    def speech(lo: float, hi: float) -> float:
        return sum(max(0.0, min(hi, b) - max(lo, a)) for a, b in ((7.35, 7.93), (8.93, 9.49)))

    snooze, stop = hw(" News.", 7.22, 7.86), hw(" stop.", 7.86, 9.27)
    assert without_silent_copies([snooze, stop, hw(" stop.", 9.33, 9.33)], speech) == [snooze, stop]
    # A word said twice has speech under each saying, and a copy is dropped, not what follows it.
    twice = [hw(" stop", 8.93, 9.2), hw(" stop.", 9.2, 9.49)]
    assert without_silent_copies(twice, speech) == twice
    assert without_silent_copies([snooze, hw(" News.", 8.0, 8.2), stop], speech) == [snooze, stop]


def test_a_final_hearing_replaces_a_last_round_with_more_words_than_the_sound_holds() -> None:
    # Prompted with "Add two cups of flour. Stir. Bake for 40 minutes.", base's last round wrote
    # "Add 1 cup of sugar." over "Done.", said after a 5 s pause (0.32 s of sound, 12.32-12.64 s);
    # the final hearing, alone, heard "Done.".
    tail = [hw(" Add", 11.2, 12.5, p=0.09), hw(" 1", 12.5, 12.5, p=0.13), hw(" cup", 12.5, 13.0, p=0.16),
            hw(" of", 13.0, 13.0, p=0.59), hw(" sugar.", 13.0, 13.0, p=0.51)]
    done = [hw(" Done.", 11.2, 12.54, p=0.29)]
    def sound_to(t: float) -> float:
        return max(0.0, min(t, 12.64) - 12.32)

    assert final_words(done, tail, sound_to) == done
    # Over sound enough for five words, the last round in context stands ...
    assert final_words(done, tail, lambda t: 0.6) == tail
    # ... and so it does where the final hearing heard nothing, or more than the sound holds too.
    assert final_words([], tail, sound_to) == tail
    many = [hw(f" {w}", 12.3 + 0.05 * i, 12.35 + 0.05 * i) for i, w in enumerate(("I", "want", "a", "new", "one."))]
    assert final_words(many, tail, sound_to) == tail


def test_a_number_in_digits_may_span_the_words_it_is_said_in() -> None:
    # "Nine hundred and forty-seven dollars" is said over 1.9 s of speech and written "$947.":
    # one word, not one stretched over words not heard. A spelled word over as much speech is.
    def speech(lo: float, hi: float) -> float:
        return max(0.0, min(hi, 10.5) - max(lo, 7.5))

    rice = hw(" Rice", 10.6, 10.9)
    assert stretched_at([hw(" $947.", 7.5, 9.4), rice], speech) == 2
    assert stretched_at([hw(" seven.", 7.5, 9.4), rice], speech) == 0
    # Each digit allows for the words it is said in, no more: one digit over 3 s is stretched.
    assert stretched_at([hw(" $947.", 7.5, 10.5), rice], speech) == 2
    assert stretched_at([hw(" 7", 7.5, 10.5), rice], speech) == 0


def test_the_last_committed_word_heard_again_before_the_committed_end_anchors_the_new_words() -> None:
    # "Um, I" committed; the next round wrote "I mean, let's just go." with "I" laid over "Um"
    # and "mean," mostly before the committed end: one word alike, but the last committed one,
    # heard where it was said, so "mean," is new.
    committed = [hw(" Um,", 0.31, 0.66), hw(" I", 0.84, 1.02)]
    words = [hw(" I", 0.0, 0.62), hw(" mean,", 0.6, 1.2), hw(" let's", 1.58, 1.92), hw(" just", 1.92, 2.18),
             hw(" go.", 2.18, 2.62)]
    assert new_words(words, committed, 1.02) == words[1:]
    # Another committed word alike is no anchor: by time, "mean," is the committed audio.
    assert new_words(words, [hw(" I", 0.31, 0.66), hw(" um,", 0.84, 1.02)], 1.02) == words[2:]


def test_the_final_hearing_writes_no_word_past_the_last_rounds_over_too_little_sound() -> None:
    # The last round heard the stream to its end, "... get that?"; alone, "that?" became "that
    # load.", "load." over 0.1 s of sound after the last round's "that?".
    tail = [hw(" that?", 6.08, 6.32, p=0.7)]
    load = [hw(" that", 6.01, 6.35, p=0.07), hw(" load.", 6.35, 6.41, p=0.41)]
    def said_to_654(t: float) -> float:
        return max(0.0, min(t, 6.54) - 6.06)

    assert [w.word.word for w in final_words(load, tail, said_to_654)] == [" that"]
    # A word past it over sound of its own stands.
    done = [load[0], hw(" done.", 6.35, 6.8)]
    assert final_words(done, tail, lambda t: max(0.0, t - 6.06)) == done
    # So does the last round's last word heard again with a later end.
    words = [hw(" in", 5.82, 5.96), hw(" my", 5.96, 6.24), hw(" calendar.", 6.24, 6.58)]
    again = [*words[:2], hw(" calendar.", 6.21, 6.79)]
    assert final_words(again, words, lambda t: max(0.0, min(t, 6.8) - 5.8)) == again


def test_a_short_word_the_last_round_heard_before_the_first_shared_one_stands_over_a_words_sound() -> None:
    # tiny.en heard "Put it in my calendar." in context, "Put" committed, and alone "in my
    # calendar.", laid over "it" too: "it" had 0.16 s of sound, a short word's.
    tail = [hw(" it", 5.66, 5.82, p=0.99), hw(" in", 5.82, 5.96), hw(" my", 5.96, 6.24), hw(" calendar.", 6.24, 6.58)]
    alone = [hw(" in", 5.61, 5.91, p=0.42), hw(" my", 5.91, 6.21), hw(" calendar.", 6.21, 6.79)]
    def said(t: float) -> float:
        return max(0.0, min(t, 6.8) - 5.66)

    assert [w.word.word for w in final_words(alone, tail, said)] == [" it", " in", " my", " calendar."]
    # Over less than a word's sound, it was the end of the last committed word.
    assert final_words(alone, tail, lambda t: max(0.0, min(t, 6.8) - 5.76)) == alone
    # Two words need more.
    two = [hw(" it", 5.66, 5.74), hw(" is", 5.74, 5.82), *tail[1:]]
    assert final_words(alone, two, said) == alone


def test_a_last_round_that_wrote_the_prompt_again_after_words_of_its_own_keeps_those() -> None:
    # "Turn left at the next light. Then" committed; at the audio's end, the last round wrote
    # "go straight." and then the prompt again at one instant; the final hearing, alone, "and
    # ghost raid.", sharing no word: the last round's own words stand.
    committed = [hw(f" {w}", 0.3 * i, 0.3 * i + 0.3) for i, w in enumerate(
        ("Turn", "left", "at", "the", "next", "light.", "Then"))]
    own = [hw(" go", 4.16, 4.44, p=0.53), hw(" straight.", 4.44, 4.9)]
    copy = [hw(f" {w}", 5.48, 5.48) for w in ("Turn", "left", "at", "the", "next", "light.", "then", "go", "straight.")]
    ghost = [hw(" and", 4.07, 4.23, p=0.21), hw(" ghost", 4.23, 4.55, p=0.48), hw(" raid.", 4.55, 4.95)]
    def said(t: float) -> float:
        return max(0.0, min(t, 5.2) - 4.12)

    assert final_words(ghost, [*own, *copy], said, committed) == own
    # A last round that wrote nothing but the prompt again still gives way, and so does one
    # unsure of the words before the copy: they are the start of it, written another way
    # ("Add 1 cup of flour. Stir." after "Add two cups of flour. Stir.").
    assert final_words(ghost, copy, said, committed) == ghost
    unsure = [hw(" go", 4.16, 4.44, p=0.18), hw(" straight.", 4.44, 4.9, p=0.12)]
    assert final_words(ghost, [*unsure, *copy], said, committed) == ghost


def test_the_final_hearing_starts_as_the_last_round_heard_it_in_context() -> None:
    # Committed "... for" (ending at 1.38 s, early); the last round heard "25 minutes." after it.
    tail = [hw(" 25", 1.38, 1.88), hw(" minutes.", 1.91, 2.35)]
    def no_sound(_: float) -> float:
        return 0.0

    # Alone, the rest of "for" merged into the number: the last round's "25" stands.
    merged = [hw(" 425", 1.38, 1.91), hw(" minutes.", 1.91, 2.35)]
    assert [w.word.word for w in final_words(merged, tail, no_sound)] == [" 25", " minutes."]
    # ... or became a word of its own: dropped where there is no sound for it.
    apart = [hw(" four", 1.33, 1.4), hw(" 25", 1.4, 1.88), hw(" minutes.", 1.91, 2.35)]
    assert [w.word.word for w in final_words(apart, tail, no_sound)] == [" 25", " minutes."]
    # A word the last round was deaf to, over sound, stands.
    assert final_words(apart, tail, lambda t: 0.5) == apart
    # A final hearing that starts as the last round's is left as it is ...
    assert final_words(tail[:1] + [hw(" minute.", 1.91, 2.3)], tail, no_sound) == tail[:1] + [hw(" minute.", 1.91, 2.3)]
    # ... and one that shares no word with it does not replace it.
    assert final_words([hw(" twenty", 1.4, 1.6)], tail, no_sound) == tail
    # The last round's words stand only where they start before the word both heard alike.
    early = [hw(" 4", 1.2, 1.3), hw(" minutes.", 1.3, 2.35)]
    assert final_words(early, tail, no_sound) == early
    # Words the last round heard before the first word both heard alike stand over sound
    # ("Down." of "Down. ... Enter.", which the final hearing laid "Enter" over) ...
    down = [hw(" Down.", 29.68, 30.84), hw(" Enter.", 32.1, 33.3)]
    alone = [hw(" Enter", 28.35, 33.51)]
    assert [(w.word.word, w.word.start) for w in final_words(alone, down, lambda t: 0.5)] == \
        [(" Down.", 29.68), (" Enter", 32.1)]
    # ... not over silence.
    assert final_words(alone, down, no_sound) == alone
    # A last round that wrote the prompt again ("Go forward 10 meters." over "Down. Enter.")
    # gives way to a final hearing that shares no word with it.
    said = [hw(f" {w}", 5.0 + i, 5.5 + i) for i, w in enumerate(("Go", "forward", "ten", "meters.", "Yes."))]
    copy = [hw(" forward", 28.3, 29.0), hw(" 10", 29.0, 30.7), hw(" meters.", 30.7, 33.3)]
    assert final_words(alone, copy, lambda t: 0.5, said) == alone
    assert final_words(alone, copy, lambda t: 0.5, said[2:]) == copy
    # So does one that heard nothing ("Done.", which Whisper alone called silence), where the
    # last round wrote the prompt again; a last round that did not stands.
    assert final_words([], copy, lambda t: 0.5, said) == []
    assert final_words([], copy, lambda t: 0.5, said[2:]) == copy
    # Nor does one that wrote, unsure, words over less sound than a word: "I'm sorry." over the
    # end of the last committed word, in place of "purple, orange, white." written again.
    sorry = [hw(" I'm", 10.96, 11.24, p=0.14), hw(" sorry.", 11.37, 11.37, p=0.29)]
    listed = [hw(f" {w}", 6.0 + i, 6.5 + i) for i, w in enumerate(("Purple,", "orange,", "white,"))]
    again = [hw(" purple,", 11.46, 11.46), hw(" orange,", 11.46, 11.46), hw(" white.", 11.46, 11.5)]
    assert final_words(sorry, again, lambda t: 0.1, listed) == []
    assert final_words(sorry, again, lambda t: 0.5, listed) == sorry
    sure = [hw(" I'm", 10.96, 11.24, p=0.8), sorry[1]]
    assert final_words(sure, again, lambda t: 0.1, listed) == sure
    # Words the last round heard after the final hearing's last word stand over sound: alone,
    # tiny.en laid "pause" over "Pause. ... Next.".
    said_last = [hw(" Pause.", 12.5, 15.24), hw(" Next.", 15.28, 16.38)]
    paused = [hw(" pause", 12.5, 15.58)]
    def next_said(t: float) -> float:
        return 0.4 * (t > 13.3) + 0.5 * (t > 15.7)  # sound of "Pause" by 13.3 s, of "Next" by 15.7 s

    assert final_words(paused, said_last, next_said) == [*paused, said_last[1]]
    assert final_words(paused, said_last, lambda t: 0.4) == paused
    # A last round that shares no word with the final hearing stands, and what the final hearing
    # put after its last word follows it where there is sound after that word ("Down." left
    # unconfirmed, then "Enter" heard alone, laid over both) ...
    def sound_after(t: float) -> float:
        return 0.3 * (t > 32.4) + 0.4 * (t > 30.0)  # "Down." from 29.7 s, "Enter." from 32.4 s

    assert [w.word.word for w in final_words(alone, down[:1], sound_after)] == [" Down.", " Enter"]
    # ... not where it heard nothing after it, nor words it put before the last round's end.
    assert final_words(alone, down[:1], lambda t: 0.4) == down[:1]
    assert final_words([hw(" Dawn", 29.7, 30.7)], down[:1], sound_after) == down[:1]
    # Nor one that wrote a single word over a pause between two things said: prompted with "Go
    # forward 10 meters", the last round wrote "meters" over "Down. ... Enter." (the end of
    # "Hello" before them); the final hearing, with a word for each, replaces it.
    meters = [hw(" meters", 28.56, 33.32, p=0.27)]
    now_enter = [hw(" Now", 28.57, 30.79, p=0.06), hw(" enter.", 30.79, 33.31, p=0.51)]
    runs = [(28.16, 28.58), (30.62, 30.98), (32.99, 33.44)]
    assert final_words(now_enter, meters, sound_after, runs=runs) == now_enter
    assert final_words(now_enter, meters, sound_after) == meters
    # A word over one thing said and the fringe of another is no word over a pause, and a final
    # hearing with no more words than the last round does not replace it.
    assert final_words(now_enter, meters, sound_after, runs=[runs[0], runs[2]]) == meters
    assert final_words(now_enter[1:], meters, sound_after, runs=runs) == meters
    # Words a deaf round's retry heard alone have no context to speak for them: the final
    # hearing replaces them, shared words or not ...
    looped = [hw(" of", 77.9, 78.0), hw(" the", 78.0, 78.1), hw(" Father", 78.1, 78.5)]
    assert final_words([hw(" high.", 78.3, 78.9)], looped, sound_after) == looped
    assert final_words([hw(" high.", 78.3, 78.9)], looped, sound_after, tail_alone=True) == [hw(" high.", 78.3, 78.9)]
    assert final_words(merged, tail, no_sound, tail_alone=True) == merged
    # ... except the words a retry was sure of, over sound, before the word the final hearing
    # starts with: alone too, it laid "Enter" over "Down. ... Enter.". The end of "Hello", heard
    # again as " low" (unsure), does not stand.
    retried = [hw(" low,", 28.42, 29.26, p=0.29), hw(" down,", 29.26, 30.86, p=0.73), hw(" enter.", 30.86, 33.3, p=0.56)]
    enter = [hw(" Enter.", 28.42, 33.33, p=0.26)]
    assert final_words(enter, retried, sound_after, tail_alone=True) == [retried[1], *enter]
    assert final_words(enter, retried, no_sound, tail_alone=True) == enter
    assert final_words(enter, [hw(" down,", 29.26, 30.86, p=0.4), *retried[2:]], sound_after, tail_alone=True) == enter



def test_the_final_hearing_counts_only_sound_after_a_pause_as_words_of_its_own() -> None:
    """Sound still under way where a word's early-running time ends is the rest of that word,
    not words the last round missed; speech after a pause is."""
    # Quiet, "Never mind." was heard alone as "Reminds me.", laid over the last 0.21 s of "mind".
    mind = [hw(" mind.", 7.02, 7.32, p=0.88)]
    reminds = [hw(" Reminds", 7.32, 7.51, p=0.5), hw(" me.", 7.51, 7.73, p=0.35)]
    def rest_of_mind(t: float) -> float:
        return max(0.0, min(t, 7.53) - 7.0)

    def no_pause(lo: float, hi: float) -> float:
        return 0.0

    def all_after_pause(lo: float, hi: float) -> float:
        return rest_of_mind(hi) - rest_of_mind(lo)

    assert final_words(reminds, mind, rest_of_mind) == [*mind, *reminds]  # all sound counts
    assert final_words(reminds, mind, rest_of_mind, after_pause=no_pause) == mind
    assert final_words(reminds, mind, rest_of_mind, after_pause=all_after_pause) == [*mind, *reminds]
    # Eight seconds after the committed "Hello?", the last round, deaf to "Is anyone there?",
    # laid "Hello?" over the silence before it; the final hearing heard all of it.
    committed = [hw(" Hello?", 5.88, 6.42)]
    hello = [hw(" Hello?", 13.3, 14.6, p=0.67)]
    alone = [hw(" Is", 14.52, 14.94, p=0.27), hw(" anyone", 14.94, 15.38), hw(" there?", 15.38, 16.1),
             hw(" Hello.", 16.28, 16.74, p=0.6)]
    def said_after(t: float) -> float:
        return max(0.0, min(t, 15.88) - 14.69) + max(0.0, min(t, 16.81) - 16.38)

    def after_silence(lo: float, hi: float) -> float:
        return said_after(hi) - said_after(lo)

    assert final_words(alone, hello, said_after, committed, after_pause=after_silence) == alone
    # Without sound of their own after a pause, the words before the shared one are the end of
    # the last committed word heard alone ("forward ... were 10 meters").
    assert final_words(alone, hello, said_after, committed, after_pause=no_pause) == alone[3:]
    # "Hey, are you listening? ... Good.": "listening" committed with its time ending 0.3 s
    # early, the final hearing wrote that rest of it as words ("the ring.") before "Good.".
    # Sound there is no word of its own unless said after a pause.
    listening = [hw(" listening.", 6.8, 7.28)]
    good = [hw(" Good.", 8.47, 8.77, p=0.75)]
    the_ring = [hw(" the", 7.28, 7.28, p=0.05), hw(" ring.", 7.28, 7.47, p=0.47), hw(" Good.", 8.47, 8.77, p=0.72)]
    def spoken(t: float) -> float:  # from the committed end: the rest of "listening", then "Good."
        return max(0.0, min(t, 7.59) - 7.28) + max(0.0, min(t, 8.94) - 8.59)

    def good_after_pause(lo: float, hi: float) -> float:
        return max(0.0, min(hi, 8.94) - max(lo, 8.59))

    assert final_words(the_ring, good, spoken, listening, after_pause=good_after_pause) == the_ring[2:]
    assert final_words(the_ring, good, spoken, listening) == the_ring  # all sound counts
    assert final_words(alone, hello, said_after, committed) == alone[3:]

def test_a_prompt_is_the_last_whole_committed_words_that_fit() -> None:
    words = [hw(f" w{i:03d}", i, i + 0.5, tokens=(i,)) for i in range(200)]  # 5 characters each
    assert prompt_tokens(words, 12) == (198, 199)  # never part of a word
    assert prompt_tokens(words, 4) == ()
    assert prompt_tokens(words[:3], 600) == (0, 1, 2)
    # A live stream's prompt holds more than Whisper-Streaming's 200 characters (see docs/live-captions.md).
    live, whisper_s = StreamOptions().prompt_limit, StreamOptions(policy="whisper-s").prompt_limit
    assert len(prompt_tokens(words, live)) == live // 5 > len(prompt_tokens(words, whisper_s)) == 40
    assert StreamOptions(prompt_chars=0).prompt_limit == 0


def test_a_loop_keeps_the_copies_dtw_gives_audio_of_their_own() -> None:
    """"Again." said three times alone is written as a loop (a fourth copy ends the text). The
    copies DTW lays over audio of their own were said; those at an instant were not."""
    again = (7, 13)
    said = [hw(" Again.", a, b, tokens=again) for a, b in ((0.0, 0.72), (1.39, 6.95), (6.95, 7.63))]
    squeezed = [hw(" Again.", 7.63, 7.67, tokens=again), hw(" Again.", 7.67, 7.67, tokens=again)]
    tokens = [t for w in (*said, *squeezed) for t in w.tokens]
    assert heard_copies([*said, *squeezed], tokens, start=2, unit=2) == 3
    # A decoder that lost its place writes every copy at one instant: the first stands alone.
    lost = [said[0], *(hw(" Again.", 3.1, 3.1, tokens=again) for _ in range(3))]
    assert heard_copies(lost, tokens, start=2, unit=2) == 1
    # Text after the copies is not kept; a phrase's copies are kept as a word's are.
    after = [*said, hw(" Now.", 8.0, 8.4, tokens=(21, 13))]
    assert heard_copies(after, [t for w in after for t in w.tokens], start=2, unit=2) == 3
    go_on = [hw(w, 0.5 * i, 0.5 * i + 0.4, tokens=t) for i, (w, t) in enumerate([(" Go", (7,)), (" on.", (8, 13))] * 3)]
    assert heard_copies(go_on, [7, 8, 13] * 3, start=3, unit=3) == 6
    # Copies that start mid-word (". Enter" of "Down. Enter. Enter. Enter. Enter") are counted
    # from the next word.
    enter = [hw(" Down.", 29.76, 30.86, tokens=(9, 13)), hw(" Enter.", 32.14, 33.3, tokens=(10, 13)),
             *(hw(" Enter.", 33.66, 33.66, tokens=(10, 13)) for _ in range(2)), hw(" Enter", 33.66, 33.66, tokens=(10,))]
    assert heard_copies(enter, [t for w in enter for t in w.tokens], start=3, unit=2) == 2
    # One word of a repeated token has no copy of its own.
    assert heard_copies([hw(" hahaha", 1.0, 2.0, tokens=(4, 4, 4, 4))], [4, 4, 4, 4], start=1, unit=1) == 0
    # "Two, zero, nine." said once, written three times: the second copy's "2" lies over the end
    # of the "9" said, long enough for a copy, but its ", 0, 9" lie at one instant: not heard.
    digits = ((" 2", (5,)), (",0", (11, 6)), (",9", (11, 9)))
    times = ((5.6, 7.28), (7.28, 7.76), (7.76, 8.46), (8.46, 8.78), (8.78, 8.78), (8.78, 8.78), *[(8.78, 8.78)] * 3)
    looped = [hw(w, a, b, tokens=t) for (w, t), (a, b) in zip(digits * 3, times, strict=True)]
    assert heard_copies(looped, [t for w in looped for t in w.tokens], start=5, unit=5) == 3
    # Each word of a copy said again lies over audio of its own: kept.
    again = [hw(w, a, b, tokens=t) for (w, t), (a, b) in zip(digits * 2, [(0.5 * i, 0.5 * i + 0.4) for i in range(6)],
                                                            strict=True)]
    assert heard_copies(again, [t for w in again for t in w.tokens], start=5, unit=5) == 6


def test_a_round_that_writes_its_prompt_again_in_place_of_the_unconfirmed_words_is_void() -> None:
    said = [hw(f" {w}", 5.0 + i, 5.5 + i) for i, w in enumerate(("Go", "forward", "ten", "meters.", "Yes."))]
    down = [hw(" Down.", 29.7, 30.8)]
    copy = [hw(" forward", 28.3, 29.0), hw(" 10", 29.0, 30.7), hw(" meters.", 30.7, 33.3)]
    assert copies_prompt(copy, down, said)
    # Nothing left unconfirmed, too few committed words written again, or the phrase said again
    # after the unconfirmed words (it shares them): not a copy in their place.
    assert not copies_prompt(copy, [], said)
    assert not copies_prompt(copy, down, said[2:])
    assert not copies_prompt([*down, *copy], down, said)


def test_repeats_said_over_audio_of_their_own_keep_the_words_after_them() -> None:
    """"words words words words" is a loop by the text alone; said, each copy lies over audio of
    its own, and the phrase after them is speech too: nothing after the copies is cut."""
    from stenoflow.streaming.live_round import counted_copies

    copies = [hw(" words", 0.4 * i, 0.4 * i + 0.35, tokens=(7,)) for i in range(4)]
    after = [hw(" and", 1.8, 2.0, tokens=(8,)), hw(" that's", 2.0, 2.3, tokens=(9,)), hw(" all.", 2.3, 2.7, tokens=(10, 13))]
    words = [*copies, *after]
    tokens = [t for w in words for t in w.tokens]
    assert counted_copies(words, tokens, start=1, unit=1) == (4, True)
    # The text ends at the copies (the loop rule ended it): said, so the round decodes on.
    assert counted_copies(copies, [7] * 4, start=1, unit=1) == (4, True)
    # Copies the decoder wrote at one instant were not said: cut there, with what follows.
    lost = [copies[0], *(hw(" words", 0.4, 0.4, tokens=(7,)) for _ in range(3)), *after]
    assert counted_copies(lost, [t for w in lost for t in w.tokens], start=1, unit=1) == (1, False)


def test_a_loop_keeps_only_copies_that_speech_starts_in() -> None:
    """"Umbrella." said alone, heard at the end of a buffer, was written four times: DTW ended
    the first copy early and laid the second over the word's last third, the others at an
    instant. A looping decoder's copy is kept only where speech starts inside it."""
    from stenoflow.streaming.live_round import counted_copies

    word = (7, 13)
    looped = [hw(" Umbrella.", 120.1, 121.58, tokens=word), hw(" Umbrella.", 121.58, 121.78, tokens=word),
              *(hw(" Umbrella.", 121.78, 121.78, tokens=word) for _ in range(2))]
    tokens = [t for w in looped for t in w.tokens]
    assert counted_copies(looped, tokens, start=2, unit=2) == (2, False)  # speech not known
    assert counted_copies(looped, tokens, start=2, unit=2, onsets=(119.8, 121.25)) == (1, False)
    # Said again alone after a pause, a copy holds the onset of its own saying: kept.
    again = [hw(" Again.", 0.0, 0.72, tokens=word), hw(" Again.", 1.39, 6.95, tokens=word),
             hw(" Again.", 6.95, 7.63, tokens=word), hw(" Again.", 7.63, 7.63, tokens=word)]
    tokens = [t for w in again for t in w.tokens]
    assert counted_copies(again, tokens, start=2, unit=2, onsets=(0.1, 6.1, 7.2)) == (3, False)
    # Repeats said in one breath hold no onset of their own, but every copy was said: kept.
    copies = [hw(" words", 0.4 * i, 0.4 * i + 0.35, tokens=(7,)) for i in range(4)]
    assert counted_copies(copies, [7] * 4, start=1, unit=1, onsets=(0.0,)) == (4, True)
