"""How a stream is transcribed: ``StreamOptions``, and what each policy takes for an option
left automatic."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from stenoflow.audio.io import WINDOW_S
from stenoflow.decoding.options import refuse_english_only
from stenoflow.decoding.timing import FRAMES_PER_SECOND
from stenoflow.streaming.agreement import AgreementOptions

if TYPE_CHECKING:
    from stenoflow.model.protocol import SpeechModel


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
    found fastest at its accuracy (see docs/benchmarks.md). Fields left at ``None`` or ``"auto"`` take
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
    # half its compute (see docs/benchmarks.md, "The window").
    window_s: float = 15.0
    # live, in such a window: the encoder computes the speech's positions only and takes the
    # silence's from a kept pass over silence alone (stenoflow.model.silence): the encoder at a
    # third of its cost, at the same WER on the streaming benchmark (see docs/benchmarks.md).
    silence_cache: bool = True
    # live, with the silence cache: a round computes the encoder's positions from this many seconds
    # before the end of the last round's speech on, and takes those before from that round's pass
    # while the buffer keeps its start (stenoflow.model.reuse; None: every round computes them all)
    encoder_reuse_s: float | None = None
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
    # "auto" (or None): detected (multilingual models): whisper-s every round; live once enough
    # speech was heard, then kept until another language holds (stenoflow.streaming.language)
    language: str | None = "en"
    task: str = "transcribe"  # "translate": the speech as English text (multilingual models)
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
    # live: the first round whose audio ends SETTLE_S after the speech under its new words decodes
    # its buffer once more with beam search of this many rows, and what that hears up to the pause
    # is final (1: no such decoding; the rounds' agreement decides there too). Greedy rounds agree
    # on words the beam does not write; on real speech 5 took the live default 0.7 WER points
    # nearer whole-file beam search on the unaware clock, for up to a third more compute per
    # stream, and the realtime clock has not shown it yet, so it is not the default (see
    # docs/benchmarks.md, "Settling at a pause").
    settle_beam: int = 1
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
        if self.settle_beam < 1:
            raise ValueError(f"settle_beam must be >= 1 (1: no settling at pauses), got {self.settle_beam}")
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
        if self.encoder_reuse_s is not None and not self.encoder_reuse_s > 0:
            raise ValueError(f"encoder_reuse_s must be > 0 seconds or None, got {self.encoder_reuse_s}")
        if not 0 < self.window_s <= WINDOW_S:
            raise ValueError(f"window_s must be in (0, {WINDOW_S:g}] seconds, got {self.window_s}")
        if self.pipeline is not None and (len(self.pipeline) != 2 or min(self.pipeline) < 1):
            raise ValueError(f"pipeline takes (encoder threads, decoder threads), each >= 1, got {self.pipeline}")
        if (self.speculative or self.medusa) and self.policy != "live":
            raise ValueError("a draft model or Medusa heads speed up live sessions (policy 'live') only")
        if self.speculative and self.medusa:
            raise ValueError("give a draft model or Medusa heads, not both")
        if self.task not in ("transcribe", "translate"):
            raise ValueError(f"task must be 'transcribe' or 'translate', got {self.task!r}")

    @property
    def detects_language(self) -> bool:
        """Whether the stream's language is detected (``language`` "auto" or None)."""
        return self.language in (None, "auto")

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

    def resolved(self, model: SpeechModel) -> StreamOptions:
        """These options with every automatic choice made for ``model``: the policy's hush word
        (when the model has one), guide, buffer length and prompt length. An English-only model
        refuses another language, its detection and translation."""
        refuse_english_only(model, self.task, self.language)
        hush = HUSH_BY_POLICY[self.policy] and model.hush is not None if self.hush is None else self.hush
        return replace(self, hush=hush,
                       guide=GUIDE_BY_POLICY[self.policy] if self.guide == "auto" else self.guide,
                       buffer_trim_s=self.trim_s, prompt_chars=self.prompt_limit)
