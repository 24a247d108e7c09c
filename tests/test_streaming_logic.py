"""Streaming without a model: LocalAgreement-2, the audio buffer, prompts, scheduling, trimming."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pytest

from stenoflow.streaming.agreement import LocalAgreement, tail_prefix_alignment, word_key
from stenoflow.streaming.buffer import AudioBuffer
from stenoflow.streaming.events import StreamUpdate, TimedWord
from stenoflow.streaming.options import StreamOptions
from stenoflow.streaming.policy import (
    PreviousRound,
    RoundResult,
    closed_segment_ends,
    repair_word_times,
)
from stenoflow.streaming.prompt import build_prompt, prompt_horizon
from stenoflow.streaming.session import StreamSession

SR = 16000


def words(text: str, start: float = 0.0, width: float = 0.5) -> list[TimedWord]:
    """Words of ``text`` laid end to end from ``start``, ``width`` seconds each."""
    return [TimedWord(" " + w, start + i * width, start + (i + 1) * width) for i, w in enumerate(text.split())]


def text(ws: tuple[TimedWord, ...] | list[TimedWord]) -> str:
    return "".join(w.word for w in ws).strip()


# --- LocalAgreement-2 ---------------------------------------------------------------------------


def test_word_key_ignores_case_and_punctuation() -> None:
    assert word_key(" Americans,") == word_key("americans") == "americans"
    assert word_key(" don't") == "don't"
    assert word_key(" ...") == "..." and word_key("-") == "-"


def test_commits_longest_common_prefix_of_two_rounds() -> None:
    la = LocalAgreement()
    assert la.update(words("and so my")) == []  # one round alone confirms nothing
    assert text(la.complete()) == "and so my"
    committed = la.update(words("and so my fellow"))
    assert text(committed) == "and so my"
    assert text(la.complete()) == "fellow"
    committed = la.update(words("And so my fellow Americans,"))
    assert text(committed) == "fellow"  # the committed part is cut off the new hypothesis by time
    assert text(la.complete()) == "Americans,"


def test_prefix_compares_normalised_words_and_keeps_newer_timing() -> None:
    la = LocalAgreement()
    la.update([TimedWord(" Hello", 0.0, 0.4), TimedWord(" world", 0.4, 0.8)])
    committed = la.update([TimedWord(" hello,", 0.0, 0.5), TimedWord(" World.", 0.5, 0.9)])
    assert [(w.word, w.start, w.end) for w in committed] == [(" hello,", 0.0, 0.5), (" World.", 0.5, 0.9)]


def test_disagreement_stops_the_prefix() -> None:
    la = LocalAgreement()
    la.update(words("ask not what you are"))
    committed = la.update(words("ask not what your country"))
    assert text(committed) == "ask not what"
    assert text(la.complete()) == "your country"


def test_words_before_the_committed_end_are_dropped() -> None:
    la = LocalAgreement()
    la.update(words("one two three"))
    la.update(words("one two three four"))  # commits one two three, ends at 1.5
    assert la.committed_end == pytest.approx(1.5)
    # The buffer still holds that audio: the model hears it again, times drifting a little.
    hyp = [TimedWord(" one", 0.02, 0.5), TimedWord(" two", 0.5, 1.02), TimedWord(" three", 1.02, 1.45),
           TimedWord(" four", 1.45, 2.0), TimedWord(" five", 2.0, 2.5)]
    assert text(la.insert(hyp)) == "four five"  # "four" starts within the 0.1 s tolerance


def test_ngram_overlap_removes_a_repeated_committed_tail() -> None:
    la = LocalAgreement()
    la.update(words("we are living in"))
    la.update(words("we are living in a"))  # commits "we are living in", ends at 2.0
    # Times of a re-heard phrase drifted past the tolerance; its text did not.
    shifted = [TimedWord(" living", 2.05, 2.3), TimedWord(" in", 2.3, 2.5), TimedWord(" a", 2.5, 2.7),
               TimedWord(" crazy", 2.7, 3.0)]
    assert text(la.insert(shifted)) == "a crazy"


def test_text_cut_survives_a_committed_word_with_a_late_end() -> None:
    """A round that stopped short stretched "come" to the buffer end and squeezed "in a new"
    there; two such rounds agree, so those words commit with times ~9 s too late. The next round
    hears the same words at their true times and goes on: its new words must not be lost."""
    la = LocalAgreement()
    la.update(words("began to come", start=19.0))
    la.update(words("began to come", start=19.0))  # commits "began to come"
    short = [TimedWord(" began", 19.0, 19.5), TimedWord(" to", 19.5, 19.76), TimedWord(" come", 19.76, 28.9),
             TimedWord(" in", 28.94, 28.96), TimedWord(" a", 28.96, 28.98), TimedWord(" new", 28.98, 28.98)]
    la.update(short)
    assert text(la.update(short)) == "in a new"
    assert la.committed_end == pytest.approx(28.98)
    full = words("began to come in a new number to the wee hours", start=19.0, width=0.3)
    assert text(la.insert(full)) == "number to the wee hours"  # the time rule alone keeps nothing


def test_a_revised_last_word_is_not_committed_again() -> None:
    la = LocalAgreement()
    la.update(words("such detailed documentation does"))
    la.update(words("such detailed documentation does"))  # committed; "does" was misheard
    revised = words("such detailed documentation was to be maintained")
    assert text(la.insert(revised)) == "to be maintained"  # "was" is the same audio as "does"


def test_text_cut_needs_a_clear_match_near_the_committed_end() -> None:
    la = LocalAgreement()
    la.update(words("thank you"))
    la.update(words("thank you"))  # committed, ends at 1.0
    la.drop_before(1.0)  # the buffer moved past them
    again = [TimedWord(" thank", 6.0, 6.3), TimedWord(" you", 6.3, 6.6), TimedWord(" all", 6.6, 7.0)]
    assert text(la.insert(again)) == "thank you all"  # said again, 5 s later: new speech


def test_tail_prefix_alignment() -> None:
    committed = ["a", "b", "c", "d", "e"]
    assert tail_prefix_alignment(committed, ["c", "d", "e", "f"]) == (3, 3)  # leading committed skipped
    assert tail_prefix_alignment(committed, ["a", "b", "x", "d", "e", "f", "g"]) == (3, 5)  # one substitution
    assert tail_prefix_alignment(committed, ["a", "b", "c", "e", "f"]) == (3, 4)  # a word the model dropped
    assert tail_prefix_alignment(committed, ["e", "f", "e", "f"]) == (1, 1)  # ties: the shortest cut
    assert tail_prefix_alignment(committed, ["x", "y"])[0] <= 0


def test_the_ending_of_a_clipped_committed_word_is_not_new() -> None:
    la = LocalAgreement()
    la.update([TimedWord(" is", 0.0, 0.3), TimedWord(" deterministic.", 0.3, 1.2)])
    la.update([TimedWord(" is", 0.0, 0.3), TimedWord(" deterministic.", 0.3, 1.2)])
    fresh = la.insert([TimedWord(" istic.", 0.95, 1.2), TimedWord(" Each", 1.5, 1.8)])
    assert text(fresh) == "Each"
    assert text(la.insert([TimedWord(" tic", 9.0, 9.2)])) == "tic"  # far later: a word of its own


def test_ngram_check_ignores_far_away_repetitions() -> None:
    la = LocalAgreement()
    la.update(words("go"))
    la.update(words("go"))  # commits "go" ending at 0.5
    later = [TimedWord(" go", 5.0, 5.3), TimedWord(" now", 5.3, 5.6)]
    assert text(la.insert(later)) == "go now"  # a new "go", said much later


def test_committed_words_never_repeat_or_change_over_many_rounds() -> None:
    full = ["the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog", "and", "runs", "away"]
    la = LocalAgreement()
    committed: list[TimedWord] = []
    for n in range(1, len(full) + 1):
        # Each round hears one word more; its last word is still uncertain (garbled).
        hyp = [TimedWord(" " + w, 0.4 * i, 0.4 * (i + 1)) for i, w in enumerate(full[:n])]
        if n < len(full):
            hyp[-1] = TimedWord(hyp[-1].word + "x", hyp[-1].start, hyp[-1].end)
        committed += la.update(hyp)
        assert [w.word.strip() for w in committed] == full[: len(committed)]
    committed += la.flush()
    assert [w.word.strip() for w in committed] == full
    starts = [w.start for w in committed]
    assert starts == sorted(starts)


def test_commit_times_never_go_back() -> None:
    la = LocalAgreement()
    la.update([TimedWord(" a", 0.0, 1.0)])
    la.update([TimedWord(" a", 0.0, 1.0), TimedWord(" b", 0.95, 1.5)])
    committed = la.update([TimedWord(" a", 0.0, 1.0), TimedWord(" b", 0.95, 1.5)])
    assert [(w.word, w.start) for w in committed] == [(" b", 1.0)]  # clamped to the committed end


def test_flush_commits_the_tail_once() -> None:
    la = LocalAgreement()
    la.update(words("hello there"))
    assert text(la.flush()) == "hello there"
    assert la.flush() == [] and la.complete() == ()


def test_drop_before_forgets_unconfirmed_words_of_dropped_audio() -> None:
    la = LocalAgreement()
    la.update(words("a b c d"))
    la.drop_before(1.0)
    assert text(la.complete()) == "c d"


# --- buffer and prompt ------------------------------------------------------------------------


def test_audio_buffer_trims_and_keeps_absolute_time() -> None:
    buf = AudioBuffer()
    for i in range(5):
        buf.append(np.full(SR, i, dtype=np.float32))
    assert buf.duration == pytest.approx(5.0) and buf.offset == 0.0
    assert buf.trim_to(2.5) == pytest.approx(2.5)
    assert buf.duration == pytest.approx(2.5) and buf.end == pytest.approx(5.0)
    assert buf.samples[0] == 2.0 and buf.samples[-1] == 4.0
    assert buf.trim_to(1.0) == pytest.approx(2.5)  # never moves back
    buf.append(np.full(SR // 2, 9, dtype=np.float32))
    assert buf.end == pytest.approx(5.5)
    assert buf.trim_to(99.0) == pytest.approx(5.5) and len(buf) == 0


def test_quietest_point_finds_the_pause_next_to_a_boundary() -> None:
    t = np.arange(3 * SR) / SR
    speech = (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)
    speech[int(1.40 * SR): int(1.60 * SR)] = 0.0  # a 0.2 s pause
    buf = AudioBuffer()
    buf.append(speech)
    assert buf.quietest(1.05, 1.55) == pytest.approx(1.48, abs=0.02)  # into the pause, not its edge
    assert buf.quietest(1.30, 1.90) == pytest.approx(1.50, abs=0.02)  # the middle of the pause
    assert 2.2 <= buf.quietest(2.2, 2.8) <= 2.8  # no pause: somewhere inside the interval
    speech[int(1.20 * SR): int(1.25 * SR)] = 0.0  # a stop closure, as quiet but shorter
    closure = AudioBuffer()
    closure.append(speech)
    assert closure.quietest(1.05, 1.65) == pytest.approx(1.50, abs=0.02)
    buf.trim_to(1.0)
    assert buf.quietest(0.5, 1.02) >= 1.0  # never before the buffer


def test_prompt_is_committed_text_before_the_buffer_at_a_word_boundary() -> None:
    committed = words("alpha beta gamma delta epsilon", width=1.0)  # ends at 1, 2, 3, 4, 5
    assert build_prompt(committed, buffer_start=3.0) == "alpha beta gamma"
    assert build_prompt(committed, buffer_start=3.4) == "alpha beta gamma"  # delta is mostly in the buffer
    # A cut that leaves the last frames of a word in the buffer keeps the word in the prompt.
    assert build_prompt(committed, buffer_start=3.6) == "alpha beta gamma delta"
    assert build_prompt(committed, buffer_start=0.4) == ""
    assert build_prompt(committed, buffer_start=9.0, max_chars=14) == "delta epsilon"  # 13 chars
    assert build_prompt(committed, buffer_start=9.0, max_chars=4) == ""  # never a cut word
    assert build_prompt(committed, buffer_start=9.0, max_chars=0) == ""


def test_prompt_horizon_keeps_what_the_prompt_needs() -> None:
    committed = words(" ".join(f"w{i:03d}" for i in range(100)), width=1.0)
    k = prompt_horizon(committed, buffer_start=90.0, max_chars=20)
    assert build_prompt(committed[k:], 90.0, 20) == build_prompt(committed, 90.0, 20)
    assert k > 70


def test_closed_segment_ends_use_the_later_of_timestamp_and_last_word() -> None:
    tb = 1000  # timestamp tokens from here; text tokens below
    pieces = [(0.0, 2.0, [tb, 1, 2, tb + 100]), (2.0, 4.0, [tb + 100, 3, 4, 5, tb + 200])]
    ws = [TimedWord(" a", 0.1, 1.0), TimedWord(" b", 1.0, 2.4), TimedWord(" c", 2.4, 3.0),
          TimedWord(" d", 3.0, 3.5)]
    assert closed_segment_ends(pieces, [1, 1, 1, 2], ws, tb) == [2.4, 4.0]
    open_end = [(0.0, 2.0, [tb, 1, 2])]  # no closing timestamp: not a trimming point
    assert closed_segment_ends(open_end, [1, 1], ws[:2], tb) == []


# --- the session's scheduling, trimming and validation, with a scripted policy -----------------


@dataclass
class ScriptedPolicy:
    """Says the words of a fixed script that lie wholly inside the buffer (a perfect recogniser)."""

    script: list[TimedWord]
    seen: list[tuple[float, str]] = field(default_factory=list)  # (buffer seconds, prompt) per round
    shifts: list[tuple[float, float]] = field(default_factory=list)  # (buffer offset, previous.shift)
    name: str = "scripted"
    segment_ends: bool = True  # False: report no closed segments (one long segment)

    def run(self, model: object, samples: np.ndarray, prompt: str, previous: PreviousRound | None) -> RoundResult:
        # The session gives a policy relative time only; the test audio carries its own clock.
        offset = float(samples[0])
        duration = samples.size / SR
        self.seen.append((duration, prompt))
        self.shifts.append((offset, previous.shift if previous is not None else float("nan")))
        heard = [TimedWord(w.word, w.start - offset, w.end - offset) for w in self.script
                 if w.start >= offset - 1e-6 and w.end <= offset + duration + 1e-6]
        ends = [w.end for w in heard if w.word.endswith(".")] if self.segment_ends else []
        return RoundResult(tuple(heard), tuple(ends), (), {"encoder_mel_frames": 3000.0})


def clock_audio(seconds: float) -> np.ndarray:
    """Samples whose value is their own time in seconds (so a policy can read the offset)."""
    return (np.arange(round(seconds * SR), dtype=np.float64) / SR).astype(np.float32)


class FakeModel:
    is_multilingual = False
    hush = None


# These sessions are Whisper-Streaming's: the whisper-s policy, 30 s padding.
WHISPER_S = {"policy": "whisper-s", "hush": False, "guide": None}


def scripted_session(script: list[TimedWord], policy_type: type[ScriptedPolicy] = ScriptedPolicy,
                     **kw: object) -> tuple[StreamSession, ScriptedPolicy]:
    session = StreamSession(FakeModel(), StreamOptions(**{**WHISPER_S, **kw}))  # type: ignore[arg-type]
    policy = policy_type(script)
    session.policy = policy
    return session, policy


def stream_half_seconds(session: StreamSession, audio: np.ndarray) -> list[TimedWord]:
    """Push ``audio`` in half-second pieces, then finish: every word committed, in order."""
    committed: list[TimedWord] = []
    for i in range(0, audio.size, SR // 2):
        committed += session.push(audio[i: i + SR // 2]).committed
    return committed + list(session.finish().committed)


def sentence_script(n_sentences: int, words_per: int = 6, width: float = 0.5) -> list[TimedWord]:
    out: list[TimedWord] = []
    t = 0.0
    for s in range(n_sentences):
        for i in range(words_per):
            w = f"s{s}w{i}" + ("." if i == words_per - 1 else "")
            out.append(TimedWord(" " + w, t, t + width))
            t += width
    return out


def test_session_rounds_every_step_and_trims_without_reemitting() -> None:
    script = sentence_script(20)  # 60 s of "speech", a sentence every 3 s
    session, policy = scripted_session(script, step=1.0, buffer_trim_s=10.0, max_buffer_s=20.0)
    audio = clock_audio(60.0)
    committed: list[TimedWord] = []
    for i in range(0, audio.size, SR // 4):
        update = session.push(audio[i: i + SR // 4])
        committed += update.committed
        assert len(update.rounds) <= 1
    committed += session.finish().committed
    assert [w.word for w in committed] == [w.word for w in script]  # each word once, in order
    assert session.committed_text == "".join(w.word for w in script)
    assert session.rounds_run == 60
    assert max(seen[0] for seen in policy.seen) <= 10.0 + 1.0 + 1e-6  # trimmed at sentence ends
    assert session.buffer.offset > 40.0
    assert any(seen[1] for seen in policy.seen[-10:])  # prompts were built from trimmed text
    last_prompt = policy.seen[-1][1]
    assert last_prompt and "".join(w.word for w in script).strip().find(last_prompt) >= 0
    assert len(last_prompt) <= 200
    # A policy can map the previous round's times onto this buffer: previous - shift = now.
    for (prev_offset, _), (offset, shift) in zip(policy.shifts, policy.shifts[1:]):
        assert shift == pytest.approx(offset - prev_offset, abs=1e-4)
    assert any(shift > 0 for _, shift in policy.shifts[1:])


def test_sentence_ends_trim_when_the_model_writes_one_long_segment() -> None:
    script = sentence_script(20)
    session, policy = scripted_session(script, step=1.0, buffer_trim_s=10.0, max_buffer_s=20.0)
    policy.segment_ends = False
    committed = stream_half_seconds(session, clock_audio(60.0))
    assert [w.word for w in committed] == [w.word for w in script]
    assert max(seen[0] for seen in policy.seen) <= 11.0 + 1e-6  # never reached the 20 s cap


@dataclass
class DeafPolicy(ScriptedPolicy):
    """Hears nothing after ``deaf_from`` s until the buffer reaches ``deaf_until`` s, while its
    segments still close in the unheard audio and at the buffer's end."""

    deaf_from: float = 6.0
    deaf_until: float = 18.0

    def run(self, model: object, samples: np.ndarray, prompt: str, previous: PreviousRound | None) -> RoundResult:
        result = super().run(model, samples, prompt, previous)
        offset, duration = float(samples[0]), samples.size / SR
        if offset + duration >= self.deaf_until:
            return result
        heard = tuple(w for w in result.words if w.end + offset <= self.deaf_from + 1e-6)
        return RoundResult(heard, (duration - 3.0, duration), (), result.stats)


