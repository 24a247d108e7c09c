"""Repetition loops: what a decoder writes once it has lost its place in the audio.

On audio it cannot place, Whisper may write one token or one phrase over and over ("to to to
to", "What? What? What?", or the whole transcript again), often up to the token limit.
Offline transcription catches this afterwards with the compression ratio and decodes again at
a higher temperature. A streaming round has no time for a second decoding; a loop that two
rounds agree on is committed, and under reference-guided decoding it becomes the next round's
draft, which the model, conditioned on the loop, confirms.

``LoopRule`` says what counts as a loop: back-to-back copies of a unit of tokens, four of a
short unit ("no, no, no" is speech; a fourth copy rarely is) or two of a long one (nobody
repeats ten tokens verbatim in one breath). Timestamps are left out of the comparison: they
differ between the copies of a looping segment. The rule is used twice: the ``StopLoops``
logit filter ends a row as soon as its text ends in a loop, so the decoder does not spend its
passes writing it, and ``loop_start`` finds where the loop began, so the round keeps only the
text before it; the audio after that point stays unconfirmed and the next round hears it again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import accumulate

import torch
from torch import Tensor

from stenoflow.decoding.logit_filters import NEG_INF, prefix_lengths


@dataclass(frozen=True)
class LoopRule:
    short_copies: int = 4  # copies of a unit shorter than long_unit that make a loop
    long_unit: int = 10  # units of at least this many tokens loop with two copies
    max_unit: int = 60  # longest unit looked for (a long sentence)

    def __post_init__(self) -> None:
        if self.short_copies < 2 or not 1 <= self.long_unit <= self.max_unit:
            raise ValueError(f"inconsistent loop rule {self}: needs short_copies >= 2 and "
                             "1 <= long_unit <= max_unit")

    def copies(self, unit: int) -> int:
        """Back-to-back copies of a unit of this many tokens that make a loop."""
        return self.short_copies if unit < self.long_unit else 2

    def loop_unit(self, seq: Sequence[int], end: int | None = None) -> int | None:
        """Length of the unit of a loop that ends exactly at ``seq[:end]``, or None."""
        end = len(seq) if end is None else end
        for unit in range(1, min(self.max_unit, end // 2) + 1):
            if seq[end - 1] != seq[end - 1 - unit]:  # cheap test: most units fail here
                continue
            n = self.copies(unit)
            if unit * n > end:
                continue
            tail = seq[end - unit : end]
            if all(seq[end - (k + 1) * unit : end - k * unit] == tail for k in range(1, n)):
                return unit
        return None

    def loop_start(self, tokens: Sequence[int], ignore: Callable[[int], bool] = lambda _: False) -> int | None:
        """Index in ``tokens`` where the second copy of the earliest loop starts (the first copy
        is kept), or None. Tokens for which ``ignore`` is true are not compared."""
        found = self.find(tokens, ignore)
        return None if found is None else found[0]

    def find(self, tokens: Sequence[int], ignore: Callable[[int], bool] = lambda _: False) -> tuple[int, int] | None:
        """The earliest loop: (index in ``tokens`` where its second copy starts, compared tokens
        per copy), or None."""
        where = [i for i, t in enumerate(tokens) if not ignore(t)]
        seq = [tokens[i] for i in where]
        for end in range(2, len(seq) + 1):
            unit = self.loop_unit(seq, end)
            if unit is not None:
                return where[end - self.copies(unit) * unit + unit], unit
        return None


class StopLoops:
    """Logit filter: a row whose sampled text (timestamps left out) ends in a loop may only end."""

    def __init__(self, rule: LoopRule, eot: int, sample_begin: int, text_from: int = 0) -> None:
        self.rule = rule
        self.eot = eot
        self.sample_begin = sample_begin
        self.text_from = text_from  # a loop must end after this many text tokens

    def apply(self, logits: Tensor, tokens: Tensor) -> None:
        rows = tokens[:, self.sample_begin :].tolist()
        for i, row in enumerate(rows):
            text = [t for t in row if t < self.eot]
            if len(text) >= max(2, self.text_from + 1) and self.rule.loop_unit(text) is not None:
                self._only_end(logits[i])

    def apply_positions(self, logits: Tensor, tokens: Tensor, start: int) -> None:
        row = tokens[0, self.sample_begin :].tolist()
        text = [t for t in row if t < self.eot]
        counts = list(accumulate(t < self.eot for t in row))  # text tokens up to each token
        checked, looped = 0, False  # the prefix's text last checked (prefixes only grow), and its verdict
        for j, length in enumerate(prefix_lengths(logits, start)):
            n = counts[length - self.sample_begin - 1] if length > self.sample_begin else 0
            if n != checked:
                checked, looped = n, n >= max(2, self.text_from + 1) and self.rule.loop_unit(text, n) is not None
            if looped:
                self._only_end(logits[j])

    def _only_end(self, logits: Tensor) -> None:
        """The row (V,) may only end."""
        keep = logits[self.eot].clone()
        logits.fill_(NEG_INF)
        logits[self.eot] = keep if torch.isfinite(keep) else 0.0


def text_loop_start(tokens: Sequence[int], eot: int) -> int | None:
    """Where a loop in a decoding's text begins (timestamps and specials, ids >= ``eot``, are not
    compared), or None: the tokens before it are what the decoder heard."""
    return LoopRule().loop_start(tokens, lambda t: t >= eot)


def text_loop(tokens: Sequence[int], eot: int) -> tuple[int, int] | None:
    """The earliest loop in a decoding's text (see ``text_loop_start``): (index where its second
    copy starts, text tokens per copy), or None."""
    return LoopRule().find(tokens, lambda t: t >= eot)
