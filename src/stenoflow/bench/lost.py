"""Lost phrases: runs of words that offline decoding of a stream has and the stream does not.

WER counts a stream's errors; it does not say whether they are words misheard one at a time or
whole phrases that never reached the page. A stream is compared with the offline decoding of
the same audio, word by word (both normalized as WER normalizes them): every run of
``min_words`` or more offline words the stream left out or wrote otherwise, with no word in
common between, is a lost phrase. Each is laid beside the drops the session reported
(:class:`~stenoflow.streaming.events.Dropped`) over the same stretch of audio: the rules that
set its words aside, or none (speech no round heard, or heard and never confirmed).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from stenoflow.bench.metrics import align_words
from stenoflow.bench.normalize import normalize_words
from stenoflow.streaming.drivers import EmittedWord
from stenoflow.streaming.events import Dropped

MIN_WORDS = 3
NEAR_S = 0.3  # a drop this close to a lost phrase's audio is counted as over it
UNNAMED = "(no rule)"  # what no named rule set aside: unheard, or heard and never confirmed


@dataclass(frozen=True)
class LostPhrase:
    text: str  # the offline words (normalized)
    instead: str  # what the stream wrote in their place (normalized; empty: nothing)
    start: float  # where the offline words lie in the audio (s)
    end: float
    rules: tuple[str, ...]  # the rules whose drops lie over it; empty: none

    @property
    def blamed(self) -> tuple[str, ...]:
        return self.rules or (UNNAMED,)


def timed_tokens(words: Sequence[EmittedWord]) -> list[tuple[str, float, float]]:
    """The normalized tokens of ``words``, each with its word's times."""
    return [(t, w.start, w.end) for w in words for t in normalize_words(w.word)]


def lost_phrases(offline: Sequence[EmittedWord], stream: Sequence[EmittedWord], dropped: Sequence[Dropped] = (),
                 min_words: int = MIN_WORDS) -> list[LostPhrase]:
    """The runs of at least ``min_words`` words of ``offline`` that ``stream`` does not have
    (see the module docstring), in order."""
    ref, hyp = timed_tokens(offline), timed_tokens(stream)
    pairs = align_words([t for t, _, _ in ref], [t for t, _, _ in hyp])
    out: list[LostPhrase] = []
    run: list[int] = []
    instead: list[int] = []

    def close() -> None:
        if len(run) >= min_words:
            start, end = ref[run[0]][1], ref[run[-1]][2]
            rules = sorted({d.rule for d in dropped if d.start < end + NEAR_S and d.end > start - NEAR_S})
            out.append(LostPhrase(" ".join(ref[i][0] for i in run), " ".join(hyp[j][0] for j in instead),
                                  start, end, tuple(rules)))
        run.clear()
        instead.clear()

    for i, j, op in pairs:
        if op == "equal":
            close()
            continue
        if i is not None:
            run.append(i)
        if j is not None:
            instead.append(j)
    close()
    return out


def blame(phrases: Sequence[LostPhrase]) -> dict[str, int]:
    """How many lost phrases each rule lies over (``UNNAMED`` for those no rule does)."""
    return dict(Counter(rule for p in phrases for rule in p.blamed).most_common())
