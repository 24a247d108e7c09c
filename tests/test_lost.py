"""Lost phrases: runs of words offline decoding has and a stream does not, and the rules over them."""

from __future__ import annotations

import pytest

from stenoflow.bench.lost import UNNAMED, blame, lost_phrases
from stenoflow.streaming.drivers import EmittedWord
from stenoflow.streaming.events import Dropped, TimedWord
from stenoflow.streaming.rules import RULES, dropped


def timed(text: str, start: float = 0.0) -> list[EmittedWord]:
    return [EmittedWord(" " + w, start + 0.5 * i, start + 0.5 * i + 0.4, 0.0) for i, w in enumerate(text.split())]


def test_a_run_of_three_words_left_out_is_a_lost_phrase_with_the_rule_over_it() -> None:
    offline = timed("and that should be all thanks next the weather")
    stream = timed("and next the weather")
    drops = [Dropped("loop", " that should", 0.5, 1.4), Dropped("echo", " far", 9.0, 9.5)]
    (lost,) = lost_phrases(offline, stream, drops)
    assert (lost.text, lost.instead, lost.rules) == ("that should be all thanks", "", ("loop",))
    assert (lost.start, lost.end) == (0.5, 2.9)
    assert blame([lost]) == {"loop": 1}


def test_words_written_otherwise_are_lost_too_and_two_words_are_not_a_phrase() -> None:
    offline = timed("so i probably sound quite different than the acoustic corpus")
    (lost,) = lost_phrases(offline, timed("so i probably sound quite different and a few sip chloropus"))
    assert lost.text == "than the acoustic corpus" and lost.instead == "and a few sip chloropus"
    assert blame([lost]) == {UNNAMED: 1}
    assert lost_phrases(offline, timed("so i sound quite different than the acoustic corpus")) == []


def test_a_drop_names_a_known_rule() -> None:
    words = [TimedWord(" words", 1.0, 1.3), TimedWord(" words.", 1.3, 1.7)]
    assert dropped("loop", words) == Dropped("loop", " words words.", 1.0, 1.7, False)
    assert all(RULES.values())
    with pytest.raises(ValueError, match="unknown rule"):
        dropped("no-such-rule", words)
