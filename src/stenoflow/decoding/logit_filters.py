"""Whisper's logit rules, each a small filter that edits the logits of one step in place.

All filters work on the whole batch (every beam or sample) with tensor operations, so a
decoding step costs a handful of kernel launches and no Python loop over rows.
"""

from __future__ import annotations

from typing import Protocol

import torch
from torch import Tensor

NEG_INF = float("-inf")


class LogitFilter(Protocol):
    def apply(self, logits: Tensor, tokens: Tensor) -> None:
        """logits (B, V) of the next token given tokens (B, T); edited in place."""

    def apply_positions(self, logits: Tensor, tokens: Tensor, start: int) -> None:
        """logits (T, V) of one row at T positions, row j the next token after ``tokens[:, :
        start + j + 1]`` (tokens (1, start + T)); edited in place, each row exactly as ``apply``
        would edit it alone. Verifying a draft filters all its positions at once this way."""


def prefix_lengths(logits: Tensor, start: int) -> range:
    """Length of the token prefix each row of ``apply_positions``'s logits follows."""
    return range(start + 1, start + 1 + logits.shape[0])


class SuppressBlank:
    """No blank and no end-of-text as the very first sampled token."""

    def __init__(self, blank_ids: list[int], sample_begin: int) -> None:
        self.ids = torch.tensor(blank_ids, dtype=torch.long)
        self.sample_begin = sample_begin

    def apply(self, logits: Tensor, tokens: Tensor) -> None:
        if tokens.shape[1] == self.sample_begin:
            logits[:, self.ids.to(logits.device)] = NEG_INF

    def apply_positions(self, logits: Tensor, tokens: Tensor, start: int) -> None:
        if self.sample_begin in prefix_lengths(logits, start):
            logits[self.sample_begin - start - 1, self.ids.to(logits.device)] = NEG_INF


class NoEndBefore:
    """No end-of-text until the sequence holds ``length`` tokens, where any other token may
    follow: decoding goes on past where the decoder would stop (a continuation past a
    sentence it took for the last one). Applied after the rules that may leave end-of-text
    alone (a loop, a segment closed at the end of the audio), which it then keeps."""

    def __init__(self, eot: int, length: int) -> None:
        self.eot = eot
        self.length = length

    def apply(self, logits: Tensor, tokens: Tensor) -> None:
        if tokens.shape[1] < self.length:
            self._suppress(logits, torch.ones(logits.shape[0], dtype=torch.bool, device=logits.device))

    def apply_positions(self, logits: Tensor, tokens: Tensor, start: int) -> None:
        rows = torch.tensor([n < self.length for n in prefix_lengths(logits, start)], device=logits.device)
        self._suppress(logits, rows)

    def _suppress(self, logits: Tensor, rows: Tensor) -> None:
        eot = logits[:, self.eot].clone()
        logits[:, self.eot] = NEG_INF
        open_ = logits.amax(dim=-1) > NEG_INF
        logits[:, self.eot] = torch.where(rows & open_, logits[:, self.eot], eot)


class SuppressTokens:
    def __init__(self, ids: list[int]) -> None:
        self.ids = torch.tensor(sorted(set(ids)), dtype=torch.long)

    def apply(self, logits: Tensor, tokens: Tensor) -> None:
        logits[:, self.ids.to(logits.device)] = NEG_INF

    def apply_positions(self, logits: Tensor, tokens: Tensor, start: int) -> None:
        self.apply(logits, tokens)


