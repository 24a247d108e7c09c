"""The live session: short buffers, rounds that cost what the new audio costs.

Whisper-Streaming re-transcribes a buffer of up to 30 s every round, token by token. Here the
buffer keeps only the audio of the words that are not final yet, plus ``context_s`` of committed
speech before them: as soon as words are committed the buffer is cut at a word boundary so that
just that much committed context stays, and the committed text before the cut is the prompt.
The words a round expects (the committed ones still in the buffer, then the previous round's
unconfirmed ones) are its draft, verified in one decoder pass, so a round spends passes only
where the words can still change (see :mod:`.live_round` for a round and :mod:`.commit` for the
commit policies). With ``settle_beam`` above 1, the first round to hear a pause after its words
decodes its buffer once more with beam search, as a whole recording is decoded, and that hearing
is final (``_settled``).

Nothing heard is lost (:mod:`.hearing` holds the hearings alone):

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
from stenoflow.streaming.buffer import ONSET_LEAD_S, SAMPLE_RATE, AudioBuffer
from stenoflow.streaming.commit import commit_policy
from stenoflow.streaming.events import SENTENCE_END, Dropped, StreamUpdate, TimedWord
from stenoflow.streaming.hearing import LONE_SPEECH_S, Rehearing
from stenoflow.streaming.intake import Intake
from stenoflow.streaming.language import LANGUAGE_WINDOW_S, LanguageTrack
from stenoflow.streaming.live_round import (
    Encoded,
    Heard,
    HeardWord,
    LiveRound,
    RoundInput,
)
from stenoflow.streaming.prompt import fitting_count
from stenoflow.streaming.rules import dropped
from stenoflow.streaming.speech import SpeechTrack
from stenoflow.streaming.word_rules import (
    CONTEXT_WORDS,
    TIME_TOLERANCE_S,
    copies_prompt,
    echo_at,
    instant_in_silence_at,
    new_words,
    on_speech,
    said_keys,
    silent_copy_at,
    spoken_length,
    stretched_at,
    unfinished_at,
    where_spoken,
    without_silent_copies,
    without_silent_runs,
)

if TYPE_CHECKING:
    from stenoflow.model.protocol import SpeechModel
    from stenoflow.streaming.options import StreamOptions
    from stenoflow.streaming.pipeline import Pipeline

log = logging.getLogger(__name__)

SNAP_S = 0.1  # a cut between two words moves to the quietest point this close to their boundary
SILENCE_KEEP_S = 1.0  # silence after the last committed word that the buffer keeps
IDLE_SILENCE_S = 1.0  # silence after the last speech a round heard before idle rounds are skipped
MAX_PROMPT_WORDS = 400  # committed words kept for prompts (older ones only live in the text)
FRESH_CONTEXT_WORDS = 4  # committed words a hypothesis start is always aligned with, in its audio or not
# Context a cut at a sentence end keeps before the new words: ``context_s`` of committed speech, and
# at least this many committed words (a pause longer than ``context_s`` still ends them, and a buffer
# over ``buffer_trim_s`` is cut keeping ``context_s`` alone). Three seconds hold
# a phrase of talk, but only a word or two of a list said a word at a time, each then heard almost
# alone ("gem" as "jam", "H." as "I. J." after "F. G.").
MIN_CONTEXT_WORDS = 4
SETTLE_S = 0.4  # silence after the speech under a round's new words that makes them final (see _settled)
FINAL_HEARINGS = 3  # most final hearings, each of the speech after the words the one before committed


class LiveSession(Rehearing):
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
        self.languages = LanguageTrack() if options.detects_language else None  # where the stream detects it

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
                          onsets=self._onsets(self.buffer.offset, self.buffer.end), language=self._language,
                          language_from=self._language_from())

    def _observe_language(self, encoded: Encoded, track: LanguageTrack) -> None:
        """Hand the round's language probabilities to the stream's language track."""
        inp = encoded.input
        if log.isEnabledFor(logging.DEBUG):
            top = sorted(encoded.language_probs.items(), key=lambda kv: -kv[1])[:3]
            log.debug("language %.2f-%.2f s: %s", inp.language_from or inp.offset, inp.end,
                      " ".join(f"{k} {v:.2f}" for k, v in top))
        if track.observe(encoded.language_probs, self.speech.seconds(inp.offset, inp.end),
                         self.speech.seconds(self._heard_end, inp.end)):
            log.info("language from %.2f s: %s", inp.end, track.current)

    def _language_from(self) -> float | None:
        """Where a round reads the stream's language from: once it is known, the speech after the
        committed words, or the last ``LANGUAGE_WINDOW_S`` if that is shorter (a switch is heard
        in the new speech, not in the context the buffer keeps); before, the whole buffer."""
        if self._language is None:
            return None
        return max(self.buffer.offset, min(self._committed_end, self.buffer.end - LANGUAGE_WINDOW_S))

    @property
    def _language(self) -> str | None:
        """The stream's language where it detects it and has (None: not yet, or not detected)."""
        return self.languages.current if self.languages is not None else None

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
        if self.languages is not None:
            self._observe_language(encoded, self.languages)
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
        heard, whole, settled = self._settled(encoded, heard, whole, heard_before, retried)
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
            # places it over audio; nor is the last word while the speech under it runs on to
            # the end of the audio (the start of a longer word, see unfinished_at).
            ready = len(heard.words) if settled else self.policy.commit(self._tail, heard)
            n = min(instant_in_silence_at(heard.words[:ready], self.speech.seconds),
                    unfinished_at(heard.words, self.speech.seconds, heard.end))
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

    def _settled(self, encoded: Encoded, heard: Heard, whole: Heard, heard_before: int,
                 retried: bool) -> tuple[Heard, Heard, bool]:
        """The round's new words ``heard`` (and its hypothesis ``whole``), unless the round is the
        first to hear a pause after them: then its buffer is decoded once more with beam search
        (``settle_beam`` rows, no draft), as a whole recording is, and what that hears is final
        (see ``_round``). Greedy rounds agree on a word the beam would not write (on real speech,
        single words said alone: "oasis" as "racist"); at a pause no later audio can change it, and the
        machine is idle; where the beam hears no new word, the round's words stand. The greedy
        words the beam does not keep ("jet jet." as "jet") are accounted for (``pause-choice``).
        Returns the words, the hypothesis and whether they settled."""
        pause = self._pause_after(heard, encoded.input) if self.options.settle_beam > 1 and not retried and heard.words else None
        if pause is None:
            return heard, whole, False
        beam = self._settle(encoded)
        fresh = self._fresh(beam.words, heard_before, beam.end)
        log.debug("settled at a pause: %r (greedy %r)", "".join(w.word.word for w in fresh),
                  "".join(w.word.word for w in heard.words))
        if not fresh:
            return heard, whole, False
        kept = set(said_keys(fresh))
        self._drop("pause-choice", [w for w, key in zip(heard.words, said_keys(heard.words), strict=True)
                                    if key not in kept])
        stats = {**heard.stats, **beam.stats, "settled_at": pause}
        return replace(beam, words=tuple(fresh), stats=stats), beam, True

    def _pause_after(self, heard: Heard, inp: RoundInput) -> float | None:
        """Where the speech under ``heard``'s words ended, if ``SETTLE_S`` before the round's audio
        did (None otherwise)."""
        last = self.speech.last_end(max(self._committed_end, inp.offset), inp.end)
        if last is None or inp.end - last < SETTLE_S or heard.words[-1].word.start >= last:
            return None
        return last

    def _settle(self, encoded: Encoded) -> Heard:
        return self._on_decoder(lambda: self.round.settle(encoded, self.options.settle_beam))

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
        before it, the last committed word for the first, laid over silence (see
        :func:`silent_copy_at`: settling "Again. ... Again. ... Again.", the beam laid a copy of
        the second over the silence before the third, and committed both); in the final hearing, which no
        later round hears again, without runs of words written at one instant over silence (see
        :func:`without_silent_runs`) and without such copies (see :func:`without_silent_copies`)."""
        n = spoken_length(words, self.speech.seconds, end)
        if n < len(words):
            log.debug("dropped %r: no speech near them", "".join(w.word.word for w in words[n:]))
            self._drop("unspoken", words[n:], final)
        if final:
            kept = without_silent_runs(words[:n], self.speech.seconds)
            self._drop("silent-run", [w for w in words[:n] if w not in kept], final)
            said = without_silent_copies(kept, self.speech.seconds, self._committed)
            self._drop("silent-copy", [w for w in kept if w not in said], final)
            return said
        for k, why in ((stretched_at(words[:n], self.speech.seconds), "is laid over more speech than a word holds"),
                       (silent_copy_at(words[:n], self.speech.seconds, self._committed),
                        "repeats the word before it over silence")):
            if k < n:
                log.debug("held back %r: %r %s", "".join(w.word.word for w in words[k:n]), words[k].word.word, why)
                n = k
        return words[:n]

    def _unechoed(self, fresh: list[HeardWord], end: float) -> list[HeardWord]:
        """``fresh`` (words after the committed ones, in audio that ends at ``end``) without
        the decoder's echo of the committed words."""
        while k := echo_at(fresh, self._committed, self._committed_end, end, self.buffer.sound_after_pause,
                           self.buffer.sound_seconds):
            log.debug("dropped %r: an echo of the committed words over silence",
                      "".join(w.word.word for w in fresh[:k]))
            self._drop("echo", fresh[:k])
            fresh = fresh[k:]
        return fresh

    # --- where stages run ---------------------------------------------------------------------------
    def _encode(self, inp: RoundInput, pad: bool = False) -> Encoded:
        if self.pipeline is None:
            return self.round.encode(inp, pad)
        return self.pipeline.encode(lambda: self.round.encode(inp, pad))

    def _decode(self, encoded: Encoded, draft: tuple[int, ...], hold: int = 0, min_tokens: int = 0,
                new_s: float | None = None) -> Heard:
        return self._on_decoder(lambda: self.round.decode(encoded, draft, hold, min_tokens, new_s))

    def _on_decoder(self, stage: Callable[[], Heard]) -> Heard:
        """Run a decoding ``stage`` where decodings run (the pipeline's decoder executor, if any)."""
        return self._heard(stage() if self.pipeline is None else self.pipeline.decode(stage))

    def _heard(self, heard: Heard) -> Heard:
        """``heard``, its set-aside words accounted for."""
        self._drops += heard.dropped
        return heard

    # --- the buffer ------------------------------------------------------------------------------
    def _cut(self) -> None:
        """Cut the buffer where the words before the cut are final: at the latest committed
        sentence end that leaves ``context_s`` of committed speech and ``MIN_CONTEXT_WORDS``
        committed words in the buffer, or, once the buffer is longer than ``buffer_trim_s``, at
        the latest word boundary that leaves ``context_s`` of committed speech. Once the silence
        after the committed words is longer than ``context_s``, keep only the last second before
        the next sound (sound a round heard with a second of silence after it is not the next
        sound): the committed speech is then no nearer to the next words than the context a cut
        keeps, and a round would hear seconds of silence before them. A shorter pause is the same
        speaker's flow, and the words before it are the next words' context: a word of a list
        said a second or two after the one before, or the first words after a pause in talk,
        heard without them, are misheard ("gem" as "Jim", "She had" as "lol had"). That the
        decoder writes the committed words again over the new speech ("Hello. Hello." over
        "Hello. ... Down.") the echo rule judges by the sound after the pause (see
        ``word_rules.echo_at``)."""
        o = self.options
        inside = self._committed[self._in_buffer :]
        keep_from = self._committed_end - o.context_s
        boundaries = [j for j in range(1, len(inside) + 1) if inside[j - 1].word.end <= keep_from + 1e-6]
        sentences = [j for j in boundaries
                     if j <= len(inside) - MIN_CONTEXT_WORDS and inside[j - 1].word.word.rstrip().endswith(SENTENCE_END)]
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
            if quiet_to > max(self._committed_end + o.context_s, cut or self.buffer.offset):
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
