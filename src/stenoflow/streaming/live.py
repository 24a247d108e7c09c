"""The live session: short buffers, rounds that cost what the new audio costs.

Whisper-Streaming re-transcribes a buffer of up to 30 s every round, token by token. Here the
buffer keeps only the audio of the words that are not final yet, plus ``context_s`` of committed
speech before them: as soon as words are committed the buffer is cut at a word boundary so that
just that much committed context stays, and the committed text before the cut is the prompt.
The words a round expects (the committed ones still in the buffer, then the previous round's
unconfirmed ones) are its draft, verified in one decoder pass, so a round spends passes only
where the words can still change (see :mod:`.live_round` for a round and :mod:`.commit` for the
commit policies).

Nothing heard is lost:

* a round that hears nothing new, or that jumps over speech, while the audio after the committed
  words holds speech (by a voice activity model, :mod:`.speech`: a breath is sound, not
  speech; the speech the last committed word's tokens attended to was heard), is decoded again
  on that audio alone, without prompt or draft (but with two seconds of committed speech
  before it, as context); where that hearing, too, hears nothing new or ends its text over
  speech, the round's own hypothesis decoded on past its end (no end-of-text until one more
  token) wins if it hears further; a round that hears nothing in all these ways is void, and
  the words the last round left unconfirmed wait for the next;
* when the buffer must lose audio whose words are not final (rounds too slow to confirm them),
  those words are committed as last heard;
* ``finish()`` decodes the audio after the committed words once more, up to its last sound,
  unconditioned and padded to 30 s as Whisper was trained, and commits all of it (or, if it
  hears nothing, the words the last round left unconfirmed); when the last round left no word
  unconfirmed, only if that audio holds as much speech as makes a round deaf, or a word said
  alone after a pause; speech said after a pause after the words it committed is heard once
  more from there.

Committed words lie over the speech under them (see :func:`on_speech`): DTW stretches a word
said alone over the silence around it, and a committed end laid far past its speech hides the
next word said alone behind it.

Rounds run in two stages (encode and prefill, then decode); with a :class:`.pipeline.Pipeline`
the encoder stage of round n+1 runs beside the decoding of round n on another executor. The
stages see the session's state only through the ``RoundInput`` a round is planned from, so a
pipelined session computes exactly what a sequential one does.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from stenoflow.memory import HeapTrimmer
from stenoflow.streaming.agreement import said_alignment, spoken_keys, word_key
from stenoflow.streaming.buffer import SAMPLE_RATE, AudioBuffer
from stenoflow.streaming.commit import commit_policy
from stenoflow.streaming.events import SENTENCE_END, Dropped, StreamUpdate, TimedWord
from stenoflow.streaming.intake import Intake
from stenoflow.streaming.live_round import (
    Encoded,
    Heard,
    HeardWord,
    LiveRound,
    RoundInput,
    unheard_run,
)
from stenoflow.streaming.prompt import fitting_count
from stenoflow.streaming.rules import dropped
from stenoflow.streaming.speech import SpeechTrack

if TYPE_CHECKING:
    from stenoflow.model.protocol import SpeechModel
    from stenoflow.streaming.options import StreamOptions
    from stenoflow.streaming.pipeline import Pipeline

log = logging.getLogger(__name__)

SNAP_S = 0.1  # a cut between two words moves to the quietest point this close to their boundary
ONSET_LEAD_S = 0.3  # audio kept before the first sound when silence is cut away
SILENCE_KEEP_S = 1.0  # silence after the last committed word that the buffer keeps
# Across a pause the committed speech before it is no context: once the silence reaches this far
# past the committed end, the buffer drops that speech and keeps only the last second before the
# next sound. Heard again before a short word said seconds later, it made Whisper write the last
# committed word again in its place ("Hello. Hello." over "Hello. ... Down.") or lay the next
# word over both; the committed text stays the prompt.
PAUSE_CONTEXT_S = 0.5
# A round is deaf when it heard no new word, or its first new word comes after this much speech
# that no word covers, in the audio after the committed words (the end of the buffer, where a
# word may still be arriving, is left out).
DEAF_SPEECH_S = 0.6
DEAF_EDGE_S = 0.5
LONE_SPEECH_S = 0.25  # speech no round heard a word in, alone before silence, that is heard again alone
IDLE_SILENCE_S = 1.0  # silence after the last speech a round heard before idle rounds are skipped
# A retry of a deaf round hears this much committed speech before the end of the last committed
# word: started at that end, where DTW may end the word early, Whisper writes the rest of it as a
# word of its own and hears what follows worse ("The Lord's name" over "Turn the volume down").
RETRY_LEAD_S = 2.0
# The final hearing starts this much before it: the final hearing is compared word for word with
# the last round's unconfirmed words (final_words), which start there.
FINAL_LEAD_S = 0.05
MAX_PROMPT_WORDS = 400  # committed words kept for prompts (older ones only live in the text)
CONTEXT_WORDS = 100  # committed words a hypothesis start is aligned with
FRESH_CONTEXT_WORDS = 4  # committed words a hypothesis start is always aligned with, in its audio or not
TIME_TOLERANCE_S = 0.1  # a word starting this little before the committed end is still new
# The last committed word heard again this far from where it was committed is another saying of
# it; a word starting this far inside the committed audio is not new.
MISPLACED_S = 1.0
PROMPT_COPY_WORDS = 3  # committed words written again in a row that make a copy of the prompt
FINAL_SILENCE_S = 0.4  # silence after the last sound that the final hearing keeps
FINAL_HEARINGS = 3  # most final hearings, each of the speech after the words the one before committed
Sound = Callable[[float, float], float]  # seconds of sound (as a caller counts it) between two absolute times
ECHO_SOUND_S = 0.2  # a repeat of the committed words over less sound than this is the decoder looping
UNSPOKEN_S = 0.5  # last words with no speech this close to them were not said: Whisper wrote them over noise
MAX_WORD_SPEECH_S = 1.5  # a word DTW lays over more speech than this was stretched over words not heard
COPY_SPEECH_S = 0.1  # a word written again right after itself over less speech than this is a loop copy
# ... but a number in digits is said in several words ("$947." as "nine hundred and forty-seven
# dollars", 1.5 s): it may span this much more speech per digit
DIGIT_SPEECH_S = 0.6
SILENT_READ_S = 0.1  # punctuation read this far from any speech was read off silence
WORD_EDGE_S = 0.2  # silence a word keeps on either side of the speech under it
INSTANT_S = 0.06  # a word DTW lays over less audio than this, in silence, was not heard
WORD_PAUSE_S = 0.5  # silence no word is said across
WORD_SOUND_S = 0.1  # the least sound a word is said in (ten words a second)
# A word heard alone that the model was less sure of than this is as likely wrong as right (most
# often the end of the last committed word, heard again): it does not outweigh a later hearing.
SURE_ALONE_P = 0.5


class LiveSession:
    """Push 16 kHz mono samples, get committed words and the unconfirmed tail (live rounds)."""

    def __init__(self, model: SpeechModel, options: StreamOptions, pipeline: Pipeline | None = None) -> None:
        self.model = model
        self.options = options = options.resolved(model)
        self.round = LiveRound(model, options)
        self.policy = commit_policy(options.commit, options.align_frames, options.agree_rounds, options.commit_sure,
                                    options.commit_unsure_s, options.commit_confident, options.cold_s,
                                    options.cold_margin_s, options.commit_flanked)
        self.pipeline = pipeline
        self.buffer = AudioBuffer()
        self.speech = SpeechTrack()  # where the audio holds speech, for hearing it again alone
        self.intake = Intake()
        self._committed: list[HeardWord] = []  # recent committed words (prompt and draft)
        self._in_buffer = 0  # index in _committed of the first committed word inside the buffer
        self._committed_end = 0.0
        self._text: list[str] = []
        self._tail: list[HeardWord] = []  # the last round's uncommitted words: the next draft
        self._ahead: Encoded | None = None  # stage A of the next round, done ahead
        self._previous: Heard | None = None  # the last round's whole hearing (the next draft)
        self._tail_alone = False  # the tail was heard alone (a deaf round's retry), not in context
        self._void = False  # the last round was void: see _round
        self._dropped = 0  # committed words pruned from _committed (only their text is kept)
        self.rounds_run = 0
        self._heard_end = 0.0  # absolute end of the audio the rounds so far took
        self._heap = HeapTrimmer()  # rounds of ever-changing shapes leave freed heap behind
        self._drops: list[Dropped] = []  # words set aside since the last update (word accounting)

    # --- the StreamingSession protocol -------------------------------------------------------
    def push(self, samples: np.ndarray, sample_rate: int = SAMPLE_RATE) -> StreamUpdate:
        """Append samples; run a round if one is due (see ``StreamSession.push`` for the rules)."""
        self.intake.accept(samples, sample_rate)
        if not self.intake.due(self.options.step, self.options.min_round_audio_s):
            return StreamUpdate(tail=self.tail)
        committed, stats = self._round()
        return StreamUpdate(tuple(committed), self.tail, (stats,), self._taken_drops())

    def finish(self) -> StreamUpdate:
        """Hear the audio no round has heard yet, then decode what is not final once more,
        unconditioned, and commit all of it."""
        if self.intake.closed:
            return StreamUpdate()
        self.intake.closed = True
        committed: list[TimedWord] = []
        rounds: list[dict[str, float]] = []
        while self.intake.pending or self._ahead is not None:
            words, stats = self._round()
            committed += words
            rounds.append(stats)
        # A final hearing that starts at words no round confirmed may hear those and stop
        # ("Okay." of "Okay. ... Thanks."): speech said after the words it committed, after a
        # pause, is heard once more from there.
        for again in range(FINAL_HEARINGS):
            words, stats = self._final_round(again > 0)
            committed += words
            if stats:
                rounds.append(stats)
            if not words or self._speech_after_committed() < LONE_SPEECH_S:
                break
        if self.pipeline is not None:
            self.pipeline.close()
        return StreamUpdate(tuple(committed), (), tuple(rounds), self._taken_drops())

    @property
    def committed_text(self) -> str:
        return "".join(self._text)

    def _drop(self, rule: str, words: Sequence[HeardWord], final: bool = False) -> None:
        """Account for ``words`` set aside by ``rule`` (see :mod:`.rules`)."""
        if words:
            self._drops.append(dropped(rule, [w.word for w in words], final))

    def _taken_drops(self) -> tuple[Dropped, ...]:
        drops, self._drops = tuple(self._drops), []
        return drops

    @property
    def tail(self) -> tuple[TimedWord, ...]:
        return tuple(w.word for w in self._tail)

    # --- rounds --------------------------------------------------------------------------------
    def _plan(self) -> RoundInput:
        """Take the audio that arrived into the buffer and describe the round to run on it."""
        self.intake.take(self._intake_samples(), self.buffer)
        unfed = round((self.speech.fed_s - self.buffer.offset) * SAMPLE_RATE)
        self.speech.feed(self.buffer.samples[max(0, unfed) :])
        return RoundInput(self.buffer.samples, self.buffer.offset, self._prompt(), self._dropped + self._in_buffer,
                          onsets=self._onsets(self.buffer.offset, self.buffer.end))

    def _intake_limit_s(self) -> float:
        """Most new audio one round takes: ``intake_s``, or else ``max_intake_s``."""
        o = self.options
        return o.max_intake_s if o.intake_s is None else o.intake_s

    def _intake_samples(self) -> int:
        """Samples the next round takes: what arrived, up to the intake limit and the room left
        in the buffer."""
        room = self.options.max_buffer_s - self.buffer.duration
        return max(0, round(min(self._intake_limit_s(), room) * SAMPLE_RATE))

    def _next_due(self) -> bool:
        """Whether another round can be planned at once: a step of audio is waiting already (or
        any, once the stream ended) and fits in the buffer before this round cuts it."""
        step = self.options.step * SAMPLE_RATE
        room = (self.options.max_buffer_s - self.buffer.duration) * SAMPLE_RATE
        pending = self.intake.pending
        return pending >= (1 if self.intake.closed else step) and room >= min(step, pending)

    def _round(self) -> tuple[list[TimedWord], dict[str, float]]:
        t0 = time.perf_counter()
        forced = self._cap()
        planned = self._ahead.input if self._ahead is not None else self._plan()
        if self._idle(planned):
            return forced, self._skip(planned, forced, t0)
        encoded = self._ahead if self._ahead is not None else self._encode(planned)
        self._ahead = None
        inp = encoded.input
        self._heard_end = inp.end
        heard_before = max(0, inp.committed_before - self._dropped)
        draft, hold, drafted_to = self._draft(inp) if self.options.guide else ((), 0, inp.offset)
        new_s = inp.end - drafted_to  # the audio the draft was not heard over
        # The next round is planned before this one's results move the buffer, whether it then
        # runs beside this decoding (pipeline) or after it: both ways compute the same thing.
        ahead = self._plan() if self._next_due() else None
        if ahead is not None and self.pipeline is not None:
            heard, self._ahead = self.pipeline.run(lambda: self.round.decode(encoded, draft, hold, new_s=new_s),
                                                   lambda: self.round.encode(ahead))
            heard = self._heard(heard)
        else:
            heard = self._decode(encoded, draft, hold, new_s=new_s)
            self._ahead = self._encode(ahead) if ahead is not None else None
        whole = heard
        heard = replace(heard, words=tuple(self._fresh(heard.words, heard_before, heard.end)))
        heard, whole, retried, alone = self._unless_deaf(encoded, whole, heard, heard_before)
        # Conditioned on its prompt, over speech it could not make out, the decoder wrote the
        # prompt again in place of every word the last round left unconfirmed ("Go forward 10
        # meters." over "Down."), or it heard nothing there, and so did the hearings alone: this
        # round is void, and those words (and the draft they came from) wait for the next.
        # Never two rounds in a row: speech that keeps being heard so is not there.
        copied = copies_prompt(heard.words, self._tail, self._committed[-CONTEXT_WORDS:])
        void = not self._void and (copied or (retried and not heard.words and bool(self._tail)))
        if void:
            log.debug("round %s in place of %r: void", "wrote committed words again" if copied else "heard nothing",
                      "".join(w.word.word for w in self._tail))
            self._drop("void-round", heard.words)
            committed = forced
        else:
            self._previous = whole
            # A word at an instant in silence is not final, whatever the rounds agree on: it
            # stays unconfirmed (and seen as such by the rules for the tail) until a round
            # places it over audio.
            n = instant_in_silence_at(heard.words[: self.policy.commit(self._tail, heard)], self.speech.seconds)
            committed = forced + self._record(heard.words[:n])
            self._tail = list(heard.words[n:])
            self._tail_alone = alone
        self._void = void
        self._cut()
        self.rounds_run += 1
        stats = {"round": float(self.rounds_run), "buffer_start": inp.offset, "audio_end": heard.end,
                 "buffer_s": heard.end - inp.offset, "committed": float(len(committed)),
                 "retried": float(retried), "pipelined": float(ahead is not None and self.pipeline is not None),
                 "void": float(void), **heard.stats, "round_ms": 1000 * (time.perf_counter() - t0)}
        log.debug("round %d: %.2f-%.2f s, %d committed, tail %r", self.rounds_run, inp.offset,
                  heard.end, len(committed), "".join(w.word.word for w in self._tail))
        return committed, stats

    def _idle(self, planned: RoundInput) -> bool:
        """Whether the round planned on ``planned`` has nothing to hear: no word waits for
        confirmation, its new audio holds no speech, and a round already heard the speech after
        the committed words (if any) with ``IDLE_SILENCE_S`` of silence after it. Until then
        rounds go on: a short word one missed, a round with more silence after it may hear."""
        if not self.options.skip_idle or self._tail or self.speech.seconds(self._heard_end, planned.end):
            return False
        return self._heard_in_silence(max(self._committed_end, planned.offset))

    def _heard_in_silence(self, lo: float) -> bool:
        """Whether the speech after absolute time ``lo`` in the audio the rounds heard, if any,
        was heard by a round with ``IDLE_SILENCE_S`` of silence after it."""
        last = self.speech.last_end(lo, self._heard_end)
        return last is None or self._heard_end - last >= IDLE_SILENCE_S

    def _skip(self, planned: RoundInput, forced: list[TimedWord], t0: float) -> dict[str, float]:
        """Skip an idle round (see ``_idle``): its audio joins the buffer unheard, and the buffer
        is cut as after a round that heard nothing. A round encoded ahead is dropped."""
        self._ahead = None
        self._heard_end = planned.end
        self._cut()
        self.rounds_run += 1
        log.debug("round %d skipped: no speech in %.2f-%.2f s", self.rounds_run, planned.offset, planned.end)
        return {"round": float(self.rounds_run), "buffer_start": planned.offset, "audio_end": planned.end,
                "buffer_s": planned.duration, "committed": float(len(forced)), "skipped": 1.0,
                "round_ms": 1000 * (time.perf_counter() - t0)}

    def _draft(self, inp: RoundInput) -> tuple[tuple[int, ...], int, float]:
        """What the round is expected to hear: the previous round's tokens from the start of this
        round's buffer on (its own words, punctuation and timestamps), or, if that round heard
        nothing there, the committed and unconfirmed words still in the buffer; with
        ``beam_tail``, how many of its tokens are words this round may commit, over which the
        beam stays shut (0: none); and where the draft's last word ends (the buffer's start
        without one)."""
        if self._previous is not None:
            until = inp.end - self.options.margin_s
            draft, hold = self._previous.draft(inp.offset, self.model.tokenizer.timestamp_begin, until)
            if draft:
                return draft, hold if self.options.beam_tail else 0, self._previous.words[-1].word.end
        words = [*self._committed[max(0, inp.committed_before - self._dropped) :], *self._tail]
        return tuple(t for w in words for t in w.tokens), 0, words[-1].word.end if words else inp.offset

    def _fresh(self, words: Sequence[HeardWord], first: int, end: float, final: bool = False) -> list[HeardWord]:
        """The words of a hypothesis that are new: see :func:`new_words`. ``first`` indexes the
        first committed word in the hypothesis's audio; the last few committed words are always
        compared too, since word times at a buffer's end run early and the audio after them may
        still hold them. ``end`` is where the audio the hypothesis heard ends; ``final``: the
        stream's final hearing, which no later round repeats."""
        context = self._committed[max(0, min(first, len(self._committed) - FRESH_CONTEXT_WORDS)) :]
        fresh = self._unechoed(new_words(words, context, self._committed_end, self.buffer.sound_after_pause,
                                         self._speech_runs(), self._tail), end)
        return where_spoken(self._spoken(fresh, end, final), self.speech.seconds, end, self.options.margin_s)

    def _spoken(self, words: list[HeardWord], end: float, final: bool) -> list[HeardWord]:
        """``words`` (heard in audio that ends at ``end``) up to the last one speech lies near
        (see :func:`spoken_length`) and, but in the final hearing, before the first one laid
        over more speech than a word holds (see :func:`stretched_at`) or a copy of the word
        before it laid over silence (see :func:`silent_copy_at`); in the final hearing, which no
        later round hears again, without runs of words written at one instant over silence (see
        :func:`without_silent_runs`) and without such copies (see :func:`without_silent_copies`)."""
        n = spoken_length(words, self.speech.seconds, end)
        if n < len(words):
            log.debug("dropped %r: no speech near them", "".join(w.word.word for w in words[n:]))
            self._drop("unspoken", words[n:], final)
        if final:
            kept = without_silent_runs(words[:n], self.speech.seconds)
            self._drop("silent-run", [w for w in words[:n] if w not in kept], final)
            said = without_silent_copies(kept, self.speech.seconds)
            self._drop("silent-copy", [w for w in kept if w not in said], final)
            return said
        for held, why in ((stretched_at, "is laid over more speech than a word holds"),
                          (silent_copy_at, "repeats the word before it over silence")):
            if (k := held(words[:n], self.speech.seconds)) < n:
                log.debug("held back %r: %r %s", "".join(w.word.word for w in words[k:n]), words[k].word.word, why)
                n = k
        return words[:n]

    def _unechoed(self, fresh: list[HeardWord], end: float) -> list[HeardWord]:
        """``fresh`` (words after the committed ones, in audio that ends at ``end``) without
        the decoder's echo of the committed words."""
        while k := echo_length(fresh, self._committed) or restart_length(fresh, self._committed):
            # The decoder said the words just committed once more ("Seven. 7."): an echo, when
            # from the committed end (or the echo's start, if later) to the next word (or the end
            # of the audio) there is too little sound for them to have been said again.
            until = fresh[k].word.start if k < len(fresh) else end
            if self.buffer.sound_seconds(max(self._committed_end, fresh[0].word.start), until) >= ECHO_SOUND_S:
                break
            log.debug("dropped %r: an echo of the committed words over silence",
                      "".join(w.word.word for w in fresh[:k]))
            self._drop("echo", fresh[:k])
            fresh = fresh[k:]
        return fresh

    def _left(self, heard: Heard, planned: RoundInput) -> float:
        """Seconds of speech after ``heard``'s last word (where its tokens were heard), to the
        end of ``planned``'s audio (its last ``DEAF_EDGE_S`` left out)."""
        last = heard.words[-1]
        return self.speech.seconds(max(last.word.end, last.heard_at), planned.end - DEAF_EDGE_S)

    def _decoded_on(self, encoded: Encoded, whole: Heard,
                    heard_before: int) -> tuple[dict[str, float], tuple[Heard, Heard] | None]:
        """The round's hypothesis ``whole`` (``encoded`` decoded) decoded on past its end: its
        own tokens as the draft, and no end-of-text until one more token. Returns the figures of
        that work (none if it did not run) and both that hypothesis and its new words alone, or
        None if it has no new words. Over a short buffer after a prompt, the decoder may take a
        sentence's period for the end of the audio, round after round ("... judgment day." over
        ten seconds of card names)."""
        if not whole.ended or not whole.words or not self.round.continues(encoded):
            return {}, None
        more = self._decode(encoded, whole.tokens, min_tokens=len(whole.tokens) + 1)
        spent = {"continued": 1.0, "continued_decoder_ms": more.stats.get("decoder_ms", 0.0)}
        fresh = self._fresh(more.words, heard_before, more.end) if len(more.words) > len(whole.words) else []
        log.debug("round ended its text at %r; decoded on, it hears %r", whole.words[-1].word.word,
                  "".join(w.word.word for w in fresh))
        return spent, ((more, replace(more, words=tuple(fresh))) if fresh else None)

    def _unless_deaf(self, encoded: Encoded, whole: Heard, heard: Heard,
                     heard_before: int) -> tuple[Heard, Heard, bool, bool]:
        """A round that heard no new word (where there is speech, or where the last round heard
        words over speech), skipped speech before its first one, or left a short word after its
        last one unheard before a second of silence (``LONE_SPEECH_S``), is decoded
        again on the audio after the committed words alone, without prompt or draft (a prompt
        or a buffer cut mid-sentence can make Whisper hear nothing). Where the round heard
        nothing, the hearing alone wins if it heard more; where the round skipped speech, what
        the hearing alone puts before the round's first word goes before the round's words, and
        where it left a short word unheard, what it writes after them follows them:
        alone, Whisper is a worse judge of the words the round heard in context ("Turn right at
        the next corner" heard alone as "to the next corner"). Where the hearing alone, too,
        heard nothing new or ended its text over speech, the round's hypothesis decoded on past
        its end (``_decoded_on``) wins if it hears further. ``whole`` is the round's hypothesis and
        ``heard`` its new words. Returns the hearing's new words, its whole hypothesis (the next
        round's draft), whether the round was decoded again, and whether its words are all the
        hearing alone's."""
        planned = encoded.input
        start = max(self._committed_end, self.buffer.offset)
        covered = max(start, self._heard_through())
        first = heard.words[0].word.start if heard.words else planned.end
        unheard = self.speech.seconds(covered, min(first, planned.end - DEAF_EDGE_S))
        # A word the last round heard over speech, unconfirmed, that this round no longer hears
        # ("Volume up." then "Volume" committed and nothing after it): less speech than makes a
        # round deaf, but no later round may hear it again.
        vanished = not heard.words and any(w.word.end > start and self.speech.seconds(w.word.start, w.word.end)
                                           for w in self._tail)
        # A short word said alone ("Down.") that no round heard, whether or not this round heard
        # words before it: with a second of silence after it, the buffer cuts it away as a
        # breath (see ``_cut``), so this is its last hearing.
        after = self._left(heard, planned) if heard.words else unheard
        lone = after >= LONE_SPEECH_S and self._heard_in_silence(covered)
        if unheard < DEAF_SPEECH_S and not vanished and not lone:
            return heard, whole, False, False
        retry = self._hear_alone(planned.end, pad=False)
        if retry is None:
            return heard, whole, True, False
        # whichever hearing wins, the round's figures count the retry's work too
        spent = {f"retry_{k}": v for k, v in retry.stats.items()}
        heard = replace(heard, stats={**heard.stats, **spent})
        retry = replace(retry, words=tuple(self._fresh(retry.words, heard_before, retry.end)), stats=heard.stats)
        left = self._left(retry, planned) if retry.words else unheard
        if not heard.words and unheard >= DEAF_SPEECH_S and left >= DEAF_SPEECH_S:
            # The hearing alone heard nothing new or ended its text over speech too ("judgment,
            # eh?" over ten seconds of card names). Where both hear as far, the hearing alone
            # wins, as over a round that heard nothing: on a voice it finds hard, the context may
            # lead the decoder ("4 of hearts." after a card list, over "Turn the volume down to
            # nine"). Whichever wins, the round's figures count this work too.
            spent_on, continued = self._decoded_on(encoded, whole, heard_before)
            heard = replace(heard, stats={**heard.stats, **spent_on})
            retry = replace(retry, stats=heard.stats)
            if continued is not None and left - self._left(continued[1], planned) >= DEAF_SPEECH_S:
                more, fresh = continued
                log.debug("round decoded on past its end hears %r, further than alone (%r)",
                          "".join(w.word.word for w in fresh.words), "".join(w.word.word for w in retry.words))
                return replace(fresh, stats=heard.stats), more, True, False
        if not retry.words:
            return heard, whole, True, False
        if heard.words:
            retry_first = retry.words[0].word.start
            skipped = tuple(w for w in retry.words if w.word.end <= first + TIME_TOLERANCE_S)
            if skipped and self.speech.seconds(covered, min(retry_first, planned.end - DEAF_EDGE_S)) >= unheard:
                skipped = ()
            # Alone, the speech after the round's last word may be heard: what the hearing alone
            # writes after the round's words, beyond a re-hearing of them (see :func:`new_words`).
            last = heard.words[-1].word
            beyond = tuple(new_words(retry.words, heard.words, last.end, self.buffer.sound_after_pause)) if lone else ()
            if not skipped and not beyond:
                return heard, whole, True, False
            retry = replace(retry, words=(*skipped, *heard.words, *beyond))
        log.debug("round heard %s; alone, the audio after %.2f s gives %r", "nothing" if not heard.words else
                  f"{first:.2f}-{heard.words[-1].word.end:.2f} s only", start, "".join(w.word.word for w in retry.words))
        return retry, whole, True, not heard.words

    def _heard_through(self) -> float:
        """Where the audio the committed words were heard in ends: the latest audio position the
        last committed word's tokens attended to. DTW may end a word before the speech it
        stands for: Whisper writes "sixty seven cents" as ".67.", whose end DTW puts before
        "cents", though its tokens were read off it. Heard alone, that speech becomes words
        of its own ("in sense"). The commit policies commit only words whose tokens attended to
        audio well before the end of what their round heard, so this never reaches audio that no
        round heard in full."""
        return self._committed[-1].heard_at if self._committed else 0.0

    def _hear_alone(self, end: float, pad: bool, through: float | None = None) -> Heard | None:
        """The audio from the last committed word to ``end`` decoded with no prompt or draft
        (a retry: with ``RETRY_LEAD_S`` of the committed speech before it; ``pad``, the final
        hearing: padded to 30 s, from ``FINAL_LEAD_S`` before it); None if there is too little
        of it. Where the voice activity model hears as much
        speech in it as a short word said alone holds (``LONE_SPEECH_S``), Whisper's own unsure
        no-speech guess does not silence it: a hearing alone is how a stream's last command, or
        its last word ("Done."), is not lost. Words it puts
        in the audio the last committed word was heard in (see ``_heard_through``) are that
        word's speech written again, not new, and so is a first word after them that writes the
        last committed word again over its own audio (see :func:`drop_clipped_repeat`);
        ``through``: where that audio ends, if not where ``_heard_through`` says."""
        lead = FINAL_LEAD_S if pad else RETRY_LEAD_S
        first = round(max(self._committed_end - lead - self.buffer.offset, 0.0) * SAMPLE_RATE)
        last = round((end - self.buffer.offset) * SAMPLE_RATE)
        samples = self.buffer.samples[first:last]
        if samples.size < 0.1 * SAMPLE_RATE:
            return None
        start = self.buffer.offset + first / SAMPLE_RATE
        inp = RoundInput(samples, start, (), speech=self.speech.seconds(start, end) >= LONE_SPEECH_S,
                         onsets=self._onsets(start, end))
        heard = self._decode(self._encode(inp, pad), ())
        words = list(heard.words)
        through = self._heard_through() if through is None else through
        k = next((i for i, w in enumerate(words) if mostly_after(w, through)), len(words))
        if k:
            log.debug("dropped %r: heard as part of the last committed word", "".join(w.word.word for w in words[:k]))
            self._drop("last-word-again", words[:k], pad)
        kept = drop_clipped_repeat(words[k:], self._committed[-2:], sound=self.buffer.sound_after_pause)
        self._drop("clipped-repeat", words[k : len(words) - len(kept)], pad)
        return replace(heard, words=tuple(kept))

    def _speech_after_committed(self) -> float:
        """Seconds of speech in the stretches of it that start after the last committed word."""
        return sum(b - a for a, b in self._speech_runs() if a >= self._committed_end)

    def _final_round(self, again: bool = False) -> tuple[list[TimedWord], dict[str, float]]:
        """The stream's final hearing (see ``finish``); ``again``: a hearing of the speech after
        the words the last one committed."""
        forced = self._cap()
        start = max(self._committed_end, self.buffer.offset)
        last_sound = self.buffer.last_sound(start, self.buffer.end)
        # The last round heard all the audio in context: with nothing left unconfirmed, only
        # speech it was deaf to (as much as makes a round deaf, or a word said alone after a
        # pause, which the end of a round's audio leaves out: see DEAF_EDGE_S) is decoded again.
        # Padded silence after the last word is where Whisper writes "Thank you." or "Hello.".
        if not self._tail and (last_sound is None or (self.speech.seconds(start, self.buffer.end) < DEAF_SPEECH_S
                                                      and self._speech_after_committed() < LONE_SPEECH_S)):
            return forced, {}
        t0 = time.perf_counter()
        end = self.buffer.end if last_sound is None else min(self.buffer.end, last_sound + FINAL_SILENCE_S)
        # Heard again, the speech after a pause is not the last committed word's, wherever its
        # tokens attended: the last hearing read "Okay." off "Okay. ... Thanks." and stopped.
        heard = self._hear_alone(end, pad=True, through=self._committed_end if again else None)
        # Word times at a buffer's end run early, so the audio after the last committed word
        # may still hold it: what re-transcribes committed words is not new.
        words = [] if heard is None else self._fresh(list(heard.words), self._in_buffer, heard.end, final=True)
        log.debug("final hearing: %r %s; the last round left %r %s unconfirmed", "".join(w.word.word for w in words),
                  [round(w.word.probability, 2) for w in words],
                  "".join(w.word.word for w in self._tail), [round(w.word.probability, 2) for w in self._tail])
        # Where the final hearing heard nothing, the last round's words stand, unless, heard in
        # context, they write the prompt again (see :func:`final_words`).
        if self._tail and heard is not None and (heard.words or not self._tail_alone):
            words = final_words(words, self._tail, lambda t: self.buffer.sound_seconds(start, t),
                                self._committed[-CONTEXT_WORDS:], self._tail_alone,
                                self._speech_runs(), self.buffer.sound_after_pause)
        elif self._tail:
            words = self._tail
        chosen = {id(w) for w in words}
        self._drop("final-choice", [w for w in (*self._tail, *([] if heard is None else heard.words))
                                    if id(w) not in chosen and w.word.end > self._committed_end], True)
        # What the last round left unconfirmed may echo what it committed ("Enter. Enter.").
        committed = forced + self._record(self._unechoed(list(words), end))
        self._tail, self._tail_alone = [], False
        stats = dict(heard.stats) if heard is not None else {}
        stats.update({"final": 1.0, "committed": float(len(committed)),
                      "round_ms": 1000 * (time.perf_counter() - t0)})
        return committed, stats

    # --- where stages run ---------------------------------------------------------------------------
    def _encode(self, inp: RoundInput, pad: bool = False) -> Encoded:
        if self.pipeline is None:
            return self.round.encode(inp, pad)
        return self.pipeline.encode(lambda: self.round.encode(inp, pad))

    def _decode(self, encoded: Encoded, draft: tuple[int, ...], hold: int = 0, min_tokens: int = 0,
                new_s: float | None = None) -> Heard:
        if self.pipeline is None:
            return self._heard(self.round.decode(encoded, draft, hold, min_tokens, new_s))
        return self._heard(self.pipeline.decode(lambda: self.round.decode(encoded, draft, hold, min_tokens, new_s)))

    def _heard(self, heard: Heard) -> Heard:
        """``heard``, its set-aside words accounted for."""
        self._drops += heard.dropped
        return heard

    # --- the buffer ------------------------------------------------------------------------------
    def _cut(self) -> None:
        """Cut the buffer where the words before the cut are final: at the latest committed
        sentence end that leaves ``context_s`` of committed speech in the buffer, or, once the
        buffer is longer than ``buffer_trim_s``, at the latest such word boundary. In silence
        (from ``PAUSE_CONTEXT_S`` after the committed words), keep only the last second before
        the next sound (sound a round heard with a second of silence after it is not the next
        sound)."""
        o = self.options
        inside = self._committed[self._in_buffer :]
        keep_from = self._committed_end - o.context_s
        boundaries = [j for j in range(1, len(inside) + 1) if inside[j - 1].word.end <= keep_from + 1e-6]
        sentences = [j for j in boundaries if inside[j - 1].word.word.rstrip().endswith(SENTENCE_END)]
        j = max(sentences, default=None)
        if j is None and self.buffer.duration > o.trim_s:
            j = max(boundaries, default=None)
        cut, first_kept = None, self._in_buffer
        if j is not None:
            before = inside[j - 1].word
            after = inside[j].word.start if j < len(inside) else (self._tail[0].word.start if self._tail
                                                                   else self.buffer.end)
            lo = max(before.start + 0.5 * (before.end - before.start), before.end - SNAP_S)
            hi = max(lo, min(after + SNAP_S, self.buffer.end))
            cut, first_kept = self.buffer.quietest(lo, hi), self._in_buffer + j
        if not self._tail:
            quiet_to = self.buffer.end - SILENCE_KEEP_S
            # Sound after the committed words that a round heard, with a second of silence after
            # it, and found no word in (the rest of the last committed word, whose time runs
            # early; a breath) is not kept: with it, the buffer would keep all the silence after
            # it too, and the round that hears the next words would hear them after seconds of
            # silence, where Whisper misses them, and that sound heard again alone as a word.
            since = max(self._committed_end, self.buffer.offset)
            # ... unless it is speech said after a pause, after the committed words: no word
            # covers it, and it stays until a round hears it ("Down." written as "Hello?" again,
            # and held back as a copy over silence).
            if self._heard_in_silence(since) and not self._unheard_after(since):
                since = max(since, self._heard_end - IDLE_SILENCE_S)
            onset = self.buffer.first_sound(since, quiet_to + ONSET_LEAD_S)
            if onset is not None:
                quiet_to = onset - ONSET_LEAD_S
            if quiet_to > max(self._committed_end + min(o.context_s, PAUSE_CONTEXT_S), cut or self.buffer.offset):
                cut, first_kept = quiet_to, len(self._committed)
        if cut is not None and cut > self.buffer.offset + 0.01:
            self._trim(cut)
            self._in_buffer = first_kept
            self._prune()
            self._heap.maybe()

    def _unheard_after(self, since: float) -> bool:
        """Whether a stretch of speech of at least ``LONE_SPEECH_S`` starts after absolute time
        ``since`` (past ``TIME_TOLERANCE_S``) in the audio the rounds heard."""
        return any(a > since + TIME_TOLERANCE_S and b - a >= LONE_SPEECH_S
                   for a, b in self.speech.runs(since, self._heard_end))

    def _cap(self) -> list[TimedWord]:
        """Keep the buffer within ``max_buffer_s``; words of the dropped audio that no round
        confirmed are committed as last heard, never dropped."""
        o = self.options
        # A round planned ahead already holds its audio; otherwise make room for the intake.
        incoming = 0.0 if self._ahead is not None else self._pending_audio_for_round()
        if self.buffer.duration + incoming <= o.max_buffer_s:
            return []
        cut = self.buffer.end + incoming - o.max_buffer_s
        n = next((i for i, w in enumerate(self._tail) if w.word.start >= cut), len(self._tail))
        forced = self._record(self._tail[:n])
        self._tail = self._tail[n:]
        self._trim(cut)
        self._in_buffer = next((i for i in range(self._in_buffer, len(self._committed))
                                if self._committed[i].word.start >= cut - 1e-6), len(self._committed))
        log.debug("buffer over %.0f s: %d unconfirmed words committed as heard, audio before %.2f s dropped",
                  o.max_buffer_s, len(forced), cut)
        return forced

    def _trim(self, cut: float) -> None:
        """Drop the buffer's audio before absolute time ``cut``, and its speech flags with it."""
        self.buffer.trim_to(cut)
        self.speech.forget(self.buffer.offset)

    def _pending_audio_for_round(self) -> float:
        return min(self.intake.pending, round(self._intake_limit_s() * SAMPLE_RATE)) / SAMPLE_RATE

    # --- committed words ---------------------------------------------------------------------------
    def _prompt(self) -> tuple[int, ...]:
        return prompt_tokens(self._committed[: self._in_buffer], self.options.prompt_limit)

    def _onsets(self, lo: float, hi: float) -> tuple[float, ...]:
        """Where stretches of speech start between absolute times ``lo`` and ``hi`` (one that
        runs on from before ``lo`` left out)."""
        return tuple(a for a, _ in self.speech.runs(lo, hi) if a > lo + 1e-6)

    def _speech_runs(self) -> list[tuple[float, float]]:
        """The stretches of speech in the buffer (absolute (start, end), in order)."""
        return self.speech.runs(self.buffer.offset, self.buffer.end)

    def _record(self, words: Sequence[HeardWord]) -> list[TimedWord]:
        """Commit ``words``, each laid over the speech under it (see :func:`on_speech`)."""
        out: list[TimedWord] = []
        for w in on_speech(words, self._speech_runs()):
            start = max(w.word.start, self._committed_end)
            end = max(w.word.end, start)
            if (start, end) != (w.word.start, w.word.end):
                w = replace(w, word=replace(w.word, start=start, end=end))
            self._committed.append(w)
            self._text.append(w.word.word)
            self._committed_end = end
            out.append(w.word)
        return out

    def _prune(self) -> None:
        drop = max(0, self._in_buffer - MAX_PROMPT_WORDS)
        if drop:
            del self._committed[:drop]
            self._in_buffer -= drop
            self._dropped += drop


