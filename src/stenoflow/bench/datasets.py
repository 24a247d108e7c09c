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

import logging
import re
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from stenoflow.bench import mixing
from stenoflow.bench.clips import (
    Clip,
    SentenceSpan,
    Timeline,
    data_dir,
    load_cached,
    resolve_voices,
    speech,
    stable_int,
    write_clip,
)
from stenoflow.bench.text_pool import TextPools, load_pools
from stenoflow.bench.tts import SAMPLE_RATE, Voice

__all__ = ["JFK_TEXT", "Clip", "SentenceSpan", "build_default_sets", "data_dir", "jfk", "long_form",
           "short_clips", "streams"]

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
    chosen = resolve_voices(voices)
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
        clip = load_cached(stem, params)
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
    chosen = resolve_voices(voices)
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
    clip = load_cached(stem, params)
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

    rendered = {text: speech(text, voice, speed, level) for text in block[:1]}

    def seconds_of(text: str) -> float:
        if text not in rendered:
            rendered[text] = speech(text, voice, speed, level)
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

    timeline = Timeline()
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
    return write_clip(
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
    rng = np.random.default_rng([seed, stable_int(name) % (2**32), 2])
    order = iter(rng.permutation(len(sentences)))
    tail_min = 0.5
    n_silences = 1 if target_s <= 150 else 2
    silence_at = sorted(float(t) for t in rng.uniform(0.2, 0.6, size=n_silences) * target_s)
    long_cap = max(LONG_SILENCE_S[0], 0.2 * target_s)

    timeline = Timeline()
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
            audio = speech(text, current, speed, level)
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
    return write_clip(
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


