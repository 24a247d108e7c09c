"""Word timing's two numerical pieces, against their plain definitions: the median filter that
smooths the alignment heads' attention, and the DTW path through it."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from stenoflow.decoding.timing import alignment_matrix, dtw_path, median_filter


def median_by_sorting(x: torch.Tensor, width: int) -> torch.Tensor:
    """Each window's own median (reflect padding), as a per-window sort computes it."""
    pad = width // 2
    y = F.pad(x.reshape(-1, 1, x.shape[-1]), (pad, pad), mode="reflect")
    return y.unfold(-1, width, 1).median(dim=-1).values.reshape(x.shape)


@pytest.mark.parametrize("width", [3, 5, 7, 9])
def test_median_filter_equals_each_windows_median(width: int) -> None:
    g = torch.Generator().manual_seed(width)
    smooth = torch.randn(4, 6, 200, generator=g)
    ties = torch.randint(0, 4, (3, 5, 31), generator=g).float()  # many equal values per window
    for x in (smooth, ties, smooth[..., : width // 2 + 1]):
        assert torch.equal(median_filter(x, width), median_by_sorting(x, width))


def test_median_filter_leaves_rows_shorter_than_half_a_window_and_refuses_even_widths() -> None:
    x = torch.randn(2, 3)
    assert torch.equal(median_filter(x, 7), x)
    with pytest.raises(ValueError, match="odd"):
        median_filter(torch.randn(2, 20), 4)


def path_by_full_table(cost: np.ndarray) -> tuple[list[int], list[int]]:
    """The cheapest monotonic path, from a table of every cell's best predecessor; of equal costs
    diagonal beats down, and both beat right."""
    n, m = cost.shape
    acc = np.full((n + 1, m + 1), np.inf)
    acc[0, 0] = 0.0
    move = np.zeros((n + 1, m + 1), dtype=int)
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            options = [acc[i - 1, j - 1], acc[i - 1, j], acc[i, j - 1]]
            best = min(range(3), key=lambda k: (options[k], k))
            acc[i, j] = cost[i - 1, j - 1] + options[best]
            move[i, j] = best
    rows, cols = [], []
    i, j = n, m
    while i > 0 and j > 0:
        rows.append(i - 1)
        cols.append(j - 1)
        i, j = (i - 1, j - 1) if move[i, j] == 0 else (i - 1, j) if move[i, j] == 1 else (i, j - 1)
    return rows[::-1], cols[::-1]


@pytest.mark.parametrize("shape", [(1, 1), (1, 9), (6, 6), (9, 40), (25, 120)])
def test_dtw_path_is_the_cheapest_monotonic_path(shape: tuple[int, int]) -> None:
    rng = np.random.default_rng(sum(shape))
    ties = (np.zeros(shape), rng.integers(0, 2, shape).astype(float))
    for cost in (rng.standard_normal(shape), *ties):
        rows, cols = dtw_path(cost)
        want_rows, want_cols = path_by_full_table(cost)
        assert rows.tolist() == want_rows and cols.tolist() == want_cols
        assert rows[0] == 0 and cols[0] == 0 and rows[-1] == shape[0] - 1 and cols[-1] == shape[1] - 1


def test_alignment_matrix_normalises_each_head_over_the_rows_then_smooths_and_averages() -> None:
    weights = torch.rand(6, 12, 90, generator=torch.Generator().manual_seed(1)).softmax(-1)
    std, mean = torch.std_mean(weights, dim=-2, keepdim=True, unbiased=False)
    want = median_by_sorting((weights - mean) / (std + 1e-8), 7).mean(dim=0)
    torch.testing.assert_close(alignment_matrix(weights), want, rtol=1e-5, atol=1e-5)