def test_segments_closed_over_speech_a_round_did_not_hear_do_not_trim_it() -> None:
    """Whisper-Streaming cuts at the last closed segment but one; a round deaf to the speech after
    the committed words still closes segments over it, and the cut dropped 15 s of speech
    untranscribed. A cut with no word unconfirmed stops at the committed words."""
    script = sentence_script(10)
    # (The stall trim, which keeps the last seconds of a round that heard nothing, is off: this
    # clock audio has no sound for it to keep.)
    session, _ = scripted_session(script, DeafPolicy, step=1.0, buffer_trim_s=10.0, max_buffer_s=20.0,
                                  stall_trim_s=None)
    committed = stream_half_seconds(session, clock_audio(30.0))
    assert [w.word for w in committed] == [w.word for w in script]


def test_stall_trim_cuts_after_a_fully_committed_hypothesis() -> None:
    # Speech for 3 s, then a decoder that hears nothing more: rounds stall on the same words.
    script = sentence_script(1)
    session, policy = scripted_session(script, step=1.0)
    audio = clock_audio(12.0)
    committed: list[TimedWord] = []
    for i in range(0, audio.size, SR):
        committed += session.push(audio[i: i + SR]).committed
    assert [w.word for w in committed] == [w.word for w in script]
    assert session.buffer.offset >= 3.0 - 0.3 - 1e-6  # cut just before the last word's end ...
    assert max(seen[0] for seen in policy.seen) < 6.0  # ... so the buffer stays short
    stalled, _ = scripted_session(script, step=1.0, stall_trim_s=None)
    for i in range(0, audio.size, SR):
        stalled.push(audio[i: i + SR])
    assert stalled.buffer.offset == 0.0  # Whisper-Streaming proper: no cut below buffer_trim_s


