"""The rules by which a live session sets heard words aside, each named, with the case it is for.

A live round hears the same speech several times; most words it writes and does not commit
are heard again and committed by a later round. The rules below set words aside for good
where the audio says they were not said: each drop is reported with its rule's name
(:class:`~stenoflow.streaming.events.Dropped`, the ``--log-rounds`` lines, ``bench stream``'s
lost phrases), so that a phrase a stream loses can be traced to the rule that lost it, or to
no rule at all (speech no round heard).
"""

from __future__ import annotations

from collections.abc import Sequence

from stenoflow.streaming.events import Dropped, TimedWord

RULES: dict[str, str] = {
    # stenoflow.streaming.live_round: what a round keeps of its own text
    "loop": "copies of a phrase the decoder wrote where it lost its place, at an instant or over no audio of "
            "their own, and all after them; copies each said over audio of their own are speech "
            "(\"words words words words\") and the round decodes on past them",
    "instant-run": "three or more words the alignment heads place at one instant, before the end of the audio "
                   "(a copy of what was just heard)",
    # stenoflow.streaming.live and .word_rules: what a session commits of a round's words
    "unspoken": "last words with no speech near them: written over noise or silence",
    "silent-run": "final hearing: runs of words written at one instant over silence",
    "silent-copy": "final hearing: a word written again right after itself, or after the last committed word, "
                   "over silence",
    "echo": "the words just committed written once more, over too little sound after a pause to have been "
            "said again (copies of the last word, each over sound of its own and together over more than "
            "twice its committed saying, are said again and again: \"words words words words\")",
    "last-word-again": "a hearing alone: words in the audio the last committed word was heard in",
    "clipped-repeat": "a hearing alone: a first word that repeats the last committed one (or its ending) "
                      "over no sound of its own",
    "void-round": "a round that wrote its prompt again in place of the unconfirmed words, or heard nothing "
                  "where a retry heard nothing either: its words wait for the next round",
    "pause-choice": "the first round to hear a pause after its words decodes them again with beam search: the "
                    "greedy words it does not keep",
    "final-choice": "the stream's final hearing and the last round disagree: the words of the one not taken",
}


def dropped(rule: str, words: Sequence[TimedWord], final: bool = False) -> Dropped:
    """The record of ``words`` (in order, not empty) set aside by ``rule``, one of ``RULES``."""
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; known: {sorted(RULES)}")
    return Dropped(rule, "".join(w.word for w in words), words[0].start, words[-1].end, final)
