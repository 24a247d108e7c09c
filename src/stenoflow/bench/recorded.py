"""A stream of recorded human speech: read prose, a speech, card names and a command.

The synthesized sets cover many voices, but synthesized voices are not people. This stream is
made of real recordings that ship on a package registry with their transcripts: five LibriVox
sentences read from *Sense and Sensibility*, ``jfk.wav``, five recordings of playing-card names
and "go forward ten meters", all from the test data of the ``pocketsphinx`` source package
(``scripts/setup.sh`` unpacks them into ``<data>/pocketsphinx``), laid end to end with 0.8 s
of silence between them. About 58 s, 118 words: the kind of recording where short items at the
end of a stream used to go uncommitted.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import numpy as np

from stenoflow.audio.io import load_audio, validate_samples
from stenoflow.bench.clips import Clip, Timeline, data_dir, load_cached, write_clip
from stenoflow.bench.datasets import JFK_TEXT, jfk

log = logging.getLogger(__name__)

POCKETSPHINX = "pocketsphinx"  # directory under the data dir that setup.sh fills
LIBRIVOX = ("0870", "0880", "0890", "0920", "0930")
CARDS = ("001", "002", "003", "004", "005")
GOFORWARD_TEXT = "go forward ten meters"  # the recording's transcript in the package's examples
PAUSE_S = 0.8
EDGE_S = 0.3  # silence before the first recording and after the last
VERSION = 1
_CARD_LINE = re.compile(r"<s>\s*(.*?)\s*</s>\s*\((\w+)\)")


def recorded_dir() -> Path:
    return data_dir() / POCKETSPHINX


def recorded_available() -> bool:
    """Whether the recordings are unpacked (``scripts/setup.sh`` does it)."""
    root = recorded_dir()
    return (root / "goforward.raw").is_file() and (root / "cards" / "cards.transcription").is_file()


def recorded_stream(name: str = "recorded-57s") -> Clip:
    """The recorded stream (see the module docstring), built once and cached."""
    if not recorded_available():
        raise FileNotFoundError(f"the recordings are not in {recorded_dir()}: run `bash scripts/setup.sh` "
                                "(it unpacks them from the pocketsphinx source package)")
    pieces = _pieces()
    params = {"kind": "recorded", "version": VERSION, "pause": PAUSE_S, "edge": EDGE_S,
              "pieces": [(label, text, int(audio.size)) for label, text, audio in pieces]}
    stem = data_dir() / "recorded" / name
    clip = load_cached(stem, params)
    if clip is not None:
        return clip
    timeline = Timeline()
    timeline.pause(EDGE_S)
    for k, (label, text, audio) in enumerate(pieces):
        if k:
            timeline.pause(PAUSE_S)
        timeline.speech(audio, text, label)
    timeline.pause(EDGE_S)
    audio = timeline.render()
    clip = write_clip(stem, params, audio.astype(np.float32), timeline, "human", name, noise_snr_db=None)
    log.info("built recorded stream %s: %.1f s, %d recordings", name, clip.duration, len(pieces))
    return clip


def _pieces() -> list[tuple[str, str, np.ndarray]]:
    """(who, transcript, samples) of every recording, in stream order."""
    root = recorded_dir()
    out = []
    for take in LIBRIVOX:
        stem = root / "librivox" / f"sense_and_sensibility_01_austen_64kb-{take}"
        out.append((f"librivox:{take}", _one_line(stem.with_suffix(".txt")), load_audio(stem.with_suffix(".wav"))))
    out.append(("human:jfk", JFK_TEXT, load_audio(jfk().audio_path)))
    cards = _card_texts(root / "cards" / "cards.transcription")
    for take in CARDS:
        out.append((f"cards:{take}", cards[take], load_audio(root / "cards" / f"{take}.wav")))
    raw = np.fromfile(root / "goforward.raw", dtype="<i2")  # 16 kHz mono s16le PCM
    out.append(("command:goforward", GOFORWARD_TEXT, validate_samples(raw)))
    return out


def _one_line(path: Path) -> str:
    return " ".join(path.read_text(encoding="utf-8").split())


def _card_texts(path: Path) -> dict[str, str]:
    """Transcripts by recording id from lines like ``<s> ten of clubs </s> (001)``."""
    found = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        m = _CARD_LINE.search(line)
        if m:
            found[m.group(2)] = " ".join(m.group(1).split())
    missing = [t for t in CARDS if t not in found]
    if missing:
        raise ValueError(f"{path}: no transcript for {missing}")
    return found
