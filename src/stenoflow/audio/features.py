"""Whisper's log-mel frontend, reproduced to float32 rounding.

Whisper checkpoints only work on features computed exactly the way OpenAI computes them
(window, padding, dropped last frame, Slaney filterbank, the 8-decade dynamic range clamp
and the (x + 4) / 4 scaling), so none of these details are configurable. The whole path
is torch so that it runs on the model's device and stays differentiable with respect to
the waveform (needed to optimise audio through the frontend).
"""

from __future__ import annotations

import logging
from functools import lru_cache

import numpy as np
import torch

from stenoflow.audio.io import N_SAMPLES, SAMPLE_RATE

logger = logging.getLogger(__name__)

N_FFT = 400  # 25 ms analysis window
HOP_LENGTH = 160  # 10 ms hop -> 100 frames per second
N_FRAMES = N_SAMPLES // HOP_LENGTH  # 3000 frames in a 30 s window
SUPPORTED_N_MELS = (80, 128)  # 128 only for large-v3 style checkpoints

_LOG_FLOOR = 1e-10  # power floor before log10, as in openai-whisper
_DYNAMIC_RANGE = 8.0  # decades kept below the loudest bin


def mel_frames(n_samples: int) -> int:
    """Number of mel frames produced for `n_samples` input samples (the last STFT frame is dropped)."""
    return n_samples // HOP_LENGTH


def _hz_to_mel(hz: np.ndarray) -> np.ndarray:
    """Slaney's Auditory Toolbox mel scale: linear below 1 kHz, logarithmic above."""
    hz = np.asarray(hz, dtype=np.float64)
    linear_step = 200.0 / 3.0  # Hz per mel in the linear part
    knee_hz = 1000.0
    knee_mel = knee_hz / linear_step  # 15 mel
    log_step = np.log(6.4) / 27.0  # mels per natural-log unit above the knee
    mel = hz / linear_step
    above = hz >= knee_hz
    mel[above] = knee_mel + np.log(hz[above] / knee_hz) / log_step
    return mel


def _mel_to_hz(mel: np.ndarray) -> np.ndarray:
    """Inverse of _hz_to_mel."""
    mel = np.asarray(mel, dtype=np.float64)
    linear_step = 200.0 / 3.0
    knee_hz = 1000.0
    knee_mel = knee_hz / linear_step
    log_step = np.log(6.4) / 27.0
    hz = mel * linear_step
    above = mel >= knee_mel
    hz[above] = knee_hz * np.exp(log_step * (mel[above] - knee_mel))
    return hz


