"""Commit policies of live rounds: which of a round's new words are final.

Every live round hears the words after the committed ones (see :mod:`.live_round`), so a policy
only looks at the start of the new hypothesis and says how many of its words to commit:

* ``agreement`` (LocalAgreement-2): the words this round and the previous one agree on, from
  the start. A word waits for a second round, so it is final about one step after it is heard.
* ``alignatt`` (AlignAtt, as in SimulStreaming): a word is final once the alignment heads place
  all of its tokens at least ``frames`` encoder positions (20 ms each) before the end of the
  audio, and something follows it (another word, or end-of-text: the word is complete). No
  second round is needed, so words are final as soon as the model has heard past them.

Both commit a prefix of the hypothesis: a word is never final while a word before it is not,
and never a part of a spoken word while its rest is not (see ``spoken_prefix``). Pure logic on
the round's words, tested without a model.
"""

from __future__ import annotations

import unicodedata
from bisect import bisect_right
from collections.abc import Sequence
from typing import Protocol

from stenoflow.streaming.agreement import word_key
from stenoflow.streaming.live_round import Heard, HeardWord

FRAMES_PER_SECOND = 50
SKIP_TOLERANCE_S = 0.1  # a previous round's word ending this far before a word's start was heard before it
FLANK_SPAN = 3  # most words either round may spell a disputed stretch with (flanked commits)
ANCHOR_TOLERANCE_S = 0.2  # words after such a stretch agree if they start this close in both rounds


def joins_previous(word: str) -> bool:
    """Whether ``word`` continues the word before it into one compound: it starts with a dash, no
    space before it (Whisper's words split at it: "super" "-complete." over "supercomputer").
    The other punctuation Whisper's words split at joins parts that stand as written ("$17"
    ".67"): the first is final on its own."""
    return bool(word) and unicodedata.category(word[0]) == "Pd"


def spoken_prefix(words: Sequence[HeardWord], n: int) -> int:
    """The most of the first ``n`` of ``words`` that ends between spoken words. A round whose
    audio ends inside a word hears its first part as a word ("super", then "-complete." over the
    rest of "supercomputer"): final on its own, the part would be committed, and the rest of the
    word, heard again by later rounds, taken for that committed word written again."""
    while 0 < n < len(words) and joins_previous(words[n].word.word):
        n -= 1
    return n


class CommitPolicy(Protocol):
    name: str

    def commit(self, previous: Sequence[HeardWord], heard: Heard) -> int:
        """How many leading words of ``heard.words`` are final, given the previous round's
        uncommitted words ``previous`` (which start where ``heard.words`` start)."""