def prompt_tokens(before: Sequence[HeardWord], max_chars: int) -> tuple[int, ...]:
    """The prompt of a round: tokens of the last whole words of ``before`` (the committed words
    before its buffer) that fit in ``max_chars`` characters of text."""
    n = fitting_count((len(before[i].word.word) for i in range(len(before) - 1, -1, -1)), max_chars)
    return tuple(t for w in before[len(before) - n :] for t in w.tokens)


def new_words(words: Sequence[HeardWord], committed: Sequence[HeardWord], committed_end: float,
              sound: Sound | None = None, runs: Sequence[tuple[float, float]] = (),
              pending: Sequence[HeardWord] = ()) -> list[HeardWord]:
    """The words of a hypothesis after those that re-transcribe ``committed`` (the committed
    words its audio may hold, the last ending at ``committed_end``): by text where the two
    clearly line up (two words or more, or the last committed word heard again before the
    committed end), else by time. One word alike elsewhere is no proof: a stream's first word
    said again after a pause ("Again. ... Again.") matched the one word committed, and no later
    saying of it was ever new; by time, a first word that repeats the last
    committed one is new only over sound of its own (see :func:`drop_clipped_repeat`).

    By time, each word is placed as it would be committed, over the speech ``runs`` under it
    (see :func:`on_speech`), as the committed words were: a later round that heard the last
    committed word differently ("Play some charts." over the committed "Play some shots.")
    stretches it over the pause after it, where it lay mostly after the committed end and was
    committed again, and the word after it a third time ("shots. charts. jazz").

    DTW starts a hypothesis at its buffer's start: where the decoder skipped the committed words
    still in the buffer, it lays its first word over them ("Down." over the committed "Hello.").
    A first word that is the first word left unconfirmed (``pending``) and none of the committed
    words is that word, and new, wherever it lies."""
    if committed and words:
        # Compared as said (see :func:`spoken_keys`): "$42" re-transcribes "42 dollars". Of a
        # word the alignment ends inside ("$42.50." after the committed "42 dollars and 50"),
        # the rest is new, as said ("cents."): no later round writes it apart ...
        score, cut, inside, keys = said_alignment([w.word.word for w in committed[-CONTEXT_WORDS:]],
                                                  [w.word.word for w in words])
        last = committed[-1].word
        last_key = said_last(committed)
        heard_last = cut > 0 and not inside and keys[cut - 1][-1] == last_key
        # One word alike is proof where it is the last committed word, heard again before the
        # committed end: that saying, and what follows it is new wherever DTW puts it ("Um, I"
        # committed, then "I mean, let's just go." with "I" laid over "Um" and "mean," mostly
        # before the committed end).
        if score >= 2 or (score == 1 and heard_last and not mostly_after(words[cut - 1], committed_end)):
            if inside:
                # ... where there is speech for it: a round that writes the committed "947" as
                # "$947." adds no "dollars" to what was said.
                end = words[cut].word.end
                said = sum(b - a for a, b in runs_within(runs, last.end, end)) if runs else end - last.end
                rest = [rest_of(words[cut], keys[cut][inside:], last.end)] if said >= WORD_SOUND_S else []
                return [*rest, *words[cut + 1 :]]
            # Ties leave revised last words ("maus trap" heard again as "mouth strap") over as
            # new: they are not, when they start within the committed words. A word after the
            # last committed word heard again as it was is new, wherever DTW puts it.
            if heard_last and words[cut - 1].word.end < last.end - MISPLACED_S:
                # Matched to an earlier saying of the last word ("six of hearts" after "queen of
                # hearts"): the hypothesis re-transcribes up to a later one heard where it was.
                sayings = [q for q in range(cut + 1, len(words) + 1)
                           if keys[q - 1][-1] == last_key
                           and abs(words[q - 1].word.end - last.end) <= MISPLACED_S]
                cut = min(sayings, key=lambda q: abs(words[q - 1].word.end - last.end), default=cut)
            while not heard_last and cut < len(words) and words[cut].word.start < last.end - TIME_TOLERANCE_S:
                cut += 1
            return list(words[cut:])
    # By time: a word is new when most of it lies after the committed words, and it does not
    # start deep inside them: that is a committed word whose end DTW stretched over
    # audio the decoder did not hear ("day." over 71.6-77.8 s, after it stopped at "in a day.").
    if words and pending and first_pending(words[0], pending[0], committed[-CONTEXT_WORDS:]):
        # laid over the first speech after the committed words, and no further than the next word
        first = words[0].word
        run = next(((a, b) for a, b in runs if a >= committed_end - TIME_TOLERANCE_S), None)
        if first.start < committed_end and run is not None:
            end = min(run[1], words[1].word.start) if len(words) > 1 else run[1]
            first = replace(first, start=run[0], end=max(run[0], end))
        return drop_clipped_repeat([replace(words[0], word=first), *words[1:]], committed[-2:], sound=sound)
    placed = on_speech(words, runs) if runs else words
    fresh = [w for w, p in zip(words, placed, strict=True)
             if mostly_after(p, committed_end) and w.word.start >= committed_end - MISPLACED_S]
    return drop_clipped_repeat(fresh, committed[-2:], sound=sound)


