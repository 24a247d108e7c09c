"""The decoder's forward pass over a growing token batch, with its caches."""

from __future__ import annotations

import torch
from torch import Tensor

from stenoflow.model.kv_cache import CrossKV
from stenoflow.model.whisper import Whisper


class Inference:
    """Feeds only the tokens the cache has not seen yet, so callers pass whole sequences.

    ``forward_passes`` counts decoder calls: later strategies (reference verification,
    speculative decoding) are judged by how many they save. ``pass_rows`` holds the batch rows
    of each call after the prompt, the beam width beam pruning reduces.

    With ``alignment_heads`` the cache also records the cross-attention queries of their layers
    at every position, from which ``attention`` gives those heads' attention over the audio: word
    timing needs no second pass over the decoded tokens.

    At one row, each pass's last residual stream (before the final layer norm) is kept until
    ``take_hidden`` reads it: Medusa heads draft from it at no extra decoder cost.
    """

    def __init__(self, model: Whisper, cross: CrossKV, batch: int, max_len: int | None = None,
                 alignment_heads: tuple[tuple[int, int], ...] | None = None) -> None:
        assert cross.k[0].shape[0] == 1, "one audio window per decoding"
        self.model = model
        self.cross = cross
        self.cache = model.new_cache(batch, max_len, alignment_heads)
        self.forward_passes = 0
        self.pass_rows: list[int] = []
        self._hidden: list[tuple[int, Tensor]] = []  # (offset, residual stream (1, T, D)) per pass

    @property
    def length(self) -> int:
        return self.cache.length

    def prefill(self, tokens: Tensor, logits_at: list[int]) -> Tensor:
        """Run the shared prompt (1, T) once and copy its keys/values to every row.

        Returns the logits (1, len(logits_at), V) at the prompt positions ``logits_at`` (the
        start-of-transcript position gives the no-speech probability, the last one the first
        token); the others are never projected onto the vocabulary.
        """
        assert tokens.shape[0] == 1 and self.cache.length == 0
        at = torch.tensor(logits_at, dtype=torch.long)
        if self.cache.batch == 1:
            logits = self._run(tokens, logits_at=at)
        else:
            one = self.model.new_cache(1, tokens.shape[1])
            logits = self.model.decoder(tokens, self.cross, one, logits_at=at)
            self.cache.broadcast(one, tokens.shape[1])
        self.forward_passes += 1
        return logits

    def extend(self, tokens: Tensor) -> Tensor:
        """Forced tokens (1, T) after the cached ones (one row): last position's logits (1, V)."""
        assert self.cache.batch == 1
        logits = self._run(tokens, last_only=True)
        self.forward_passes += 1
        return logits[:, -1]

    def logits(self, tokens: Tensor) -> Tensor:
        """Next-token logits (B, V) for sequences tokens (B, T) that extend the cached ones."""
        new = tokens[:, self.cache.length :]
        logits = self._run(new, last_only=True)
        self.forward_passes += 1
        self.pass_rows.append(new.shape[0])
        return logits[:, -1]

    def all_logits(self, tokens: Tensor) -> Tensor:
        """Logits (B, T_new, V) at every new position: verifies several drafted tokens at once."""
        new = tokens[:, self.cache.length :]
        logits = self._run(new)
        self.forward_passes += 1
        self.pass_rows.append(new.shape[0])
        return logits

    def take_hidden(self, valid: int) -> tuple[int, Tensor]:
        """The residual stream at the cached positions a reader has not seen: (start, (1, length -
        start, D)), where start is ``valid`` (what the reader already holds) or the first position a
        pass recomputed since, if earlier. The kept passes are released."""
        end = self.length
        start = min([valid, *(offset for offset, _ in self._hidden)])
        if start >= end or not self._hidden:
            self._hidden = []
            return end, torch.empty(1, 0, 0)
        d = self._hidden[-1][1].shape[-1]
        out = torch.zeros(1, end - start, d, dtype=self._hidden[-1][1].dtype)
        for offset, x in self._hidden:  # in order: a later pass over a position replaces an earlier one
            lo, hi = max(offset, start), min(offset + x.shape[1], end)
            if lo < hi:
                out[:, lo - start : hi - start] = x[:, lo - offset : hi - offset]
        self._hidden = []
        return start, out

    def _run(self, tokens: Tensor, last_only: bool = False, logits_at: Tensor | None = None) -> Tensor:
        offset = self.cache.length
        x = self.model.decoder.hidden(tokens, self.cross, self.cache)
        if x.shape[0] == 1:
            self._hidden.append((offset, x))
        return self.model.decoder.logits_of(x, last_only, logits_at)

    def attention(self, row: int = 0, start: int = 0, end: int | None = None) -> Tensor | None:
        """Alignment-head attention of ``row`` at the cached positions start..end (default: all)
        (positions, heads, n_audio), or None when the cache records none."""
        return self.cache.attention(self.cross, row, start, end)

    def rearrange(self, index: Tensor) -> None:
        self.cache.reorder(index)

    def rollback(self, length: int) -> None:
        self.cache.truncate(length)
