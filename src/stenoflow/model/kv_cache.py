"""Decoder caches: a preallocated self-attention cache and the cross-attention K/V.

The self-attention cache is allocated once for the longest sequence a decoding can reach and
written in place, so the per-token step allocates nothing for it. Its ``length`` is the
number of valid positions; rolling it back (speculative decoding, reference verification)
is just lowering ``length``. Beam search reorders its rows every step; the positions every row
holds alike (the prompt, and all a single row decoded before a beam opened) are ``shared`` and
never copied, so a reorder moves only what the rows decoded since they last were one.

The cross-attention K/V depends only on the encoder output, so it is projected once per
audio window and shared by every beam and every decoding step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor


class SelfAttentionCache:
    """Keys and values of every decoder layer: ``(n_layer, batch, n_head, max_len, head_dim)``.

    ``k``, ``v`` and ``queries`` are views of the rows in use of a larger store: a beam that
    closes to one row keeps the store and reads one of its rows; when it opens again, the other
    rows still hold the shared positions and only what that row decoded since is copied out."""

    def __init__(
        self,
        n_layer: int,
        batch: int,
        n_head: int,
        max_len: int,
        head_dim: int,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
        alignment: tuple[tuple[int, int], ...] | None = None,
    ) -> None:
        shape = (n_layer, batch, n_head, max_len, head_dim)
        self._k = torch.empty(shape, dtype=dtype, device=device)
        self._v = torch.empty(shape, dtype=dtype, device=device)
        self.length = 0
        # Positions before this one hold the same keys, values and queries in every row of the
        # store (in use or not).
        self.shared = 0
        # The cross-attention queries of the layers that hold alignment heads (``alignment``:
        # (layer, head) pairs) at every position (batch, max_len, layers, n_head, head_dim): what
        # word timing needs, recorded by the passes that decode the tokens anyway (a whole layer's
        # queries: one plain copy per pass). The heads' attention over the audio is computed from
        # them when asked for (``attention``), once for all positions rather than in every pass.
        self.alignment = alignment or ()
        self._slots = {layer: slot for slot, layer in enumerate(sorted({layer for layer, _ in self.alignment}))}
        self._queries: Tensor | None = None
        if self.alignment:
            self._queries = torch.zeros((batch, max_len, len(self._slots), n_head, head_dim), dtype=dtype,
                                        device=device)
        self._use(0, batch)

    def _use(self, first: int, batch: int) -> None:
        """Serve the store's rows ``first .. first + batch``."""
        self._first = first
        self.k = self._k[:, first : first + batch]
        self.v = self._v[:, first : first + batch]
        self.queries = None if self._queries is None else self._queries[first : first + batch]

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
        self.shared = min(self.shared, offset)  # rows may write different tokens
        self.k[layer, :, :, offset:end] = k
        self.v[layer, :, :, offset:end] = v
        return self.k[layer, :, :, :end], self.v[layer, :, :, :end]

    def records(self, layer: int) -> bool:
        """Whether this cache records the cross-attention queries of ``layer``."""
        return layer in self._slots

    def record_queries(self, layer: int, q: Tensor, offset: int) -> None:
        """Store the cross-attention queries ``q`` (batch, n_head, T, head_dim) of ``layer`` at
        positions offset.."""
        assert self.queries is not None
        self.queries[:, offset : offset + q.shape[2], self._slots[layer]] = q.transpose(1, 2)

    def attention(self, cross: CrossKV, row: int = 0, start: int = 0, end: int | None = None) -> Tensor | None:
        """The alignment heads' attention over the audio of ``cross`` at positions start..end
        (default: every cached one) of ``row``: (positions, heads, n_audio), softmaxed in float32;
        None when the cache records no queries."""
        if self.queries is None:
            return None
        end = self.length if end is None else min(end, self.length)
        q = torch.stack([self.queries[row, start:end, self._slots[layer], head]
                         for layer, head in self.alignment])  # (heads, T, head_dim)
        keys = torch.stack([cross.k[layer][row if cross.k[layer].shape[0] > 1 else 0, head]
                            for layer, head in self.alignment])  # (heads, n_audio, head_dim)
        scores = (q @ keys.transpose(1, 2)) / math.sqrt(q.shape[-1])
        return scores.float().softmax(dim=-1).transpose(0, 1)

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows ``index`` (beam search): rows may repeat or drop out. Only positions
        from ``shared`` on differ between rows, so only they are ever copied; one row kept alone
        is served from the store in place, and opening a beam on it again copies only what it
        decoded alone."""
        n = self.length
        if n == 0:
            return
        rows = index.numel()
        if rows == 1:
            self._use(self._first + int(index[0]), 1)
        elif bool((index == index[0]).all()):
            self._spread(self._first + int(index[0]), rows, n)
        elif rows == self.batch:
            moved = (index != torch.arange(rows, device=index.device)).nonzero().flatten()
            # rows that keep their own history need no copy
            self._copy_rows(moved + self._first, index[moved] + self._first, n)
        else:  # another number of distinct rows: a new store of them
            self._restore(index + self._first, n)
            self._use(0, rows)

    def _spread(self, row: int, rows: int, n: int) -> None:
        """Serve ``rows`` copies of the store's row ``row``: copy what it holds from ``shared``
        on into the store's first ``rows`` rows (a larger store first, if need be, filled in
        full), which then all agree up to ``n``."""
        if rows > self._k.shape[1]:
            self._restore(torch.full((rows,), row, dtype=torch.long, device=self._k.device), n)
        else:
            others = torch.tensor([r for r in range(rows) if r != row], dtype=torch.long, device=self._k.device)
            self._copy_rows(others, torch.full_like(others, row), n)
        if rows == self._k.shape[1]:
            self.shared = n
        self._use(0, rows)

    def _copy_rows(self, to: Tensor, source: Tensor, n: int) -> None:
        """Store rows ``to`` take the positions ``shared .. n`` of store rows ``source`` (those
        before ``shared`` are alike in every row already)."""
        start = self.shared
        if not to.numel() or start >= n:
            return
        self._k[:, to, :, start:n] = self._k[:, source, :, start:n]
        self._v[:, to, :, start:n] = self._v[:, source, :, start:n]
        if self._queries is not None:
            self._queries[to, start:n] = self._queries[source, start:n]

    def _restore(self, index: Tensor, n: int) -> None:
        """A new store of the store's rows ``index``, their positions ``:n`` copied (the rest
        unset until written)."""

        def picked(store: Tensor, rows: int, positions: int) -> Tensor:
            shape = list(store.shape)
            shape[rows] = index.numel()
            out = store.new_empty(shape)
            out.narrow(positions, 0, n).copy_(store.narrow(positions, 0, n).index_select(rows, index))
            return out

        self._k, self._v = picked(self._k, 1, 3), picked(self._v, 1, 3)
        if self._queries is not None:
            self._queries = picked(self._queries, 0, 1)

    def broadcast(self, one: SelfAttentionCache, length: int) -> None:
        """Fill every row's first ``length`` positions from the one-row cache ``one`` (a prompt
        run once for all rows)."""
        assert self.length == 0 and self.batch == self._k.shape[1]
        self.k[:, :, :, :length] = one.k[:, :, :, :length]
        self.v[:, :, :, :length] = one.v[:, :, :, :length]
        self.length = self.shared = length

    def truncate(self, length: int) -> None:
        assert 0 <= length <= self.length
        self.length = length
        self.shared = min(self.shared, length)


@dataclass
class CrossKV:
    """Per decoder layer, the projected encoder keys and values: (1 or batch, n_head, n_audio, head_dim)."""

    k: list[Tensor]
    v: list[Tensor]

    @property
    def n_audio(self) -> int:
        return self.k[0].shape[2]

    def first(self, n: int) -> CrossKV:
        """A view of the first ``n`` positions."""
        return CrossKV([k[:, :, :n] for k in self.k], [v[:, :, :n] for v in self.v])

    def span(self, start: int, end: int) -> CrossKV:
        """A view of positions ``start:end``."""
        return CrossKV([k[:, :, start:end] for k in self.k], [v[:, :, start:end] for v in self.v])

    def then(self, rest: CrossKV, start: int, end: int) -> CrossKV:
        """These positions followed by ``rest``'s positions ``start:end``."""
        return CrossKV([torch.cat([a, b[:, :, start:end]], dim=2) for a, b in zip(self.k, rest.k)],
                       [torch.cat([a, b[:, :, start:end]], dim=2) for a, b in zip(self.v, rest.v)])

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
