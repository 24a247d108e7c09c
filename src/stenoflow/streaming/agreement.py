"""LocalAgreement-2: a word becomes final once two consecutive rounds agree on it.

Each processing round re-transcribes the whole audio buffer, so its hypothesis repeats words
that are already committed and proposes new ones whose ending may still change when more audio
arrives. This module holds the pure-Python bookkeeping (no model): it cuts the already-committed
part off a new hypothesis, commits the longest prefix it shares with the previous hypothesis,
and keeps the rest as the unconfirmed tail.

Words are compared after normalisation (lowercase, punctuation stripped), because successive
rounds often disagree only on a comma or a capital letter, which should not hold a word back.

Which words of a hypothesis are already committed is decided by text first, by time second.
Whisper-Streaming drops words that start before the last committed end; but when a round's
decoding stops short, DTW stretches its last words to the end of the buffer, and one such late
end, once committed, makes the time rule discard every real word said before it (10 s of speech
lost on our streams with tiny.en). The hypothesis re-transcribes the buffer from its start, so
its first words are the committed words still in the buffer: aligning the committed tail with
the hypothesis start finds them whatever their times. The time rule remains the fallback when
the text gives no clear answer.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import accumulate

from stenoflow.streaming.events import TimedWord

_NON_WORD = re.compile(r"[^\w']+|_")


def word_key(word: str) -> str:
    """The comparison form of a word: lowercase, punctuation and spaces removed.

    A word made only of punctuation keeps its stripped text, so that "..." still differs
    from "-" rather than both comparing equal to the empty string.
    """
    stripped = word.strip()
    key = _NON_WORD.sub("", stripped.lower()).strip("'")
    return key or stripped


# An amount as Whisper writes it: "$42", "$42.50", "30%", "€1,000", or cents split off (".50").
_AMOUNT = re.compile(r"(?P<unit>[$£€])?(?P<whole>\d[\d,]*)?(?:\.(?P<part>\d+))?(?P<percent>%)?")
# a currency's name, one and more, and its hundredth's
_UNITS = {"$": ("dollar", "dollars", "cent", "cents"), "£": ("pound", "pounds", "penny", "pence"),
          "€": ("euro", "euros", "cent", "cents")}


def spoken_keys(words: Sequence[str]) -> list[tuple[str, ...]]:
    """Each word's comparison keys (see :func:`word_key`) as the words are said: a currency
    or percent sign is a word of its own ("$42" is "42 dollars", "30%" is "30 percent"), and
    so are the cents of an amount, also where Whisper splits them off ("$42" ".50." is
    "42 dollars 50 cents"). One round writes "$42.50", the next "42 dollars and 50 cents"
    over the same speech; compared word by word, the second's "dollars" and "cents" are new."""
    out: list[tuple[str, ...]] = []
    unit = None  # the currency of an amount without cents just before
    for word in words:
        m = _AMOUNT.fullmatch(word.strip().strip("\"'()").rstrip(".,!?;:"))
        keys: tuple[str, ...] = (word_key(word),)
        before, unit = unit, None
        if m and m["whole"] and m["percent"]:
            keys = (keys[0], "percent")
        elif m and m["whole"] and m["unit"]:
            whole = m["whole"].replace(",", "")
            one, many = _UNITS[m["unit"]][:2]
            keys = (whole, one if whole == "1" else many, *_hundredths(m["part"], m["unit"]))
            unit = None if m["part"] else m["unit"]
        elif m and m["part"] and not m["whole"] and before:
            keys = _hundredths(m["part"], before)
        out.append(keys)
    return out


def said_alignment(committed: Sequence[str], hypothesis: Sequence[str]) -> tuple[int, int, int, list[tuple[str, ...]]]:
    """:func:`tail_prefix_alignment` of two word sequences compared as said (see
    :func:`spoken_keys`). Returns (score, cut, inside, keys): the hypothesis words ``[:cut]``
    re-transcribe committed ones, and so do the first ``inside`` keys of word ``cut`` ("$42.50."
    after the committed "42 dollars and 50": all but "cents"); ``keys`` are the hypothesis
    words' keys. The score counts keys."""
    context = [k for ks in spoken_keys(committed) for k in ks]
    keys = spoken_keys(hypothesis)
    ends = list(accumulate(len(k) for k in keys))
    score, flat = tail_prefix_alignment(context, [k for ks in keys for k in ks])
    cut = bisect_right(ends, flat)
    return score, cut, flat - (ends[cut - 1] if cut else 0), keys


