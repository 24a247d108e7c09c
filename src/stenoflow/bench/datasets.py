"""Synthesized evaluation sets, built once and cached on disk.

No recorded corpus can be downloaded on these machines, so the accuracy and streaming benchmarks
run on speech synthesized from Debian's English prose (see :mod:`stenoflow.bench.text_pool`)
with flite and espeak-ng (see :mod:`stenoflow.bench.tts`), plus the well-known ``jfk.wav``.
Because the synthesizers are deterministic and every random choice comes from a seeded
generator, the same parameters give the same audio on every machine.

Each clip is a 16 kHz mono float32 wav with a JSON sidecar of the same stem that holds the
reference text, the voice(s), and where each sentence starts and ends, which is known exactly
from how the clip was put together. The sidecar also stores a key hashed from everything the
audio depends on; a clip whose key still matches is reused, anything else is rebuilt.

Cache root: ``$STENOFLOW_DATA`` if set, else ``.cache/stenoflow/data`` under the working
directory (the repository root, where ``scripts/setup.sh`` puts ``jfk.wav``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from stenoflow.bench import mixing
from stenoflow.bench.text_pool import TextPools, load_pools
from stenoflow.bench.tts import (
    DEFAULT_VOICES,
    SAMPLE_RATE,
    Voice,
    available_voices,
    synthesize,
)

logger = logging.getLogger(__name__)

# Bump when the way clips are assembled changes, so every cached clip is rebuilt.
BUILD_VERSION = 1

JFK_TEXT = (
    "And so my fellow Americans, ask not what your country can do for you, "
    "ask what you can do for your country."
)
SPEECH_LEVEL_DBFS = -20.0
SHORT_SENTENCES_PER_CLIP = 8  # candidate sentences reserved for each short clip
SHORT_NOISY_SHARE = 1 / 3
SHORT_NOISE_SNR_DB = (20.0, 30.0)
LONG_PAUSE_S = (0.2, 0.8)
LONG_SILENCE_S = (3.0, 6.0)
LONG_NOISE_SNR_DB = (28.0, 32.0)
LONG_FLOOR_SNR_DB = 50.0
SPEEDS = (0.92, 1.06)
_GOLDEN = 0.6180339887498949
_NAME = re.compile(r"^[A-Za-z0-9._-]+$")

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


# --- public builders ------------------------------------------------------------------------


def jfk() -> Clip:
    """The classic 11-second JFK sample that ``scripts/setup.sh`` places in the cache."""
    path = data_dir() / "jfk.wav"
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing: run `bash scripts/setup.sh` from the repository root "
            "(or set STENOFLOW_DATA to a directory that holds jfk.wav)"
        )
    info = sf.info(str(path))
    return Clip(
        audio_path=path,
        text=JFK_TEXT,
        voice="human:jfk",
        duration=round(info.frames / info.samplerate, 4),
        name="jfk",
        sample_rate=int(info.samplerate),
    )


def short_clips(
    n: int,
    pool: str = "eval",
    min_s: float = 2.0,
    max_s: float = 25.0,
    seed: int = 0,
    voices: Sequence[str] | None = None,
) -> list[Clip]:
    """``n`` clips of one voice each, ``min_s``..``max_s`` long, of one or more sentences.

    Target lengths are spread evenly over the range, voices are taken in turn, and about a
    third of the clips get light noise (20-30 dB SNR). Clip ``i`` depends only on the
    parameters and ``i``, so ``short_clips(2)`` are the first two of ``short_clips(20)``.
    """
    if n < 0:
        raise ValueError("n must be >= 0")
    if not (0.5 <= min_s and min_s + 1.5 <= max_s):
        raise ValueError("need 0.5 <= min_s and min_s + 1.5 <= max_s")
    pools = load_pools()
    sentences = pools.get(pool)
    chosen = _resolve_voices(voices)
    order = np.random.default_rng([seed, 7001]).permutation(len(sentences))
    set_dir = data_dir() / f"short-{pool}-seed{seed}-{min_s:g}-{max_s:g}s"
    clips: list[Clip] = []
    for index in range(n):
        params = {
            "kind": "short",
            "version": BUILD_VERSION,
            "pool": pool,
            "text": pools.fingerprint(pool),
            "seed": seed,
            "min_s": min_s,
            "max_s": max_s,
            "index": index,
            "voices": [v.id for v in chosen],
        }
        stem = set_dir / f"clip-{index:04d}"
        clip = _load_cached(stem, params)
        if clip is None:
            first = (index * SHORT_SENTENCES_PER_CLIP) % len(sentences)
            block = [
                sentences[order[(first + k) % len(sentences)]]
                for k in range(SHORT_SENTENCES_PER_CLIP)
            ]
            voice = chosen[(index + seed) % len(chosen)]
            clip = _build_short(stem, params, block, voice, min_s, max_s, seed, index)
            logger.info(
                "built short clip %d/%d: %.1f s, %s, %d sentence(s)%s",
                index + 1,
                n,
                clip.duration,
                clip.voice,
                len(clip.sentences),
                "" if clip.noise_snr_db is None else f", noise {clip.noise_snr_db:.0f} dB SNR",
            )
        else:
            logger.debug("reusing cached %s", clip.audio_path)
        clips.append(clip)
    logger.info("short clips (%s pool, seed %d): %d ready in %s", pool, seed, n, set_dir)
    return clips


def long_form(
    name: str = "longform-2min",
    minutes: float = 2.0,
    pool: str = "eval",
    seed: int = 0,
    voices: Sequence[str] | None = None,
) -> Clip:
    """A long recording of exactly ``minutes``: sentences from several voices in turns.

    Speakers change every 2-5 sentences, sentences are 0.2-0.8 s apart, one or two silences of
    3-6 s sit in the middle, a faint noise floor (50 dB below speech) runs throughout, and a
    stretch of a quarter to two fifths of the file carries noise at about 30 dB SNR.
    """
    if not _NAME.match(name):
        raise ValueError(f"name must match {_NAME.pattern}, got {name!r}")
    if minutes <= 0:
        raise ValueError("minutes must be positive")
    pools = load_pools()
    chosen = _resolve_voices(voices)
    params = {
        "kind": "long",
        "version": BUILD_VERSION,
        "pool": pool,
        "text": pools.fingerprint(pool),
        "seed": seed,
        "name": name,
        "minutes": minutes,
        "voices": [v.id for v in chosen],
    }
    stem = data_dir() / "longform" / name
    clip = _load_cached(stem, params)
    if clip is not None:
        logger.info(
            "long-form %s: reusing cached %s (%.1f s)", name, clip.audio_path, clip.duration
        )
        return clip
    logger.info("building long-form %s (%.1f min) from %d voices", name, minutes, len(chosen))
    clip = _build_long(stem, params, pools, pool, chosen, minutes * 60.0, seed, name)
    logger.info(
        "built long-form %s: %.1f s, %d sentences, voices %s",
        name,
        clip.duration,
        len(clip.sentences),
        clip.voice,
    )
    return clip


def streams(
    n: int = 3,
    minutes: float = 5.0,
    pool: str = "eval",
    seed: int = 0,
    voices: Sequence[str] | None = None,
) -> list[Clip]:
    """``n`` long-form recordings for the streaming benchmark, each with its own text."""
    return [
        long_form(f"stream-{minutes:g}min-{i}", minutes, pool=pool, seed=seed, voices=voices)
        for i in range(n)
    ]


def build_default_sets() -> list[Clip]:
    """What the benchmarks expect: jfk, 20 short eval clips, a 2-minute long-form, 3 streams.

    A missing ``jfk.wav`` is logged, not raised, so the synthesized sets still get built.
    """
    clips: list[Clip] = []
    try:
        clips.append(jfk())
    except FileNotFoundError as exc:
        logger.error("%s", exc)
    clips.extend(short_clips(20))
    clips.append(long_form())
    clips.extend(streams())
    return clips


# --- building -------------------------------------------------------------------------------


def _resolve_voices(voices: Sequence[str] | None) -> list[Voice]:
    wanted = tuple(voices) if voices is not None else DEFAULT_VOICES
    found = available_voices(wanted)
    if not found:
        raise RuntimeError(
            f"none of the voices {list(wanted)} can be synthesized here: install flite and "
            "espeak-ng with `bash scripts/setup.sh`"
        )
    return found


def _stable_int(text: str) -> int:
    return int.from_bytes(hashlib.sha1(text.encode("utf-8")).digest()[:8], "big")


def _speech(text: str, voice: Voice, speed: float, level_dbfs: float) -> np.ndarray:
    """One sentence, trimmed to its voiced extent and set to a speech level."""
    raw = synthesize(text, voice, speed)
    trimmed = mixing.trim_silence(raw)
    if len(trimmed) == 0:
        raise RuntimeError(f"{voice.id} produced silence for {text!r}")
    return mixing.set_level(trimmed, level_dbfs)


class _Timeline:
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


def _build_short(
    stem: Path,
    params: dict[str, Any],
    block: list[str],
    voice: Voice,
    min_s: float,
    max_s: float,
    seed: int,
    index: int,
) -> Clip:
    rng = np.random.default_rng([seed, index, 1])
    speed = float(rng.uniform(*SPEEDS))
    level = SPEECH_LEVEL_DBFS + float(rng.uniform(-4.0, 2.0))
    lead = float(rng.uniform(0.1, 0.4))
    tail = float(rng.uniform(0.2, 0.5))
    spread = (index * _GOLDEN + 0.37 * seed) % 1.0
    target = min_s + spread * (max_s - 1.0 - min_s)
    noisy = bool(rng.random() < SHORT_NOISY_SHARE)
    snr = float(rng.uniform(*SHORT_NOISE_SNR_DB))
    pauses = rng.uniform(0.2, 0.6, size=len(block))

    rendered = {text: _speech(text, voice, speed, level) for text in block[:1]}

    def seconds_of(text: str) -> float:
        if text not in rendered:
            rendered[text] = _speech(text, voice, speed, level)
        return len(rendered[text]) / SAMPLE_RATE

    # First sentence: the first that fits the target (with a little slack), else the shortest
    # that fits the hard maximum.
    budget = lead + tail
    first = next((t for t in block if budget + seconds_of(t) <= target + 1.0), None)
    if first is None:
        fitting = [t for t in block if budget + seconds_of(t) <= max_s]
        if not fitting:
            raise RuntimeError(f"no sentence short enough for a {max_s} s clip")
        first = min(fitting, key=seconds_of)
    chosen = [first]
    total = budget + seconds_of(first)
    for k, text in enumerate(t for t in block if t != first):
        extra = float(pauses[k]) + seconds_of(text)
        if total + extra > target:
            break
        chosen.append(text)
        total += extra

    timeline = _Timeline()
    timeline.pause(lead)
    for k, text in enumerate(chosen):
        if k:
            timeline.pause(float(pauses[k - 1]))
        timeline.speech(rendered[text], text, voice.id)
    timeline.pause(tail)
    timeline.pad_to(min_s)
    audio = timeline.render()
    if noisy:
        amplitude = timeline.speech_rms(audio) * mixing.db_to_amplitude(-snr)
        audio = audio + amplitude * mixing.noise(len(audio), rng)
    meta_noise = {"snr_db": round(snr, 2)} if noisy else None
    return _write_clip(
        stem,
        params,
        mixing.finalize(audio),
        timeline,
        voice.id,
        f"short-{params['pool']}-s{seed}-{index:04d}",
        noise_snr_db=round(snr, 2) if noisy else None,
        extra={"speed": round(speed, 4), "noise": meta_noise},
    )


def _build_long(
    stem: Path,
    params: dict[str, Any],
    pools: TextPools,
    pool: str,
    voices: list[Voice],
    target_s: float,
    seed: int,
    name: str,
) -> Clip:
    sentences = pools.get(pool)
    rng = np.random.default_rng([seed, _stable_int(name) % (2**32), 2])
    order = iter(rng.permutation(len(sentences)))
    tail_min = 0.5
    n_silences = 1 if target_s <= 150 else 2
    silence_at = sorted(float(t) for t in rng.uniform(0.2, 0.6, size=n_silences) * target_s)
    long_cap = max(LONG_SILENCE_S[0], 0.2 * target_s)

    timeline = _Timeline()
    timeline.pause(float(rng.uniform(0.3, 1.0)))
    current: Voice | None = None
    run_left = 0
    speed = 1.0
    level = SPEECH_LEVEL_DBFS
    exhausted = False
    while not exhausted:
        if run_left == 0:
            others = [v for v in voices if v != current] or voices
            current = others[int(rng.integers(len(others)))]
            run_left = int(rng.integers(2, 6))
            speed = float(rng.uniform(*SPEEDS))
            level = SPEECH_LEVEL_DBFS + float(rng.uniform(-3.0, 2.0))
        if not timeline.placed:
            gap = 0.0
        elif silence_at and timeline.seconds >= silence_at[0]:
            silence_at.pop(0)
            gap = min(float(rng.uniform(*LONG_SILENCE_S)), long_cap)
        else:
            gap = float(rng.uniform(*LONG_PAUSE_S))
        remaining = target_s - tail_min - timeline.seconds - gap
        if remaining < 1.0:
            break
        # Try a few sentences for one that still fits; stop when none does.
        for _attempt in range(12):
            index = next(order, None)
            if index is None:
                exhausted = True
                logger.warning("text pool %s exhausted while building %s", pool, name)
                break
            text = sentences[int(index)]
            audio = _speech(text, current, speed, level)
            if len(audio) / SAMPLE_RATE <= remaining:
                timeline.pause(gap)
                timeline.speech(audio, text, current.id)
                run_left -= 1
                break
        else:
            break
    timeline.pad_to(target_s)

    audio = timeline.render()
    speech_rms = timeline.speech_rms(audio)
    audio = audio + speech_rms * mixing.db_to_amplitude(-LONG_FLOOR_SNR_DB) * mixing.noise(
        len(audio), rng
    )
    snr = float(rng.uniform(*LONG_NOISE_SNR_DB))
    window_s = float(rng.uniform(0.25, 0.4)) * target_s
    window_start_s = float(rng.uniform(0.0, target_s - window_s))
    start = int(window_start_s * SAMPLE_RATE)
    end = min(len(audio), start + int(window_s * SAMPLE_RATE))
    envelope = np.ones(end - start)
    fade = min(int(0.5 * SAMPLE_RATE), (end - start) // 2)
    if fade > 0:
        envelope[:fade] = np.linspace(0.0, 1.0, fade)
        envelope[-fade:] = np.linspace(1.0, 0.0, fade)
    audio[start:end] += (
        speech_rms * mixing.db_to_amplitude(-snr) * envelope * mixing.noise(end - start, rng)
    )
    used: list[str] = []
    for placed in timeline.placed:
        if placed.voice not in used:
            used.append(placed.voice)
    return _write_clip(
        stem,
        params,
        mixing.finalize(audio),
        timeline,
        ",".join(used),
        name,
        noise_snr_db=round(snr, 2),
        extra={
            "noise": {
                "snr_db": round(snr, 2),
                "start": mixing.seconds(start),
                "end": mixing.seconds(end),
                "floor_snr_db": LONG_FLOOR_SNR_DB,
            },
            "long_silences": _long_gaps(timeline.placed, LONG_SILENCE_S[0]),
        },
    )


def _long_gaps(placed: list[mixing.Placed], min_gap_s: float) -> list[list[float]]:
    gaps: list[list[float]] = []
    for before, after in pairwise(placed):
        if (after.start - before.end) / SAMPLE_RATE >= min_gap_s:
            gaps.append([mixing.seconds(before.end), mixing.seconds(after.start)])
    return gaps


# --- cache ----------------------------------------------------------------------------------


def _key(params: dict[str, Any]) -> str:
    return hashlib.sha1(json.dumps(params, sort_keys=True).encode("utf-8")).hexdigest()


def _load_cached(stem: Path, params: dict[str, Any]) -> Clip | None:
    """The clip at ``stem`` if its sidecar was written for exactly these parameters."""
    wav, meta_path = stem.with_suffix(".wav"), stem.with_suffix(".json")
    if not (wav.is_file() and meta_path.is_file()):
        return None
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    if meta.get("key") != _key(params):
        logger.info("cached %s was built with other parameters; rebuilding", wav)
        return None
    return _clip_from_meta(wav, meta)


def _clip_from_meta(wav: Path, meta: dict[str, Any]) -> Clip:
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


def _write_clip(
    stem: Path,
    params: dict[str, Any],
    audio: np.ndarray,
    timeline: _Timeline,
    voice: str,
    name: str,
    noise_snr_db: float | None,
    extra: dict[str, Any] | None = None,
) -> Clip:
    """Write wav then sidecar, each atomically; the sidecar last, as the commit marker."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    wav, meta_path = stem.with_suffix(".wav"), stem.with_suffix(".json")
    meta: dict[str, Any] = {
        "key": _key(params),
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
    return _clip_from_meta(wav, meta)