def first_pending(word: HeardWord, pending: HeardWord, committed: Sequence[HeardWord]) -> bool:
    """Whether ``word`` is said as ``pending`` is and as none of ``committed`` is."""
    keys = spoken_keys([word.word.word])
    return keys == spoken_keys([pending.word.word]) and all(keys != spoken_keys([c.word.word]) for c in committed)


def said_last(committed: Sequence[HeardWord]) -> str:
    """The last key of the committed words as said (see :func:`spoken_keys`), the word before
    the last one read with it: "cents" after "$42" ".50."."""
    return spoken_keys([w.word.word for w in committed[-2:]])[-1][-1]


def rest_of(word: HeardWord, said: Sequence[str], after: float) -> HeardWord:
    """The part ``said`` (word keys) of ``word``, from ``after`` on: the words it is said in
    ("cents." of "$42.50."), with its end punctuation and no tokens of its own."""
    text = word.word.word.rstrip()
    mark = text[len(text.rstrip(".,!?;:")) :]
    start = min(max(word.word.start, after), word.word.end)
    return replace(word, word=replace(word.word, word=" " + " ".join(said) + mark, start=start), tokens=())


def on_speech(words: Sequence[HeardWord], runs: Sequence[tuple[float, float]]) -> list[HeardWord]:
    """``words`` each laid over the speech under it: DTW stretches a word said alone over the
    silence around it, and the speech ``runs`` (absolute (start, end) stretches, by a voice
    activity model) say where it was said. A word that starts (or ends) more than
    ``WORD_EDGE_S`` before (or after) the speech under it is cut to that much of silence.
    Rounds that heard "Five. ... Nine." with seconds of silence around them laid "5" over
    2.0-5.6 s (said at 3.1-3.6 s) and "9" over 3.7-7.5 s (said at 6.1-6.5 s): behind the
    committed "5", "9" started too deep inside the committed words to be new. A word over no
    speech at all stays where it is."""
    out = []
    for w in words:
        under = [(a, b) for a, b in runs if a < w.word.end and b > w.word.start]
        if not under:
            out.append(w)
            continue
        start = under[0][0] - WORD_EDGE_S if under[0][0] - w.word.start > WORD_EDGE_S + 1e-6 else w.word.start
        end = under[-1][1] + WORD_EDGE_S if w.word.end - under[-1][1] > WORD_EDGE_S + 1e-6 else w.word.end
        out.append(w if (start, end) == (w.word.start, w.word.end) else
                   replace(w, word=replace(w.word, start=start, end=end)))
    return out