def _hundredths(part: str | None, unit: str) -> tuple[str, ...]:
    if not part:
        return ()
    n = part.lstrip("0") or "0"
    one, many = _UNITS[unit][2:]
    return (n, one if n == "1" else many)


@dataclass(frozen=True)
class AgreementOptions:
    # A new word may start this much before the last committed end and still be new: word
    # times of one stretch of audio move by a frame or two between rounds.
    time_tolerance: float = 0.1
    # Longest run of words compared between the committed tail and the hypothesis start.
    max_ngram: int = 5
    # The n-gram check applies only when the hypothesis starts this close to the committed end;
    # further away, a repeated phrase is new speech, not a re-transcription.
    ngram_window: float = 1.0
    # Text cut: committed words compared with the hypothesis start, and the least net number of
    # matched words (matches minus edits) that counts as "the hypothesis repeats them".
    context_words: int = 100
    min_text_score: int = 2
    # ... unless the hypothesis starts this long after the committed end (no committed audio left).
    text_time_slack: float = 1.0


class LocalAgreement:
    """The transcript buffer of one stream: committed words, previous and current hypothesis.

    All times are absolute (seconds since the stream began). ``update`` is the one call a round
    makes; ``insert`` and ``commit`` are its two halves, public for tests and other policies.
    """

    def __init__(self, options: AgreementOptions | None = None) -> None:
        self.options = options or AgreementOptions()
        self._committed_tail: list[TimedWord] = []  # last committed words: the text cut's context
        self._horizon = 0.0  # audio before this time has left the buffer
        self._previous: list[TimedWord] = []  # last round's hypothesis after the committed part
        self._current: list[TimedWord] = []  # this round's, waiting for commit()
        self.committed_end = 0.0  # end time of the last committed word

    # --- the round ----------------------------------------------------------------------------
    def update(self, words: Sequence[TimedWord]) -> list[TimedWord]:
        """Insert a round's hypothesis and return the words it confirmed."""
        self.insert(words)
        return self.commit()

    def insert(self, words: Sequence[TimedWord]) -> list[TimedWord]:
        """Keep only the part of ``words`` that follows what is already committed.

        First by text (see the module docstring): the hypothesis prefix that aligns with the
        committed tail is cut. Without a clear text match, Whisper-Streaming's two rules: drop
        words that start before the committed end, then an n-gram overlap (1..5 words) between
        the committed tail and the hypothesis start.
        """
        cut = self._text_cut(words)
        fresh = list(words[cut:]) if cut is not None else self._time_cut(words)
        self._current = fresh
        return list(fresh)

    def _text_cut(self, words: Sequence[TimedWord]) -> int | None:
        """How many leading hypothesis words re-transcribe committed ones, if the text is clear."""
        o = self.options
        context = [word_key(w.word) for w in self._committed_tail if w.end > self._horizon - o.text_time_slack]
        if len(context) < o.min_text_score or not words:
            return None
        if words[0].start > self.committed_end + o.text_time_slack:
            return None  # the buffer starts after the committed words: a match would be new speech
        best, cut = tail_prefix_alignment(context, [word_key(w.word) for w in words])
        if best < o.min_text_score or cut == 0:
            return None
        # Equal scores favour the shorter cut, so a revised last word ("does" heard again as
        # "was") is left over as new: drop it when it sits inside the last committed word.
        last = self._committed_tail[-1]
        if cut < len(words) and words[cut].start >= last.start - o.time_tolerance \
                and words[cut].end <= last.end + o.time_tolerance:
            cut += 1
        return cut

    def _time_cut(self, words: Sequence[TimedWord]) -> list[TimedWord]:
        o = self.options
        fresh = [w for w in words if w.start > self.committed_end - o.time_tolerance]
        if fresh and self._committed_tail and self._is_clipped_repeat(fresh[0]):
            fresh = fresh[1:]
        if fresh and self._committed_tail and abs(fresh[0].start - self.committed_end) < o.ngram_window:
            longest = min(o.max_ngram, len(self._committed_tail), len(fresh))
            for n in range(longest, 0, -1):
                tail = [word_key(w.word) for w in self._committed_tail[-n:]]
                head = [word_key(w.word) for w in fresh[:n]]
                if tail == head:
                    return fresh[n:]
        return fresh

    def _is_clipped_repeat(self, word: TimedWord) -> bool:
        """A buffer cut inside the last committed word leaves its ending, heard as a word of
        its own ("istic." after "deterministic."): a proper suffix of it, right at the cut."""
        last = word_key(self._committed_tail[-1].word)
        key = word_key(word.word)
        near = word.start < self.committed_end + self.options.ngram_window
        return near and 2 <= len(key) < len(last) and last.endswith(key)

    def commit(self) -> list[TimedWord]:
        """Commit the longest common prefix of the previous and the current hypothesis.

        The committed words carry the current round's text and timing (it heard more audio).
        Times are clamped so that committed words never go back in time.
        """
        n = 0
        for old, new in zip(self._previous, self._current):
            if word_key(old.word) != word_key(new.word):
                break
            n += 1
        committed = self._accept(self._current[:n])
        self._previous = self._current[n:]
        self._current = []
        return committed

    def flush(self, after: Sequence[TimedWord] = ()) -> list[TimedWord]:
        """End of stream: commit the whole unconfirmed tail (nothing more will confirm it), and
        ``after`` it the words the last round heard but could not place."""
        rest = [*(self._current or self._previous), *after]
        committed = self._accept(rest)
        self._previous, self._current = [], []
        return committed

    def commit_before(self, time: float) -> list[TimedWord]:
        """The buffer is about to lose the audio before ``time`` with words still unconfirmed:
        commit those that start before it, as last heard (no later round can confirm them)."""
        tail = self.complete()
        n = next((i for i, w in enumerate(tail) if w.start >= time), len(tail))
        if self._current:
            self._current = list(tail[n:])
        else:
            self._previous = list(tail[n:])
        return self._accept(tail[:n])

    def complete(self) -> tuple[TimedWord, ...]:
        """The unconfirmed tail: what the latest round said after the committed words."""
        return tuple(self._current or self._previous)

    def drop_before(self, time: float) -> None:
        """The buffer now starts at ``time``: forget unconfirmed words whose audio was dropped."""
        self._horizon = max(self._horizon, time)
        self._previous = [w for w in self._previous if w.start >= time]
        self._current = [w for w in self._current if w.start >= time]

    # --- helpers ------------------------------------------------------------------------------
    def _accept(self, words: Sequence[TimedWord]) -> list[TimedWord]:
        out: list[TimedWord] = []
        for w in words:
            start = max(w.start, self.committed_end)
            end = max(w.end, start)
            if (start, end) != (w.start, w.end):
                w = replace(w, start=start, end=end)
            out.append(w)
            self.committed_end = end
        keep = max(self.options.max_ngram, self.options.context_words)
        self._committed_tail = (self._committed_tail + out)[-keep:]
        return out


def tail_prefix_alignment(committed: Sequence[str], hypothesis: Sequence[str]) -> tuple[int, int]:
    """Best alignment of the end of ``committed`` with the start of ``hypothesis``.

    Returns (score, cut): the hypothesis words ``[:cut]`` re-transcribe a suffix of the committed
    words. Score is matches minus edits; committed words before the suffix are skipped for free
    (their audio may have left the buffer), hypothesis words inside the cut that match nothing
    cost one each. Ties go to the shortest cut, so a repeated phrase is kept as new speech.
    """
    n, m = len(committed), len(hypothesis)
    # score[p][q]: best alignment of committed[:p] (any leading part skipped) with hypothesis[:q].
    prev = [-q for q in range(m + 1)]  # p = 0: hypothesis words with nothing to match
    for p in range(1, n + 1):
        row = [0] * (m + 1)  # q = 0: committed[:p] skipped for free
        word = committed[p - 1]
        for q in range(1, m + 1):
            diagonal = prev[q - 1] + (1 if hypothesis[q - 1] == word else -1)
            row[q] = max(diagonal, prev[q] - 1, row[q - 1] - 1)
        prev = row
    best = max(prev)
    return best, prev.index(best)
