"""Speculative decoding with a draft model (seed 004), as a draft source of reference-guided decoding.

A small model proposes the next K tokens greedily on the same audio; the main model checks them
in one pass (``decoding.guided.DraftVerifier``), keeps the longest prefix its own argmax confirms
plus its own token where it first disagrees, and rolls its cache back past the rest. So at
beam width 1 the output is the main model's greedy output token for token, in fewer main passes.

``SpeculativeDraft`` is the matcher the reference-guided decoder follows: it records every token
the main model keeps and asks a ``Proposer`` for the next draft. ``DraftModelProposer`` brings the
draft model's own cache in line with those tokens (mapped through a ``TokenBridge`` when the
vocabularies differ, rolled back to the longest common prefix) and decodes K tokens ahead with the
draft model's own prompt, logit rules and log-mel; ``decoding.medusa.MedusaProposer`` reads them off
Medusa heads. A fixed draft (a streaming round's previous hypothesis) can go first: while it has
tokens to offer, it is the draft; past it, the proposer drafts.

Lookahead: fixed, or adaptive: K is chosen after every draft to yield the most tokens per second
from two running estimates, the probability that a draft token is accepted and the cost of a draft
pass against a verification pass (both measured while decoding, so the choice follows the speech,
the pair of models and the machine).

Beam width > 1: the draft guides one row while the main model's best token agrees with it and,
with a confidence gate, leads the second by the gate; where the model disagrees (or is unsure)
the full beam search takes over from that prefix, as for a streaming reference. That is not beam
search's output token for token; greedy decoding with a draft is.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import torch

from stenoflow.decoding.inference import Inference
from stenoflow.decoding.reference import MISMATCH, DraftMatcher, Verdict
from stenoflow.decoding.token_bridge import TokenBridge
from stenoflow.model.kv_cache import CrossKV

if TYPE_CHECKING:
    from stenoflow.decoding.logit_filters import LogitFilter
    from stenoflow.model.context import DecoderContext
    from stenoflow.tokenizer import Tokenizer


@dataclass(frozen=True)
class Lookahead:
    """How many tokens the draft model proposes at a time: fixed, or chosen from what drafting costs."""

    initial: int = 4
    minimum: int = 1
    maximum: int = 12
    # Off by default: on our bench (``stenoflow bench decode``) a fixed K of 4 was as fast with a
    # same-vocabulary draft and faster with another vocabulary's, whose rejections come in bursts
    # (segment ends, timestamps) that a running estimate follows late.
    adaptive: bool = False
    memory: float = 0.7  # weight of the past in the running acceptance and cost estimates

    def __post_init__(self) -> None:
        if not 1 <= self.minimum <= self.initial <= self.maximum:
            raise ValueError(f"lookahead needs 1 <= minimum <= initial <= maximum, got {self.minimum}, "
                             f"{self.initial}, {self.maximum}")
        if not 0 <= self.memory < 1:
            raise ValueError(f"lookahead memory must be in [0, 1), got {self.memory}")

    def best(self, acceptance: float, cost: float) -> int:
        """The K that yields the most tokens per unit of time, for a per-token acceptance
        probability ``acceptance`` and a draft pass costing ``cost`` main-model passes.

        A draft of K tokens yields (1 - a^(K+1)) / (1 - a) tokens (the accepted run, then the
        main model's own token) for K draft passes and one verification pass.
        """
        a = min(max(acceptance, 0.0), 0.999)

        def rate(k: int) -> float:
            return (1 - a ** (k + 1)) / (1 - a) / (k * cost + 1)

        return max(range(self.minimum, self.maximum + 1), key=rate)


class LookaheadControl:
    """K for the next draft: learns the acceptance probability and the cost of a draft pass
    relative to a verification pass as decoding goes (adaptive), or keeps K (fixed)."""

    def __init__(self, config: Lookahead) -> None:
        self.config = config
        self.k = config.initial
        self.kept = 0.0  # running (discounted) draft tokens kept ...
        self.rejected = 0.0  # ... and drafts rejected before their end
        self.cost: float | None = None  # a draft pass / a verification pass (running)

    @property
    def acceptance(self) -> float:
        return (self.kept + 1.0) / (self.kept + self.rejected + 1.25)  # a mild prior near 0.8

    def update(self, proposed: int, accepted: int, cost: float | None) -> None:
        if not self.config.adaptive:
            return
        m = self.config.memory
        self.kept = m * self.kept + accepted
        self.rejected = m * self.rejected + (accepted < proposed)
        if cost is not None:
            self.cost = cost if self.cost is None else m * self.cost + (1 - m) * cost
        if self.cost is not None:
            self.k = self.config.best(self.acceptance, self.cost)


@dataclass(frozen=True)
class DraftModel:
    """A draft model for a main model: its network and tokenizer, and the map between the vocabularies."""

    context: DecoderContext
    to_draft: TokenBridge  # main ids -> draft ids
    to_main: TokenBridge  # draft ids -> main ids
    lookahead: Lookahead = Lookahead()

    @classmethod
    def pair(cls, draft: DecoderContext, main: Tokenizer, lookahead: Lookahead = Lookahead()) -> DraftModel:
        to_draft = TokenBridge(main, draft.tokenizer)
        return cls(draft, to_draft, to_draft.reverse(), lookahead)


@dataclass(frozen=True)
class DraftWindow:
    """A draft model ready for one audio window: its own cross-attention keys/values of that window."""

    model: DraftModel
    cross: CrossKV


class Proposer(Protocol):
    """Where drafted tokens come from: a draft model, or Medusa heads (``decoding.medusa``)."""

    lookahead: Lookahead
    passes: int  # draft computations so far (a draft model's decoder passes, Medusa head evaluations)

    def propose(self, history: list[int], k: int) -> tuple[int, ...]:
        """Up to ``k`` main-vocabulary tokens after the main model's kept tokens ``history``."""

    def restart(self) -> None:
        """Back to the prompt, for a new decoding of the same window."""

    def stats(self) -> dict[str, float]: ...


class SpeculativeDraft:
    """A matcher (the ``ReferenceMatcher`` interface) whose draft a ``Proposer`` writes on demand.

    ``strict`` (beam width > 1): a kept token that differs from the offered draft is a mismatch,
    which opens the beam; otherwise every kept token follows (greedy speculative decoding).
    ``first``: a fixed draft (a streaming round's previous hypothesis) offered before the proposer's.
    """

    reason: str | None = None

    def __init__(self, proposer: Proposer, eot: int, strict: bool, first: DraftMatcher | None = None) -> None:
        self.proposer = proposer
        self.eot = eot
        self.strict = strict
        self.first = first
        self.history: list[int] = []  # tokens the main model kept, after its initial ones
        self.lookahead = LookaheadControl(proposer.lookahead)
        self.draft_s = 0.0  # time per draft computation for the draft on offer
        self.offered_end: float | None = None  # when the draft on offer was handed over
        self.offered: tuple[int, ...] = ()  # the draft last offered, from history position ``offered_at``
        self.offered_at = 0
        self.offered_by_model = False
        self.ended = False

    # --- the matcher interface ---------------------------------------------------------
    @property
    def aligned(self) -> bool:
        return not self.ended

    def restart(self) -> None:
        """Back to the prompt, for a new decoding of the same window."""
        self.proposer.restart()
        self.history, self.offered, self.ended = [], (), False

    def observe(self, token: int) -> Verdict:
        position = len(self.history)
        self.history.append(token)
        if self.first is not None:
            self.first.observe(token)
        if token == self.eot:
            self.ended = True
        j = position - self.offered_at
        if 0 <= j < len(self.offered):
            if token != self.offered[j]:
                self._close(j)
                if self.strict:
                    self.reason = MISMATCH
                    return Verdict.FALLBACK
            elif j == len(self.offered) - 1:
                self._close(j + 1)
        return Verdict.MATCH

    def draft(self, limit: int) -> tuple[int, ...]:
        """The next tokens as the fixed draft has them, or as the proposer drafts them."""
        if self.ended or limit <= 0:
            return ()
        proposal: tuple[int, ...] = ()
        if self.first is not None and self.first.aligned:
            proposal = self.first.draft(limit)
        self.offered_by_model = not proposal
        if not proposal:
            started, passes = time.perf_counter(), self.proposer.passes
            proposal = self.proposer.propose(self.history, min(limit, self.lookahead.k))[:limit]
            self.offered_end = time.perf_counter()
            self.draft_s = (self.offered_end - started) / max(self.proposer.passes - passes, 1)
        self.offered, self.offered_at = proposal, len(self.history)
        return proposal

    def stats(self) -> dict[str, float]:
        return self.proposer.stats()

    def _close(self, accepted: int) -> None:
        """The offered draft was decided: ``accepted`` of its tokens kept. Adapt K to it, and to the
        cost of a draft computation against the verification pass that just ran (the time since the
        draft was handed over)."""
        if self.offered and self.offered_by_model and self.offered_end is not None:
            verify_s = time.perf_counter() - self.offered_end
            self.lookahead.update(len(self.offered), accepted, self.draft_s / verify_s if verify_s > 0 else None)
        self.offered = ()


class DraftModelProposer:
    """Drafts with a small model: it brings its own KV cache in line with the kept tokens (mapped
    into its vocabulary, rolled back to the longest common prefix) and decodes K tokens ahead."""

    def __init__(self, window: DraftWindow, initial: list[int], filters: Sequence[LogitFilter], eot: int) -> None:
        """``initial``: the draft's start of transcript (prompt and prefix included) and
        ``filters`` its logit rules, both in its own vocabulary (see ``DecodingTask.draft_proposer``)."""
        draft = window.model
        ctx = draft.context
        self.initial = initial
        self.filters = list(filters)
        self.eot = eot
        self.inference = Inference(ctx.model, window.cross, 1, ctx.model.dims.n_text_ctx)
        self.pending: torch.Tensor | None = self.inference.prefill(torch.tensor([self.initial]),
                                                                   [len(self.initial) - 1])[:, 0]
        self.fed: list[int] = []  # draft tokens in the draft cache after the initial ones
        self.model = draft
        self.lookahead = draft.lookahead
        self.counts = {"draft_model_passes": 0, "draft_model_tokens": 0, "model_drafts": 0}

    @property
    def passes(self) -> int:
        return self.counts["draft_model_passes"]

    def restart(self) -> None:
        self.inference.rollback(len(self.initial))
        self.fed, self.pending = [], None

    def stats(self) -> dict[str, float]:
        return {key: float(v) for key, v in self.counts.items()}

    def propose(self, history: list[int], k: int) -> tuple[int, ...]:
        target = self.model.to_draft.convert(history)
        common = 0
        for a, b in zip(self.fed, target):
            if a != b:
                break
            common += 1
        if common < len(self.fed):  # the draft model's own guesses past ``common`` were not kept
            self.inference.rollback(len(self.initial) + common)
            self.fed, self.pending = self.fed[:common], None
        seq = [*self.initial, *target]
        if len(target) > len(self.fed) or self.pending is None:
            if len(target) == len(self.fed):  # all cached, but not the logits after them: feed the last again
                self.inference.rollback(len(seq) - 1)
            logits = self.inference.logits(torch.tensor([seq]))
            self.counts["draft_model_passes"] += 1
        else:
            logits = self.pending
        self.fed = list(target)
        out: list[int] = []
        for i in range(k):
            scored = logits.clone()
            for f in self.filters:
                f.apply(scored, torch.tensor([seq]))
            token = int(scored[0].argmax())
            out.append(token)
            if token == self.eot or i == k - 1:
                break
            seq.append(token)
            self.fed.append(token)
            logits = self.inference.logits(torch.tensor([seq]))
            self.counts["draft_model_passes"] += 1
        self.pending = logits  # after the fed tokens: the next draft may start from them
        self.counts["draft_model_tokens"] += len(out)
        self.counts["model_drafts"] += 1
        return tuple(self.model.to_main.convert(out))[:k]
