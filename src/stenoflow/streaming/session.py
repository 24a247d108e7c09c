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
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from stenoflow.audio.io import WINDOW_S
from stenoflow.decoding.options import DecodingOptions, verify_options
from stenoflow.decoding.timing import FRAMES_PER_SECOND
from stenoflow.streaming.agreement import AgreementOptions, LocalAgreement
from stenoflow.streaming.buffer import SAMPLE_RATE, AudioBuffer
from stenoflow.streaming.events import SENTENCE_END, StreamingSession, StreamUpdate, TimedWord
from stenoflow.streaming.intake import Intake
from stenoflow.streaming.policy import PreviousRound, RoundResult, resolve_policy
from stenoflow.streaming.prompt import build_prompt, prompt_horizon

if TYPE_CHECKING:
    from stenoflow.api import Model

log = logging.getLogger(__name__)

_PRUNE_AT = 2000  # committed words kept for the prompt before old ones are dropped
SNAP_S = 0.25  # a cut moves to the quietest point this close to the aligned boundary
LAST_WORD_LEAD_S = 0.3  # ... or, after a stall, this far before the last word's aligned start
ONSET_LEAD_S = 0.3  # a cut in a round that heard nothing stays this far before the first sound
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


GUIDES = {"whisper-s": ("prune", "verify"), "live": ("draft",)}
SESSION_POLICIES = tuple(GUIDES)


GUIDE_BY_POLICY = {"whisper-s": "verify", "live": "draft"}  # what guide="auto" means
TRIM_BY_POLICY = {"whisper-s": 15.0, "live": 10.0}  # what buffer_trim_s=None means
HUSH_BY_POLICY = {"whisper-s": True, "live": False}  # hush=None: the model's hush word, if it has one
PROMPT_BY_POLICY = {"whisper-s": 200, "live": 600}  # what prompt_chars=None means


