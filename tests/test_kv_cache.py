"""The decoder's self-attention cache: beam reorders that copy only what differs between rows
serve every row the history a cache of full copies gives."""

from __future__ import annotations

import torch

from stenoflow.model.kv_cache import SelfAttentionCache

LAYERS, HEADS, DIM, MAX_LEN = 2, 3, 4, 32
ALIGNMENT = ((0, 1), (1, 0), (1, 2))  # (layer, head) pairs


class FullCopies:
    """What a cache must serve: every row's whole history, reordered by copying all of it."""

    def __init__(self, batch: int) -> None:
        self.k = torch.zeros(LAYERS, batch, HEADS, MAX_LEN, DIM)
        self.v = torch.zeros_like(self.k)
        self.queries = torch.zeros(batch, MAX_LEN, len({layer for layer, _ in ALIGNMENT}), HEADS, DIM)

    def reorder(self, index: torch.Tensor) -> None:
        self.k, self.v = self.k[:, index].clone(), self.v[:, index].clone()
        self.queries = self.queries[index].clone()


def _write(cache: SelfAttentionCache, full: FullCopies, steps: int, gen: torch.Generator, back: int = 0) -> None:
    """``steps`` positions from ``back`` before the cache's end on, different in every row."""
    offset, batch = cache.length - back, cache.batch
    for layer in range(LAYERS):
        k, v = (torch.randn(batch, HEADS, steps, DIM, generator=gen) for _ in range(2))
        cache.write(layer, k, v, offset)
        full.k[layer, :, :, offset : offset + steps] = k
        full.v[layer, :, :, offset : offset + steps] = v
        q = torch.randn(batch, HEADS, steps, DIM, generator=gen)
        cache.record_queries(layer, q, offset)
        full.queries[:, offset : offset + steps, layer] = q.transpose(1, 2)
    cache.length = offset + steps


def _same(cache: SelfAttentionCache, full: FullCopies) -> None:
    n = cache.length
    assert cache.batch == full.k.shape[1]
    torch.testing.assert_close(cache.k[:, :, :, :n], full.k[:, :, :, :n], rtol=0, atol=0)
    torch.testing.assert_close(cache.v[:, :, :, :n], full.v[:, :, :, :n], rtol=0, atol=0)
    assert cache.queries is not None
    torch.testing.assert_close(cache.queries[:, :n], full.queries[:, :n], rtol=0, atol=0)


def test_beam_reorders_serve_every_row_its_whole_history() -> None:
    gen = torch.Generator().manual_seed(0)
    cache = SelfAttentionCache(LAYERS, 1, HEADS, MAX_LEN, DIM, alignment=ALIGNMENT)
    full = FullCopies(1)
    _write(cache, full, 6, gen)  # the prompt, at one row

    def step(index: list[int] | None = None, new: int = 1, back: int = 0) -> None:
        if index is not None:
            i = torch.tensor(index)
            cache.reorder(i)
            full.reorder(i)
        _write(cache, full, new, gen, back)
        _same(cache, full)

    step([0, 0, 0, 0])  # a beam opens: four copies of the one row
    step([0, 0, 2, 1])  # rows repeat and drop out
    step([3, 1, 1, 0], new=2)
    step([2])  # the beam closes on one row, which goes on alone
    step(None, new=3)
    cache.truncate(cache.length - 2)  # a rolled-back draft
    step(None)
    step([0, 0, 0, 0])  # opens again: the other rows hold only what they shared before
    step([1, 1, 1, 1])  # all rows one row's copies, at the same size
    step([3, 0, 2, 1])
    step([1, 0, 2])  # another number of distinct rows
    step([2, 2, 0])
    step([1])
    step([0, 0, 0, 0, 0])  # more rows than the store held
    step([4, 3, 2, 1, 0])
    step([1])
    step([0, 0, 0])  # fewer rows than the store holds: the rest keep older positions
    step([2])
    step([0, 0, 0, 0, 0])
    step([0, 0, 0, 0, 0], new=2, back=2)  # positions written again, without a rollback
    step([0, 1, 2, 3, 4])
    step([2, 2, 1, 1, 0])