class AgreementCommit:
    """LocalAgreement-n: the words the last ``rounds`` rounds agree on, from the start, and only
    those the model heard at least ``frames`` before the end of the audio. With short steps two
    rounds hear nearly the same audio and make the same mistakes, so agreement means more when
    it spans more rounds. A word the model is unsure of (mean token probability below ``sure``)
    also waits until it heard ``unsure_s`` of audio after it. A word it is confident of (mean
    token probability at least ``confident``) needs no agreement: it is final in the first round
    that heard past it, by the AlignAtt rule (heard ``frames`` before the end, and complete:
    another word follows it), unless the previous round heard more words before it: then this
    round may have skipped one ("three of diamonds, king" heard as "three of king"), and what
    follows the skip waits for agreement. A word that starts within ``cold_s`` of the start of
    the audio the round heard, with little audio before it (a stream's first words, or the first
    words of audio heard again alone), waits until it heard ``cold_margin_s`` after it: with a
    second of audio Whisper hears "And Mr. John" as "Mr. John", twice alike. With ``flanked``, a
    word the rounds keep spelling differently ("Agus", "Eggers", "Egas" for "Egg") is final once
    the ``flanked`` words after it agree and were heard before the margin too: the words on both
    sides of it are settled, so more rounds only spell it again, and everything after it waits.
    The rounds may split such a stretch into different numbers of words ("Eggers" and "Egg, us",
    "$31" and "31 dollars"): up to ``FLANK_SPAN`` words on either side, the words after it are
    matched where they start at the same time in both rounds."""

    name = "agreement"

    def __init__(self, frames: int = 0, rounds: int = 2, sure: float = 0.0, unsure_s: float = 0.0,
                 confident: float | None = None, cold_s: float = 0.0, cold_margin_s: float = 0.0,
                 flanked: int | None = None) -> None:
        if frames < 0 or unsure_s < 0 or not 0 <= sure <= 1 or rounds < 2 or cold_s < 0 or cold_margin_s < 0:
            raise ValueError(f"need frames >= 0, rounds >= 2, unsure_s, cold_s, cold_margin_s >= 0 and "
                             f"0 <= sure <= 1, got {frames}, {rounds}, {unsure_s}, {cold_s}, {cold_margin_s}, {sure}")
        if confident is not None and not 0 < confident <= 1:
            raise ValueError(f"confident must be in (0, 1] or None, got {confident}")
        if flanked is not None and flanked < 1:
            raise ValueError(f"flanked must be >= 1 word or None, got {flanked}")
        self.margin = frames / FRAMES_PER_SECOND
        self.rounds = rounds
        self.sure = sure
        self.confident = confident
        self.unsure_margin = max(self.margin, unsure_s)
        self.cold_s = cold_s
        self.cold_margin = cold_margin_s
        self.flanked = flanked
        self._older: list[list[str]] = []  # word keys of the tails before the previous one

    def commit(self, previous: Sequence[HeardWord], heard: Heard) -> int:
        before = [word_key(w.word.word) for w in previous]
        earlier = [*self._older, before][-(self.rounds - 1) :]
        words = heard.words
        earlier_ends = sorted(w.word.end for w in previous)
        keys = [word_key(w.word.word) for w in words]

        def agrees(i: int, shift: int = 0) -> bool:
            # word i of this round against word i + shift of the earlier rounds
            return len(earlier) >= self.rounds - 1 and all(0 <= i + shift < len(e) and e[i + shift] == keys[i]
                                                           for e in earlier)

        def flank(i: int, shift: int) -> tuple[int, int] | None:
            # Where the rounds meet again after a disputed stretch from word i: the first word of
            # this round, within FLANK_SPAN, that starts where an equal word of the previous round
            # started. (That word, its shift) if the ``flanked`` words from it agree and were heard
            # before the margin; otherwise the stretch is not settled.
            if self.flanked is None:
                return None
            for j in range(i + 1, min(i + 1 + FLANK_SPAN, len(words))):
                for other in range(max(i + shift + 1, 0), min(i + shift + 1 + FLANK_SPAN, len(previous))):
                    if keys[j] == before[other] and \
                            abs(words[j].word.start - previous[other].word.start) <= ANCHOR_TOLERANCE_S:
                        settled = j + self.flanked <= len(words) and all(
                            agrees(k, other - j) and words[k].heard_at < heard.end - self.margin
                            for k in range(j, j + self.flanked))
                        return (j, other - j) if settled else None
            return None

        i = shift = 0  # i: the words final so far
        stretch_end = -1  # words before this index are a disputed stretch found final
        while i < len(words):
            new = words[i]
            p = new.word.probability  # NaN: neither sure nor confident
            margin = self.margin if p >= self.sure else self.unsure_margin
            if new.word.start - heard.offset < self.cold_s:
                margin = max(margin, self.cold_margin)
            if new.heard_at >= heard.end - margin:
                break
            if i >= stretch_end and not agrees(i, shift):
                early = (self.confident is not None and p >= self.confident and (i + 1 < len(words) or heard.ended)
                         and bisect_right(earlier_ends, new.word.start - SKIP_TOLERANCE_S) <= i + shift)
                if not early:
                    found = flank(i, shift)
                    if found is None:
                        break
                    stretch_end, shift = found
            i += 1
        i = spoken_prefix(words, i)
        self._older = [e[i + shift :] for e in earlier][-(self.rounds - 2) :] if self.rounds > 2 else []
        return i


class AttentionCommit:
    name = "alignatt"

    def __init__(self, frames: int) -> None:
        if frames < 0:
            raise ValueError(f"the AlignAtt margin must be >= 0 frames, got {frames}")
        self.margin = frames / FRAMES_PER_SECOND

    def commit(self, previous: Sequence[HeardWord], heard: Heard) -> int:
        limit = heard.end - self.margin
        words = heard.words
        n = 0
        for i, w in enumerate(words):
            complete = i + 1 < len(words) or heard.ended
            if w.heard_at >= limit or not complete:
                break
            n += 1
        return spoken_prefix(words, n)


COMMIT_POLICIES = ("agreement", "alignatt")


def commit_policy(name: str, frames: int, rounds: int = 2, sure: float = 0.0, unsure_s: float = 0.0,
                  confident: float | None = None, cold_s: float = 0.0, cold_margin_s: float = 0.0,
                  flanked: int | None = None) -> CommitPolicy:
    """A new commit policy for one stream (policies may keep state between rounds)."""
    if name == AgreementCommit.name:
        return AgreementCommit(frames, rounds, sure, unsure_s, confident, cold_s, cold_margin_s, flanked)
    if name == AttentionCommit.name:
        return AttentionCommit(frames)
    raise ValueError(f"unknown commit policy {name!r}; known: {', '.join(COMMIT_POLICIES)}")
