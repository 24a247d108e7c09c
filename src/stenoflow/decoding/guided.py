"""Reference-guided decoding: beam pruning (paper §4.2) and parallel verification of the reference.

While the hypothesis follows the reference (the previous streaming round's transcript),
decoding keeps a single row and takes the best token, which is what the full beam is
assumed to agree on; once they part ways it falls back to the configured strategy (the
full beam search, or greedy at beam width 1). Two modes:

* ``prune``: the paper's selective matching, one token per decoder pass;
* ``verify``: speculative decoding with the reference as a free draft. After each accepted
  token the rest of the reference goes through the decoder in one pass; each position's
  logits are filtered with its own token prefix, and the longest prefix of the draft that
  the model's own choice (argmax) confirms is accepted, plus the model's token at the
  first position it disagrees. The cache is rolled back past the rejected draft tokens.

Every token kept at one row is the argmax of the filtered logits after the same prefix, so
with a reference both modes at beam width 1 produce the greedy tokens (verify mode up to the
rounding difference between a multi-token and a one-token pass), and verify mode never
needs more decoder passes than greedy: a rejected draft still yields the next token.

Fallback semantics at beam width B > 1: at the step where the match breaks, the single row
is repeated B times and handed to the beam search, which then continues exactly as a fresh
beam search whose B initial rows all hold the current prefix (the same expansion,
deduplication and finished-candidate rules as a search started at the prompt). Scores keep
the prefix's log probability, a constant shared by all candidates, so beam selection is as
if the search had started at the prefix; ranking uses the whole sampled length. There is no
way back to one row afterwards, except that a beam the confidence gate opened may close again
(``close``): once its best row leads the next by the gate, or stayed the best for ``CLOSE_HELD``
tokens, and no candidate has finished, that row goes on alone, and the matcher re-aligns on the
reference from the tokens the beam chose. At beam width 1 in verify mode a fallback only pauses
the drafting: the matcher re-aligns on a later word token, searching from where it broke.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor

from stenoflow.decoding.inference import Inference
from stenoflow.decoding.logit_filters import LogitFilter
from stenoflow.decoding.reference import (
    ALIGN_FAILED,
    FALLBACK_REASONS,
    MISMATCH,
    DraftMatcher,
    ReferenceMatcher,
    Verdict,
)
from stenoflow.decoding.strategies import BeamSearchDecoder, Step, TokenDecoder

if TYPE_CHECKING:
    from stenoflow.decoding.speculative import SpeculativeDraft

log = logging.getLogger(__name__)


class DraftVerifier:
    """Feeds a drafted continuation through the decoder in one pass; returns filtered logits.

    The logit filters look at the tokens so far, so each position's logits are filtered
    with the sequence up to that position, exactly as a one-token step there would be; all
    positions are filtered together, with tensor operations, not one Python step per token.

    ``typical`` = (epsilon, alpha): typical acceptance (Medusa, seed 003 eq. 3) instead of
    greedy-exact: see ``choose``.
    """

    def __init__(self, inference: Inference, filters: Sequence[LogitFilter],
                 typical: tuple[float, float] | None = None) -> None:
        self.inference = inference
        self.filters = filters
        self.typical = typical

    def choose(self, logits: Tensor, drafted: int | None, best: int | None = None) -> int:
        """The token kept at a position with filtered logits (1, V) where the draft has ``drafted``:
        the argmax (``best``, if known; greedy-exact), or, with typical acceptance, the drafted
        token if the model gives it a probability above min(epsilon, alpha * exp(-entropy)), else
        the argmax."""
        best = int(logits[0].argmax()) if best is None else best
        if self.typical is None or drafted is None or drafted == best:
            return best
        epsilon, alpha = self.typical
        logp = F.log_softmax(logits[0].float(), dim=-1)
        p = logp.exp()
        entropy = -(p * logp.masked_fill(p == 0, 0.0)).sum()
        return drafted if float(p[drafted]) > min(epsilon, alpha * float(torch.exp(-entropy))) else best

    def positions(self, seq: Tensor) -> Tensor:
        """For seq (1, T) extending the cached tokens, the filtered next-token logits (T - start, V)
        after each token the cache has not seen yet, in order, each row filtered with its own
        prefix, all rows at once."""
        start = self.inference.length
        logits = self.inference.all_logits(seq)[0]  # (T - start, V)
        for f in self.filters:
            f.apply_positions(logits, seq, start)
        return logits


UNSURE = "unsure"  # the confidence gate opened the beam: the best token did not lead by enough
# A closing beam closes once its best row leads the next by the gate, or has stayed the best for
# this many more tokens: rival rows then mostly differ from it in an earlier choice (a comma, the
# case of a word) that these tokens of look-ahead have settled, and carrying them along to the
# end of the window would decide nothing more.
CLOSE_HELD = 3


def top_margin(logits: Tensor) -> float:
    """How far (nats) the best token's log probability leads the second's, for logits (1, V)."""
    return leads(F.log_softmax(logits.float(), dim=-1))[0]


def leads(logprobs: Tensor) -> list[float]:
    """For log probabilities (T, V), how far (nats) each row's best token leads its second."""
    top = logprobs.topk(2, dim=-1).values
    return (top[:, 0] - top[:, 1]).tolist()


