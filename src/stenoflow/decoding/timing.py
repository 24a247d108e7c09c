"""Word timestamps: dynamic time warping over the cross-attention of the alignment heads.

Some decoder heads attend to the audio frames a token was spoken in. Stacking their attention
over the known tokens gives a token-by-frame similarity; the cheapest monotonic path through it
says when each token starts, and words start where their first token does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from stenoflow.model.kv_cache import CrossKV
from stenoflow.model.whisper import Whisper
from stenoflow.tokenizer import Tokenizer

FRAMES_PER_SECOND = 50  # encoder positions per second (mel hop 10 ms, conv stride 2)
PREPEND_PUNCTUATION = "\"'“¿([{-"
APPEND_PUNCTUATION = "\"'.。,，!！?？:：”)]}、"


@dataclass
class WordTiming:
    word: str
    tokens: list[int]
    start: float
    end: float
    probability: float


def dtw_path(cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Monotonic path from (0, 0) to (N-1, M-1) minimising the summed cost.

    Moves are diagonal, down (next token, same frame) or right (same token, next frame); of equal
    costs, diagonal is preferred to down, and both to right. The right-move recurrence along a
    row is a running sum that numpy cannot vectorise, so each row is filled by a loop over plain
    Python floats (the same float64 arithmetic, without numpy's per-element overhead).
    """
    n, m = cost.shape
    inf = float("inf")
    prev = [0.0] + [inf] * m  # accumulated cost of the row above, column 0 being "before frame 0"
    traces: list[bytearray] = []  # per row and column: 0 diagonal, 1 down, 2 right
    for i in range(n):
        c = cost[i].tolist()
        row = [inf] * (m + 1)
        trace = bytearray(m + 1)
        left = inf
        for j in range(m):
            diag, up = prev[j], prev[j + 1]
            vert, move = (diag, 0) if diag <= up else (up, 1)
            if vert <= left:
                left = c[j] + vert
                trace[j + 1] = move
            else:
                left = c[j] + left
                trace[j + 1] = 2
            row[j + 1] = left
        traces.append(trace)
        prev = row
    i, j = n, m
    rows, cols = [], []
    while i > 0 and j > 0:
        rows.append(i - 1)
        cols.append(j - 1)
        t = traces[i - 1][j]
        if t == 0:
            i, j = i - 1, j - 1
        elif t == 1:
            i -= 1
        else:
            j -= 1
    return np.array(rows[::-1]), np.array(cols[::-1])


def median_filter(x: torch.Tensor, width: int) -> torch.Tensor:
    """Median over the last axis with reflect padding (smooths attention before DTW), for an odd
    ``width``: the ``width`` shifted copies of each row are sorted elementwise by a network of
    min/max pairs (odd-even transposition) and the middle one is taken. The same values as
    ``unfold(...).median()``, several times faster than its per-window sort."""
    if width % 2 == 0:
        raise ValueError(f"median filter width must be odd, got {width}")
    pad = width // 2
    if x.shape[-1] <= pad:
        return x
    shape = x.shape
    y = F.pad(x.reshape(-1, 1, shape[-1]), (pad, pad), mode="reflect")[:, 0]
    n = shape[-1]
    wires = [y[:, k : k + n] for k in range(width)]
    for r in range(width):
        for k in range(r % 2, width - 1, 2):
            a, b = wires[k], wires[k + 1]
            wires[k], wires[k + 1] = torch.minimum(a, b), torch.maximum(a, b)
    return wires[pad].reshape(shape)


@torch.inference_mode()
def find_alignment(model: Whisper, tokenizer: Tokenizer, text_tokens: list[int], audio_features: torch.Tensor,
                   num_frames: int, alignment_heads: tuple[tuple[int, int], ...],
                   medfilt_width: int = 7) -> list[WordTiming]:
    """Word timings (seconds from the window start) of ``text_tokens`` over ``num_frames`` mel frames,
    from one teacher-forced decoder pass over them."""
    if not text_tokens:
        return []
    sot = [*tokenizer.sot_sequence, tokenizer.no_timestamps]
    weights, logits = forced_attention(model, model.decoder.cross_kv(audio_features), sot, text_tokens,
                                       alignment_heads, with_logits=True)
    assert logits is not None
    targets = torch.tensor([*text_tokens, tokenizer.eot])
    token_probs = logits.float().softmax(-1)[torch.arange(targets.numel()), targets].tolist()
    return timings_from_attention(weights.transpose(0, 1), tokenizer, text_tokens, num_frames, token_probs,
                                  medfilt_width)


