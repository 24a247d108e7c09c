"""Token selection strategies (greedy/sampling, beam search) and the final ranking.

A strategy sees the filtered logits of one step and says which tokens extend which rows; the
decoding task owns the loop, the caches and the filters. New strategies (reference-guided,
speculative, Medusa) implement the same ``TokenDecoder`` protocol.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.distributions import Categorical


@dataclass(frozen=True)
class Step:
    """What a strategy made of one step's logits: the new batch and where each row came from.

    ``parents`` is what lets a strategy reorder rows (beam search) or change their number
    (reference-guided decoding: one row while the reference holds, the full beam after a
    fallback) without touching the caches itself: the task applies it to the decoder's cache.
    A strategy may also append more than one token to its rows (verified drafts).
    """

    tokens: Tensor  # (B', T') every row's sequence after this step
    sum_logprobs: Tensor  # (B',) log probability of each row's sampled tokens
    done: bool  # every row has ended (or enough candidates have)
    parents: Tensor | None = None  # (B',) row of the previous batch each row continues; None: row i
    # At one row: the log probability of each token this step appended (None: not reported).
    logprobs: tuple[float, ...] | None = None


class TokenDecoder(Protocol):
    def reset(self) -> None: ...

    def update(self, tokens: Tensor, logits: Tensor, sum_logprobs: Tensor) -> Step:
        """Extend the rows tokens (B, T) given the filtered next-token logits (B, V)."""

    def finalize(self, tokens: Tensor, sum_logprobs: Tensor) -> tuple[list[list[Tensor]], list[list[float]]]:
        """Candidate sequences and their scores, per audio (one audio here)."""

    def stats(self) -> dict[str, float]:
        """Counters for ``DecodingResult.stats`` (empty for the plain strategies)."""


class GreedyDecoder:
    """Argmax at temperature 0, otherwise sampling; finished rows keep emitting end-of-text."""

    def __init__(self, temperature: float, eot: int) -> None:
        self.temperature = temperature
        self.eot = eot

    def reset(self) -> None:
        pass

    def update(self, tokens: Tensor, logits: Tensor, sum_logprobs: Tensor) -> Step:
        if self.temperature == 0:
            next_tokens = logits.argmax(dim=-1)
        else:
            next_tokens = Categorical(logits=logits / self.temperature).sample()
        logprobs = F.log_softmax(logits.float(), dim=-1)
        current = logprobs.gather(1, next_tokens[:, None]).squeeze(1)
        finished = tokens[:, -1] == self.eot
        sum_logprobs = sum_logprobs + current.masked_fill(finished, 0.0)
        next_tokens = next_tokens.masked_fill(finished, self.eot)
        tokens = torch.cat([tokens, next_tokens[:, None]], dim=-1)
        single = (float(current[0]),) if tokens.shape[0] == 1 else None
        return Step(tokens, sum_logprobs, bool((next_tokens == self.eot).all()), logprobs=single)

    def finalize(self, tokens: Tensor, sum_logprobs: Tensor) -> tuple[list[list[Tensor]], list[list[float]]]:
        tokens = F.pad(tokens, (0, 1), value=self.eot)  # every row ends with end-of-text
        return [list(tokens)], [sum_logprobs.tolist()]

    def stats(self) -> dict[str, float]:
        return {}


ET_MIN_SHARE = 0.75  # early termination: a finished candidate counts once it is this share of the budget


class BeamSearchDecoder:
    """Batched beam search: all beams go through the decoder in one forward call.

    Each step takes the ``beam_size + 1`` best continuations of every live beam, keeps the best
    ``beam_size`` unfinished ones alive and moves finished ones aside; the search stops once
    ``round(beam_size * patience)`` sequences have finished. The returned ``parents`` tell the
    task which cache row each beam continues.

    Early termination (seed 001 §4.3): with ``stop_length`` (the rows' length, prompt included,
    at which the transcript is expected to be complete) the search also stops as soon as the
    rows reach it and a sequence has finished that is itself at least ``ET_MIN_SHARE`` of that
    length: a candidate that ended far short of the prediction is a deletion, not a transcript.
    """

    def __init__(self, beam_size: int, eot: int, patience: float | None = None,
                 stop_length: int | None = None, sample_begin: int = 0) -> None:
        self.beam_size = beam_size
        self.eot = eot
        self.stop_length = stop_length
        self.patience = patience or 1.0
        # a finished sequence (end-of-text included) this long counts for early termination
        self.min_finished = sample_begin + ET_MIN_SHARE * ((stop_length or sample_begin) - sample_begin)
        self.max_candidates = round(beam_size * self.patience)
        assert self.max_candidates > 0, f"patience {patience} leaves no candidate"
        self.finished: dict[tuple[int, ...], float] = {}

    def reset(self) -> None:
        self.finished = {}

    def update(self, tokens: Tensor, logits: Tensor, sum_logprobs: Tensor) -> Step:
        n = tokens.shape[0]
        assert n == self.beam_size, f"{n} rows for {self.beam_size} beams"
        logprobs = F.log_softmax(logits.float(), dim=-1)
        k = self.beam_size + 1
        top_lp, top_ids = logprobs.topk(k, dim=-1)  # (B, k)
        scores = (sum_logprobs[:, None] + top_lp).flatten()
        order = scores.argsort(descending=True).tolist()
        top_ids_l = top_ids.flatten().tolist()
        scores_l = scores.tolist()
        prefixes = tokens.tolist()
        keep_rows: list[int] = []
        keep_tokens: list[int] = []
        keep_scores: list[float] = []
        seen: set[tuple[int, ...]] = set()
        for flat in order:
            row, token = divmod(flat, k)[0], top_ids_l[flat]
            seq = (*prefixes[row], token)
            if seq in seen:
                continue
            seen.add(seq)
            if token == self.eot:
                if len(self.finished) < self.max_candidates and seq not in self.finished:
                    self.finished[seq] = scores_l[flat]
            else:
                keep_rows.append(row)
                keep_tokens.append(token)
                keep_scores.append(scores_l[flat])
                if len(keep_rows) == self.beam_size:
                    break
        slots = stable_slots(keep_rows)
        parents = [keep_rows[j] for j in slots]
        index = torch.tensor(parents, dtype=torch.long, device=tokens.device)
        new_tokens = torch.tensor([keep_tokens[j] for j in slots], device=tokens.device)
        tokens = torch.cat([tokens[index], new_tokens[:, None]], dim=-1)
        scores_kept = torch.tensor([keep_scores[j] for j in slots], dtype=sum_logprobs.dtype)
        done = len(self.finished) >= self.max_candidates or (
            self.stop_length is not None and tokens.shape[1] >= self.stop_length
            and any(len(seq) >= self.min_finished for seq in self.finished))
        return Step(tokens, scores_kept, done, index)

    def finalize(self, tokens: Tensor, sum_logprobs: Tensor) -> tuple[list[list[Tensor]], list[list[float]]]:
        finished = dict(self.finished)
        if len(finished) < self.beam_size:  # ran out of length: take the best unfinished ones
            for row in sum_logprobs.argsort(descending=True).tolist():
                seq = (*tokens[row].tolist(), self.eot)
                finished.setdefault(seq, float(sum_logprobs[row]))
                if len(finished) >= self.beam_size:
                    break
        seqs = [torch.tensor(s) for s in finished]
        return [seqs], [list(finished.values())]

    def stats(self) -> dict[str, float]:
        return {}


def stable_slots(parents: list[int]) -> list[int]:
    """Order the kept candidates so that each stays in its parent's row where it can.

    Row order means nothing to the search, but a candidate left in its parent's row needs no
    copy of that row's KV cache: usually most beams extend in place and few rows move.
    Returns, for each row, the index of the candidate placed there.
    """
    n = len(parents)
    slot_of: list[int | None] = [None] * n
    taken = [False] * n
    for j, p in enumerate(parents):
        if not taken[p]:
            taken[p] = True
            slot_of[j] = p
    free = iter(i for i in range(n) if not taken[i])
    rows = [0] * n
    for j in range(n):
        slot = slot_of[j]
        if slot is None:
            slot = next(free)
        rows[slot] = j
    return rows


class MaximumLikelihoodRanker:
    """Pick the candidate with the best length-normalised log probability.

    ``length_penalty=None`` divides by the length; a value alpha uses ((5 + len) / 6) ** alpha.
    """

    def __init__(self, length_penalty: float | None) -> None:
        self.length_penalty = length_penalty

    def score(self, logprob: float, length: int) -> float:
        length = max(length, 1)  # an empty transcript (end-of-text first, after a forced prefix)
        if self.length_penalty is None:
            return logprob / length
        return logprob / (((5 + length) / 6) ** self.length_penalty)

    def rank(self, lengths: list[int], sum_logprobs: list[float]) -> int:
        scores = [self.score(lp, n) for lp, n in zip(sum_logprobs, lengths)]
        return max(range(len(scores)), key=scores.__getitem__)
