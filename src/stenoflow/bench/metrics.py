"""Word error rate and word alignment.

Both come from one word-level Levenshtein alignment. The dynamic programme is filled a row at a
time with numpy: the diagonal and vertical moves of a row are plain vector operations, and the
horizontal (insertion) chain within a row is a running minimum, because
``D[i, j] = min_k<=j (T[k] + j - k)``, i.e. ``D[i, j] - j`` is a prefix minimum of ``T[k] - k``.
That makes a 1,000 x 1,000-word alignment take milliseconds instead of seconds in pure Python.

:func:`align_words` returns the alignment itself; the streaming latency metric uses it to pair
each reference word with the hypothesis word that recognised it.

Empty texts: aligning nothing against nothing is a perfect match (WER 0). When the references
hold no words at all but the hypotheses do, every hypothesis word is an insertion and the WER is
reported as 1.0 rather than infinity, so that averages stay finite; the insertion count carries
the size of the damage.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from stenoflow.bench.normalize import DEFAULT_OPTIONS, NormalizeOptions, normalize_text

Op = Literal["equal", "sub", "del", "ins"]
AlignedPair = tuple[int | None, int | None, Op]


@dataclass(frozen=True)
class WerResult:
    """Error counts summed over all pairs, and the corpus-level WER they give."""

    wer: float
    substitutions: int
    deletions: int
    insertions: int
    ref_words: int

    @property
    def errors(self) -> int:
        return self.substitutions + self.deletions + self.insertions

    @property
    def hits(self) -> int:
        return self.ref_words - self.substitutions - self.deletions


def wer(
    references: Sequence[str] | str,
    hypotheses: Sequence[str] | str,
    normalize: bool = True,
    options: NormalizeOptions = DEFAULT_OPTIONS,
) -> WerResult:
    """Corpus WER: errors of all pairs over reference words of all pairs.

    Each reference is aligned with its own hypothesis (never across pairs). A single string may
    be passed for each side. With ``normalize`` both sides go through
    :func:`stenoflow.bench.normalize.normalize_text`; without it the texts are only split on
    whitespace.
    """
    refs = [references] if isinstance(references, str) else list(references)
    hyps = [hypotheses] if isinstance(hypotheses, str) else list(hypotheses)
    if len(refs) != len(hyps):
        raise ValueError(f"{len(refs)} references but {len(hyps)} hypotheses")
    subs = dels = ins = ref_total = 0
    for ref, hyp in zip(refs, hyps, strict=True):
        ref_words = normalize_text(ref, options).split() if normalize else ref.split()
        hyp_words = normalize_text(hyp, options).split() if normalize else hyp.split()
        for _, _, op in align_words(ref_words, hyp_words):
            if op == "sub":
                subs += 1
            elif op == "del":
                dels += 1
            elif op == "ins":
                ins += 1
        ref_total += len(ref_words)
    errors = subs + dels + ins
    if ref_total:
        rate = errors / ref_total
    else:
        rate = 0.0 if errors == 0 else 1.0
    return WerResult(
        wer=rate, substitutions=subs, deletions=dels, insertions=ins, ref_words=ref_total
    )


def align_words(ref_words: Sequence[str], hyp_words: Sequence[str]) -> list[AlignedPair]:
    """A minimum-edit alignment as ``(ref_index, hyp_index, op)`` in text order.

    ``equal`` and ``sub`` carry both indices, ``del`` (a reference word that was missed) has
    ``hyp_index`` None, ``ins`` (an extra hypothesis word) has ``ref_index`` None. Among
    alignments of equal cost, matches and substitutions are preferred over a deletion plus an
    insertion, so words are paired whenever that costs nothing extra.
    """
    n, m = len(ref_words), len(hyp_words)
    if n == 0:
        return [(None, j, "ins") for j in range(m)]
    if m == 0:
        return [(i, None, "del") for i in range(n)]

    vocab: dict[str, int] = {}
    ref_ids = np.array([vocab.setdefault(w, len(vocab)) for w in ref_words], dtype=np.int64)
    hyp_ids = np.array([vocab.setdefault(w, len(vocab)) for w in hyp_words], dtype=np.int64)
    table = _distance_table(ref_ids, hyp_ids)

    pairs: list[AlignedPair] = []
    i, j = n, m
    while i > 0 or j > 0:
        here = int(table[i, j])
        if i > 0 and j > 0:
            same = ref_ids[i - 1] == hyp_ids[j - 1]
            if here == int(table[i - 1, j - 1]) + (0 if same else 1):
                pairs.append((i - 1, j - 1, "equal" if same else "sub"))
                i, j = i - 1, j - 1
                continue
        if i > 0 and here == int(table[i - 1, j]) + 1:
            pairs.append((i - 1, None, "del"))
            i -= 1
        else:
            pairs.append((None, j - 1, "ins"))
            j -= 1
    pairs.reverse()
    return pairs


def edit_distance(ref_words: Sequence[str], hyp_words: Sequence[str]) -> int:
    """The word-level Levenshtein distance alone."""
    if not ref_words or not hyp_words:
        return max(len(ref_words), len(hyp_words))
    vocab: dict[str, int] = {}
    ref_ids = np.array([vocab.setdefault(w, len(vocab)) for w in ref_words], dtype=np.int64)
    hyp_ids = np.array([vocab.setdefault(w, len(vocab)) for w in hyp_words], dtype=np.int64)
    return int(_distance_table(ref_ids, hyp_ids)[-1, -1])


def _distance_table(ref_ids: np.ndarray, hyp_ids: np.ndarray) -> np.ndarray:
    """The full (n+1) x (m+1) table of edit distances between prefixes.

    Stored as uint16 while distances fit (a few MB for 1,000 x 1,000 words), else uint32; the
    whole table is kept because the backtrace needs it.
    """
    n, m = len(ref_ids), len(hyp_ids)
    dtype = np.uint16 if max(n, m) < np.iinfo(np.uint16).max else np.uint32
    table = np.empty((n + 1, m + 1), dtype=dtype)
    offsets = np.arange(m + 1, dtype=np.int64)
    prev = offsets.copy()  # row 0: j insertions
    table[0] = prev
    row = np.empty(m + 1, dtype=np.int64)
    for i in range(1, n + 1):
        cost = (hyp_ids != ref_ids[i - 1]).astype(np.int64)
        row[0] = i
        # Best of substitution/match (diagonal) and deletion (from above).
        np.minimum(prev[:-1] + cost, prev[1:] + 1, out=row[1:])
        # Then chains of insertions within the row: a prefix minimum of row[k] - k.
        np.minimum.accumulate(row - offsets, out=row)
        row += offsets
        table[i] = row
        prev, row = row, prev
    return table