@dataclass(frozen=True)
class StreamOptions:
    """How a stream is transcribed. ``policy`` picks the session: ``live`` (short buffers and
    one-pass drafts, see streaming.live) or ``whisper-s`` (Whisper-Streaming rounds over a buffer
    of up to 30 s); a few fields apply to one of them only, as their comments say.

    The defaults are what ``stenoflow stream`` runs: the configuration the streaming benchmark
    found fastest at its accuracy (see docs/live-captions.md). Fields left at ``None`` or ``"auto"`` take
    the policy's and the model's own choice when a session opens (``resolved``)."""

    step: float = 0.35  # seconds of new audio between rounds (back-to-back when rounds are slower)
    policy: str = "live"  # "live" or "whisper-s"
    beam_size: int = 1  # beams per round (1: greedy)
    # encode buffer ⊕ the model's hush word instead of padding it with silence (None: the
    # policy's choice, see HUSH_BY_POLICY: whisper-s when the model has one, live never)
    hush: bool | None = None
    # live, without the hush word: the encoder hears the buffer padded with silence to a window of
    # this many seconds (at least 5 s of silence after it; 30: Whisper's own window). A 15 s
    # window gains most of what 30 s padding gains over the hush word (about a WER point) at
    # half its compute (see docs/live-captions.md).
    window_s: float = 15.0
    # live, in such a window: the encoder computes the speech's positions only and takes the
    # silence's from a kept pass over silence alone (stenoflow.model.silence): the encoder at a
    # third of its cost, at the same WER on the streaming benchmark (see docs/live-captions.md).
    silence_cache: bool = True
    # The previous round guides decoding: whisper-s "prune" (token by token) or "verify" (one
    # pass); live "draft" (its unconfirmed tokens, verified in one pass). "auto": "verify" for
    # whisper-s, "draft" for live; None: no guide.
    guide: str | None = "auto"
    # Confidence gate (nats): one row while the best token leads the second by this much and
    # agrees with the guide; beam search where it does not. None: the guide alone decides.
    gate: float | None = None
    # live, with a gate: the beam closes again once its best row leads the next by the gate or
    # stayed the best for a few tokens, and the round goes on at one row verifying the draft
    # (False: an open beam runs to the round's end)
    gate_close: bool = False
    # live, with a gate: the beam stays shut over the words a round may commit (the draft's words
    # that end align_frames before the audio's end), decoded greedily, and opens only past them,
    # where words can still change
    beam_tail: bool = False
    language: str | None = "en"  # None: detected every round (multilingual models; whisper-s only)
    # above this, the buffer is cut at a committed boundary (None: 10 s live, 15 s whisper-s)
    buffer_trim_s: float | None = None
    max_buffer_s: float = 30.0  # hard cap: the encoder hears at most 30 s
    # committed text before the buffer, given as the prompt (None: the policy's own, see
    # PROMPT_BY_POLICY: 200 characters for whisper-s, as Whisper-Streaming; 600 for live, where
    # the streaming benchmark found it most of a WER point better than 200 at the same latency)
    prompt_chars: int | None = None
    min_round_audio_s: float = 1.0  # audio needed before the first round
    # whisper-s: a round whose words are all committed, the last ending a sentence, and that heard
    # this much audio after it cuts the buffer there (None: never, as in Whisper-Streaming).
    # Decoders sometimes stop after a sentence under a prompt, round after round; without this
    # the buffer would only be cut at the 30 s cap. In silence it keeps the buffer short.
    stall_trim_s: float | None = 2.0
    no_speech_threshold: float = 0.6  # a round with p(no speech) above this ...
    log_prob_threshold: float = -1.0  # ... and mean token log-prob below this hears nothing
    no_speech_skip: float = 0.9  # a round with p(no speech) above this hears nothing, whatever the text
    agreement: AgreementOptions = field(default_factory=AgreementOptions)
    # live: which words are final, "agreement" (LocalAgreement-2) or "alignatt" (attention
    # at least align_frames encoder positions, 20 ms each, before the end of the audio).
    commit: str = "agreement"
    align_frames: int = 20
    # live agreement: a word whose mean token probability is below commit_sure waits until the
    # model heard commit_unsure_s of audio after it.
    agree_rounds: int = 2  # live agreement: rounds that must agree on a word (2: LocalAgreement-2)
    commit_sure: float = 0.0
    commit_unsure_s: float = 0.0
    # live agreement: a word at least this probable is final in the first round that heard past
    # it (the AlignAtt rule), without waiting for the next round to agree (None: always wait).
    commit_confident: float | None = 0.9
    # live agreement: a word that starts within cold_s of the start of the audio a round heard (a
    # stream's first words, the first after a silence the buffer dropped, or the first of audio
    # heard again alone) was heard with too little audio before it to be sure of: it waits until
    # the model heard cold_margin_s of audio after it.
    cold_s: float = 1.5
    cold_margin_s: float = 1.2
    # live agreement: a word the rounds disagree on (or a stretch of up to three, which the rounds
    # may split into different numbers of words) is final once this many words after it agree and
    # were heard before the margin (None: it waits for the rounds to agree on it). The streaming
    # benchmark found 2 as accurate as waiting, and the late words sooner.
    commit_flanked: int | None = 2
    context_s: float = 3.0  # live: committed speech kept in the buffer before the new words
    # live: a round is skipped when no word waits for confirmation and its new audio holds no
    # speech (by the voice activity model): it could only hear silence, and a machine busy with
    # it starts the round that hears the next words late.
    skip_idle: bool = True
    intake_s: float | None = None  # live: most new audio a round takes (None: all that arrived)
    # live: run the encoder stage of the next round beside this round's decoding, on two
    # executors with (encoder, decoder) threads; None: one after the other on all threads.
    pipeline: tuple[int, int] | None = None
    # live: past the previous round's draft, tokens are drafted by a draft model (its name or path,
    # loaded int8 on the CPU: ``speculative``) or by this model's Medusa heads ("linear", "block" or
    # a heads file: ``medusa``), and verified in the same pass; greedy rounds hear the same words.
    speculative: str | None = None
    medusa: str | None = None

    def __post_init__(self) -> None:
        if not self.step > 0:
            raise ValueError(f"step must be > 0 seconds, got {self.step}")
        if self.policy not in GUIDES:
            raise ValueError(f"unknown streaming policy {self.policy!r}; known: {', '.join(GUIDES)}")
        if self.beam_size < 1:
            raise ValueError(f"beam_size must be >= 1, got {self.beam_size}")
        guides = GUIDES[self.policy]
        if self.guide not in (None, "auto", *guides):
            raise ValueError(f"guide for the {self.policy} policy must be one of {', '.join(guides)} or None, "
                             f"got {self.guide!r}")
        if self.gate is not None and not self.gate >= 0:
            raise ValueError(f"gate must be >= 0 nats or None, got {self.gate}")
        if self.beam_tail and (self.gate is None or self.policy != "live" or self.guide is None):
            raise ValueError("beam_tail keeps a gated beam to the words a live round cannot commit yet: "
                             "give gate, a guide and the live policy")
        if self.gate_close and (self.gate is None or self.policy != "live"):
            raise ValueError("gate_close closes the beam a gate opened in live rounds: give gate and the live policy")
        if not 0 < self.trim_s < self.max_buffer_s <= 30.0:
            raise ValueError("need 0 < buffer_trim_s < max_buffer_s <= 30 seconds, got "
                             f"{self.trim_s} and {self.max_buffer_s}")
        if self.prompt_limit < 0 or self.min_round_audio_s < 0:
            raise ValueError("prompt_chars and min_round_audio_s must be >= 0")
        if self.stall_trim_s is not None and not self.stall_trim_s > 0:
            raise ValueError(f"stall_trim_s must be > 0 seconds or None, got {self.stall_trim_s}")
        if self.commit not in ("agreement", "alignatt"):
            raise ValueError(f"commit must be 'agreement' or 'alignatt', got {self.commit!r}")
        if self.commit_confident is not None and not 0 < self.commit_confident <= 1:
            raise ValueError(f"commit_confident must be in (0, 1] or None, got {self.commit_confident}")
        if self.commit_flanked is not None and self.commit_flanked < 1:
            raise ValueError(f"commit_flanked must be >= 1 word or None, got {self.commit_flanked}")
        if self.align_frames < 0 or self.context_s < 0 or self.cold_s < 0 or self.cold_margin_s < 0:
            raise ValueError("align_frames, context_s, cold_s and cold_margin_s must be >= 0")
        if self.intake_s is not None and not self.intake_s >= self.step:
            raise ValueError(f"intake_s must be >= step ({self.step} s) or None, got {self.intake_s}")
        if not 0 < self.window_s <= WINDOW_S:
            raise ValueError(f"window_s must be in (0, {WINDOW_S:g}] seconds, got {self.window_s}")
        if self.pipeline is not None and (len(self.pipeline) != 2 or min(self.pipeline) < 1):
            raise ValueError(f"pipeline takes (encoder threads, decoder threads), each >= 1, got {self.pipeline}")
        if (self.speculative or self.medusa) and self.policy != "live":
            raise ValueError("a draft model or Medusa heads speed up live sessions (policy 'live') only")
        if self.speculative and self.medusa:
            raise ValueError("give a draft model or Medusa heads, not both")
        if self.policy == "live" and self.language is None:
            raise ValueError("live streams need a language (prefilled rounds cannot detect it)")

    @property
    def trim_s(self) -> float:
        """``buffer_trim_s``, or the policy's own when it is None."""
        return TRIM_BY_POLICY[self.policy] if self.buffer_trim_s is None else self.buffer_trim_s

    @property
    def prompt_limit(self) -> int:
        """``prompt_chars``, or the policy's own when it is None."""
        return PROMPT_BY_POLICY[self.policy] if self.prompt_chars is None else self.prompt_chars

    @property
    def margin_s(self) -> float:
        """Audio a live round must hear after a word for the word to be final (``align_frames``)."""
        return self.align_frames / FRAMES_PER_SECOND

    @property
    def max_intake_s(self) -> float:
        """Most new audio one round takes in: the rest waits, so a backlog (a whole file pushed
        at once) is worked through in overlapping rounds instead of overflowing the buffer."""
        return max(self.step, self.max_buffer_s - self.trim_s)

    def resolved(self, model: Model) -> StreamOptions:
        """These options with every automatic choice made for ``model``: the policy's hush word
        (when the model has one), guide, buffer length and prompt length."""
        hush = HUSH_BY_POLICY[self.policy] and model.hush is not None if self.hush is None else self.hush
        return replace(self, hush=hush,
                       guide=GUIDE_BY_POLICY[self.policy] if self.guide == "auto" else self.guide,
                       buffer_trim_s=self.trim_s, prompt_chars=self.prompt_limit)


def open_session(model: Model, options: StreamOptions) -> StreamingSession:
    """A new session of ``options.policy`` on ``model``."""
    options = options.resolved(model)
    if options.policy == "live":
        from stenoflow.streaming.live import LiveSession
        from stenoflow.streaming.pipeline import Pipeline

        pipeline = Pipeline(*options.pipeline) if options.pipeline is not None else None
        return LiveSession(model, options, pipeline)
    return StreamSession(model, options)


class StreamSession:
    """Push 16 kHz mono samples, get committed words and the unconfirmed tail.

    Not thread-safe on its own: drive each session from one task at a time (sessions do not
    share state, so different sessions may run concurrently).
    """

    def __init__(self, model: Model, options: StreamOptions | None = None) -> None:
        self.model = model
        self.options = (options or StreamOptions()).resolved(model)
        o = self.options
        verify_options(DecodingOptions(language=o.language, beam_size=o.beam_size), model.is_multilingual)
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
