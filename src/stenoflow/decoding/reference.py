"""Reference transcripts for beam pruning: which tokens count, and how a hypothesis follows one.

In streaming, each round decodes an audio buffer that overlaps the previous round's, so the
previous hypothesis is a good guess of the current one. It is not a token-exact guess:
the buffer may have been trimmed at the front (the reference starts earlier), new audio
extends it at the end (the reference stops early), and Whisper is inconsistent about
punctuation and timestamps between rounds. So the reference keeps only word tokens, and
the matching skips punctuation, timestamps and special tokens on the hypothesis side, and
compares word tokens without case: a buffer trimmed at the front often starts its first
sentence with a capital (" Ask") where the previous round had " ask".

Everything here is pure logic on token ids, tested without a model.
"""

from __future__ import annotations

import string
import unicodedata
from collections.abc import Callable, Iterable
from enum import Enum

from stenoflow.tokenizer import Tokenizer

ALIGN_FAILED = "align-failed"  # the first word of the hypothesis is nowhere in the reference
MISMATCH = "mismatch"  # the hypothesis left the reference
EXHAUSTED = "reference-exhausted"  # the hypothesis goes on past the reference's last word
STALLED = "stalled"  # a run of punctuation/timestamps without a word: a loop the reference cannot catch
FALLBACK_REASONS = (ALIGN_FAILED, MISMATCH, EXHAUSTED, STALLED)
# Between two words Whisper writes a few skippable tokens at most (". <|t|><|t|>"); a longer run
# is a punctuation loop ("....", ". . . ."), which a single row would follow to the token limit.
MAX_SKIPS = 8


def is_punctuation(text: str) -> bool:
    """Only punctuation and spaces (an empty string counts): the tokens rounds disagree on."""
    return all(c.isspace() or c in string.punctuation or unicodedata.category(c).startswith("P") for c in text)


class TokenKinds:
    """Tells word tokens from the ones matching skips, decoding each token once when first asked.

    A token is skippable if it is special or a timestamp (id >= end-of-text) or if it decodes
    to punctuation and spaces only. Word tokens are compared by ``key``, their lower-cased text
    (the leading space kept: a word start never matches the middle of a word). Answers are
    cached per instance (one decoding or one reference build): the vocabulary is never scanned.
    """

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self._text: dict[int, str] = {}

    def _decoded(self, token: int) -> str:
        text = self._text.get(token)
        if text is None:
            text = self._text[token] = self.tokenizer.decode([token])
        return text

    def skippable(self, token: int) -> bool:
        return token >= self.tokenizer.eot or is_punctuation(self._decoded(token))

    def key(self, token: int) -> str:
        return self._decoded(token).lower()


def reference_tokens(tokens: Iterable[int], tokenizer: Tokenizer) -> tuple[int, ...]:
    """The reference a hypothesis (token ids, e.g. ``DecodingResult.tokens``) gives the next round:
    its word tokens, without punctuation, timestamps or special tokens."""
    kinds = TokenKinds(tokenizer)
    return tuple(t for t in tokens if not kinds.skippable(t))


class Verdict(Enum):
    MATCH = "match"  # the token is (up to case) the reference's next word: keep one row, advance
    SKIP = "skip"  # punctuation, timestamp or special: keep one row, do not advance
    FALLBACK = "fallback"  # the hypothesis and the reference part ways (see ``reason``)


class _Cursor:
    """A position in a token sequence that a hypothesis follows: what both matchers share."""

    reference: tuple[int, ...]
    cursor: int | None  # next reference index to match; None: not aligned
    search_from: int  # where a new alignment may start
    reason: str | None  # why the last FALLBACK verdict happened

    @property
    def aligned(self) -> bool:
        return self.cursor is not None

    def draft(self, limit: int) -> tuple[int, ...]:
        """The reference tokens expected next (at most ``limit``): the draft to verify."""
        if self.cursor is None or limit <= 0:
            return ()
        return self.reference[self.cursor : self.cursor + limit]

    def stats(self) -> dict[str, float]:
        """Counters of how the draft was written (none for a fixed one)."""
        return {}

    def _fallback(self, reason: str) -> Verdict:
        if self.cursor is not None:
            self.search_from = self.cursor
        self.cursor = None
        self.reason = reason
        return Verdict.FALLBACK


