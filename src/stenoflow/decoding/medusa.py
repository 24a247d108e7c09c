"""Drafting with Medusa heads (seed 003): the draft costs one small product per main-model pass.

After each pass of the main model, the heads read the decoder's last state at the position that
predicted the newest kept token and propose the K tokens after it (head k: the token k places
further on). The next verification pass checks them with that token, so a cycle of draft and check
is one main pass and one evaluation of the heads; there is no draft model and no draft cache
(Medusa-Block keeps the one layer of cache its block needs, rolled back with the model's).

Acceptance is the verifier's (``decoding.guided``): greedy-exact keeps a drafted token only where it
is the main model's argmax, so the output is greedy's token for token; typical acceptance (the
paper's eq. 3) keeps it where the main model gives it enough probability.
"""

from __future__ import annotations

import torch

from stenoflow.decoding.inference import Inference
from stenoflow.decoding.speculative import Lookahead
from stenoflow.model.kv_cache import SelfAttentionCache
from stenoflow.model.medusa import MedusaHeads
from stenoflow.model.whisper import TextDecoder


class MedusaProposer:
    """A ``speculative.Proposer`` that reads the draft off Medusa heads on the main model's states."""

    def __init__(self, heads: MedusaHeads, decoder: TextDecoder, inference: Inference, eot: int) -> None:
        self.heads = heads
        self.decoder = decoder
        self.inference = inference
        self.eot = eot
        k = heads.useful  # the heads a draft gets far enough to need (from their held-out record)
        self.lookahead = Lookahead(initial=k, minimum=1, maximum=k)
        self.cross_k, self.cross_v = inference.cross.k[-1], inference.cross.v[-1]
        self.cache: SelfAttentionCache | None = heads.new_cache(inference.cache.max_len)
        self.valid = 0  # positions whose state the heads (the block's cache) already hold
        self.last: torch.Tensor | None = None  # the heads' input at position valid - 1
        self.passes = 0
        self.counts = {"medusa_drafts": 0, "medusa_tokens": 0}

    def restart(self) -> None:
        self.valid = min(self.valid, self.inference.length)
        self.last = None

    def stats(self) -> dict[str, float]:
        return {key: float(v) for key, v in self.counts.items()}

    def propose(self, history: list[int], k: int) -> tuple[int, ...]:
        state = self._state()
        if state is None:
            return ()
        logits = self.heads.shortlist_logits(state, k=k)  # (k, |vocab|)
        tokens = self.heads.vocab[logits.argmax(dim=-1)].tolist()
        self.passes += 1
        self.counts["medusa_drafts"] += 1
        out: list[int] = []
        for token in tokens:
            out.append(int(token))
            if token == self.eot:
                break
        self.counts["medusa_tokens"] += len(out)
        return tuple(out)

    def _state(self) -> torch.Tensor | None:
        """The heads' input (D,) at the last cached position (the one that predicted the newest
        kept token), bringing the block's cache up to date on the way."""
        end = self.inference.length
        start, hidden = self.inference.take_hidden(self.valid)
        if hidden.shape[1] == 0:
            return self.last if self.valid == end else None
        if self.cache is None:
            hidden = hidden[:, -1:]  # the linear heads read the last state only
        else:
            self.cache.truncate(min(self.cache.length, start))
            if self.cache.length < start:  # states the block never saw (not kept by the inference)
                return None
        states = self.heads.states(hidden, self.decoder, self.cross_k, self.cross_v, self.cache)
        self.valid, self.last = end, states[0, -1]
        return self.last