def where_spoken(words: Sequence[HeardWord], speech: Callable[[float, float], float], end: float,
                 quiet_s: float) -> list[HeardWord]:
    """``words`` (heard in audio that ends at ``end``), each heard where its spoken tokens were
    when the punctuation after them was read off silence (no ``speech`` within
    ``SILENT_READ_S`` of it, or past the end of the audio) and the audio ends in ``quiet_s`` of
    silence. A sentence's closing punctuation attends to the silence after it, near the end of
    what a round heard, however much of it there is: read as where the word was heard, it held
    "hair." back until 1.2-2 s of audio after it, 0.4 s being the margin. Punctuation read off
    speech, or with speech near the end of the audio, still counts: Whisper writes "sixty
    seven cents" as "$17.67.", whose period waits for "cents" after the pause before it."""
    if speech(end - quiet_s, end):
        return list(words)
    return [replace(w, heard_at=w.spoken_at)
            if w.spoken_at is not None and not speech(w.heard_at - SILENT_READ_S, w.heard_at + SILENT_READ_S)
            else w for w in words]


def mostly_after(word: HeardWord, time: float) -> bool:
    """Whether most of ``word`` lies after absolute ``time`` (within ``TIME_TOLERANCE_S``): DTW
    squeezes the times of words at the end of a buffer, so a start alone may fall a little early."""
    return (word.word.start + word.word.end) / 2 >= time - TIME_TOLERANCE_S


