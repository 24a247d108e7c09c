"""Decoder caches: a preallocated self-attention cache and the cross-attention K/V.

The self-attention cache is allocated once for the longest sequence a decoding can reach and
written in place, so the per-token step allocates nothing for it. Its ``length`` is the
number of valid positions; rolling it back (speculative decoding, reference verification)
is just lowering ``length``.

The cross-attention K/V depends only on the encoder output, so it is projected once per
audio window and shared by every beam and every decoding step.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


class SelfAttentionCache:
    """Keys and values of every decoder layer: ``(n_layer, batch, n_head, max_len, head_dim)``."""

    def __init__(
        self,
        n_layer: int,
        batch: int,
        n_head: int,
        max_len: int,
        head_dim: int,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
        alignment: tuple[tuple[tuple[int, int], ...], int] | None = None,
    ) -> None:
        shape = (n_layer, batch, n_head, max_len, head_dim)
        self.k = torch.empty(shape, dtype=dtype, device=device)
        self.v = torch.empty(shape, dtype=dtype, device=device)
        self.length = 0
        # Attention of the alignment heads at every position (batch, max_len, n_heads, n_audio):
        # the rows word timing needs, recorded by the passes that decode the tokens anyway.
        self.attention: Tensor | None = None
        self._heads: dict[int, tuple[list[int], list[int]]] = {}  # layer -> (heads, their slots)
        if alignment is not None:
            heads, n_audio = alignment
            for slot, (layer, head) in enumerate(heads):
                mine = self._heads.setdefault(layer, ([], []))
                mine[0].append(head)
                mine[1].append(slot)
            self.attention = torch.zeros((batch, max_len, len(heads), n_audio), dtype=torch.float32, device=device)

    @property
    def batch(self) -> int:
        return self.k.shape[1]

    @property
    def max_len(self) -> int:
        return self.k.shape[3]

    def write(self, layer: int, k: Tensor, v: Tensor, offset: int) -> tuple[Tensor, Tensor]:
        """Store ``k, v`` of shape (batch, n_head, T, head_dim) at ``offset``; return the valid prefix."""
        end = offset + k.shape[2]
        if end > self.max_len:
            raise ValueError(f"decoder context overflow: {end} positions > {self.max_len}")
        self.k[layer, :, :, offset:end] = k
        self.v[layer, :, :, offset:end] = v
        return self.k[layer, :, :, :end], self.v[layer, :, :, :end]

    def heads_of_layer(self, layer: int) -> list[int]:
        """Alignment heads of ``layer`` whose attention this cache records."""
        entry = self._heads.get(layer)
        return entry[0] if entry else []

    def record_attention(self, layer: int, weights: Tensor, offset: int) -> None:
        """Store ``weights`` (batch, heads of this layer, T, n_audio) at positions offset.."""
        assert self.attention is not None
        slots = self._heads[layer][1]
        n = min(weights.shape[-1], self.attention.shape[-1])
        self.attention[:, offset : offset + weights.shape[2], slots, :n] = weights[..., :n].transpose(1, 2)

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows ``index`` (beam search): rows may repeat or drop out."""
        n = self.length
        if n == 0:
            return
        if index.numel() == self.batch:
            moved = (index != torch.arange(self.batch, device=index.device)).nonzero().flatten()
            if moved.numel():  # rows that keep their own history need no copy
                src = index[moved]
                self.k[:, moved, :, :n] = self.k[:, src, :, :n]
                self.v[:, moved, :, :n] = self.v[:, src, :, :n]
                if self.attention is not None:
                    self.attention[moved, :n] = self.attention[src, :n]
        else:  # batch size changes: reallocate at the new size
            self.k = self.k.index_select(1, index)
            self.v = self.v.index_select(1, index)
            if self.attention is not None:
                self.attention = self.attention.index_select(0, index)

    def truncate(self, length: int) -> None:
        assert 0 <= length <= self.length
        self.length = length


@dataclass
class CrossKV:
    """Per decoder layer, the projected encoder keys and values: (1 or batch, n_head, n_audio, head_dim)."""

    k: list[Tensor]
    v: list[Tensor]

    @property
    def n_audio(self) -> int:
        return self.k[0].shape[2]

    def expand(self, batch: int) -> CrossKV:
        """A view that serves ``batch`` rows (beams) without copying."""
        if self.k[0].shape[0] == batch:
            return self
        assert self.k[0].shape[0] == 1, "only a single audio can be broadcast over beams"
        return CrossKV(
            [k.expand(batch, -1, -1, -1) for k in self.k],
            [v.expand(batch, -1, -1, -1) for v in self.v],
        )

    def select(self, index: Tensor) -> CrossKV:
        if self.k[0].shape[0] == 1:
            return self
        return CrossKV([k.index_select(0, index) for k in self.k], [v.index_select(0, index) for v in self.v])
