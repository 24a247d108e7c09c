"""Hearing audio again alone: a live session's retries of deaf rounds and its final hearing.

A round decodes its buffer after a prompt and with a draft. A prompt, or a buffer cut
mid-sentence, can make Whisper hear nothing, or skip speech, or stop its text early. Where the
voice activity model finds speech that no word of a round covers, the audio after the committed
words is decoded again on its own, without prompt or draft (``_unless_deaf``). At the end of a
stream the audio after the committed words is heard once more, padded to 30 s as Whisper was
trained (``_final_round``). :class:`Rehearing` holds these steps for
:class:`stenoflow.streaming.live.LiveSession`, whose state they read.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from stenoflow.streaming.buffer import SAMPLE_RATE, AudioBuffer
from stenoflow.streaming.live_round import Encoded, Heard, HeardWord, LiveRound, RoundInput
from stenoflow.streaming.speech import SpeechTrack
from stenoflow.streaming.word_rules import (
    CONTEXT_WORDS,
    TIME_TOLERANCE_S,
    drop_clipped_repeat,
    final_words,
    mostly_after,
    new_words,
)

if TYPE_CHECKING:
    from stenoflow.streaming.events import TimedWord

log = logging.getLogger(__name__)

# A round is deaf when it heard no new word, or its first new word comes after this much speech
# that no word covers, in the audio after the committed words (the end of the buffer, where a
# word may still be arriving, is left out).
DEAF_SPEECH_S = 0.6
DEAF_EDGE_S = 0.5
LONE_SPEECH_S = 0.25  # speech no round heard a word in, alone before silence, that is heard again alone
# A retry of a deaf round hears this much committed speech before the end of the last committed
# word: started at that end, where DTW may end the word early, Whisper writes the rest of it as a
# word of its own and hears what follows worse ("The Lord's name" over "Turn the volume down").
RETRY_LEAD_S = 2.0
# The final hearing starts this much before it: the final hearing is compared word for word with
# the last round's unconfirmed words (final_words), which start there.
FINAL_LEAD_S = 0.05
FINAL_SILENCE_S = 0.4  # silence after the last sound that the final hearing keeps


class Rehearing:
    """The steps of a live session that hear audio again alone (see the module docstring)."""

    buffer: AudioBuffer
    speech: SpeechTrack
    round: LiveRound
    _committed: list[HeardWord]
    _committed_end: float
    _in_buffer: int
    _tail: list[HeardWord]
    _tail_alone: bool
    _language: str | None

    if TYPE_CHECKING:  # the session's own steps these read
        def _encode(self, inp: RoundInput, pad: bool = False) -> Encoded: ...
        def _decode(self, encoded: Encoded, draft: tuple[int, ...], hold: int = 0, min_tokens: int = 0,
                    new_s: float | None = None) -> Heard: ...
        def _fresh(self, words: Sequence[HeardWord], first: int, end: float,
                   final: bool = False) -> list[HeardWord]: ...
        def _drop(self, rule: str, words: Sequence[HeardWord], final: bool = False) -> None: ...
        def _heard_in_silence(self, lo: float) -> bool: ...
        def _cap(self) -> list[TimedWord]: ...
        def _record(self, words: Sequence[HeardWord]) -> list[TimedWord]: ...
        def _unechoed(self, fresh: list[HeardWord], end: float) -> list[HeardWord]: ...
        def _speech_runs(self) -> list[tuple[float, float]]: ...
        def _onsets(self, lo: float, hi: float) -> tuple[float, ...]: ...

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
        (a retry: with ``RETRY_LEAD_S`` of the committed speech before it, as far as the buffer
        still holds it, which a long pause cut away: see ``LiveSession._cut``; ``pad``, the final
        hearing: padded to 30 s, from ``FINAL_LEAD_S`` before it); None if there is too little
        of it. Where the voice activity model hears as much
        speech in it as a short word said alone holds (``LONE_SPEECH_S``), Whisper's own unsure
        no-speech guess does not silence it: a hearing alone is how a stream's last command, or
        its last word ("Done."), is not lost. Words it puts
        in the audio the last committed word was heard in (see ``_heard_through``) are that
        word's speech written again, not new, and so is a first word after them that writes the
        last committed word again over its own audio (see :func:`drop_clipped_repeat`);
        ``through``: where that audio ends, if not where ``_heard_through`` says."""
        first = round(max(self._committed_end - (FINAL_LEAD_S if pad else RETRY_LEAD_S) - self.buffer.offset, 0.0)
                      * SAMPLE_RATE)
        last = round((end - self.buffer.offset) * SAMPLE_RATE)
        samples = self.buffer.samples[first:last]
        if samples.size < 0.1 * SAMPLE_RATE:
            return None
        start = self.buffer.offset + first / SAMPLE_RATE
        inp = RoundInput(samples, start, (), speech=self.speech.seconds(start, end) >= LONE_SPEECH_S,
                         onsets=self._onsets(start, end), language=self._language)
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