@lru_cache(maxsize=8)
def mel_filters(n_mels: int = 80) -> np.ndarray:
    """Slaney-normalised triangular mel filterbank, shape (n_mels, N_FFT // 2 + 1), float32.

    Equivalent to librosa.filters.mel(sr=16000, n_fft=400, n_mels=n_mels) (fmin 0,
    fmax 8000, htk=False, norm="slaney"), which is what Whisper was trained with. Built in
    float64 and cast once; the result is read-only because it is cached and shared.
    """
    if n_mels not in SUPPORTED_N_MELS:
        raise ValueError(f"n_mels must be one of {SUPPORTED_N_MELS}, got {n_mels}")
    fmin, fmax = 0.0, SAMPLE_RATE / 2.0
    bin_hz = np.linspace(0.0, SAMPLE_RATE / 2.0, N_FFT // 2 + 1)
    # n_mels triangles need n_mels + 2 edge points, equally spaced on the mel scale.
    mel_lo, mel_hi = _hz_to_mel(np.array([fmin, fmax]))
    edges_hz = _mel_to_hz(np.linspace(mel_lo, mel_hi, n_mels + 2))
    left, centre, right = edges_hz[:-2, None], edges_hz[1:-1, None], edges_hz[2:, None]
    rising = (bin_hz[None, :] - left) / (centre - left)
    falling = (right - bin_hz[None, :]) / (right - centre)
    weights = np.clip(np.minimum(rising, falling), 0.0, None)
    # Slaney normalisation: each triangle has unit area, so wide high-frequency bands
    # do not dominate the energy.
    weights *= (2.0 / (edges_hz[2:] - edges_hz[:-2]))[:, None]
    out = weights.astype(np.float32)
    out.flags.writeable = False
    return out


@lru_cache(maxsize=16)
def _filters_tensor(n_mels: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """The filterbank as a tensor on `device`, cached so each call does not re-upload it (built
    outside inference mode, so autograd may use it whichever call built it first)."""
    with torch.inference_mode(False):
        return torch.from_numpy(mel_filters(n_mels).copy()).to(device=device, dtype=dtype)


@lru_cache(maxsize=16)
def _window_tensor(device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """Periodic Hann window of N_FFT samples (the torch.stft convention Whisper used), built
    outside inference mode as the filterbank is."""
    with torch.inference_mode(False):
        return torch.hann_window(N_FFT, periodic=True, device=device, dtype=dtype)


def log_mel_spectrogram(
    audio: np.ndarray | torch.Tensor,
    n_mels: int = 80,
    padding: int = 0,
    device: str | torch.device | None = None,
) -> torch.Tensor:
    """Whisper log-mel features of 16 kHz mono audio.

    `audio` is (n_samples,) or a batch (batch, n_samples); the result is
    (n_mels, n_frames) or (batch, n_mels, n_frames) with n_frames =
    mel_frames(n_samples + padding). `padding` zero samples are appended first, as
    openai-whisper does with 30 s of silence so the final window is complete.

    Each batch item is normalised against its own loudest bin, so a batched call gives
    the same features as separate calls. A float32/float64 tensor input keeps its
    autograd graph; numpy input is converted to float32 without a copy where possible.
    """
    if n_mels not in SUPPORTED_N_MELS:
        raise ValueError(f"n_mels must be one of {SUPPORTED_N_MELS}, got {n_mels}")
    if padding < 0:
        raise ValueError(f"padding must be non-negative, got {padding}")
    x = _as_waveform_tensor(audio)
    if device is not None:
        x = x.to(torch.device(device))
    if padding:
        x = torch.nn.functional.pad(x, (0, padding))
    if x.shape[-1] <= N_FFT // 2:
        raise ValueError(
            f"audio too short for the mel frontend: {x.shape[-1]} samples (with padding), "
            f"need more than {N_FFT // 2}"
        )
    window = _window_tensor(x.device, x.dtype)
    spectrum = torch.stft(
        x,
        N_FFT,
        HOP_LENGTH,
        window=window,
        center=True,
        pad_mode="reflect",
        return_complex=True,
    )[..., :-1]
    # |z|^2 as re^2 + im^2: same value as abs()**2 up to rounding, but no sqrt, and a
    # gradient that is simply zero (not undefined) where the spectrum is exactly zero.
    power = spectrum.real.square() + spectrum.imag.square()
    mel = _filters_tensor(n_mels, x.device, x.dtype) @ power
    log_spec = mel.clamp(min=_LOG_FLOOR).log10()
    peak = log_spec.amax(dim=(-2, -1), keepdim=True)
    log_spec = torch.maximum(log_spec, peak - _DYNAMIC_RANGE)
    return (log_spec + 4.0) / 4.0


def _as_waveform_tensor(audio: np.ndarray | torch.Tensor) -> torch.Tensor:
    """Accept numpy or torch samples; keep float32/64 tensors as-is so gradients flow."""
    if isinstance(audio, torch.Tensor):
        x = audio
        if x.dtype not in (torch.float32, torch.float64):
            if x.is_complex() or not (x.is_floating_point() or x.dtype == torch.int16):
                raise TypeError(f"expected float32 16 kHz mono samples, got dtype {x.dtype}")
            x = x.float() / 32768.0 if x.dtype == torch.int16 else x.float()
    else:
        array = np.asarray(audio)
        if array.dtype.kind != "f":
            raise TypeError(
                f"expected float32 16 kHz mono samples, got dtype {array.dtype}; "
                "use stenoflow.audio.io.validate_samples to convert"
            )
        array = np.ascontiguousarray(array, dtype=np.float32)
        if not array.flags.writeable:
            array = array.copy()  # torch.from_numpy warns on read-only memory
        x = torch.from_numpy(array)
    if x.ndim not in (1, 2):
        raise ValueError(
            f"expected audio of shape (n_samples,) or (batch, n_samples), got {tuple(x.shape)}"
        )
    return x