def test_repair_word_times_drops_squeezed_words_and_caps_stretched_ones() -> None:
    ws = [TimedWord(" began", 5.0, 5.3), TimedWord(" to", 5.3, 5.5), TimedWord(" come", 5.5, 12.9),
          TimedWord(" in", 12.94, 12.96), TimedWord(" a", 12.96, 12.98), TimedWord(" new", 12.98, 12.98)]
    fixed, held = repair_word_times(ws, duration=13.0)
    assert [w.word for w in fixed] == [" began", " to", " come"]
    assert [w.word for w in held] == [" in", " a", " new"]
    assert fixed[2].start == 5.5 and fixed[2].end == pytest.approx(5.5 + 2 * 0.3)  # 2 x median
    normal = words("a normal sentence here", width=0.3)
    assert repair_word_times(normal, duration=5.0) == (normal, [])
    assert repair_word_times([], 1.0) == ([], [])


def test_first_round_waits_for_min_audio_and_step_counts_from_snapshots() -> None:
    session, _ = scripted_session(sentence_script(2), step=2.0, min_round_audio_s=1.0)
    audio = clock_audio(6.0)
    rounds = [len(session.push(audio[i: i + SR // 2]).rounds) for i in range(0, audio.size, SR // 2)]
    # 12 pushes of 0.5 s: rounds at 1.0 s, 3.0 s and 5.0 s of audio.
    assert rounds == [0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0]


def test_backlog_is_worked_through_in_overlapping_rounds() -> None:
    script = sentence_script(10)
    session, policy = scripted_session(script, step=1.0)
    update = session.push(clock_audio(30.0))  # a whole file at once
    assert len(update.rounds) == 1
    committed = list(update.committed) + list(session.finish().committed)
    assert [w.word for w in committed] == [w.word for w in script]
    assert all(seen[0] <= 30.0 + 1e-6 for seen in policy.seen)


def test_hard_cap_without_commits_drops_old_audio() -> None:
    session, policy = scripted_session([], step=5.0, buffer_trim_s=10.0, max_buffer_s=12.0)
    audio = clock_audio(40.0)
    for i in range(0, audio.size, SR):
        session.push(audio[i: i + SR])
    session.finish()
    assert max(seen[0] for seen in policy.seen) <= 12.0 + 1e-6
    assert session.committed_text == ""


@dataclass
class FicklePolicy(ScriptedPolicy):
    """Hears the script but spells every word differently each round: no two rounds agree."""

    def run(self, model: object, samples: np.ndarray, prompt: str, previous: PreviousRound | None) -> RoundResult:
        result = super().run(model, samples, prompt, previous)
        n = len(self.seen)
        return replace(result, words=tuple(replace(w, word=f"{w.word}~{n}") for w in result.words))


def test_hard_cap_commits_unconfirmed_words_instead_of_dropping_them() -> None:
    script = sentence_script(12)  # 36 s of words, no sentence ever confirmed by two rounds
    session, _ = scripted_session(script, FicklePolicy, step=1.0, buffer_trim_s=10.0, max_buffer_s=12.0)
    audio = clock_audio(36.0)
    committed = [w for i in range(0, audio.size, SR) for w in session.push(audio[i: i + SR]).committed]
    assert committed, "slow agreement must not keep the buffer from committing at the cap"
    committed += session.finish().committed
    assert [w.word.split("~")[0] for w in committed] == [w.word for w in script]  # each word once, in order
    starts = [w.start for w in committed]
    assert starts == sorted(starts)


def test_commit_before_commits_only_the_words_the_cut_takes_away() -> None:
    la = LocalAgreement()
    la.update(words("one two three four"))
    forced = la.commit_before(1.0)  # "one" 0-0.5, "two" 0.5-1.0 start before the cut
    assert text(forced) == "one two"
    assert text(la.complete()) == "three four"
    assert text(la.update(words("three four five", start=1.0))) == "three four"


def test_push_rejects_bad_input_and_stays_usable() -> None:
    session, _ = scripted_session(sentence_script(1))
    with pytest.raises(TypeError, match="dtype"):
        session.push(np.zeros(100, dtype=np.int32))
    with pytest.raises(ValueError, match="NaN"):
        session.push(np.array([0.0, np.nan], dtype=np.float32))
    with pytest.raises(ValueError, match="16000"):
        session.push(np.zeros(100, dtype=np.float32), sample_rate=44100)
    with pytest.raises(ValueError, match="1-D"):
        session.push(np.zeros((2, 2, 2), dtype=np.float32))
    assert session.push(np.zeros(0, dtype=np.float32)) == StreamUpdate()
    session.push(clock_audio(3.0))
    assert session.finish().committed
    assert session.finish() == StreamUpdate()
    with pytest.raises(RuntimeError, match="finish"):
        session.push(np.zeros(10, dtype=np.float32))


def test_empty_stream_finishes_with_nothing() -> None:
    session, policy = scripted_session(sentence_script(1))
    assert session.finish() == StreamUpdate()
    assert policy.seen == []


@pytest.mark.parametrize("bad", [{"step": 0}, {"policy": "nope"}, {"beam_size": 0}, {"buffer_trim_s": 30.0},
                                 {"max_buffer_s": 31.0}, {"prompt_chars": -1}, {"cold_margin_s": -1.0},
                                 {"commit_flanked": 0}, {"settle_beam": 0}])
def test_stream_options_reject_nonsense(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        StreamOptions(**bad)  # type: ignore[arg-type]


def test_words_held_back_by_the_last_round_are_committed_at_finish() -> None:
    """A round that could not place its trailing words holds them back for the next round; when
    no next round comes (end of stream) they are committed as heard, not lost."""
    script = words("one two three four five six")

    class Holding(ScriptedPolicy):
        def run(self, model: object, samples: np.ndarray, prompt: str,
                previous: PreviousRound | None) -> RoundResult:
            result = super().run(model, samples, prompt, previous)
            placed = tuple(w for w in result.words if w.end <= samples.size / SR - 0.5)
            return RoundResult(placed, (), (), {}, result.words[len(placed):])

    session = StreamSession(FakeModel(), StreamOptions(**WHISPER_S, step=1.0, min_round_audio_s=1.0))  # type: ignore[arg-type]
    session.policy = Holding(script)
    audio = clock_audio(3.0)
    committed: list[TimedWord] = []
    for i in range(0, audio.size, SR // 2):
        committed += session.push(audio[i: i + SR // 2]).committed
    assert "six" not in text(committed)  # held back while the stream goes on
    committed += session.finish().committed
    assert text(committed) == "one two three four five six"


def test_sound_detector_finds_onsets_above_the_noise_floor() -> None:
    rng = np.random.default_rng(0)
    audio = (1e-3 * rng.standard_normal(6 * SR)).astype(np.float32)  # a steady noise floor
    audio[int(3.5 * SR): int(5.0 * SR)] += (0.2 * np.sin(2 * np.pi * 200 * np.arange(int(1.5 * SR)) / SR)).astype(np.float32)
    buf = AudioBuffer()
    buf.append(audio)
    assert buf.first_sound(0.0, 6.0) == pytest.approx(3.5, abs=0.02)
    assert buf.first_sound(0.0, 3.4) is None  # noise alone is not sound
    assert buf.sound_seconds(0.0, 6.0) == pytest.approx(1.5, abs=0.04)
    assert buf.sound_seconds(4.0, 4.5) == pytest.approx(0.5, abs=0.02)
    buf.trim_to(2.0)
    assert buf.first_sound(0.0, 6.0) == pytest.approx(3.5, abs=0.02)  # absolute times after a trim


def syllables(seconds: float) -> np.ndarray:
    """Speech-like sound: 0.15 s tone bursts 0.25 s apart (speech is never a steady level)."""
    t = np.arange(round(seconds * SR)) / SR
    return (0.2 * np.sin(2 * np.pi * 200 * t) * ((t % 0.25) < 0.15)).astype(np.float32)


class SilentPolicy(ScriptedPolicy):
    """Hears nothing, whatever the audio (as Whisper may when a buffer starts with a long pause)."""

    def run(self, model: object, samples: np.ndarray, prompt: str, previous: PreviousRound | None) -> RoundResult:
        super().run(model, samples, prompt, previous)
        return RoundResult()


def test_a_round_that_hears_nothing_never_cuts_off_a_sound() -> None:
    audio = np.zeros(8 * SR, dtype=np.float32)
    audio[int(4.0 * SR):] = syllables(4.0)  # speech from 4 s on
    session = StreamSession(FakeModel(), StreamOptions(**WHISPER_S, step=1.0))  # type: ignore[arg-type]
    session.policy = SilentPolicy([])
    for i in range(0, audio.size, SR):
        session.push(audio[i: i + SR])
        # Silence alone keeps only the last 2 s; once sound arrives, it stays in the buffer.
        assert session.buffer.offset <= 4.0 - 0.3 + 1e-6
    assert session.buffer.offset == pytest.approx(4.0 - 0.3, abs=0.02)


def test_a_hypothesis_that_skips_over_speech_is_not_committed_past_the_skip() -> None:
    """Two rounds that both leave out a spoken sentence (DTW stretching the gap over it) would
    agree past it; the words after the skip wait for a round that hears the sentence."""
    audio = syllables(10.0)  # speech throughout
    first = words("one two three", start=0.0)  # 0 - 1.5 s
    later = words("seven eight", start=5.0)  # the hypothesis jumps from 1.5 s to 5 s

    class Skipping(ScriptedPolicy):
        def run(self, model: object, samples: np.ndarray, prompt: str,
                previous: PreviousRound | None) -> RoundResult:
            super().run(model, samples, prompt, previous)
            offset = session.buffer.offset
            heard = [w for w in first + later if w.end <= offset + samples.size / SR]
            return RoundResult(tuple(TimedWord(w.word, w.start - offset, w.end - offset) for w in heard))

    session = StreamSession(FakeModel(), StreamOptions(**WHISPER_S, step=1.0))  # type: ignore[arg-type]
    session.policy = Skipping([])
    committed: list[TimedWord] = []
    for i in range(0, 8 * SR, SR):
        committed += session.push(audio[i: i + SR]).committed
    assert text(committed) == "one two three"  # "seven eight" agree, but follow 3.5 s of skipped sound
    committed += session.finish().committed  # at the end of the stream nothing better will come
    assert text(committed) == "one two three seven eight"


def test_speech_skipped_after_a_pause_is_heard_once_the_pause_is_cut_away() -> None:
    """Whisper may pass over the speech that follows a long pause at the start of its window:
    the session cuts the pause away, and the round that hears the speech first transcribes it."""
    audio = np.zeros(16 * SR, dtype=np.float32)
    audio[: 2 * SR] = syllables(2.0)  # "one two three four", then a 3 s pause
    audio[5 * SR:] = syllables(11.0)
    before = words("one two three four", start=0.0)
    after = words("five six seven eight nine ten eleven twelve", start=5.0, width=1.0)
    offsets: list[float] = []

    class SkipsAfterPause(ScriptedPolicy):
        def run(self, model: object, samples: np.ndarray, prompt: str,
                previous: PreviousRound | None) -> RoundResult:
            super().run(model, samples, prompt, previous)
            offset = session.buffer.offset
            offsets.append(offset)
            end = offset + samples.size / SR
            # While the pause is in the window, the first 3 s of speech after it go unheard.
            heard = [w for w in before + after if w.start >= offset and w.end <= end
                     and not (offset < 4.0 and 5.0 <= w.start < 8.0)]
            return RoundResult(tuple(TimedWord(w.word, w.start - offset, w.end - offset) for w in heard))

    session = StreamSession(FakeModel(), StreamOptions(**WHISPER_S, step=1.0, stall_trim_s=None))  # type: ignore[arg-type]
    session.policy = SkipsAfterPause([])
    committed: list[TimedWord] = []
    for i in range(0, audio.size, SR):
        committed += session.push(audio[i: i + SR]).committed
    committed += session.finish().committed
    assert text(committed) == "one two three four five six seven eight nine ten eleven twelve"
    assert max(offsets) == pytest.approx(5.0 - 0.3, abs=0.05)  # cut to just before the sound


def test_a_cut_never_drops_speech_said_after_the_committed_words() -> None:
    """A round that skipped a sentence lays the next one's words (or the last committed word)
    over it, and its boundaries there are no place to cut: the sentence would leave the buffer
    untranscribed. Cuts stop before speech that starts after the committed words."""
    rng = np.random.default_rng(0)
    said = [(0.0, 2.0), (4.0, 6.0)]  # committed, then a sentence no round wrote yet
    audio = 1e-4 * rng.standard_normal(8 * SR)
    for a, b in said:
        audio[round(a * SR): round(b * SR)] += 0.3 * np.sin(np.arange(round((b - a) * SR)) * 0.1)
    session = StreamSession(FakeModel(), StreamOptions(**WHISPER_S))  # type: ignore[arg-type]
    session.buffer.append(audio.astype(np.float32))
    committed = words("one two three four", width=0.5)
    session.agreement.update(committed)
    assert session.agreement.update(committed)  # agreed: committed to 2.0 s
    session._cut(5.0, snap=(4.75, 5.25))
    assert 2.0 <= session.buffer.offset <= 4.0
    session._cut(7.0)
    assert session.buffer.offset <= 4.0
    # With nothing said after the committed words, the cut goes where it was asked to.
    quiet = StreamSession(FakeModel(), StreamOptions(**WHISPER_S))  # type: ignore[arg-type]
    quiet.buffer.append(np.concatenate([audio[: 3 * SR], 1e-4 * rng.standard_normal(5 * SR)]).astype(np.float32))
    quiet.agreement.update(committed)
    quiet.agreement.update(committed)
    quiet._cut(5.0)
    assert quiet.buffer.offset == pytest.approx(5.0)


def test_onset_after_pause_skips_a_sound_under_way() -> None:
    buffer = AudioBuffer()
    audio = np.zeros(4 * SR, dtype=np.float32) + 1e-5
    audio[: SR] = 0.3
    audio[2 * SR: 3 * SR] = 0.3
    buffer.append(audio)
    assert buffer.onset_after_pause(0.5, 4.0) == pytest.approx(2.0, abs=0.021)
    assert buffer.onset_after_pause(1.5, 4.0) == pytest.approx(2.0, abs=0.021)
    assert buffer.onset_after_pause(2.5, 4.0) is None  # the rest of a sound, then quiet
