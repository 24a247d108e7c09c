"""How voice commands (utterances) are endpointed, decoded and offloaded."""

from __future__ import annotations

from dataclasses import dataclass, field

from stenoflow.utterance.endpoint import EndpointOptions


@dataclass(frozen=True)
class UtteranceOptions:
    """The defaults are what ``stenoflow listen`` runs: every shortcut of seed 001 that keeps the
    full decode's text (see the utterance benchmark in docs/voice-commands.md)."""

    language: str | None = "en"  # None: detected per utterance (multilingual models)
    beam_size: int = 5  # the final pass's beam (pilots are greedy)
    hush: bool = True  # encode speech ⊕ the model's hush word, not 30 s of padding
    # Pilot inference: every pilot_s seconds of new audio while the person speaks, decode what was
    # said so far, drafted by the previous pilot's tokens. None: no pilots.
    pilot_s: float | None = 0.5
    pilot_min_s: float = 1.0  # no pilot on less audio than this (a pilot on a syllable only misleads)
    # Beam collapse: the final pass follows the last pilot at one row (verified in one pass) and
    # opens the beam where the model disagrees with it, or is unsure: where its best token leads the
    # second by less than collapse_gate nats (None: disagreement alone opens it). 2 nats (the best
    # token at least 7x as likely): at 1 nat the one row kept tiny.en off paths the full beam finds.
    collapse: bool = True
    collapse_gate: float | None = 2.0
    # Early termination: the final beam search stops once it is budget tokens long and a
    # candidate has finished, budget = audio_full / audio_pilot * pilot_tokens + budget_slack.
    early_termination: bool = True
    budget_slack: int = 4
    # Decode at the pause, while the hang time runs: if the person does not go on, that decoding is
    # the final one (the audio is the same), and the text is ready when the endpoint is.
    final_in_hang: bool = True
    endpoint: EndpointOptions = field(default_factory=EndpointOptions)
    no_speech_threshold: float = 0.6  # p(no speech) above this ...
    log_prob_threshold: float = -1.0  # ... with a mean log-prob below this: nothing was said

    def __post_init__(self) -> None:
        if self.beam_size < 1:
            raise ValueError(f"beam_size must be >= 1, got {self.beam_size}")
        if self.pilot_s is not None and not self.pilot_s >= 0.1:
            raise ValueError(f"pilot_s must be >= 0.1 seconds or None, got {self.pilot_s}")
        if self.budget_slack < 0:
            raise ValueError(f"budget_slack must be >= 0 tokens, got {self.budget_slack}")
