"""Named stream variants: a session policy with options, e.g. ``live+hush+draft`` or
``whisper-s+hush+verify``.

A variant names what the streaming benchmark compares and what the CLI can ask for: the session
policy (``whisper-s`` or ``live``), then options, each a set of ``StreamOptions`` fields:

* ``+hush``: speech ⊕ hush word instead of silence (whisper-s: a 30 s window; live: a window of
  ``window_s``);
* ``+prune`` / ``+verify`` (whisper-s) or ``+draft`` (live): the previous round guides decoding;
* ``+gate``: the confidence gate (one row where the model is sure, the beam where it is not);
* ``+alignatt``: live rounds commit by attention (AlignAtt) instead of LocalAgreement;
* ``+pipe``: live rounds run the encoder of the next round beside this round's decoding.

Pure string handling; ``Variant.apply`` returns the options, which validate themselves.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stenoflow.streaming.options import StreamOptions

GATE_NATS = 1.0  # the confidence gate a +gate variant uses
PIPELINE_THREADS = (1, 1)  # the executors of a +pipe variant when none was profiled


EXTRAS: Mapping[str, Mapping[str, object]] = MappingProxyType({
    "hush": {"hush": True},
    "prune": {"guide": "prune"},
    "verify": {"guide": "verify"},
    "draft": {"guide": "draft"},
    "gate": {"gate": GATE_NATS},
    "alignatt": {"commit": "alignatt"},
    "pipe": {"pipeline": PIPELINE_THREADS},
})
GUIDES = ("prune", "verify", "draft")


@dataclass(frozen=True)
class Variant:
    policy: str
    extras: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return "+".join((self.policy, *self.extras))

    @property
    def hush(self) -> bool:
        return "hush" in self.extras

    @property
    def guide(self) -> str | None:
        return next((e for e in self.extras if e in GUIDES), None)

    def apply(self, options: StreamOptions, pipeline: tuple[int, int] | None = None) -> StreamOptions:
        """``options`` with this variant's policy and extras (``pipeline``: the executors' threads
        for ``+pipe``, e.g. from ``stenoflow profile-threads``)."""
        # A variant is the whole configuration of these fields: what it does not name is off.
        fields: dict[str, object] = {"policy": self.policy, "hush": False, "guide": None, "gate": None,
                                     "commit": "agreement", "pipeline": None}
        for extra in self.extras:
            fields.update(EXTRAS[extra])
        if "pipe" in self.extras and pipeline is not None:
            fields["pipeline"] = pipeline
        return replace(options, **fields)  # type: ignore[arg-type]


def parse_variant(name: str) -> Variant:
    policy, *extras = name.strip().split("+")
    if not policy:
        raise ValueError(f"variant {name!r} names no policy (e.g. live+hush+draft)")
    unknown = [e for e in extras if e not in EXTRAS]
    if unknown:
        raise ValueError(f"variant {name!r}: unknown option(s) {unknown}; known: {', '.join(EXTRAS)}")
    if len(set(extras)) != len(extras) or sum(e in GUIDES for e in extras) > 1:
        raise ValueError(f"variant {name!r}: give each option once and at most one of {', '.join(GUIDES)}")
    return Variant(policy, tuple(extras))


@dataclass(frozen=True)
class Stage:
    """One line of the ablation: a variant at a compute type, step and beam width, and the
    live session's committed context and early commits."""

    label: str
    variant: str
    compute: str = "float32"
    step: float = 1.0
    beam_size: int = 5
    context_s: float = 0.5
    commit_confident: float | None = None
    silence_cache: bool = False

    def options(self, pipeline: tuple[int, int] | None = None) -> StreamOptions:
        """The stream options of this stage (``pipeline``: see ``Variant.apply``)."""
        from stenoflow.streaming.options import StreamOptions

        base = StreamOptions(step=self.step, beam_size=self.beam_size, context_s=self.context_s,
                             commit_confident=self.commit_confident, silence_cache=self.silence_cache)
        return parse_variant(self.variant).apply(base, pipeline)


# The ablation in the order of WhisperFlow's Fig. 10: Whisper-Streaming as it was (30 s padding,
# beam 5, step 1 s), then one change at a time, each stage keeping the previous ones, up to the
# default configuration (the live session); its pipelining and AlignAtt beside it.
ABLATION = (
    Stage("baseline", "whisper-s"),
    Stage("+hush", "whisper-s+hush"),
    Stage("+draft/gate", "whisper-s+hush+verify+gate"),
    Stage("+int8", "whisper-s+hush+verify+gate", "int8"),
    Stage("+greedy/step 0.5", "whisper-s+hush+verify", "int8", step=0.5, beam_size=1),
    Stage("+short buffers", "live+hush+draft", "int8", step=0.5, beam_size=1),
    Stage("+context 3 s", "live+hush+draft", "int8", step=0.5, beam_size=1, context_s=3.0),
    Stage("+step 0.35/confident", "live+hush+draft", "int8", 0.35, 1, 3.0, commit_confident=0.9),
    Stage("+15 s window", "live+draft", "int8", 0.35, 1, 3.0, commit_confident=0.9),
    Stage("+silence cache", "live+draft", "int8", 0.35, 1, 3.0, commit_confident=0.9, silence_cache=True),
    Stage("+pipelining", "live+draft+pipe", "int8", 0.35, 1, 3.0, commit_confident=0.9, silence_cache=True),
    Stage("alignatt", "live+draft+alignatt", "int8", 0.35, 1, 3.0, silence_cache=True),
)