def spoken_length(words: Sequence[HeardWord], speech: Callable[[float, float], float], end: float) -> int:
    """How many of ``words`` (heard in audio that ends at ``end``) to keep: all but the last
    ones that no speech lies near (``speech``: seconds of speech between two times, by a voice
    activity model). Over hiss, hum or music after speech, Whisper writes "you." or the prompt's
    words again ("And so my"), and two rounds agree on them. A word before a spoken one stays,
    wherever DTW put it: after a long pause, "The" of "The most" may be placed seconds before
    its speech."""
    n = len(words)
    while n and not speech(words[n - 1].word.start - UNSPOKEN_S, min(end, words[n - 1].word.end + UNSPOKEN_S)):
        n -= 1
    return n


def stretched_at(words: Sequence[HeardWord], speech: Callable[[float, float], float]) -> int:
    """Index of the first of ``words`` whose span holds more than ``MAX_WORD_SPEECH_S`` of speech
    (``speech``: seconds of speech between two times, by a voice activity model); ``len(words)``
    if none. Whisper sometimes writes the first word of a sentence it cannot make out and stops,
    and DTW lays that word over the whole sentence ("The" over 2.9 s of "Turn the volume down to
    nine"): committed, its end would put the sentence behind the committed words, lost. Words
    from it on wait for a round that hears them. A number in digits may span more speech (see
    :func:`speech_allowance`)."""
    return next((i for i, w in enumerate(words) if speech(w.word.start, w.word.end) > speech_allowance(w.word.word)),
                len(words))


