"""Streaming metrics: per-word latency, real-time factor, encoder GFLOPs per audio second.

Per-word latency is ``emitted_at - gold end`` for every reference word the stream recognised,
i.e. every reference word aligned to a hypothesis word as equal or substituted (a substitution
was still *emitted* for that word, late or early). The two word lists are aligned after
normalisation; normalisation can split or merge tokens ("$5" -> "5 dollars"), so each word is
normalised on its own and expanded into its tokens, each token remembering the word it came from.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from stenoflow.bench.gold import GoldWord
from stenoflow.bench.metrics import align_words
from stenoflow.bench.normalize import normalize_text
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


def expand_normalized(words: Iterable[str], normalize: Callable[[str], str] = normalize_text
                      ) -> tuple[list[str], list[int]]:
    """Normalised tokens of each word, and for each token the index of its word."""
    tokens: list[str] = []
    owners: list[int] = []
    for i, word in enumerate(words):
        for t in normalize(word).split():
            tokens.append(t)
            owners.append(i)
    return tokens, owners


def word_latencies(gold: Sequence[GoldWord], emitted: Sequence[EmittedWord],
                   normalize: Callable[[str], str] = normalize_text) -> list[float]:
    """Latency of each recognised reference word, in reference order (words compared as
    ``normalize`` writes them: English by default).

    A reference word split into several tokens counts once, at its latest-emitted token.
    """
    return [latency for _, latency in timed_latencies(gold, emitted, normalize)]


def timed_latencies(gold: Sequence[GoldWord], emitted: Sequence[EmittedWord],
                    normalize: Callable[[str], str] = normalize_text) -> list[tuple[float, float]]:
    """``(gold end, latency)`` of each recognised reference word, in reference order."""
    ref_tokens, ref_owner = expand_normalized((w.word for w in gold), normalize)
    hyp_tokens, hyp_owner = expand_normalized((w.word for w in emitted), normalize)
    emitted_at: dict[int, float] = {}
    for r, h, op in align_words(ref_tokens, hyp_tokens):
        if op in ("equal", "sub") and r is not None and h is not None:
            ref = ref_owner[r]
            when = emitted[hyp_owner[h]].emitted_at
            emitted_at[ref] = max(when, emitted_at.get(ref, when))
    return [(gold[i].end, emitted_at[i] - gold[i].end) for i in sorted(emitted_at)]


ENCODER_GFLOP_KEYS = ("encoder_gflop", "retry_encoder_gflop")  # a round's encoder passes: its own, a retry's


def encoder_gflops_per_audio_s(rounds: Iterable[Mapping[str, float]], audio_s: float) -> float:
    """Encoder GFLOPs spent per second of audio: every encoder pass the rounds ran (their own,
    their retries', passes over silence; skipped rounds ran none). NaN where no round reports
    its encoder work (a peer's session)."""
    spent = [r[k] for r in rounds for k in ENCODER_GFLOP_KEYS if k in r]
    if not audio_s or not spent:
        return float("nan")
    return sum(spent) / audio_s
