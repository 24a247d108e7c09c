"""Getting audio into the one shape the model accepts: float32, mono, 16 kHz.

Whisper was trained on 16 kHz mono audio scaled to roughly [-1, 1]; every entry point
(files, in-memory arrays, live streams) funnels through this module so the rest of the
engine never has to think about containers, channel layouts or sample rates.
"""

from __future__ import annotations

import io
import logging
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, TypeVar

import av
import numpy as np
import torch
import torch.nn.functional as F

logger = logging.getLogger(__name__)

SAMPLE_RATE = 16000
WINDOW_S = 30.0  # Whisper's window: every input it was trained on was padded to it
N_SAMPLES = round(WINDOW_S * SAMPLE_RATE)  # one 30 s Whisper window

# A 2-D array with more "channels" than this is almost certainly (channels, n) by mistake.
_MAX_CHANNELS = 32
# Float input whose peak is this large was almost certainly integer PCM cast to float.
_SUSPICIOUS_PEAK = 64.0
# ... and beyond the largest 32-bit PCM value it is not audio at all (bytes read as the wrong
# format); such values also overflow the spectrogram's power.
_MAX_PEAK = float(2**31)

ArrayT = TypeVar("ArrayT", np.ndarray, torch.Tensor)
AudioSource = str | os.PathLike[str] | bytes | bytearray | memoryview | BinaryIO


class AudioError(ValueError):
    """Input that exists but cannot be turned into audio samples.

    A ValueError subclass so callers that already treat bad input as ValueError keep
    working, while callers that care can tell "not audio" from other value problems.
    """


def load_audio(source: AudioSource) -> np.ndarray:
    """Decode any audio PyAV/FFmpeg understands to float32 mono 16 kHz samples.

    `source` is a path, the encoded bytes of a file, or a readable binary file object.
    PyAV is used (rather than shelling out to an ffmpeg binary) so that decoding works
    wherever the wheel installs, and so that in-memory input needs no temporary file.

    Raises FileNotFoundError for a missing path and AudioError (a ValueError) for input
    that is empty, is not audio, is corrupt beyond recovery, or decodes to nothing.
    """
    name, opened = _open_source(source)
    try:
        with av.open(opened, mode="r", metadata_errors="ignore") as container:
            if not container.streams.audio:
                raise AudioError(f"{name}: has no audio stream")
            samples = _decode_stream(container, container.streams.audio[0], name)
    except AudioError:
        raise
    except av.FFmpegError as e:
        raise AudioError(f"{name}: cannot be decoded as audio ({e})") from e
    if samples.size == 0:
        raise AudioError(f"{name}: contains no audio samples")
    _checked_peak(samples, f"{name}:", AudioError)
    logger.debug("decoded %s: %.2f s", name, samples.size / SAMPLE_RATE)
    return samples