class ReferenceGuidedDecoder:
    """A ``TokenDecoder`` that runs at one row while the best tokens follow the reference.

    ``fallback`` is the strategy of the full width (``BeamSearchDecoder`` for beam_size > 1,
    ``GreedyDecoder`` at 1); it takes over for good at the first fallback, except at width 1
    in verify mode, where following the reference costs nothing and drafting resumes as soon
    as the matcher re-aligns. ``max_length`` bounds a row's length (prompt included) as the
    task's loop does, so that drafting never runs past the sample length or the cache.

    With a confidence ``gate`` (nats, beam_size > 1) the single row must also be sure of itself:
    the beam opens where the best token leads the second by less than the gate or where the
    model disagrees with the reference; running out of reference (or having none) is not a
    reason, so past the draft decoding stays greedy while it is sure. With ``close`` the beam the
    gate opened closes again where its best row is as sure as the gate asks (see the module
    docstring): a round spends beam width only on the stretch the model is unsure of.

    ``hold`` (with a ``DraftMatcher``): over the first ``hold`` draft tokens the beam does not
    open; where the model parts with the draft there, decoding goes on greedily at one row,
    re-aligning on the draft later. A live round holds the words it may commit this round and
    searches only past them, where words can still change.
    """

    def __init__(self, matcher: ReferenceMatcher | DraftMatcher | SpeculativeDraft,
                 fallback: TokenDecoder, beam_size: int, eot: int,
                 verifier: DraftVerifier | None, max_length: int, gate: float | None = None,
                 close: bool = False, hold: int = 0) -> None:
        self.matcher = matcher
        self.fallback = fallback
        self.beam_size = beam_size
        self.eot = eot
        self.verifier = verifier
        self.max_length = max_length
        self.gate = gate if beam_size > 1 else None
        self.close = close and self.gate is not None and isinstance(fallback, BeamSearchDecoder)
        self.hold = hold if isinstance(matcher, DraftMatcher) else 0
        self._held_over = matcher if self.hold and isinstance(matcher, DraftMatcher) else None  # the held draft
        self.opened_at: int | None = None  # length of the rows where the beam last opened (None: at one row)
        self._beam_logprobs: list[list[float]] = []  # per beam row: its tokens' log probabilities since then
        self._best, self._held = -1, 0  # the open beam's best row, and for how many steps it stayed best
        self.resync = verifier is not None and beam_size == 1
        self.guided = True  # one row under the reference; False once the fallback took over
        self.searching = False  # lost the reference and looking for it again (resync only)
        self.fallbacks: list[str] = []  # why each fallback happened, in order
        self.counts: Counter[str] = Counter()

    def reset(self) -> None:
        self.fallback.reset()
        self.matcher.restart()
        self.guided, self.searching = True, False
        self.fallbacks, self.counts = [], Counter()
        self.opened_at = None

    def update(self, tokens: Tensor, logits: Tensor, sum_logprobs: Tensor) -> Step:
        if not self.guided:
            step = self.fallback.update(tokens, logits, sum_logprobs)
            return self._closing(step, sum_logprobs) if self.close else step
        assert tokens.shape[0] == 1, "reference-guided decoding keeps one row until it falls back"
        token = int(logits[0].argmax())
        if not self._sure(logits) or not self._follows(self.matcher.observe(token)):
            return self._fall_back(tokens, logits, sum_logprobs)
        before = float(sum_logprobs[0])
        tokens, sum_logprobs = self._append(tokens, sum_logprobs, token, logits)
        logprob = (float(sum_logprobs[0]) - before,)
        if token == self.eot:
            return Step(tokens, sum_logprobs, True, logprobs=logprob)
        if self.verifier is not None and self.matcher.aligned:
            return self._carry(logprob, self._verify(self.verifier, tokens, sum_logprobs))
        return Step(tokens, sum_logprobs, False, logprobs=logprob)

    def finalize(self, tokens: Tensor, sum_logprobs: Tensor) -> tuple[list[list[Tensor]], list[list[float]]]:
        return self.fallback.finalize(tokens, sum_logprobs)

    def stats(self) -> dict[str, float]:
        out = {key: float(self.counts[key]) for key in ("matched_tokens", "verify_passes", "draft_tokens",
                                                        "draft_accepted", "beam_closed")}
        reasons = Counter(self.fallbacks)
        out.update({f"fallback_{r.replace('-', '_')}": float(reasons[r]) for r in (*FALLBACK_REASONS, UNSURE)})
        out.update(self.matcher.stats())
        return out

    # --- internals --------------------------------------------------------------------------
    def _verify(self, verifier: DraftVerifier, tokens: Tensor, sum_logprobs: Tensor) -> Step:
        """Verify drafts while there are any: each pass checks the token the last one chose together
        with the next draft, so a cycle of draft and check costs one pass of the main model."""
        logprobs: tuple[float, ...] = ()
        while True:
            step = self._verify_once(verifier, tokens, sum_logprobs)
            if step is None:
                return Step(tokens, sum_logprobs, False, logprobs=logprobs)
            if step.logprobs is None or step.done or not self.guided or not self.matcher.aligned:
                return self._carry(logprobs, step)
            tokens, sum_logprobs, logprobs = step.tokens, step.sum_logprobs, logprobs + step.logprobs

    def _verify_once(self, verifier: DraftVerifier, tokens: Tensor, sum_logprobs: Tensor) -> Step | None:
        """Accept the longest prefix of the draft the model confirms, plus its own next token
        (None: no draft to verify)."""
        inference = verifier.inference
        n = tokens.shape[1]
        # Room for the draft and one more token within the length limit and the cache.
        draft = self.matcher.draft(min(self.max_length - n - 1, inference.cache.max_len - n))
        if not draft:
            return None
        seq = torch.cat([tokens, torch.tensor([draft], dtype=tokens.dtype, device=tokens.device)], dim=1)
        self.counts["verify_passes"] += 1
        self.counts["draft_tokens"] += len(draft)
        accepted: list[float] = []
        held = self._holding_until(len(draft))
        rows = verifier.positions(seq)
        best = rows.argmax(dim=-1).tolist()
        logprobs = F.log_softmax(rows.float(), dim=-1)
        gate = self.gate
        margins = [] if gate is None else leads(logprobs)
        for j in range(rows.shape[0]):
            row = rows[j : j + 1]
            token = verifier.choose(row, draft[j] if j < len(draft) else None, best[j])
            sure = j >= len(draft) or gate is None or j < held or margins[j] >= gate
            verdict = self.matcher.observe(token) if sure else Verdict.SKIP
            if sure and verdict is Verdict.MATCH and j < len(draft) and token == draft[j]:
                self._follows(verdict)
                logprob = logprobs[j, token]
                sum_logprobs = sum_logprobs + logprob
                accepted.append(float(logprob))
                self.counts["draft_accepted"] += 1
                if token == self.eot:  # a draft that ends where the model ends: nothing after it counts
                    inference.rollback(n + j + 1)
                    return Step(seq[:, : n + j + 1], sum_logprobs, True, logprobs=tuple(accepted))
                continue
            # The model's token differs from the draft's (in kind, or only in case), or it is
            # unsure: the draft after position j is not what it would feed, so forget those keys.
            inference.rollback(n + j)
            prefix = seq[:, : n + j]
            if not self._sure(row) or not self._follows(verdict):
                step = self._fall_back(prefix, row, sum_logprobs)
                return self._carry(tuple(accepted), step) if step.tokens.shape[0] > 1 else \
                    replace(step, logprobs=(*accepted, *(step.logprobs or ())))
            before = float(sum_logprobs[0])
            prefix, sum_logprobs = self._append(prefix, sum_logprobs, token, row)
            return Step(prefix, sum_logprobs, token == self.eot, logprobs=(*accepted, float(sum_logprobs[0]) - before))
        raise AssertionError("the position after the last draft token always stops verification")

    def _carry(self, logprobs: tuple[float, ...], step: Step) -> Step:
        """``step`` after tokens with ``logprobs`` appended earlier in the same step: reported with
        its own, or, where a closing beam opened in it, carried by its rows until it closes."""
        if step.logprobs is not None:
            return replace(step, logprobs=logprobs + step.logprobs)
        if self.close and not self.guided:
            self._beam_logprobs = [[*logprobs, *row] for row in self._beam_logprobs]
        return step

    def _holding_until(self, n: int) -> int:
        """How many of the next ``n`` draft tokens lie in the held stretch (0 when not aligned)."""
        m = self._held_over
        return 0 if m is None or m.cursor is None else max(0, min(n, self.hold - m.cursor))

    def _holding(self) -> bool:
        """Whether decoding is inside the held stretch, aligned on the draft or re-aligning in it."""
        m = self._held_over
        return m is not None and (m.cursor if m.cursor is not None else m.search_from) < self.hold

    def _sure(self, logits: Tensor) -> bool:
        """The confidence gate: whether the best token leads by enough to stay at one row."""
        if self.gate is None or self._holding() or top_margin(logits) >= self.gate:
            return True
        self.fallbacks.append(UNSURE)
        return False

    def _follows(self, verdict: Verdict) -> bool:
        """Whether decoding stays at one row; records why it does not."""
        if verdict is Verdict.MATCH:
            self.counts["matched_tokens"] += 1
            self.searching = False
        if verdict is not Verdict.FALLBACK:
            return True
        reason = self.matcher.reason
        assert reason is not None
        if self.gate is not None and reason != MISMATCH:
            return True  # no reference (left) to follow: the gate alone decides
        if reason == MISMATCH and self._holding():  # parted with a held draft: on at one row
            self.fallbacks.append(reason)
            self.searching = True
            return True
        if not (self.searching and reason == ALIGN_FAILED):  # one record per lost reference
            self.fallbacks.append(reason)
            log.debug("reference fallback: %s", reason)
        self.searching = self.resync
        return self.resync

    def _fall_back(self, tokens: Tensor, logits: Tensor, sum_logprobs: Tensor) -> Step:
        """Hand the single row to the full-width strategy: a fresh search rooted at this prefix."""
        self.guided = False
        if self.beam_size == 1:
            return self.fallback.update(tokens, logits, sum_logprobs)
        b = self.beam_size
        step = self.fallback.update(tokens.expand(b, -1), logits.expand(b, -1), sum_logprobs.expand(b))
        # Every row of the expanded batch is the single cached row: the cache grows to b rows.
        step = replace(step, parents=torch.zeros(b, dtype=torch.long, device=tokens.device))
        self.opened_at = tokens.shape[1]
        if not self.close:
            return step
        self._beam_logprobs = [[] for _ in range(b)]
        self._best, self._held = -1, 0
        return self._closing(step, sum_logprobs.expand(b))

    def _closing(self, step: Step, before: Tensor) -> Step:
        """A beam step as it is, or, where its best row leads the next by the gate or stayed the
        best for ``CLOSE_HELD`` steps and no candidate has finished, that row alone, back under
        the reference."""
        assert step.parents is not None and isinstance(self.fallback, BeamSearchDecoder) and self.gate is not None
        parents = step.parents.tolist()
        gained = (step.sum_logprobs - before[step.parents]).tolist()
        self._beam_logprobs = [[*self._beam_logprobs[p], g] for p, g in zip(parents, gained)]
        if step.done or self.fallback.finished:
            return step
        top = step.sum_logprobs.topk(2)
        best = int(top.indices[0])
        held = self._held + 1 if parents[best] == self._best else 0  # steps the best row stayed best
        self._best, self._held = best, held
        if float(top.values[0] - top.values[1]) < self.gate and held < CLOSE_HELD:
            return step
        row = step.tokens[best : best + 1]
        assert self.opened_at is not None
        for token in row[0, self.opened_at :].tolist():  # re-align on the reference
            self.matcher.observe(token)
        self.opened_at = None
        self.fallback.reset()
        self.guided, self.searching = True, False
        self.counts["beam_closed"] += 1
        return Step(row, step.sum_logprobs[best : best + 1], False, parents=step.parents[best : best + 1],
                    logprobs=tuple(self._beam_logprobs[best]))

    @staticmethod
    def _append(tokens: Tensor, sum_logprobs: Tensor, token: int, logits: Tensor) -> tuple[Tensor, Tensor]:
        """The row extended by ``token``, scored from the filtered logits (1, V) as greedy does."""
        logprob = F.log_softmax(logits.float(), dim=-1)[:, token]
        new = torch.tensor([[token]], dtype=tokens.dtype, device=tokens.device)
        return torch.cat([tokens, new], dim=1), sum_logprobs + logprob