class ApplyTimestampRules:
    """Timestamps come in pairs, never go backwards, and win when they are likelier than any text.

    * ``<|notimestamps|>`` is never sampled;
    * after one timestamp the next token is another timestamp (closing a segment) or, if it
      already closed one, text; a lone timestamp may be followed by text or end-of-text;
    * a timestamp may not be smaller than the last one, so segments cannot loop back;
    * the first sampled token is a timestamp no later than ``max_initial_timestamp``;
    * with ``max_timestamp_index`` (where the audio ends): no timestamp after it, none opening a
      segment at it, and once a segment closes there only end-of-text follows. Without it a
      decoder that heard less than 30 s can write segments past the end of its input, which is
      how it repeats the transcript it already wrote;
    * if the total probability of all timestamps beats every single text token, sample a
      timestamp: this is what makes Whisper segment at all.
    """

    def __init__(self, eot: int, no_timestamps: int, timestamp_begin: int, sample_begin: int,
                 max_initial_timestamp_index: int | None, max_timestamp_index: int | None = None) -> None:
        self.eot = eot
        self.no_timestamps = no_timestamps
        self.tb = timestamp_begin
        self.sample_begin = sample_begin
        self.max_initial = max_initial_timestamp_index
        self.max_index = max_timestamp_index

    def apply(self, logits: Tensor, tokens: Tensor) -> None:
        logits[:, self.no_timestamps] = NEG_INF
        seq = tokens[:, self.sample_begin :]
        n = seq.shape[1]
        if n == 0:
            self._first(logits)
        else:
            is_ts = seq >= self.tb
            newest = torch.where(is_ts, seq, torch.full_like(seq, -1)).max(dim=1).values
            penultimate = is_ts[:, -2] if n >= 2 else torch.ones_like(is_ts[:, -1])
            self._after(logits, is_ts[:, -1], penultimate, newest, seq[:, -1])
        self._prefer_timestamps(logits)

    def apply_positions(self, logits: Tensor, tokens: Tensor, start: int) -> None:
        logits[:, self.no_timestamps] = NEG_INF
        # Rows are in prefix order, so those with nothing sampled yet lead.
        empty = min(logits.shape[0], max(0, self.sample_begin - start))
        self._first(logits[:empty])
        if empty < logits.shape[0]:
            seq = tokens[0, self.sample_begin :]
            is_ts = seq >= self.tb
            newest = torch.where(is_ts, seq, torch.full_like(seq, -1)).cummax(dim=0).values
            last = torch.arange(start + empty, start + logits.shape[0], device=seq.device) - self.sample_begin
            penultimate = torch.where(last >= 1, is_ts[(last - 1).clamp(min=0)], True)
            self._after(logits[empty:], is_ts[last], penultimate, newest[last], seq[last])
        self._prefer_timestamps(logits)

    def _first(self, logits: Tensor) -> None:
        """The rules of the first sampled token."""
        tb = self.tb
        logits[:, :tb] = NEG_INF
        if self.max_initial is not None:
            logits[:, tb + self.max_initial + 1 :] = NEG_INF
        if self.max_index is not None:
            logits[:, tb + max(self.max_index, 1) :] = NEG_INF  # opens a segment: before the end

    def _after(self, logits: Tensor, last: Tensor, penultimate: Tensor, newest: Tensor, last_token: Tensor) -> None:
        """The rules after sampled tokens, per row: whether its last and the one before it are
        timestamps, its newest timestamp (-1: none) and its last token."""
        tb = self.tb
        logits[:, tb:].masked_fill_((last & penultimate)[:, None], NEG_INF)
        logits[:, : self.eot].masked_fill_((last & ~penultimate)[:, None], NEG_INF)
        # Timestamps are non-decreasing; a segment that just opened may close at the same time.
        bound = torch.where(last & ~penultimate, newest, newest + 1)
        ids = torch.arange(tb, logits.shape[1], device=logits.device)
        below = (ids[None, :] < bound[:, None]) & (newest >= 0)[:, None]
        logits[:, tb:].masked_fill_(below, NEG_INF)
        if self.max_index is not None:
            # Closing at the end is allowed; opening there (after a closed segment) is not.
            opening = last & ~penultimate
            logits[:, tb + self.max_index + 1 :] = NEG_INF
            logits[:, tb + self.max_index].masked_fill_(opening, NEG_INF)
            ended = opening & (last_token >= tb + self.max_index)
            logits[:, tb:].masked_fill_(ended[:, None], NEG_INF)

    def _prefer_timestamps(self, logits: Tensor) -> None:
        """Sample a timestamp where all of them together are likelier than any text token."""
        tb = self.tb
        logprobs = torch.log_softmax(logits.float(), dim=-1)
        timestamp_logprob = logprobs[:, tb:].logsumexp(dim=-1)
        max_text_logprob = logprobs[:, :tb].max(dim=-1).values
        logits[:, :tb].masked_fill_((timestamp_logprob > max_text_logprob)[:, None], NEG_INF)
