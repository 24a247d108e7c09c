"""Signal helpers for assembling synthesized clips: trimming, levels, pauses and noise.

Every sentence is trimmed to its voiced extent before it is placed, so the sentence boundaries
a clip records are where speech really starts and ends, not where a synthesizer's padding does.
Levels are set from the speech itself, which keeps voices of very different loudness (kal16 is
far quieter than slt) comparable, and gives noise a meaningful signal-to-noise ratio.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.signal import lfilter

from stenoflow.bench.tts import SAMPLE_RATE

FRAME_S = 0.010
PEAK_LIMIT = 0.95


def trim_silence(
    audio: np.ndarray, threshold_db: float = -40.0, margin_s: float = 0.02
) -> np.ndarray:
    """Cut leading and trailing frames quieter than ``threshold_db`` below the loudest frame."""
    frame = int(FRAME_S * SAMPLE_RATE)
    n_frames = len(audio) // frame
    if n_frames == 0:
        return audio
    frames = audio[: n_frames * frame].astype(np.float64).reshape(n_frames, frame)
    rms = np.sqrt(np.mean(frames**2, axis=1) + 1e-20)
    loud = np.flatnonzero(20 * np.log10(rms / rms.max()) > threshold_db)
    if loud.size == 0:
        return audio[:0]
    margin = int(margin_s * SAMPLE_RATE)
    start = max(0, loud[0] * frame - margin)
    end = min(len(audio), (loud[-1] + 1) * frame + margin)
    return audio[start:end]


def active_rms(audio: np.ndarray, threshold_db: float = -35.0) -> float:
    """RMS over the frames that carry speech, ignoring the pauses between words."""
    frame = int(FRAME_S * SAMPLE_RATE)
    n_frames = len(audio) // frame
    if n_frames == 0:
        return 0.0
    frames = audio[: n_frames * frame].astype(np.float64).reshape(n_frames, frame)
    energy = np.mean(frames**2, axis=1)
    if energy.max() <= 0:
        return 0.0
    active = energy[10 * np.log10(energy / energy.max() + 1e-20) > threshold_db]
    return float(np.sqrt(active.mean()))


def set_level(audio: np.ndarray, level_dbfs: float) -> np.ndarray:
    """Scale so the active-speech RMS sits at ``level_dbfs`` (dB relative to full scale)."""
    rms = active_rms(audio)
    if rms == 0.0:
        return audio.astype(np.float32)
    gain = 10 ** (level_dbfs / 20) / rms
    peak = float(np.abs(audio).max()) * gain
    if peak > PEAK_LIMIT:
        gain *= PEAK_LIMIT / peak
    return (audio * gain).astype(np.float32)


def noise(n: int, rng: np.random.Generator) -> np.ndarray:
    """Unit-RMS noise with a gently falling spectrum, closer to room noise than white noise."""
    if n <= 0:
        return np.zeros(0, dtype=np.float64)
    white = rng.standard_normal(n)
    rumble = lfilter([1.0], [1.0, -0.95], rng.standard_normal(n))
    mixed = 0.5 * white / white.std() + rumble / max(rumble.std(), 1e-12)
    return mixed / mixed.std()


def db_to_amplitude(db: float) -> float:
    return float(10 ** (db / 20))


def with_noise(audio: np.ndarray, level_db: float, rng: np.random.Generator) -> np.ndarray:
    """``audio`` with room noise (:func:`noise`) at ``level_db`` dBFS RMS over all of it."""
    return (audio + db_to_amplitude(level_db) * noise(audio.size, rng)).astype(np.float32)


@dataclass(frozen=True)
class Placed:
    """A sentence placed on a clip's timeline, in samples."""

    start: int
    end: int
    text: str
    voice: str


def seconds(samples: int) -> float:
    return round(samples / SAMPLE_RATE, 4)


def silence(duration_s: float) -> np.ndarray:
    return np.zeros(round(duration_s * SAMPLE_RATE), dtype=np.float32)


def finalize(audio: np.ndarray) -> np.ndarray:
    """Clip to the valid range after noise was mixed in, as float32."""
    return np.clip(audio, -1.0, 1.0).astype(np.float32)