def instant_in_silence_at(words: Sequence[HeardWord], speech: Callable[[float, float], float]) -> int:
    """Index of the first of ``words`` that DTW lays over less than ``INSTANT_S`` of audio with
    no speech (``speech``: seconds of it between two times, by a voice activity model) within
    ``WORD_EDGE_S`` of it; ``len(words)`` if none. Prompted with a list ("Red, green, blue"),
    the decoder may go on with it where the audio holds none ("Yellow, blue," after "Yellow."
    said, the "blue," at 20 ms of the silence after it), and the next round agrees. A word said
    has audio and speech of its own. Words from it on are not committed before a round hears
    them."""
    return next((i for i, w in enumerate(words) if w.word.end - w.word.start < INSTANT_S
                 and not speech(w.word.start - WORD_EDGE_S, w.word.end + WORD_EDGE_S)), len(words))


def silent_copy_at(words: Sequence[HeardWord], speech: Callable[[float, float], float]) -> int:
    """Index of the first of ``words`` that repeats the word before it (numbers spelled or in
    digits alike) over less than ``COPY_SPEECH_S`` of speech (``speech``: seconds of speech
    between two times, by a voice activity model); ``len(words)`` if none. A word said again
    after a pause ("Again. ... Again.") is written as a loop of copies, one more than was said,
    and DTW gives each copy audio of its own, the extra one the silence beside a saying:
    committed, it is a word never said. Words from it on wait for a round that hears them. A
    word said twice ("very very") has speech under each saying."""
    keys = said_keys(words)
    return next((i for i in range(1, len(words))
                 if keys[i] == keys[i - 1] and speech(words[i].word.start, words[i].word.end) < COPY_SPEECH_S),
                len(words))


def without_silent_copies(words: Sequence[HeardWord], speech: Callable[[float, float], float]) -> list[HeardWord]:
    """``words`` of a stream's final hearing without each copy of the word before it laid over
    silence (see :func:`silent_copy_at`). A round holds such a copy back for the next round to
    hear again; the final hearing has no next: "... Snooze. Stop." was heard as "stop. stop.",
    the second at an instant after the one saying."""
    kept = list(words)
    while (k := silent_copy_at(kept, speech)) < len(kept):
        log.debug("dropped %r: repeats the word before it over silence", kept[k].word.word)
        del kept[k]
    return kept


def without_silent_runs(words: Sequence[HeardWord], speech: Callable[[float, float], float]) -> list[HeardWord]:
    """``words`` of a stream's final hearing without every run of words written at one instant
    (see :func:`~stenoflow.streaming.live_round.unheard_run`) with no speech (``speech``: seconds
    of it between two times, by a voice activity model) within ``SILENT_READ_S`` of that
    instant. A round leaves such runs at the end of its audio to the next, since speech heard
    in part is squeezed there; the final hearing has no next, and its audio ends in the
    silence after the last word, where tiny.en wrote "Power. Enter. Power. Power." after the
    "Enter." said. Over speech the stream ended in, a run stays: those words were said. There,
    too, a last word at an instant over silence goes, one word being run enough after the last
    sound: tiny.en heard "That's all." alone as "All right.", the "right." 0.27 s past the speech."""
    kept = list(words)

    def silent(at: float) -> bool:
        return not speech(at - SILENT_READ_S, at + SILENT_READ_S)

    while (run := unheard_run(kept, silent)) is not None:
        log.debug("dropped %r: written at one instant over silence", "".join(w.word.word for w in kept[run[0]:run[1]]))
        kept = kept[: run[0]] + kept[run[1] :]
    while kept and kept[-1].word.start == kept[-1].word.end and silent(kept[-1].word.end):
        log.debug("dropped %r: the last word, written at an instant over silence", kept[-1].word.word)
        kept.pop()
    return kept


def speech_allowance(word: str) -> float:
    """The most speech one written word may span: ``MAX_WORD_SPEECH_S``, and ``DIGIT_SPEECH_S``
    more for each digit of a number, which is said in several words ("1984", "$17.67")."""
    return MAX_WORD_SPEECH_S + DIGIT_SPEECH_S * sum(ch.isdigit() for ch in word)


def said_keys(words: Sequence[HeardWord]) -> list[str]:
    """The words' comparison keys, a number spelled or in digits alike ("seven", "7.")."""
    return [same_number(word_key(w.word.word)) for w in words]