def forced_attention(model: Whisper, cross: CrossKV, sot: Sequence[int], text_tokens: Sequence[int],
                     alignment_heads: tuple[tuple[int, int], ...],
                     with_logits: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One teacher-forced decoder pass over ``sot`` + ``text_tokens`` on a cache that records the
    alignment heads' queries. Returns the heads' attention over the audio (rows, heads, positions)
    at the rows that predict each text token and then the end of text, and with ``with_logits``
    those rows' logits (rows, vocabulary)."""
    seq = torch.tensor([[*sot, *text_tokens]])
    cache = model.new_cache(1, seq.shape[1], alignment_heads)
    logits = None
    if with_logits:
        logits = model.decoder(seq, cross, cache, logits_at=torch.arange(len(sot) - 1, seq.shape[1]))[0]
    else:
        model.decoder(seq, cross, cache, last_only=True)
    attention = cache.attention(cross, 0, len(sot) - 1)
    assert attention is not None
    return attention, logits


def alignment_matrix(weights: torch.Tensor, medfilt_width: int = 7) -> torch.Tensor:
    """Token-by-position similarity (rows, positions) from the alignment heads' attention
    (heads, rows, positions): each head normalised over the rows, smoothed over time, averaged."""
    # The moments by hand: torch.std_mean over a middle axis runs about ten times slower.
    mean = weights.mean(dim=-2, keepdim=True)
    centred = weights - mean
    std = centred.square().mean(dim=-2, keepdim=True).sqrt_()
    return median_filter(centred.div_(std + 1e-8), medfilt_width).mean(dim=0)


def attended_positions(weights: torch.Tensor, medfilt_width: int = 7) -> list[int]:
    """For each row of ``weights`` (heads, rows, positions), the audio position (20 ms each) the
    alignment heads attend to most: where the token that row predicts is heard (AlignAtt)."""
    if weights.shape[1] == 0:
        return []
    return alignment_matrix(weights, medfilt_width).argmax(dim=-1).tolist()


def timings_from_attention(weights: torch.Tensor, tokenizer: Tokenizer, text_tokens: list[int], num_frames: int,
                           token_probs: list[float] | None = None, medfilt_width: int = 7) -> list[WordTiming]:
    """Word timings from the alignment heads' attention ``weights`` (heads, len(text_tokens) + 1,
    audio positions), softmaxed; row i is the query that predicts text token i, the last row
    the end-of-text. Decoding records these rows as it goes, so no second pass is needed."""
    if not text_tokens:
        return []
    matrix = alignment_matrix(weights[..., : min(num_frames // 2, weights.shape[-1])], medfilt_width)
    rows, cols = dtw_path(-matrix.double().numpy())

    words, word_tokens = tokenizer.split_to_word_tokens([*text_tokens, tokenizer.eot])
    if len(word_tokens) <= 1:
        return []
    jumps = np.pad(np.diff(rows), (1, 0), constant_values=1).astype(bool)
    jump_times = cols[jumps] / FRAMES_PER_SECOND  # start time of each matrix row (text token)
    boundaries = np.pad(np.cumsum([len(t) for t in word_tokens[:-1]]), (1, 0))
    starts = jump_times[np.minimum(boundaries[:-1], len(jump_times) - 1)]
    ends = jump_times[np.minimum(boundaries[1:], len(jump_times) - 1)]
    timings = []
    for k, (word, toks) in enumerate(zip(words[:-1], word_tokens[:-1])):
        p = token_probs[boundaries[k] : boundaries[k + 1]] if token_probs is not None else [float("nan")]
        timings.append(WordTiming(word, toks, float(starts[k]), float(ends[k]), float(np.mean(p))))
    return merge_punctuation(timings)


def merge_punctuation(words: list[WordTiming]) -> list[WordTiming]:
    """Attach opening punctuation to the next word and closing punctuation to the previous one."""
    out: list[WordTiming] = []
    pending: WordTiming | None = None
    for w in words:
        if pending is not None:
            w = WordTiming(pending.word + w.word, pending.tokens + w.tokens, pending.start, w.end, w.probability)
            pending = None
        stripped = w.word.strip()
        if stripped and all(ch in PREPEND_PUNCTUATION for ch in stripped):
            pending = w
            continue
        if out and stripped and all(ch in APPEND_PUNCTUATION for ch in stripped) and not w.word.startswith(" "):
            prev = out[-1]
            out[-1] = WordTiming(prev.word + w.word, prev.tokens + w.tokens, prev.start, prev.end, prev.probability)
            continue
        out.append(w)
    if pending is not None:
        out.append(pending)
    return out
