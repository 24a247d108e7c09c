"""Assembling evaluation clips: synthesized speech laid on a timeline, written and cached.

The shared machinery of the data sets (:mod:`stenoflow.bench.datasets`, :mod:`stenoflow.bench.varied`):
a ``Timeline`` of pauses and sentences that remembers where each sentence went, sentences
synthesized and levelled, and clips written as a wav plus a JSON sidecar keyed by everything the
audio depends on, so that a clip whose key still matches is reused and anything else is rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from stenoflow.bench import mixing
from stenoflow.bench.tts import DEFAULT_VOICES, SAMPLE_RATE, Voice, available_voices, synthesize

logger = logging.getLogger(__name__)

SentenceSpan = tuple[float, float, str]


@dataclass(frozen=True)
class Clip:
    """One evaluation clip: the wav on disk and what is known to be said in it.

    ``sentences`` holds ``(start_s, end_s, text)`` for every sentence, with the times marking
    the voiced extent of that sentence in the file; ``sentence_voices`` says who spoke each.
    """

    audio_path: Path
    text: str
    voice: str
    duration: float
    sentences: tuple[SentenceSpan, ...] = ()
    sentence_voices: tuple[str, ...] = ()
    name: str = ""
    noise_snr_db: float | None = None
    sample_rate: int = SAMPLE_RATE

    @property
    def words(self) -> list[str]:
        return self.text.split()

    def load_audio(self) -> np.ndarray:
        """The samples as float32 (mono, at ``sample_rate``)."""
        audio, _ = sf.read(str(self.audio_path), dtype="float32", always_2d=True)
        return audio.mean(axis=1).astype(np.float32)


def data_dir() -> Path:
    """Where the sets are cached: ``$STENOFLOW_DATA``, else ``./.cache/stenoflow/data``."""
    env = os.environ.get("STENOFLOW_DATA", "").strip()
    return Path(env) if env else Path.cwd() / ".cache" / "stenoflow" / "data"


def resolve_voices(voices: Sequence[str] | None) -> list[Voice]:
    wanted = tuple(voices) if voices is not None else DEFAULT_VOICES
    found = available_voices(wanted)
    if not found:
        raise RuntimeError(
            f"none of the voices {list(wanted)} can be synthesized here: install flite and "
            "espeak-ng with `bash scripts/setup.sh`"
        )
    return found


def stable_int(text: str) -> int:
    return int.from_bytes(hashlib.sha1(text.encode("utf-8")).digest()[:8], "big")


def speech(text: str, voice: Voice, speed: float, level_dbfs: float) -> np.ndarray:
    """One sentence, trimmed to its voiced extent and set to a speech level."""
    raw = synthesize(text, voice, speed)
    trimmed = mixing.trim_silence(raw)
    if len(trimmed) == 0:
        raise RuntimeError(f"{voice.id} produced silence for {text!r}")
    return mixing.set_level(trimmed, level_dbfs)


class Timeline:
    """Pieces of audio laid end to end, remembering where each sentence went."""

    def __init__(self) -> None:
        self.pieces: list[np.ndarray] = []
        self.length = 0
        self.placed: list[mixing.Placed] = []

    @property
    def seconds(self) -> float:
        return self.length / SAMPLE_RATE

    def pause(self, duration_s: float) -> None:
        self._add(mixing.silence(duration_s))

    def speech(self, audio: np.ndarray, text: str, voice: str) -> None:
        self.placed.append(mixing.Placed(self.length, self.length + len(audio), text, voice))
        self._add(audio)

    def pad_to(self, duration_s: float) -> None:
        missing = round(duration_s * SAMPLE_RATE) - self.length
        if missing > 0:
            self._add(np.zeros(missing, dtype=np.float32))

    def render(self) -> np.ndarray:
        if not self.pieces:
            return np.zeros(0, dtype=np.float64)
        return np.concatenate(self.pieces).astype(np.float64)

    def speech_rms(self, audio: np.ndarray) -> float:
        if not self.placed:
            return 0.0
        voiced = np.concatenate([audio[p.start : p.end] for p in self.placed])
        return mixing.active_rms(voiced)

    def _add(self, piece: np.ndarray) -> None:
        self.pieces.append(piece)
        self.length += len(piece)


# --- cache ----------------------------------------------------------------------------------


def clip_key(params: dict[str, Any]) -> str:
    return hashlib.sha1(json.dumps(params, sort_keys=True).encode("utf-8")).hexdigest()


def clip_paths(stem: Path) -> tuple[Path, Path]:
    """The wav and the sidecar of a clip named ``stem`` (whose name may hold dots: "1.5min")."""
    return stem.with_name(stem.name + ".wav"), stem.with_name(stem.name + ".json")


def load_cached(stem: Path, params: dict[str, Any]) -> Clip | None:
    """The clip at ``stem`` if its sidecar was written for exactly these parameters."""
    wav, meta_path = clip_paths(stem)
    if not (wav.is_file() and meta_path.is_file()):
        return None
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    if meta.get("key") != clip_key(params):
        logger.info("cached %s was built with other parameters; rebuilding", wav)
        return None
    return clip_from_meta(wav, meta)


def clip_from_meta(wav: Path, meta: dict[str, Any]) -> Clip:
    spans = meta.get("sentences", [])
    return Clip(
        audio_path=wav,
        text=meta["text"],
        voice=meta["voice"],
        duration=float(meta["duration"]),
        sentences=tuple((float(s["start"]), float(s["end"]), str(s["text"])) for s in spans),
        sentence_voices=tuple(str(s["voice"]) for s in spans),
        name=meta.get("name", wav.stem),
        noise_snr_db=meta.get("noise_snr_db"),
        sample_rate=int(meta.get("sample_rate", SAMPLE_RATE)),
    )


def write_clip(
    stem: Path,
    params: dict[str, Any],
    audio: np.ndarray,
    timeline: Timeline,
    voice: str,
    name: str,
    noise_snr_db: float | None,
    extra: dict[str, Any] | None = None,
) -> Clip:
    """Write wav then sidecar, each atomically; the sidecar last, as the commit marker."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    wav, meta_path = clip_paths(stem)
    meta: dict[str, Any] = {
        "key": clip_key(params),
        "params": params,
        "name": name,
        "text": " ".join(p.text for p in timeline.placed),
        "voice": voice,
        "duration": mixing.seconds(len(audio)),
        "sample_rate": SAMPLE_RATE,
        "noise_snr_db": noise_snr_db,
        "sentences": [
            {
                "start": mixing.seconds(p.start),
                "end": mixing.seconds(p.end),
                "text": p.text,
                "voice": p.voice,
            }
            for p in timeline.placed
        ],
        **(extra or {}),
    }
    meta_path.unlink(missing_ok=True)
    tmp_wav = wav.with_name(wav.name + ".part")
    sf.write(str(tmp_wav), audio, SAMPLE_RATE, subtype="FLOAT", format="WAV")
    os.replace(tmp_wav, wav)
    tmp_meta = meta_path.with_name(meta_path.name + ".part")
    tmp_meta.write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp_meta, meta_path)
    return clip_from_meta(wav, meta)


def write_with_floor(stem: Path, params: dict[str, Any], timeline: Timeline, name: str, floor_snr_db: float,
                     rng: np.random.Generator) -> Clip:
    """Render ``timeline`` under a room-noise floor ``floor_snr_db`` below its speech (pauses too),
    and write it as a clip whose voice lists every voice that spoke, in order of appearance."""
    audio = timeline.render()
    audio = audio + timeline.speech_rms(audio) * mixing.db_to_amplitude(-floor_snr_db) * mixing.noise(len(audio), rng)
    used = list(dict.fromkeys(p.voice for p in timeline.placed))
    return write_clip(stem, params, mixing.finalize(audio), timeline, ",".join(used), name, noise_snr_db=None)
