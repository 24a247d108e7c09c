"""A streaming session: audio in, committed words out, one processing round at a time.

The session is the Whisper-Streaming processor (audio buffer, prompt, trimming) around two
pluggable parts: a round policy (how the model hears the buffer, see :mod:`.policy`) and the
LocalAgreement-2 commit rule (see :mod:`.agreement`). It holds no global state and only reads
the model, so a server can run many sessions over one loaded model.

Scheduling: a round is due once ``step`` seconds of audio arrived since the last round took its
snapshot. ``push`` runs at most one round, so a driver that pushes whatever arrived while the
previous round was computing gets Whisper-Streaming's best-effort behaviour for free: when a
round is slower than the step, the next one starts at once on the latest audio.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from stenoflow.decoding.options import DecodingOptions, verify_options
from stenoflow.streaming.agreement import LocalAgreement
from stenoflow.streaming.buffer import ONSET_LEAD_S, SAMPLE_RATE, AudioBuffer
from stenoflow.streaming.events import SENTENCE_END, StreamUpdate, TimedWord
from stenoflow.streaming.intake import Intake
from stenoflow.streaming.options import StreamOptions
from stenoflow.streaming.policy import PreviousRound, RoundResult, resolve_policy
from stenoflow.streaming.prompt import build_prompt, prompt_horizon

if TYPE_CHECKING:
    from stenoflow.model.protocol import SpeechModel

log = logging.getLogger(__name__)

_PRUNE_AT = 2000  # committed words kept for the prompt before old ones are dropped
SNAP_S = 0.25  # a cut moves to the quietest point this close to the aligned boundary
LAST_WORD_LEAD_S = 0.3  # ... or, after a stall, this far before the last word's aligned start
SPEECH_LEAD_S = 0.1  # any cut stays this far before speech that starts after the committed words
# A hypothesis that jumps over a gap this long holding this much sound skipped speech: it is
# trusted only up to the jump while the gap is this recent (later rounds usually hear it).
SKIP_GAP_S = 1.5
SKIP_SOUND_S = 1.0
SKIP_HOLD_S = 8.0
# ... and when the skipped stretch begins with this much quiet after the committed words, the
# buffer is cut to just before the sound: Whisper tends to pass over speech that follows a long
# pause at the start of its window, and a round that hears the speech first does not.
SKIP_PAUSE_S = 1.0


class StreamSession:
    """Push 16 kHz mono samples, get committed words and the unconfirmed tail.

    Not thread-safe on its own: drive each session from one task at a time (sessions do not
    share state, so different sessions may run concurrently).
    """

    def __init__(self, model: SpeechModel, options: StreamOptions | None = None) -> None:
        self.model = model
        self.options = (options or StreamOptions()).resolved(model)
        o = self.options
        verify_options(DecodingOptions(language=None if o.detects_language else o.language, task=o.task,
                                       beam_size=o.beam_size), model.is_multilingual)
        if o.hush and model.hush is None:
            raise ValueError(f"no hush word for model {model.name!r}: train one with `stenoflow train-hush`, "
                             "put hush.npz beside the model, or stream without hush")
        self.policy = resolve_policy(o)
        self.agreement = LocalAgreement(o.agreement)
        self.buffer = AudioBuffer()
        self.intake = Intake()
        self._committed: list[TimedWord] = []  # recent committed words (the prompt reads them)
        self._text: list[str] = []  # every committed word's text
        self._previous: PreviousRound | None = None
        self._previous_offset = 0.0
        # Words the last round heard but left for a later round to confirm: those after a skip
        # over speech and those DTW squeezed against the buffer end (absolute times).
        self._waiting: list[TimedWord] = []
        self.rounds_run = 0

    # --- the StreamingSession protocol ---------------------------------------------------------
    def push(self, samples: np.ndarray, sample_rate: int = SAMPLE_RATE) -> StreamUpdate:
        """Append samples; run a round if one is due.

        Accepts float (or int16 PCM) samples, 1-D mono or (n, channels). Only 16 kHz is taken:
        resampling chunk by chunk would click at every chunk edge, so other rates are rejected
        (resample the stream before pushing; ``stenoflow.audio.io.load_audio`` does it for files).
        A rejected chunk (wrong rate, dtype or shape, NaN) leaves the session unchanged.
        """
        self.intake.accept(samples, sample_rate)
        if not self.intake.due(self.options.step, self.options.min_round_audio_s):
            return StreamUpdate(tail=self.agreement.complete())
        committed, stats = self._round()
        return StreamUpdate(tuple(committed), self.agreement.complete(), (stats,))

    def finish(self) -> StreamUpdate:
        """Process the audio no round has heard yet, then commit the rest of the hypothesis."""
        if self.intake.closed:
            return StreamUpdate()
        self.intake.closed = True
        committed: list[TimedWord] = []
        rounds: list[dict[str, float]] = []
        while self.intake.pending:
            words, stats = self._round()
            committed += words
            rounds.append(stats)
        # No later round will confirm the words the last round left waiting: they stand as heard.
        committed += self._record(self.agreement.flush(self._waiting))
        return StreamUpdate(tuple(committed), (), tuple(rounds))

    # --- what it has said -----------------------------------------------------------------------
    @property
    def committed_text(self) -> str:
        return "".join(self._text)

    @property
    def tail(self) -> tuple[TimedWord, ...]:
        return self.agreement.complete()

    # --- rounds -----------------------------------------------------------------------------
    def _round(self) -> tuple[list[TimedWord], dict[str, float]]:
        o = self.options
        t0 = time.perf_counter()
        self.intake.take(int(o.max_intake_s * SAMPLE_RATE), self.buffer)
        forced = self._cap()
        offset = self.buffer.offset
        prompt = build_prompt(self._committed, offset, o.prompt_limit)
        result = self.policy.run(self.model, self.buffer.samples, prompt, self._previous)
        words = [replace(w, start=w.start + offset, end=w.end + offset) for w in result.words]
        trusted, pause_cut = (words, None) if self.intake.closed else self._before_skip(words)
        committed = forced + self._record(self.agreement.update(trusted))
        held = [replace(w, start=w.start + offset, end=w.end + offset) for w in result.held]
        self._waiting = [*words[len(trusted):], *held]
        self._previous = PreviousRound(result, 0.0)
        self._previous_offset = offset
        self._trim(result, offset)
        if pause_cut is not None and not self.agreement.complete() and pause_cut > self.buffer.offset:
            log.debug("round skipped speech after a pause: buffer cut to %.2f s, before the sound", pause_cut)
            self._cut(pause_cut)
        self.rounds_run += 1
        stats = {"round": float(self.rounds_run), "buffer_start": offset, "audio_end": self.buffer.end,
                 "buffer_s": self.buffer.end - offset, "prompt_chars": float(len(prompt)),
                 "committed": float(len(committed)), **result.stats,
                 "round_ms": 1000 * (time.perf_counter() - t0)}
        log.debug("round %d: buffer %.2f-%.2f s, %d committed, tail %r", self.rounds_run, offset,
                  self.buffer.end, len(committed), "".join(w.word for w in self.agreement.complete()))
        return committed, stats

    def _before_skip(self, words: list[TimedWord]) -> tuple[list[TimedWord], float | None]:
        """The hypothesis up to where it jumps over speech it did not transcribe, and where to cut
        the buffer when the jump starts with a pause (None: no such pause). The session cuts
        there only when every word before the jump is committed.

        Whisper sometimes leaves out a sentence, most often at the start of a trimmed buffer or
        after a long pause, and DTW then stretches the gap between two words over it. Two such
        rounds would agree and commit past the sentence, which would be lost; a round a little
        later usually hears it, the more so when the pause before it is no longer in the buffer.
        """
        heard_to = max(self.agreement.committed_end, self.buffer.offset)
        for i, w in enumerate(words):
            if (w.start - heard_to >= SKIP_GAP_S and self.buffer.end - w.start < SKIP_HOLD_S
                    and self.buffer.sound_seconds(heard_to, w.start) >= SKIP_SOUND_S):
                log.debug("round skipped %.1f s of sound before %r at %.2f s: trusted up to there",
                          w.start - heard_to, w.word, w.start)
                onset = self.buffer.first_sound(heard_to, w.start)
                pause_cut = None
                if onset is not None and onset - heard_to >= SKIP_PAUSE_S:
                    pause_cut = onset - ONSET_LEAD_S
                return words[:i], pause_cut
            heard_to = max(heard_to, w.end)
        return words, None

    def _cap(self) -> list[TimedWord]:
        """Keep the buffer within ``max_buffer_s``: cut where the unconfirmed words begin (or at
        the committed end). Only when even that is not enough (rounds so slow that two in a row
        never agreed on the older audio), the unconfirmed words heard in the audio to be dropped
        are committed as last heard, and returned: speech is never dropped untranscribed."""
        o = self.options
        if self.buffer.duration <= o.max_buffer_s:
            return []
        tail = self.agreement.complete()
        cut = max(tail[0].start if tail else self.agreement.committed_end, self.buffer.offset)
        if self.buffer.end - cut > o.max_buffer_s:
            cut = self.buffer.end - o.max_buffer_s
            forced = self._record(self.agreement.commit_before(cut))
            log.debug("buffer over %.0f s with nothing committed to cut at: %d unconfirmed words "
                      "committed as heard, audio before %.2f s dropped", o.max_buffer_s, len(forced), cut)
            self._cut(cut)
            return forced
        self._cut(cut, snap=(max(cut - SNAP_S, self.buffer.end - o.max_buffer_s), cut))
        return []

    def _trim(self, result: RoundResult, offset: float) -> None:
        """Past ``buffer_trim_s``, cut at the latest completed segment or sentence end.

        Candidates are the round's closed segment ends but the last (as in Whisper-Streaming:
        a decoding that stops short still closes its last segment at the end of the buffer) and
        the ends of its sentence-final words but the last (small models often write a whole
        buffer as one segment). A cut must precede the first unconfirmed word, in this round's
        own timing (with none, the last committed word's end), so only committed speech leaves the
        buffer.
        """
        tail = self.agreement.complete()
        if not tail and self._stall_trim(result, offset):
            return
        if self.buffer.duration <= self.options.trim_s:
            return
        # With no word unconfirmed, the round may still have heard nothing after the committed
        # words while its last segment closed at the buffer's end: cut no further than them.
        limit = tail[0].start if tail else max(self.agreement.committed_end, offset) + SNAP_S
        sentence_ends = [w.end for w in result.words[:-1] if w.word.rstrip().endswith(SENTENCE_END)]
        ends = [offset + e for e in (*result.segment_ends[:-1], *sentence_ends) if offset + e <= limit + 1e-6]
        if ends and max(ends) > offset:
            self._cut(max(ends), snap=(max(ends) - SNAP_S, min(max(ends) + SNAP_S, limit)))

    def _stall_trim(self, result: RoundResult, offset: float) -> bool:
        """All heard words are committed: cut after the last one if it ends a sentence and
        ``stall_trim_s`` of audio follows it, or, when nothing was heard at all, keep the last
        ``stall_trim_s`` and whatever follows the first sound before them."""
        stall = self.options.stall_trim_s
        if stall is None:
            return False
        if not result.words:
            # The round may have missed speech that begins late in the buffer (a long silence
            # before it makes Whisper call the whole window silent): never cut past a sound.
            cut = self.buffer.end - stall
            onset = self.buffer.first_sound(offset, cut + ONSET_LEAD_S)
            if onset is not None:
                cut = onset - ONSET_LEAD_S
            if cut > offset:
                self._cut(cut)
            return cut > offset
        last = result.words[-1]
        if self.buffer.end - (offset + last.end) < stall - 1e-6 or not last.word.rstrip().endswith(SENTENCE_END):
            return False  # a decoding that stopped mid-sentence may go on next round
        # Nothing transcribed follows the last word, so DTW places it late, often by more than
        # its own length: look for the pause after it from a little before where it starts.
        self._cut(offset + last.end, snap=(offset + last.start - LAST_WORD_LEAD_S, offset + last.end + 0.1))
        return True

    def _cut(self, time_s: float, snap: tuple[float, float] | None = None) -> None:
        """Cut the buffer at ``time_s``, or at the quietest point of the ``snap`` interval, but
        never past speech that starts after the committed words (while the buffer fits the cap).

        A round that skipped a sentence places the next one's words, or stretches the last
        committed word, over it; a cut at those words' boundaries would drop the sentence
        untranscribed. The speech counted starts after a pause: the rest of the last committed
        word, which DTW often ends early, does not hold the cut back.
        """
        committed_end = max(self.agreement.committed_end, self.buffer.offset)
        onset = self.buffer.onset_after_pause(committed_end, max((time_s, *(snap or ()))))
        if onset is not None:
            bound = max(onset - SPEECH_LEAD_S, committed_end, self.buffer.end - self.options.max_buffer_s)
            time_s = min(time_s, bound)
            snap = None if snap is None else (min(snap[0], bound), min(snap[1], bound))
        if snap is not None:
            time_s = self.buffer.quietest(*snap)
        new_offset = self.buffer.trim_to(time_s)
        self.agreement.drop_before(new_offset)
        if self._previous is not None:
            shift = new_offset - self._previous_offset
            self._previous = PreviousRound(self._previous.result, shift)
        log.debug("buffer trimmed to start at %.2f s", new_offset)

    def _record(self, words: list[TimedWord]) -> list[TimedWord]:
        self._committed += words
        self._text += [w.word for w in words]
        if len(self._committed) > _PRUNE_AT:
            del self._committed[: prompt_horizon(self._committed, self.buffer.offset, self.options.prompt_limit)]
        return words
