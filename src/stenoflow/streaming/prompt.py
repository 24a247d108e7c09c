"""The text prompt of a round: committed words whose audio has left the buffer.

Whisper continues a transcript better when it sees what came before (names, casing, style), but
text that is still inside the buffer must not be in the prompt, or the model tends to skip the
audio it describes. So the prompt is the committed text before the buffer start, cut to the last
``max_chars`` characters at a word boundary. A word counts as before the buffer when most of it
is: cuts snap to quiet points near word ends, which may leave a word's last few frames inside,
and a prompt without that word reads as if the sentence stopped one word early (the model then
takes the next words of the audio for the prompt's own and skips them).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from stenoflow.streaming.events import TimedWord


def build_prompt(committed: Sequence[TimedWord], buffer_start: float, max_chars: int = 200) -> str:
    """The last whole words of ``committed`` before ``buffer_start``, <= max_chars."""
    if max_chars <= 0:
        return ""
    k = words_before(committed, buffer_start)
    # Each word and the space before it; the first word's space is the budget's extra character.
    n = fitting_count((len(committed[i].word.strip()) + 1 for i in range(k - 1, -1, -1)), max_chars + 1)
    return " ".join(w.word.strip() for w in committed[k - n : k])


def fitting_count(lengths_from_last: Iterable[int], max_chars: int) -> int:
    """How many of the last words, whose lengths are given newest first, fit in ``max_chars``
    characters together: a prompt is whole words, never part of one."""
    n, budget = 0, max_chars
    for length in lengths_from_last:
        if length > budget:
            break
        budget -= length
        n += 1
    return n


def prompt_horizon(committed: Sequence[TimedWord], buffer_start: float, max_chars: int) -> int:
    """How many leading committed words no future prompt can need (for pruning long sessions).

    The buffer start only moves forward, so words before the ones the current prompt uses are
    never read again.
    """
    k = words_before(committed, buffer_start)
    length = 0
    while k > 0 and length <= max_chars:
        length += len(committed[k - 1].word.strip()) + 1
        k -= 1
    return k


def words_before(committed: Sequence[TimedWord], buffer_start: float) -> int:
    """How many leading committed words lie (mostly) before ``buffer_start``."""
    k = len(committed)
    while k > 0 and committed[k - 1].start + committed[k - 1].end > 2 * buffer_start:
        k -= 1
    return k
