"""Streaming metrics: per-word latency, real-time factor, encoder GFLOPs per audio second.

Per-word latency is ``emitted_at - gold end`` for every reference word the stream recognised,
i.e. every reference word aligned to a hypothesis word as equal or substituted (a substitution
was still *emitted* for that word, late or early). The two word lists are aligned after
normalisation; normalisation can split or merge tokens ("$5" -> "5 dollars"), so each word is
normalised on its own and expanded into its tokens, each token remembering the word it came from.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from stenoflow.bench.gold import GoldWord
from stenoflow.bench.metrics import align_words
from stenoflow.bench.normalize import normalize_text
from stenoflow.model.dims import ModelDims
from stenoflow.streaming.drivers import EmittedWord


@dataclass(frozen=True)
class LatencyStats:
    words: int  # reference words with a latency
    mean: float
    median: float
    p90: float

    @classmethod
    def of(cls, latencies: Sequence[float]) -> LatencyStats:
        if not latencies:
            return cls(0, float("nan"), float("nan"), float("nan"))
        x = np.asarray(latencies, dtype=np.float64)
        return cls(len(x), float(x.mean()), float(np.median(x)), float(np.percentile(x, 90)))


def expand_normalized(words: Iterable[str]) -> tuple[list[str], list[int]]:
    """Normalised tokens of each word, and for each token the index of its word."""
    tokens: list[str] = []
    owners: list[int] = []
    for i, word in enumerate(words):
        for t in normalize_text(word).split():
            tokens.append(t)
            owners.append(i)
    return tokens, owners


def word_latencies(gold: Sequence[GoldWord], emitted: Sequence[EmittedWord]) -> list[float]:
    """Latency of each recognised reference word, in reference order.

    A reference word split into several tokens counts once, at its latest-emitted token.
    """
    return [latency for _, latency in timed_latencies(gold, emitted)]


def timed_latencies(gold: Sequence[GoldWord], emitted: Sequence[EmittedWord]) -> list[tuple[float, float]]:
    """``(gold end, latency)`` of each recognised reference word, in reference order."""
    ref_tokens, ref_owner = expand_normalized(w.word for w in gold)
    hyp_tokens, hyp_owner = expand_normalized(w.word for w in emitted)
    emitted_at: dict[int, float] = {}
    for r, h, op in align_words(ref_tokens, hyp_tokens):
        if op in ("equal", "sub") and r is not None and h is not None:
            ref = ref_owner[r]
            when = emitted[hyp_owner[h]].emitted_at
            emitted_at[ref] = max(when, emitted_at.get(ref, when))
    return [(gold[i].end, emitted_at[i] - gold[i].end) for i in sorted(emitted_at)]


def encoder_flops(dims: ModelDims, mel_frames: int) -> float:
    """Multiply-add FLOPs (2 per MAC) of one encoder pass over ``mel_frames`` log-mel frames.

    conv1 (k=3) over the mel frames, conv2 (k=3, stride 2) down to ``n`` positions, then per
    layer: Q/K/V/out projections, attention scores and values, and the 4x MLP. Norms, softmax
    and GELU are left out (they are a rounding error next to the matrix products).
    """
    d, n_mels = dims.n_audio_state, dims.n_mels
    n = (mel_frames + 1) // 2
    conv = 2 * mel_frames * n_mels * d * 3 + 2 * n * d * d * 3
    layer = 2 * n * d * d * 4 + 2 * n * n * d * 2 + 2 * n * d * (4 * d) * 2
    return float(conv + dims.n_audio_layer * layer)


def encoder_gflops_per_audio_s(dims: ModelDims, rounds: Iterable[dict[str, float]], audio_s: float) -> float:
    """Encoder GFLOPs spent per second of audio, from each round's ``encoder_mel_frames``."""
    frames = [r.get("encoder_mel_frames") for r in rounds]
    if not audio_s or any(f is None for f in frames):
        return float("nan")
    return sum(encoder_flops(dims, int(f)) for f in frames if f is not None) / 1e9 / audio_s
