"""Voice-command streams: spoken commands of 2-7 s, each followed by a pause, in several voices.

What a voice assistant hears: "set a timer for twelve minutes", a list of cards or groceries, a
number, a short sentence; between them 1-2.5 s of quiet (room noise, no speech), sometimes longer.
Each item is one utterance; the clip's sentences give its text and voiced extent, which is what the
utterance benchmark scores against. Built from a seed and cached like every other clip.
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
from stenoflow.bench.varied import COMMANDS, LEVEL_DBFS, SPEEDS, cards, groceries, number

logger = logging.getLogger(__name__)

BUILD_VERSION = 1
MIN_S, MAX_S = 2.0, 7.0  # spoken length of a command
PAUSE_S = (1.0, 2.5)
LONG_PAUSE_S = (3.0, 5.0)
LONG_PAUSE_SHARE = 0.1
FLOOR_SNR_DB = 40.0  # room noise under everything, pauses included
TRIES = 8  # draws per item before accepting one outside [MIN_S, MAX_S]


def command_text(rng: np.random.Generator, prose: Sequence[str]) -> str:
    """One command-like item: mostly commands, also lists, numbers and a short sentence."""
    makers: list[Callable[[np.random.Generator], str]] = [
        lambda r: COMMANDS[int(r.integers(len(COMMANDS)))](r), cards, groceries, number,
        lambda r: prose[int(r.integers(len(prose)))]]
    weights = np.array([0.45, 0.12, 0.12, 0.16, 0.15])
    return makers[int(rng.choice(len(makers), p=weights))](rng)


def command_stream(name: str = "commands-0", count: int = 30, seed: int = 0,
                   voices: Sequence[str] | None = None) -> Clip:
    """``count`` commands with pauses (see the module docstring), cached."""
    if count < 1:
        raise ValueError("count must be >= 1")
    chosen = resolve_voices(voices)
    pools = load_pools()
    params = {"kind": "commands", "version": BUILD_VERSION, "name": name, "count": count, "seed": seed,
              "text": pools.fingerprint("eval"), "voices": [v.id for v in chosen]}
    stem = data_dir() / "commands" / name
    clip = load_cached(stem, params)
    if clip is not None:
        return clip
    rng = np.random.default_rng([seed, 7171, count])
    prose = [t for t in pools.get("eval") if 25 <= len(t) <= 90]  # a sentence said in 2-7 s
    timeline = Timeline()
    timeline.pause(float(rng.uniform(0.5, 1.0)))
    for k in range(count):
        voice = chosen[int(rng.integers(len(chosen)))]
        for _ in range(TRIES):
            text = command_text(rng, prose)
            audio = speech(text, voice, float(rng.uniform(*SPEEDS)), float(rng.uniform(*LEVEL_DBFS)))
            if MIN_S <= audio.size / 16000 <= MAX_S:
                break
        timeline.speech(audio, text, voice.id)
        long = rng.random() < LONG_PAUSE_SHARE
        timeline.pause(float(rng.uniform(*(LONG_PAUSE_S if long else PAUSE_S))))
        if k == count - 1:
            timeline.pause(0.5)
    clip = write_with_floor(stem, params, timeline, name, FLOOR_SNR_DB, rng)
    logger.info("built command stream %s: %.1f s, %d commands, voices %s", name, clip.duration, count, clip.voice)
    return clip