def echo_length(words: Sequence[HeardWord], committed: Sequence[HeardWord]) -> int:
    """How many words at the start of ``words`` repeat the last committed words (numbers spelled
    or in digits alike): the longest verbatim repeat of two or more; one when ``words`` are
    nothing but the last committed word again (the decoder looping on it: "Seven. 7. 7."); else
    0. A single word said twice before others ("That that is") is speech too often to drop."""
    keys = said_keys(words)
    ends = said_keys(committed[-len(keys):]) if keys else []
    for k in range(min(len(keys), len(ends)), 1, -1):
        if keys[:k] == ends[len(ends) - k:]:
            return k
    return 1 if ends and all(key == ends[-1] for key in keys) else 0


def restart_length(words: Sequence[HeardWord], committed: Sequence[HeardWord]) -> int:
    """``len(words)`` when ``words`` are nothing but the start of the last committed sentence
    again (the decoder starting it over: "Open" after "Open the front door."), else 0."""
    keys = said_keys(words)
    start = next((i for i in range(len(committed) - 1, 0, -1)
                  if committed[i - 1].word.word.rstrip().endswith(SENTENCE_END)), 0)
    sentence = said_keys(committed[start:])
    return len(keys) if keys and len(keys) < len(sentence) and sentence[: len(keys)] == keys else 0


def final_words(heard: list[HeardWord], tail: list[HeardWord], sound_to: Callable[[float], float],
                committed: Sequence[HeardWord] = (), tail_alone: bool = False,
                runs: Sequence[tuple[float, float]] = (), after_pause: Sound | None = None) -> list[HeardWord]:
    """What a stream's final hearing ``heard`` commits in place of ``tail``, the words the last
    round, in context, left unconfirmed.

    Alone, a second of audio can make Whisper write anything ("country" as "I'm afraid."): a
    final hearing that shares no word with ``tail`` does not replace it, unless ``tail`` writes
    ``committed`` words again (see :func:`repeats_committed`: "The Queen of Hearts" over
    "Done.", whether the final hearing heard it or nothing, or words it was unsure of over less
    than ``ECHO_SOUND_S`` of sound), or unless it writes more words than ``tail`` and a word of
    ``tail`` lies over a pause between two stretches of speech (see :func:`over_pause`; ``runs``:
    the speech): no word is said across a pause, and the last round wrote one word where two
    things were said ("meters", a word of its prompt, over "Down. ... Enter."); or unless
    ``tail`` has more words than the sound after the committed words could hold and the final
    hearing does not (see :func:`fits_sound`): prompted with a recipe, the last round wrote
    "Add 1 cup of sugar." over the 0.3 s of "Done.", the final hearing "Done.". The words it puts
    after the last of ``tail`` over sound there follow it; with ``after_pause`` (seconds of sound
    after a pause between two times), only sound after a pause counts: quiet, "Never mind." was heard
    alone as "Reminds me." laid over the rest of "mind", whose time ran early. Where the last
    round heard no word before one the final hearing heard too, the final hearing's words before
    it are the end of the last committed word heard alone ("forward ... were 10 meters"; "listening"
    ... "the ring. Good."), unless there is sound for them, or before the last round's first word,
    after a pause (the last round laid "Hello?" early, deaf to "Is anyone there?" said after
    eight seconds of silence). One that shares a word is taken, without the words it puts
    after the last of ``tail`` over less sound than a word ("that load." over "that?"), and
    with its start as the last round heard it: heard alone from the end of the last committed
    word, whose time runs early, the rest of that word becomes a word of its own ("forward" ...
    "were 10 meters") or merges into the next one ("for" and "25" as "425"). Where both put
    words of their own before the first word both heard alike, the last round's stand; where
    only the final hearing does, they stand if ``sound_to`` (seconds of sound from the committed
    end to a time) finds a word's worth before the last round's first word: the last round, in
    context, may have been deaf to them. Where only the last round does, they stand if there is
    sound for them: alone, Whisper may have been deaf to them; so do the last round's words
    after the final hearing's last word (see :func:`heard_past`).

    Where ``tail`` writes committed words again after words of its own that the last round
    was sure of on the whole, only those are the tail ("go straight." then the prompt again,
    at an instant past the speech).

    All this holds for a last round that heard ``tail`` in context. Where ``tail_alone``, a deaf
    round's retry heard it alone, in a short window: the final hearing, of the same audio alone
    but through to its last sound and padded as Whisper was trained, replaces it ("of the Father
    of the Father of" written over "... down to nine" by a retry, "high." by the final hearing),
    except the words before its first one that the retry was sure of and heard over sound."""
    keys = [word_key(w.word.word) for w in tail]
    if tail_alone:
        # Both heard the audio alone: of the words the final hearing laid its first one over,
        # those the retry was sure of stand.
        kept = [w for w in tail[: laid_over(heard, keys, tail, sound_to)] if w.word.probability >= SURE_ALONE_P]
        log.debug("final hearing %r in place of %r, heard alone by a retry%s", "".join(w.word.word for w in heard),
                  "".join(w.word.word for w in tail), f"; kept {''.join(w.word.word for w in kept)!r}" if kept else "")
        return [*kept, *heard]
    r = committed_run_at(tail, committed)
    if 0 < r < len(tail) and sum(w.word.probability for w in tail[:r]) >= r * SURE_ALONE_P:
        # In context, the last round heard words, then wrote the prompt again: those words are
        # the tail ("go straight." then "Turn left at the next light. then go straight." at
        # the audio's end, over "Then go straight." with "Then" committed), where it was sure
        # of them; else they are the start of the copy ("Add 1 cup of flour. Stir." after "Add
        # two cups of flour. Stir.", unsure of "Add 1 cup").
        log.debug("set aside %r: writes committed words again", "".join(w.word.word for w in tail[r:]))
        return final_words(heard, tail[:r], sound_to, committed, tail_alone, runs, after_pause)
    heard_keys = [word_key(w.word.word) for w in heard]
    i = next((k for k, key in enumerate(heard_keys) if key in keys), None)
    if i is None:
        if r < len(tail):
            # ... and so may its final hearing, of the end of the last committed word alone:
            # words it was unsure of, over less sound than a word, were not said ("I'm sorry."
            # over the last 0.5 s of "... orange. ... White.").
            unsure = all(w.word.probability < SURE_ALONE_P for w in heard)
            said = [] if heard and unsure and sound_to(heard[-1].word.end) < ECHO_SOUND_S else heard
            log.debug("final hearing %r in place of %r, which writes committed words again",
                      "".join(w.word.word for w in said), "".join(w.word.word for w in tail))
            return said
        if len(heard) > len(tail) and any(over_pause(w, runs) for w in tail):
            log.debug("final hearing %r in place of %r, which lies one word over a pause",
                      "".join(w.word.word for w in heard), "".join(w.word.word for w in tail))
            return heard
        sound = sound_to(max(w.word.end for w in (*tail, *heard)) + WORD_EDGE_S)
        if heard and not fits_sound(tail, sound) and fits_sound(heard, sound):
            log.debug("final hearing %r in place of %r, more words than %.2f s of sound holds",
                      "".join(w.word.word for w in heard), "".join(w.word.word for w in tail), sound)
            return heard
        # The last round stands; what the final hearing heard after its last word, over sound
        # there, the last round had not heard yet. Sound still under way at that word's end,
        # which runs early, is the rest of it (``after_pause``).
        k, fresh = past_tail(heard, 0, tail, sound_to, after_pause)
        if not fresh:
            return tail
        log.debug("kept %r, then %r heard alone after it", "".join(w.word.word for w in tail),
                  "".join(w.word.word for w in heard[k:]))
        return [*tail, *heard[k:]]
    j = keys.index(heard_keys[i])
    # So, where the two share a word, are the words the final hearing writes after the last
    # round's last word: over "that?", heard alone as "that load.", "load." had 0.1 s of sound.
    again = [q for q, key in enumerate(heard_keys) if key == keys[-1]]  # the last round's last word
    k, fresh = past_tail(heard, max([i, *again]) + 1, tail, sound_to)
    if k < len(heard) and not fresh:
        log.debug("dropped %r: heard alone after %r, over too little sound", "".join(w.word.word for w in heard[k:]),
                  tail[-1].word.word)
        heard = heard[:k]
    words = heard
    if i and j and tail[j - 1].word.start <= heard[i].word.start:
        log.debug("heard alone %r where the last round heard %r: kept the last round's",
                  "".join(w.word.word for w in heard[:i]), "".join(w.word.word for w in tail[:j]))
        words = [*tail[:j], *heard[i:]]
    elif not i and laid_over(heard, keys, tail, sound_to):  # the last round, in context, heard them over sound
        log.debug("kept %r: the last round heard it before %r, over sound the final hearing missed",
                  "".join(w.word.word for w in tail[:j]), heard[0].word.word)
        first = heard[0].word
        start = min(max(first.start, tail[j].word.start), first.end)
        words = [*tail[:j], replace(heard[0], word=replace(first, start=start)), *heard[1:]]
    elif i and not j and (sound_to(tail[0].word.start) if after_pause is None or not committed else after_pause(
            committed[-1].word.end, max(tail[0].word.start, heard[i - 1].word.end))) < ECHO_SOUND_S:
        log.debug("dropped %r: the end of the last committed word, heard alone",
                  "".join(w.word.word for w in heard[:i]))
        words = heard[i:]
    after = heard_past(heard, keys, tail, sound_to)
    if after:
        log.debug("kept %r: the last round heard it after %r, over sound the final hearing missed",
                  "".join(w.word.word for w in after), heard[-1].word.word)
    return [*words, *after]


