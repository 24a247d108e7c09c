"""Synthesized streams of three ways real speech lost phrases in live captions.

Held-out recordings of unscripted talk showed the live default losing whole phrases that
offline decoding of the same audio gets right. Each stream here says the same kind of thing
with the synthesizers' voices, between ordinary sentences, so that the tests can hold every
word of it to being committed once:

* ``hoarse``: a speaker with a cold, in a rough, quieter voice over a noisier room, with
  fillers ("uh", "um") between the words: its first words and a whole clause were lost;
* ``repeats``: a word said four times in a row, then a filler and a closing phrase, then a
  pause: the repeats read as a decoder loop, and what followed was never committed;
* ``restart``: a sentence that restarts mid-way ("there's nothing going else going on"): the
  restart was dropped as a repeat.
"""

from __future__ import annotations

import logging
import zlib
from dataclasses import dataclass

import numpy as np

from stenoflow.bench.clips import Clip, Timeline, data_dir, load_cached, speech, write_with_floor
from stenoflow.bench.tts import Voice

log = logging.getLogger(__name__)

VERSION = 1
LEVEL_DBFS = -24.0
EDGE_S = 0.3


@dataclass(frozen=True)
class Said:
    text: str
    voice: str
    level_db: float = 0.0  # relative to LEVEL_DBFS
    pause_after_s: float = 0.8


@dataclass(frozen=True)
class FailureCase:
    name: str
    said: tuple[Said, ...]
    floor_snr_db: float  # room noise this far below the speech
    phrase: str  # the words the stream used to lose: each must be committed once


CASES: tuple[FailureCase, ...] = (
    FailureCase("hoarse", (
        Said("Welcome to the recording session for our speech project.", "flite:slt"),
        Said("So this is the sick corpus. I have a cold, so I probably sound quite different than the, uh, "
             "acoustic corpus. Um, the recording environment is also quite different.", "espeak:en-us+croak", -8.0),
        Said("That is all for today.", "flite:rms"),
    ), 18.0, "I have a cold, so I probably sound quite different than the acoustic corpus."),
    FailureCase("repeats", (
        Said("Let me read the list again.", "flite:awb"),
        Said("And here's some more words words words words. Um, and that should be all. Thanks.", "espeak:en-us",
             pause_after_s=2.8),
        Said("Next, the weather report for tomorrow.", "flite:slt"),
    ), 30.0, "words words words words, um, and that should be all. Thanks."),
    FailureCase("restart", (
        Said("Well, there's nothing going else going on in the office this week.", "flite:kal16"),
        Said("We can meet again on Monday.", "espeak:en-gb"),
    ), 30.0, "there's nothing going else going on in the office this week."),
)


def failure_stream(case: FailureCase) -> Clip:
    """The stream of ``case``, built once and cached under the data dir."""
    params = {"kind": "failure", "version": VERSION, "case": case.name, "floor": case.floor_snr_db,
              "said": [(s.text, s.voice, s.level_db, s.pause_after_s) for s in case.said]}
    stem = data_dir() / "failures" / case.name
    clip = load_cached(stem, params)
    if clip is not None:
        return clip
    timeline = Timeline()
    timeline.pause(EDGE_S)
    for k, s in enumerate(case.said):
        timeline.speech(speech(s.text, Voice.parse(s.voice), 1.0, LEVEL_DBFS + s.level_db), s.text, s.voice)
        timeline.pause(s.pause_after_s if k + 1 < len(case.said) else EDGE_S)
    rng = np.random.default_rng(zlib.crc32(case.name.encode()))
    clip = write_with_floor(stem, params, timeline, case.name, case.floor_snr_db, rng)
    log.info("built failure stream %s: %.1f s", case.name, clip.duration)
    return clip


def failure_streams() -> list[Clip]:
    return [failure_stream(c) for c in CASES]
