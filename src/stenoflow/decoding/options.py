"""Options and results of decoding one audio window."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from torch import Tensor

if TYPE_CHECKING:
    from stenoflow.model.protocol import SpeechModel

SUPPRESS_NON_SPEECH = "-1"  # in suppress_tokens: the tokenizer's non-speech symbol set
TYPICAL_PUBLISHED = (0.09, 0.3)  # typical acceptance's (epsilon, alpha) as seed 003 selected them


@dataclass(frozen=True)
class DecodingOptions:
    task: str = "transcribe"  # or "translate" (to English)
    language: str | None = None  # None: detect it (multilingual models), "en" for English-only
    temperature: float = 0.0  # 0: greedy or beam search; > 0: sampling
    sample_len: int | None = None  # most tokens to sample; default: half the text context
    best_of: int | None = None  # independent samples at temperature > 0, best one kept
    beam_size: int | None = None  # beams at temperature 0; None or 1 is greedy
    patience: float | None = None  # beam search waits for round(beam_size * patience) finished
    length_penalty: float | None = None  # None: rank by sum/length; alpha: Google NMT penalty
    prompt: str | list[int] | None = None  # previous text, as context (<|startofprev|>)
    prefix: str | list[int] | None = None  # forced start of the transcript of this window
    suppress_tokens: str | tuple[int, ...] | None = SUPPRESS_NON_SPEECH  # ids, "-1" for symbols
    suppress_blank: bool = True  # no blank or end-of-text as the first sampled token
    without_timestamps: bool = False  # <|notimestamps|>: text tokens only
    max_initial_timestamp: float | None = 1.0  # the first timestamp may not exceed this (s)
    # Where the audio ends (s): no timestamp after it, no segment opening at it, and a segment
    # closing there ends the text. None: anywhere in the 30 s window.
    max_timestamp: float | None = None
    # End a row as soon as its text ends in a repetition loop (see decoding.repetition.LoopRule);
    # off by default: offline transcription catches loops by compression ratio and retries.
    stop_loops: bool = False
    # With stop_loops: text tokens at the start of the text (a draft whose repeats were said) in
    # which no loop is judged; a loop must end after them.
    loops_from: int = 0
    # Beam pruning: the previous streaming round's hypothesis for this buffer; decoding keeps
    # one row while it follows its word tokens (punctuation, timestamps, specials are ignored).
    reference: tuple[int, ...] | None = None
    # "prune": match word tokens one by one; "verify": word tokens, checked in one pass;
    # "draft": the reference is the exact continuation (every token), checked in one pass.
    reference_mode: str | None = None
    # Confidence gate (nats): decoding stays at one row while the best token leads the second by
    # at least this much (and agrees with the reference, if any); below it, or where the model
    # disagrees with the reference, beam search takes over. None: no gate (see decoding.guided).
    beam_gate: float | None = None
    # With beam_gate: the beam closes again, back to one row following the reference, once its
    # best row leads the next by the gate or stayed the best for a few tokens, and no candidate
    # has finished (see decoding.guided; False: the beam, once open, runs to the end of the window).
    beam_close: bool = False
    # With a draft: over its first reference_hold tokens (the words a live round may commit) the
    # beam does not open, and where the model parts with the draft there decoding goes on greedily
    # at one row; past them the gate decides as above (the beam searches where words can still change).
    reference_hold: int = 0
    # Record the alignment heads' cross-attention of the decoded tokens in the result (word
    # timing without a second pass); kept when the result is a single decoded row, or the row a
    # gated beam still open at the end chose (one more pass at one row gives it, and its token
    # log probabilities, under a draft verifier).
    record_alignment: bool = False
    # With drafted tokens (a draft model, Medusa heads): (epsilon, alpha) for typical acceptance
    # (seed 003 eq. 3: a drafted token is kept where the model gives it more than
    # min(epsilon, alpha * exp(-entropy))), faster but not greedy's output; None: greedy-exact.
    typical: tuple[float, float] | None = None
    # Early termination of beam search (seed 001 §4.3): the number of tokens the transcript is
    # expected to have (e.g. from a pilot decoding of part of the audio); once the beams are this
    # long and a candidate has finished, the search stops. None: the usual stopping rule only.
    length_budget: int | None = None
    # No end-of-text among the first this many sampled tokens (the reference's included): decoding
    # continues past where the decoder would stop (0: it may stop anywhere).
    min_tokens: int = 0


@dataclass
class DecodingResult:
    tokens: list[int]  # sampled tokens (timestamps included), without the prompt and end-of-text
    text: str
    language: str | None
    language_probs: dict[str, float] | None = None
    avg_logprob: float = float("nan")
    sum_logprob: float = float("nan")
    no_speech_prob: float = float("nan")
    temperature: float = 0.0
    compression_ratio: float = float("nan")
    stats: dict[str, float] = field(default_factory=dict)  # forward passes, beam widths...
    fallbacks: list[str] = field(default_factory=list)  # why reference-guided decoding fell back
    # With record_alignment, at one row: the alignment heads' attention (rows, heads, audio
    # positions) of the queries that predicted the prefix tokens, then ``tokens``, then the
    # end-of-text: len(prefix) + len(tokens) + 1 rows (word timing of text without timestamps).
    alignment: Tensor | None = None
    ended: bool = True  # the decoder chose end-of-text (False: stopped by the length limit)
    token_logprobs: list[float] | None = None  # at one row: the log probability of each token


def verify_options(options: DecodingOptions, multilingual: bool) -> None:
    """Raise ValueError for contradictory or out-of-range options."""
    if options.task not in ("transcribe", "translate"):
        raise ValueError(f"task must be 'transcribe' or 'translate', got {options.task!r}")
    if options.beam_size is not None and options.best_of is not None:
        raise ValueError("best_of is for sampling and beam_size for beam search: give only one")
    if options.temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {options.temperature}")
    if options.temperature == 0 and options.best_of is not None and options.best_of > 1:
        raise ValueError("best_of > 1 needs temperature > 0 (greedy decoding is deterministic)")
    if options.beam_size is not None and options.beam_size < 1:
        raise ValueError(f"beam_size must be >= 1, got {options.beam_size}")
    if options.patience is not None and options.beam_size is None:
        raise ValueError("patience applies to beam search only: set beam_size")
    if options.patience is not None and options.patience <= 0:
        raise ValueError(f"patience must be > 0, got {options.patience}")
    if options.max_timestamp is not None and not options.max_timestamp > 0:
        raise ValueError(f"max_timestamp must be > 0 seconds, got {options.max_timestamp}")
    if options.length_penalty is not None and not 0 <= options.length_penalty <= 1:
        raise ValueError(f"length_penalty must be in [0, 1], got {options.length_penalty}")
    verify_reference(options)
    if options.length_budget is not None and options.length_budget < 1:
        raise ValueError(f"length_budget must be >= 1 token, got {options.length_budget}")
    if options.typical is not None:
        epsilon, alpha = options.typical
        if not (0 < epsilon < 1 and 0 < alpha <= 1):
            raise ValueError(f"typical acceptance needs 0 < epsilon < 1 and 0 < alpha <= 1, got {options.typical}")
        if options.temperature > 0:
            raise ValueError("typical acceptance checks drafted tokens at temperature 0")
    if not multilingual and options.task == "translate":
        raise ValueError("an English-only model cannot translate; use a multilingual model")
    if not multilingual and options.language not in (None, "en"):
        raise ValueError(f"an English-only model cannot transcribe language {options.language!r}")


def refuse_english_only(model: SpeechModel, task: str, language: str | None) -> None:
    """Raise a clear error where an English-only model is asked to translate, or to detect or
    transcribe another language (``language`` None: not given, English for such a model)."""
    if model.is_multilingual or (task != "translate" and language in (None, "en")):
        return
    asked = "translate" if task == "translate" else f"detect or transcribe language {language!r}"
    raise ValueError(f"{model.name} is an English-only model: it cannot {asked}; use a multilingual model such as "
                     "base")


REFERENCE_MODES = ("prune", "verify", "draft")


def verify_reference(options: DecodingOptions) -> None:
    """A reference guides deterministic decoding only, and needs a mode saying how."""
    mode, reference = options.reference_mode, options.reference
    if mode is not None and mode not in REFERENCE_MODES:
        raise ValueError(f"reference_mode must be one of {', '.join(REFERENCE_MODES)} or None, got {mode!r}")
    if (mode is None) != (reference is None):
        raise ValueError("reference and reference_mode go together: give both or neither")
    if mode is not None and options.temperature > 0:
        raise ValueError("a reference guides greedy or beam search decoding (temperature 0); "
                         "drop it when sampling at a higher temperature")
    if reference is not None and not isinstance(reference, tuple):
        raise ValueError(f"reference must be a tuple of token ids, got {type(reference).__name__}")
    gate = options.beam_gate
    if gate is not None and not gate >= 0:
        raise ValueError(f"beam_gate must be >= 0 nats or None, got {gate}")
    if gate is not None and options.temperature > 0:
        raise ValueError("beam_gate chooses between greedy and beam search (temperature 0)")
    if options.beam_close and gate is None:
        raise ValueError("beam_close closes a beam the confidence gate opened: give beam_gate too")
    if options.reference_hold and options.reference_mode != "draft":
        raise ValueError("reference_hold holds the first tokens of a draft: give a draft reference")
