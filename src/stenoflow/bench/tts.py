"""Thin wrappers around the Debian speech synthesizers flite and espeak-ng.

Both are deterministic, fast on a CPU and installed by ``scripts/setup.sh``, which makes them a
reproducible stand-in for recorded speech: the evaluation sets can be rebuilt on any machine
and always hold the same audio for the same text. Their output is read at its native rate and
resampled to Whisper's 16 kHz here, so callers only ever see 16 kHz mono float32.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from math import gcd
from pathlib import Path
from typing import Literal

import numpy as np
import soundfile as sf
from scipy.signal import resample_poly

logger = logging.getLogger(__name__)

SAMPLE_RATE = 16_000
Engine = Literal["flite", "espeak"]

# The voices the sets are built from when present. flite's "kal" (8 kHz) and "awb_time" (a
# limited-domain voice that only tells the time) are left out on purpose.
DEFAULT_VOICES: tuple[str, ...] = (
    "flite:slt",
    "flite:rms",
    "flite:awb",
    "flite:kal16",
    "espeak:en-us",
    "espeak:en-gb",
    "espeak:en-gb-x-rp",
    "espeak:en-us+m3",
    "espeak:en+f2",
)

ESPEAK_BASE_WPM = 165.0
_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Voice:
    """One synthesizer voice, written ``engine:name`` (e.g. ``flite:slt``, ``espeak:en-gb``)."""

    engine: Engine
    name: str

    @classmethod
    def parse(cls, spec: str) -> Voice:
        engine, sep, name = spec.partition(":")
        if not sep or not name or engine not in ("flite", "espeak"):
            raise ValueError(f"voice must be 'flite:NAME' or 'espeak:NAME', got {spec!r}")
        return cls(engine=engine, name=name)  # type: ignore[arg-type]

    @property
    def id(self) -> str:
        return f"{self.engine}:{self.name}"


def _binary(engine: Engine) -> str:
    return "flite" if engine == "flite" else "espeak-ng"


def engine_available(engine: Engine) -> bool:
    return shutil.which(_binary(engine)) is not None


def flite_voices() -> frozenset[str]:
    """The voices compiled into the installed flite (empty when flite is missing)."""
    if not engine_available("flite"):
        return frozenset()
    result = subprocess.run(
        ["flite", "-lv"], capture_output=True, text=True, timeout=_TIMEOUT_S, check=False
    )
    _, _, names = result.stdout.partition(":")
    return frozenset(names.split())


def available_voices(wanted: tuple[str, ...] | list[str] = DEFAULT_VOICES) -> list[Voice]:
    """The subset of ``wanted`` that this machine can synthesize, in the given order."""
    flite_names = flite_voices()
    espeak_ok = engine_available("espeak")
    found: list[Voice] = []
    for spec in wanted:
        voice = Voice.parse(spec)
        if (voice.engine == "flite" and voice.name in flite_names) or (
            voice.engine == "espeak" and espeak_ok
        ):
            found.append(voice)
        else:
            logger.debug("voice %s is not available here", spec)
    return found


def synthesize(text: str, voice: Voice, speed: float = 1.0) -> np.ndarray:
    """Speak ``text`` with ``voice``; 16 kHz mono float32, including the engine's own padding.

    ``speed`` scales the speaking rate: 1.0 is espeak-ng at 165 words per minute and flite at
    its natural rate. The text goes through a file so no shell or option parsing can see it.
    """
    if speed <= 0:
        raise ValueError("speed must be positive")
    with tempfile.TemporaryDirectory(prefix="stenoflow-tts-") as tmp:
        text_path = Path(tmp) / "text.txt"
        wav_path = Path(tmp) / "speech.wav"
        text_path.write_text(text + "\n", encoding="utf-8")
        if voice.engine == "flite":
            cmd = [
                "flite",
                "-voice",
                voice.name,
                "--setf",
                f"duration_stretch={1.0 / speed:.4f}",
                "-f",
                str(text_path),
                "-o",
                str(wav_path),
            ]
        else:
            cmd = [
                "espeak-ng",
                "-v",
                voice.name,
                "-s",
                str(round(ESPEAK_BASE_WPM * speed)),
                "-f",
                str(text_path),
                "-w",
                str(wav_path),
            ]
        result = subprocess.run(
            cmd, capture_output=True, text=True, timeout=_TIMEOUT_S, check=False
        )
        if result.returncode != 0 or not wav_path.is_file():
            raise RuntimeError(
                f"{cmd[0]} failed for voice {voice.id} (exit {result.returncode}): "
                f"{result.stderr.strip()[:500]}"
            )
        audio, rate = sf.read(str(wav_path), dtype="float32", always_2d=True)
    return to_16k_mono(audio, rate)


def to_16k_mono(audio: np.ndarray, rate: int) -> np.ndarray:
    """Mix to mono and resample with a polyphase filter to 16 kHz."""
    mono = audio.mean(axis=1) if audio.ndim == 2 else audio
    mono = np.asarray(mono, dtype=np.float64)
    if rate != SAMPLE_RATE:
        common = gcd(int(rate), SAMPLE_RATE)
        mono = resample_poly(mono, SAMPLE_RATE // common, int(rate) // common)
    return mono.astype(np.float32)
