"""Varied evaluation streams: what live captions and voice commands meet, not only read prose.

A varied stream is a sequence of short items, each spoken by one of several voices, with pauses
between them (mostly about 0.8 s, sometimes a few seconds; in a sparse stream, all of 4 to 12 s,
as a voice interface or dictation hears them): a sentence or two of prose, a list of
playing cards or groceries, a number, a command ("go forward ten meters"). Numbers are spelled
out for the synthesizer; the WER normaliser turns words and digits alike into digits. Every
stream ends with a list of short words and a command, the case where a stream's last words are
easiest to lose.

Items are drawn from a seeded generator, so a stream depends only on its parameters, and are
cached like every other clip (see :mod:`stenoflow.bench.clips`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import numpy as np

from stenoflow.bench.clips import (
    Clip,
    Timeline,
    data_dir,
    load_cached,
    resolve_voices,
    speech,
    write_with_floor,
)
from stenoflow.bench.text_pool import load_pools

logger = logging.getLogger(__name__)

BUILD_VERSION = 1
LEVEL_DBFS = (-24.0, -17.0)
SPEEDS = (0.9, 1.1)
PAUSE_S = (0.6, 1.0)  # between items, most of the time
LONG_PAUSE_S = (2.0, 4.0)  # ... and sometimes
LONG_PAUSE_SHARE = 0.15
SPARSE_PAUSE_S = (4.0, 12.0)  # between the items of a sparse stream
TALK_PAUSE_S = (1.0, 3.0)  # between the items of a conversational stream: 20 to 40 % of it pauses
VOICE_CHANGE_SHARE = 0.6
FLOOR_SNR_DB = 45.0

UNITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
         "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen")
TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
RANKS = ("ace", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "jack", "queen", "king")
SUITS = ("spades", "hearts", "diamonds", "clubs")
GROCERIES = ("apples", "bread", "milk", "eggs", "butter", "rice", "coffee", "onions", "cheese", "lemons",
             "carrots", "flour", "sugar", "tomatoes", "soap", "tea")
NAMES = ("Anna", "David", "Maria", "Tom", "Sarah", "Peter", "Lucy", "James")
COMMANDS: tuple[Callable[[np.random.Generator], str], ...] = (
    lambda r: f"Go forward {spell(int(r.integers(2, 30)))} meters.",
    lambda r: f"Move back {spell(int(r.integers(2, 12)))} steps.",
    lambda r: f"Turn {r.choice(['left', 'right'])} at the next corner.",
    lambda r: f"Set a timer for {spell(int(r.integers(2, 60)))} minutes.",
    lambda r: f"Call {r.choice(NAMES)} on the mobile phone.",
    lambda r: f"Remind me to buy {r.choice(GROCERIES)} tomorrow morning.",
    lambda r: f"Open the {r.choice(['garage door', 'front door', 'window', 'calendar'])}.",
    lambda r: f"Turn the volume down to {spell(int(r.integers(1, 10)))}.",
    lambda r: "Stop the music.",
    lambda r: f"Wake me up at {spell(int(r.integers(5, 10)))} thirty.",
)


def spell(n: int) -> str:
    """English words for 0 <= n < 10000 ("three hundred and five")."""
    if not 0 <= n < 10000:
        raise ValueError(f"spell() takes 0..9999, got {n}")
    if n < 20:
        return UNITS[n]
    if n < 100:
        return TENS[n // 10] + ("" if n % 10 == 0 else " " + UNITS[n % 10])
    if n < 1000:
        rest = n % 100
        return UNITS[n // 100] + " hundred" + ("" if rest == 0 else " and " + spell(rest))
    rest = n % 1000
    return spell(n // 1000) + " thousand" + ("" if rest == 0 else (" and " if rest < 100 else " ") + spell(rest))


def cards(r: np.random.Generator) -> str:
    n = int(r.integers(3, 6))
    picked = [f"{r.choice(RANKS)} of {r.choice(SUITS)}" for _ in range(n)]
    return (", ".join(picked) + ".").capitalize()


def groceries(r: np.random.Generator) -> str:
    picked = list(r.choice(GROCERIES, size=int(r.integers(3, 6)), replace=False))
    return (", ".join(picked[:-1]) + " and " + picked[-1] + ".").capitalize()


def number(r: np.random.Generator) -> str:
    kind = int(r.integers(3))
    if kind == 0:
        return spell(int(r.integers(20, 1000))).capitalize() + "."
    if kind == 1:
        return f"The code is {', '.join(spell(int(d)) for d in r.integers(0, 10, size=4))}."
    return f"It costs {spell(int(r.integers(2, 100)))} dollars and {spell(int(r.integers(1, 99)))} cents."


def varied_stream(name: str = "varied-0", minutes: float = 1.0, seed: int = 0,
                  voices: Sequence[str] | None = None, pauses_s: tuple[float, float] | None = None) -> Clip:
    """A stream of ``minutes`` of varied items (see the module docstring), cached; ``pauses_s``:
    the range every pause between items is drawn from (None: mostly short, sometimes long)."""
    if minutes <= 0:
        raise ValueError("minutes must be positive")
    if pauses_s is not None and not 0 <= pauses_s[0] <= pauses_s[1]:
        raise ValueError(f"pauses_s must be (low, high) with 0 <= low <= high, got {pauses_s}")
    chosen = resolve_voices(voices)
    pools = load_pools()
    params = {"kind": "varied", "version": BUILD_VERSION, "name": name, "minutes": minutes, "seed": seed,
              "text": pools.fingerprint("eval"), "voices": [v.id for v in chosen],
              **({} if pauses_s is None else {"pauses_s": list(pauses_s)})}
    stem = data_dir() / "varied" / name
    clip = load_cached(stem, params)
    if clip is not None:
        return clip
    rng = np.random.default_rng([seed, 4242, round(minutes * 1000)])
    prose = pools.get("eval")
    order = iter(rng.permutation(len(prose)))
    makers: list[Callable[[np.random.Generator], str]] = [cards, groceries, number,
                                                         lambda r: COMMANDS[int(r.integers(len(COMMANDS)))](r)]
    target = minutes * 60.0
    timeline = Timeline()
    timeline.pause(float(rng.uniform(0.3, 0.8)))
    voice = chosen[int(rng.integers(len(chosen)))]
    ending = [cards(rng), COMMANDS[int(rng.integers(len(COMMANDS)))](rng)]
    items: list[str] = []
    while True:
        kind = rng.random()
        text = prose[int(next(order))] if kind < 0.4 else makers[int(rng.integers(len(makers)))](rng)
        items.append(text)
        if len(items) > 2 and _estimate_s(items + ending, pauses_s) > target:
            items.pop()
            break
    for k, text in enumerate([*items, *ending]):
        if k and rng.random() < VOICE_CHANGE_SHARE:
            voice = chosen[int(rng.integers(len(chosen)))]
        if k:
            long = rng.random() < LONG_PAUSE_SHARE
            timeline.pause(float(rng.uniform(*(pauses_s or (LONG_PAUSE_S if long else PAUSE_S)))))
        audio = speech(text, voice, float(rng.uniform(*SPEEDS)), float(rng.uniform(*LEVEL_DBFS)))
        timeline.speech(audio, text, voice.id)
    timeline.pause(float(rng.uniform(0.5, 1.0)))
    clip = write_with_floor(stem, params, timeline, name, FLOOR_SNR_DB, rng)
    logger.info("built varied stream %s: %.1f s, %d items, voices %s", name, clip.duration, len(timeline.placed),
                clip.voice)
    return clip


def varied_streams(n: int = 2, minutes: float = 1.0, seed: int = 0) -> list[Clip]:
    """``n`` varied streams of ``minutes`` each."""
    return [varied_stream(f"varied-{minutes:g}min-{i}", minutes, seed + i) for i in range(n)]


def sparse_streams(n: int = 2, minutes: float = 1.5, seed: int = 0) -> list[Clip]:
    """``n`` sparse streams of ``minutes`` each: varied items, 4 to 12 s apart."""
    return [varied_stream(f"sparse-{minutes:g}min-{i}", minutes, seed + 100 + i, pauses_s=SPARSE_PAUSE_S)
            for i in range(n)]


def talk_streams(n: int = 2, minutes: float = 1.5, seed: int = 0) -> list[Clip]:
    """``n`` conversational streams of ``minutes`` each: varied items, 1 to 3 s apart (a person
    talking with pauses, as a server's clients send it)."""
    return [varied_stream(f"talk-{minutes:g}min-{i}", minutes, seed + 200 + i, pauses_s=TALK_PAUSE_S)
            for i in range(n)]


def _estimate_s(items: Sequence[str], pauses_s: tuple[float, float] | None = None) -> float:
    """Rough spoken length of ``items`` with their pauses: 14 characters a second, and the mean
    pause (about a second, or the middle of ``pauses_s``)."""
    pause = 1.0 if pauses_s is None else sum(pauses_s) / 2
    return sum(len(t) / 14.0 + pause for t in items)