def _open_source(source: AudioSource) -> tuple[str, str | BinaryIO]:
    """Return a display name and something av.open accepts, rejecting empty input early.

    FFmpeg's message for a zero-byte file is an unhelpful "Invalid data found"; checking
    size here lets the error say what actually went wrong.
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        if len(source) == 0:
            raise AudioError("<bytes>: is empty (0 bytes), expected an encoded audio file")
        return "<bytes>", io.BytesIO(bytes(source))
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.exists():
            raise FileNotFoundError(2, "audio file not found", str(path))
        if path.is_dir():
            raise IsADirectoryError(21, "expected an audio file, got a directory", str(path))
        if path.stat().st_size == 0:
            raise AudioError(f"{path}: is empty (0 bytes)")
        return str(path), str(path)
    if hasattr(source, "read"):
        return str(getattr(source, "name", "<stream>")), source
    raise TypeError(f"load_audio expects a path, bytes or a binary file, got {type(source)!r}")


def _decode_stream(
    container: av.container.InputContainer, stream: av.AudioStream, name: str
) -> np.ndarray:
    """Decode one audio stream, resampled to 16 kHz and averaged to mono, into one array.

    The channels are averaged here rather than by asking the resampler for a mono layout:
    FFmpeg's float downmix sums stereo as 0.707 * (L + R), i.e. +3 dB and peaks up to 1.41,
    whereas openai-whisper (ffmpeg to s16 mono, which normalises the matrix) and
    validate_samples both produce the plain mean. Whisper's features are level-dependent,
    so the same recording must give the same samples on every path.
    """
    chunks: list[np.ndarray] = []
    for frame in _resampled(container, stream, name):
        # Packed 'flt' is one interleaved plane, (1, n * channels). Planar output is avoided
        # on purpose: PyAV's to_ndarray crashes on planar frames with 8 or more channels.
        channels = frame.layout.nb_channels
        interleaved = frame.to_ndarray().reshape(-1)
        if channels == 1:
            chunks.append(interleaved)
        else:
            chunks.append(interleaved.reshape(-1, channels).mean(axis=1, dtype=np.float32))
    if not chunks:
        return np.zeros(0, dtype=np.float32)
    return np.concatenate(chunks).astype(np.float32, copy=False)


def _resampled(
    container: av.container.InputContainer, stream: av.AudioStream, name: str
) -> Iterator[av.AudioFrame]:
    """Yield 16 kHz packed float frames in the input's channel layout.

    PyAV's resampler is fixed to the first frame it sees, but streams can switch layout or
    rate midway (concatenated recordings, some broadcast captures), so on a change the
    resampler is flushed and replaced rather than allowed to fail.
    """
    resampler: av.AudioResampler | None = None
    signature: tuple[str, str, int] | None = None
    for frame in _decoded_frames(container, stream, name):
        current = (frame.format.name, frame.layout.name, frame.sample_rate)
        if resampler is None or current != signature:
            if resampler is not None:
                yield from resampler.resample(None)
            # layout=None keeps the input's channels; _decode_stream averages them.
            resampler = av.AudioResampler(format="flt", layout=None, rate=SAMPLE_RATE)
            signature = current
        # Broken or missing timestamps make the resampling filter graph complain; the
        # samples are consumed strictly in order, so timestamps carry no information here.
        frame.pts = None
        yield from resampler.resample(frame)
    if resampler is not None:
        yield from resampler.resample(None)


def _decoded_frames(
    container: av.container.InputContainer, stream: av.AudioStream, name: str
) -> Iterator[av.AudioFrame]:
    """Decode packet by packet, skipping damaged packets the way the ffmpeg CLI does.

    A truncated download or a glitch in a long recording should cost a few milliseconds of
    audio, not the whole file; a file where nothing decodes still fails later with
    "contains no audio samples".
    """
    bad_packets = 0
    for packet in container.demux(stream):
        try:
            frames = packet.decode()
        except av.InvalidDataError as e:
            bad_packets += 1
            logger.debug("%s: skipping undecodable packet: %s", name, e)
            continue
        yield from frames
    if bad_packets:
        logger.warning("%s: skipped %d undecodable audio packet(s)", name, bad_packets)


def validate_samples(samples: np.ndarray, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    """Check and normalise raw samples handed to the engine by API users or streams.

    Returns a C-contiguous 1-D float32 array at 16 kHz (possibly the input itself when it
    already is one; it is never modified). Accepted input:

    * float16/32/64 samples, nominally in [-1, 1];
    * int16 PCM, converted by dividing by 32768 (so full scale maps to [-1, 1)); other
      integer widths are rejected because their scale cannot be guessed safely;
    * 1-D mono, or 2-D (n_samples, n_channels) which is averaged to mono;
    * any positive `sample_rate`, resampled to 16 kHz with a polyphase filter.

    NaN or infinite values raise ValueError: they would silently poison every mel frame; so do
    values beyond 2**31 (no PCM scale reaches them; bytes decoded in the wrong format do).
    """
    if isinstance(sample_rate, bool) or not isinstance(sample_rate, (int, np.integer)):
        raise TypeError(f"sample_rate must be an int, got {sample_rate!r}")
    if sample_rate <= 0:
        raise ValueError(f"sample_rate must be positive, got {sample_rate}")
    array = np.asarray(samples)
    array = _to_float32(array)
    array = _to_mono(array)
    peak = _checked_peak(array, "audio", ValueError)
    if peak > _SUSPICIOUS_PEAK:
        logger.warning(
            "audio peak amplitude %.1f is far outside [-1, 1]; integer PCM passed as "
            "float? Divide int16 data by 32768 or pass it as int16.",
            peak,
        )
    if sample_rate != SAMPLE_RATE:
        array = _resample(array, sample_rate, SAMPLE_RATE)
    return np.ascontiguousarray(array, dtype=np.float32)


def _checked_peak(samples: np.ndarray, what: str, error: type[ValueError]) -> float:
    """The largest magnitude of float ``samples`` (0 if empty); ``error``, its message led by
    ``what``, where they are unusable: NaN or infinite values, or values beyond any PCM scale."""
    if not np.isfinite(samples).all():
        raise error(f"{what} samples contain NaN or infinite values")
    peak = float(np.max(np.abs(samples))) if samples.size else 0.0
    if peak > _MAX_PEAK:
        raise error(f"{what} samples reach {peak:.3g}, beyond any PCM scale (float samples belong in "
                    "[-1, 1]): not audio, or raw PCM read in the wrong format")
    return peak


def _to_float32(array: np.ndarray) -> np.ndarray:
    """Convert supported sample types to float32; reject the rest with a pointed message."""
    expected = "expected float32 16 kHz mono samples (float or int16 PCM also accepted)"
    if array.dtype.kind == "f":
        return array.astype(np.float32, copy=False)
    if array.dtype == np.int16:
        return array.astype(np.float32) / np.float32(32768.0)
    raise TypeError(f"unsupported audio sample dtype {array.dtype}; {expected}")


def _to_mono(array: np.ndarray) -> np.ndarray:
    """Average (n_samples, n_channels) to mono; refuse shapes that are probably a mistake."""
    if array.ndim == 1:
        return array
    if array.ndim == 2:
        if array.shape[1] > _MAX_CHANNELS:
            raise ValueError(
                f"audio array of shape {array.shape} looks like (channels, samples); "
                "expected (samples,) or (samples, channels) of float32 16 kHz audio"
            )
        if array.shape[1] == 0:
            raise ValueError(f"audio array of shape {array.shape} has no channels")
        return array.mean(axis=1, dtype=np.float32)
    raise ValueError(
        f"audio array must be 1-D (samples,) or 2-D (samples, channels), got shape "
        f"{array.shape}; expected float32 16 kHz mono"
    )


def _resample(array: np.ndarray, rate_in: int, rate_out: int) -> np.ndarray:
    """Polyphase resampling: exact rational ratio, linear phase, no FFT-length artefacts."""
    # Imported lazily: scipy.signal costs ~0.3 s to import and most inputs are already 16 kHz.
    from scipy.signal import resample_poly

    if array.size == 0:
        return array
    g = math.gcd(rate_in, rate_out)
    up, down = rate_out // g, rate_in // g
    return resample_poly(array, up, down).astype(np.float32, copy=False)


def pad_or_trim(array: ArrayT, length: int = N_SAMPLES, axis: int = -1) -> ArrayT:
    """Zero-pad or cut `array` along `axis` to exactly `length` (numpy or torch).

    The encoder has a fixed input size (30 s by default), so every window is brought to
    that size; padding is at the end so timestamps stay anchored at the start.
    """
    if length < 0:
        raise ValueError(f"length must be non-negative, got {length}")
    if isinstance(array, torch.Tensor):
        dim = axis % array.ndim
        current = array.shape[dim]
        if current > length:
            return array.narrow(dim, 0, length)
        if current < length:
            # F.pad lists (left, right) pairs starting from the last dimension.
            pads = [0, 0] * (array.ndim - 1 - dim) + [0, length - current]
            return F.pad(array, pads)
        return array
    dim = axis % array.ndim
    current = array.shape[dim]
    if current > length:
        index = (slice(None),) * dim + (slice(0, length),)
        return array[index]
    if current < length:
        widths = [(0, 0)] * array.ndim
        widths[dim] = (0, length - current)
        return np.pad(array, widths)
    return array