def past_tail(heard: Sequence[HeardWord], first: int, tail: Sequence[HeardWord],
              sound_to: Callable[[float], float], after_pause: Sound | None = None) -> tuple[int, bool]:
    """Index of the first of the final hearing's words ``heard[first:]`` that lies mostly after
    ``tail``'s last word, the last round's (``len(heard)`` if none), and whether those words
    have ``ECHO_SOUND_S`` of sound between the end of that word and the end of ``heard``
    (``sound_to``, as in :func:`final_words`; with ``after_pause``, only sound after a pause
    counts). The last round heard the stream to its end, in context: alone, Whisper writes a
    word past it over the end of its last word, or its punctuation."""
    end = tail[-1].word.end
    k = next((k for k in range(first, len(heard)) if mostly_after(heard[k], end)), len(heard))
    if k == len(heard):
        return k, False
    last = heard[-1].word.end
    fresh = sound_to(last) - sound_to(end) if after_pause is None else after_pause(end, last)
    return k, fresh >= ECHO_SOUND_S


def fits_sound(words: Sequence[HeardWord], sound: float) -> bool:
    """Whether ``words`` could have been said in ``sound`` seconds of sound: each takes at least
    ``WORD_SOUND_S`` of it, faster than anyone speaks."""
    return len(words) * WORD_SOUND_S <= sound + 1e-9


def runs_within(runs: Sequence[tuple[float, float]], lo: float, hi: float) -> list[tuple[float, float]]:
    """The parts of the speech ``runs`` (absolute (start, end) stretches, in order) between ``lo``
    and ``hi`` that are not empty."""
    return [(max(a, lo), min(b, hi)) for a, b in runs if max(a, lo) < min(b, hi)]


def over_pause(word: HeardWord, runs: Sequence[tuple[float, float]]) -> bool:
    """Whether ``word`` lies over a pause: over ``COPY_SPEECH_S`` of speech or more on either
    side of at least ``WORD_PAUSE_S`` of silence (``runs``: absolute (start, end) stretches of
    speech, in order). DTW stretches a word said alone over the silence around it, not over the
    speech of another word beyond it."""
    under = runs_within(runs, word.word.start, word.word.end)
    return any(b1 - a1 >= COPY_SPEECH_S and b2 - a2 >= COPY_SPEECH_S and a2 - b1 >= WORD_PAUSE_S
               for i, (a1, b1) in enumerate(under) for a2, b2 in under[i + 1 :])


def laid_over(heard: Sequence[HeardWord], keys: Sequence[str], tail: Sequence[HeardWord],
              sound_to: Callable[[float], float]) -> int:
    """How many of ``tail``'s words (``keys``) the final hearing ``heard`` laid its first word
    over: alone, Whisper may miss a short word before the next one and lay that one over both
    ("Enter" over "Down. ... Enter."). 0 unless its first word is a later word of ``tail`` with
    sound for the words before it (``sound_to``, as in :func:`final_words`): ``WORD_SOUND_S``
    for each, up to ``ECHO_SOUND_S`` (tiny.en heard "it" of "Put it in my calendar." in
    context, over 0.16 s of sound, and alone "in my calendar.")."""
    first = word_key(heard[0].word.word) if heard else None
    j = keys.index(first) if first in keys else 0
    return j if j and sound_to(tail[j].word.start) >= min(ECHO_SOUND_S, j * WORD_SOUND_S) else 0


def heard_past(heard: Sequence[HeardWord], keys: Sequence[str], tail: Sequence[HeardWord],
               sound_to: Callable[[float], float]) -> list[HeardWord]:
    """The words of ``tail`` (``keys``) after the last word of the final hearing ``heard``, where
    ``tail`` holds that word and there is sound under them (``sound_to``, as in
    :func:`final_words`): alone, Whisper may lay its last word over the words after it too
    ("pause" over "Pause. ... Next."), as it lays its first word over those before it (see
    :func:`laid_over`). Empty otherwise."""
    last = word_key(heard[-1].word.word)
    k = next((k for k in range(len(keys) - 1, -1, -1) if keys[k] == last), len(keys))
    rest = list(tail[k + 1 :])
    return rest if rest and sound_to(rest[-1].word.end) - sound_to(rest[0].word.start) >= ECHO_SOUND_S else []


def repeats_committed(words: Sequence[HeardWord], committed: Sequence[HeardWord]) -> bool:
    """Whether ``words`` hold a run of ``PROMPT_COPY_WORDS`` words that ``committed`` holds too.
    Conditioned on its prompt, over speech it cannot make out, Whisper writes the prompt again
    ("Go forward 10 meters." over "Down. Enter."); unconditioned, it does not."""
    return committed_run_at(words, committed) < len(words)


def committed_run_at(words: Sequence[HeardWord], committed: Sequence[HeardWord]) -> int:
    """Index of the first of ``words`` that starts a run of ``PROMPT_COPY_WORDS`` words that
    ``committed`` holds too (see :func:`repeats_committed`); ``len(words)`` if none."""
    def runs(ws: Sequence[HeardWord]) -> list[tuple[str, ...]]:
        keys = said_keys(ws)
        return [tuple(keys[k : k + PROMPT_COPY_WORDS]) for k in range(len(keys) - PROMPT_COPY_WORDS + 1)]

    held = set(runs(committed))
    return next((k for k, run in enumerate(runs(words)) if run in held), len(words))


def copies_prompt(words: Sequence[HeardWord], tail: Sequence[HeardWord], committed: Sequence[HeardWord]) -> bool:
    """Whether a round's new ``words`` write ``committed`` words again (see
    :func:`repeats_committed`) in place of ``tail``, the words the last round left unconfirmed,
    sharing none of them. A speaker may say a phrase again, but its words then come after the
    unconfirmed ones, or as them."""
    return bool(tail) and not set(said_keys(words)) & set(said_keys(tail)) and repeats_committed(words, committed)


def drop_clipped_repeat(words: list[HeardWord], last: Sequence[HeardWord], window_s: float = 0.4,
                        sound: Sound | None = None) -> list[HeardWord]:
    """Without context, a decoding that starts right at the end of the last committed word
    may hear that word (or its ending: "$17.67" as "7") again: drop such a first word, unless
    ``sound`` (seconds of sound said after a pause, between two times) finds a word's worth of
    it from this word (or the committed end, if later) to the word after it: the speaker said it
    again ("Again. ... Again."; the last word of a hypothesis waits for one). So is a first
    word that lies mostly inside the last committed word and is a variant of it ("knock" heard
    again as "knack", "trap" as "strap", "eight" as "8"): the same audio written another way.
    ``last`` ends with the last committed word, and may hold words before it: the amount it is
    the cents of (".50." after "$42" ends in "cents", said; see :func:`spoken_keys`)."""
    if not words or not last:
        return words
    prev, first = same_number(word_key(last[-1].word.word)), same_number(word_key(words[0].word.word))
    said = same_number(said_last(last))
    w, last_end = words[0].word, last[-1].word.end
    if not first:
        return words
    repeats = first in (prev, said)
    if w.start < last_end + window_s and (repeats or ((len(first) >= 2 or is_number(first))
                                                      and prev.endswith(first))):
        until = words[1].word.start if len(words) > 1 else w.end
        if repeats and sound is not None and sound(max(last_end, w.start), until) >= ECHO_SOUND_S:
            return words
        return words[1:]
    if (w.start + w.end) / 2 < last_end and is_variant(prev, first):
        return words[1:]
    return words


_NUMBERS = {name: str(i) for i, name in enumerate((
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
    "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty"))}


def same_number(key: str) -> str:
    """A word key with a spelled number up to twenty in digits ("seven" and "7" alike)."""
    return _NUMBERS.get(key, key)


def is_number(key: str) -> bool:
    """Whether a word key holds a number written in digits ("457", "1767", "4x2s")."""
    return any(ch.isdigit() for ch in key)


def is_variant(a: str, b: str) -> bool:
    """Whether two word keys are one word written two ways: the same number (spelled or in
    digits), one a longer form of the other at its start ("trap", "strap"), or, for words of
    four letters or more, one letter apart ("knock", "knack"; "risk", "risks")."""
    if same_number(a) == same_number(b):
        return True
    short, long_ = sorted((a, b), key=len)
    if len(short) < 3 or len(long_) - len(short) > 1:
        return False
    if long_.endswith(short):
        return True
    return len(short) >= 4 and _one_edit(short, long_)


def _one_edit(short: str, long_: str) -> bool:
    """``long_`` is ``short`` with one letter changed (same length) or inserted."""
    if len(short) == len(long_):
        return sum(x != y for x, y in zip(short, long_, strict=True)) == 1
    i = next((k for k, (x, y) in enumerate(zip(short, long_, strict=False)) if x != y), len(short))
    return short[i:] == long_[i + 1:]