class ReferenceMatcher(_Cursor):
    """Follows a hypothesis along the reference, one best token at a time (paper §4.2.2).

    * alignment: the first word token of the hypothesis is searched in the reference, and the
      position after its first occurrence becomes the cursor; not found: ``align-failed``;
    * selective matching: a word token must equal ``reference[cursor]`` and advances the
      cursor; skippable tokens neither break nor advance the match;
    * a word token that differs is a ``mismatch``; one past the end is ``reference-exhausted``;
    * more than ``max_skips`` skippable tokens in a row while aligned is ``stalled``.

    Tokens are compared by ``key`` (identity by default); skippable tokens in the reference
    itself are dropped, so a raw hypothesis works as a reference too. After a fallback the
    matcher is unaligned; ``observe`` may align it again, searching from where the match broke
    (used at beam width 1, where following the reference costs nothing).
    """

    def __init__(self, reference: Iterable[int], skippable: Callable[[int], bool],
                 key: Callable[[int], object] = int, max_skips: int = MAX_SKIPS) -> None:
        self.reference = tuple(t for t in reference if not skippable(t))
        self.skippable = skippable
        self.max_skips = max_skips
        self.skips = 0  # skippable tokens since the last word token, while aligned
        self.key = key
        self.keys = [key(t) for t in self.reference]
        self.cursor: int | None = None  # next reference index to match; None: not aligned
        self.search_from = 0  # where a new alignment may start
        self.reason: str | None = None  # why the last FALLBACK verdict happened

    def restart(self) -> None:
        """Back to the unaligned start, for a new decoding."""
        self.cursor, self.search_from, self.reason, self.skips = None, 0, None, 0

    def observe(self, token: int) -> Verdict:
        """Judge the best token of the current step and move the cursor accordingly."""
        if self.skippable(token):
            if self.cursor is not None:
                self.skips += 1
                if self.skips > self.max_skips:
                    return self._fallback(STALLED)
            return Verdict.SKIP
        self.skips = 0
        key = self.key(token)
        if self.cursor is None:
            try:
                self.cursor = self.keys.index(key, self.search_from) + 1
            except ValueError:
                return self._fallback(ALIGN_FAILED)
            return Verdict.MATCH
        if self.cursor >= len(self.reference):
            return self._fallback(EXHAUSTED)
        if self.keys[self.cursor] != key:
            return self._fallback(MISMATCH)
        self.cursor += 1
        return Verdict.MATCH

    def _fallback(self, reason: str) -> Verdict:
        self.skips = 0
        return super()._fallback(reason)


class DraftMatcher(_Cursor):
    """Follows a hypothesis along an exact draft (text and timestamp tokens), for ``draft`` mode.

    Text tokens must equal the draft's; a timestamp matches any timestamp in the draft (its value
    may differ by a step, and the verifier stops at such a difference anyway), a timestamp where
    the draft has text is skipped, and timestamps in the draft where the hypothesis goes on with
    text are passed over. Same interface as ``ReferenceMatcher``; after a mismatch it re-aligns
    on a later text token, searching from where the match broke.
    """

    def __init__(self, draft: Iterable[int], timestamp_begin: int) -> None:
        self.reference = tuple(draft)
        self.timestamp_begin = timestamp_begin
        self.cursor: int | None = 0 if self.reference else None
        self.search_from = 0
        self.reason: str | None = None

    def restart(self) -> None:
        self.cursor, self.search_from, self.reason = (0 if self.reference else None), 0, None

    def observe(self, token: int) -> Verdict:
        ref, tb = self.reference, self.timestamp_begin
        if self.cursor is None:
            if token >= tb:
                return Verdict.SKIP
            try:
                self.cursor = ref.index(token, self.search_from) + 1
            except ValueError:
                self.reason = ALIGN_FAILED
                return Verdict.FALLBACK
            return Verdict.MATCH
        if token >= tb:
            if self.cursor < len(ref) and ref[self.cursor] >= tb:
                self.cursor += 1
                return Verdict.MATCH
            return Verdict.SKIP
        while self.cursor < len(ref) and ref[self.cursor] >= tb:
            self.cursor += 1
        if self.cursor >= len(ref):
            return self._fallback(EXHAUSTED)
        if ref[self.cursor] != token:
            return self._fallback(MISMATCH)
        self.cursor += 1
        return Verdict.MATCH
