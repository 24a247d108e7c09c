"""Tests for the audio frontend: decoding, sample validation and the log-mel features.

The mel features are checked against faster-whisper's NumPy reimplementation of
OpenAI's frontend, because checkpoints are only usable with bit-for-bit-ish features.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

from stenoflow.audio.features import (
    HOP_LENGTH,
    N_FFT,
    log_mel_spectrogram,
    mel_filters,
    mel_frames,
)
from stenoflow.audio.io import (
    SAMPLE_RATE,
    AudioError,
    load_audio,
    pad_or_trim,
    validate_samples,
)

feature_extractor = pytest.importorskip("faster_whisper.feature_extractor")

REPO_ROOT = Path(__file__).resolve().parents[1]
MEL_TOLERANCE = 1e-4


def _synthetic_speechlike(seconds: float = 7.3, seed: int = 0) -> np.ndarray:
    """Deterministic broadband test signal: chirps sweeping the speech band plus noise.

    Chirps exercise every mel band over time; the noise floor keeps quiet bins away from
    the 1e-10 clamp so the comparison tests arithmetic, not the floor.
    """
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    signal = np.zeros_like(t)
    for f0, f1, amp in ((100.0, 3000.0, 0.3), (7000.0, 200.0, 0.2), (500.0, 7900.0, 0.1)):
        # Linear chirp: instantaneous frequency f0 -> f1 over the clip.
        phase = 2 * np.pi * (f0 * t + (f1 - f0) * t**2 / (2 * seconds))
        signal += amp * np.sin(phase)
    envelope = 0.5 + 0.5 * np.sin(2 * np.pi * 1.7 * t) ** 2  # syllable-like amplitude changes
    signal = signal * envelope + 0.01 * rng.standard_normal(t.size)
    return signal.astype(np.float32)


def _jfk_path() -> Path | None:
    candidates = [os.environ.get("STENOFLOW_JFK"), REPO_ROOT / ".cache/stenoflow/data/jfk.wav"]
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


def _reference_mel(samples: np.ndarray, n_mels: int, padding: int) -> np.ndarray:
    extractor = feature_extractor.FeatureExtractor(feature_size=n_mels)
    return extractor(samples, padding=padding, chunk_length=None)


def _assert_matches_reference(samples: np.ndarray, n_mels: int, padding: int) -> float:
    ref = _reference_mel(samples, n_mels, padding)
    ours = log_mel_spectrogram(samples, n_mels=n_mels, padding=padding).numpy()
    assert ref.shape == (n_mels, mel_frames(samples.size + padding))
    assert ours.shape == ref.shape
    diff = float(np.abs(ours - ref).max())
    assert diff < MEL_TOLERANCE, f"max abs mel difference {diff:.3g} (n_mels={n_mels})"
    return diff


# ----------------------------------------------------------------------------- features


@pytest.mark.parametrize("n_mels", [80, 128])
def test_mel_filters_match_reference(n_mels: int) -> None:
    ref = feature_extractor.FeatureExtractor.get_mel_filters(SAMPLE_RATE, N_FFT, n_mels=n_mels)
    ours = mel_filters(n_mels)
    assert ours.shape == (n_mels, N_FFT // 2 + 1)
    assert ours.dtype == np.float32
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-6)


def test_mel_filters_are_cached_and_read_only() -> None:
    assert mel_filters(80) is mel_filters(80)
    with pytest.raises(ValueError):
        mel_filters(80)[0, 0] = 1.0
    with pytest.raises(ValueError, match="n_mels"):
        mel_filters(81)


@pytest.mark.parametrize("n_mels", [80, 128])
@pytest.mark.parametrize("padding", [160, 0])
def test_mel_matches_faster_whisper_on_synthetic(n_mels: int, padding: int) -> None:
    _assert_matches_reference(_synthetic_speechlike(), n_mels, padding)


@pytest.mark.parametrize("n_mels", [80, 128])
def test_mel_matches_faster_whisper_on_jfk(n_mels: int) -> None:
    path = _jfk_path()
    if path is None:
        pytest.skip("jfk.wav not found: set STENOFLOW_JFK or put it at .cache/stenoflow/data/")
    _assert_matches_reference(load_audio(path), n_mels, padding=160)


def test_mel_shape_and_range() -> None:
    audio = _synthetic_speechlike(2.0)
    mel = log_mel_spectrogram(audio, padding=480000)
    assert mel.shape == (80, mel_frames(audio.size + 480000)) == (80, 200 + 3000)
    assert mel.dtype == torch.float32
    # The dynamic-range clamp keeps exactly 8 decades, i.e. 2.0 after the /4 scaling.
    assert float(mel.max() - mel.min()) <= 2.0 + 1e-6


def test_mel_accepts_tensor_and_numpy_alike() -> None:
    audio = _synthetic_speechlike(1.0)
    from_numpy = log_mel_spectrogram(audio, padding=160)
    from_tensor = log_mel_spectrogram(torch.from_numpy(audio), padding=160)
    torch.testing.assert_close(from_numpy, from_tensor, rtol=0, atol=0)


def test_mel_batch_equals_single_calls() -> None:
    a = _synthetic_speechlike(1.0, seed=1)
    b = 0.01 * _synthetic_speechlike(1.0, seed=2)  # much quieter: per-item normalisation
    batch = log_mel_spectrogram(torch.from_numpy(np.stack([a, b])), padding=160)
    assert batch.shape == (2, 80, mel_frames(a.size + 160))
    torch.testing.assert_close(batch[0], log_mel_spectrogram(a, padding=160))
    torch.testing.assert_close(batch[1], log_mel_spectrogram(b, padding=160))


def test_mel_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="too short"):
        log_mel_spectrogram(np.zeros(10, dtype=np.float32))
    with pytest.raises(TypeError, match="float32"):
        log_mel_spectrogram(np.zeros(1000, dtype=np.int32))
    with pytest.raises(ValueError, match="shape"):
        log_mel_spectrogram(np.zeros((1, 1, 1000), dtype=np.float32))


def test_mel_frames() -> None:
    assert mel_frames(480000) == 3000
    assert mel_frames(159) == 0
    assert mel_frames(160) == 1
    assert HOP_LENGTH == 160


def test_gradient_flows_to_waveform() -> None:
    speech = torch.from_numpy(_synthetic_speechlike(1.0))
    x = torch.zeros(8000, requires_grad=True)
    mel = log_mel_spectrogram(torch.cat([speech, x]), padding=160)
    mel.sum().backward()
    assert x.grad is not None
    assert torch.isfinite(x.grad).all()
    assert x.grad.abs().sum() > 0


# ----------------------------------------------------------------------------- load_audio


def _tone(freq: float, rate: int, seconds: float) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return (0.5 * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def _peak_hz(samples: np.ndarray, rate: int = SAMPLE_RATE) -> float:
    spectrum = np.abs(np.fft.rfft(samples * np.hanning(samples.size)))
    return float(np.fft.rfftfreq(samples.size, 1.0 / rate)[np.argmax(spectrum)])


def _assert_is_tone(decoded: np.ndarray, seconds: float, freq: float = 440.0) -> None:
    assert decoded.dtype == np.float32 and decoded.ndim == 1
    expected = seconds * SAMPLE_RATE
    assert abs(decoded.size - expected) <= 0.01 * expected, decoded.size
    assert abs(_peak_hz(decoded) - freq) < 2.0
    # Content, not just pitch: correlates with the ideal tone (allowing for codec delay).
    middle = decoded[SAMPLE_RATE // 4 : SAMPLE_RATE // 4 + 4000]
    ideal = _tone(freq, SAMPLE_RATE, 1.0)
    best = max(abs(np.corrcoef(middle, ideal[s : s + middle.size])[0, 1]) for s in range(40))
    assert best > 0.95


def _encode_with_pyav(path: Path, codec: str, samples: np.ndarray, rate: int) -> None:
    av = pytest.importorskip("av")
    try:
        av.codec.Codec(codec, "w")
    except Exception:  # noqa: BLE001 - any failure means the encoder is unavailable
        pytest.skip(f"PyAV build has no {codec} encoder")
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream(codec, rate=rate, layout="mono")
        frame = av.AudioFrame.from_ndarray(samples[None, :], format="fltp", layout="mono")
        frame.sample_rate = rate
        for packet in stream.encode(frame):
            container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)


def test_load_wav_8khz_stereo(tmp_path: Path) -> None:
    tone = _tone(440.0, 8000, 1.5)
    stereo = np.stack([tone, 0.5 * tone], axis=1)
    path = tmp_path / "tone.wav"
    sf.write(path, stereo, 8000, subtype="PCM_16")
    decoded = load_audio(path)
    _assert_is_tone(decoded, 1.5)
    assert abs(float(np.max(np.abs(decoded))) - 0.375) < 0.02  # mean of 0.5 and 0.25 peaks


def test_load_many_channels_matches_validate_samples(tmp_path: Path) -> None:
    # 9 channels: beyond the 8 data pointers where planar PyAV frames misbehave.
    tone = _tone(440.0, 16000, 0.5)
    channels = np.stack([tone * (0.1 + 0.1 * i) for i in range(9)], axis=1)
    path = tmp_path / "multi.wav"
    sf.write(path, channels, 16000, subtype="FLOAT")
    np.testing.assert_allclose(load_audio(path), validate_samples(channels), atol=1e-6)


def test_load_flac_44k(tmp_path: Path) -> None:
    path = tmp_path / "tone.flac"
    sf.write(path, _tone(440.0, 44100, 1.0), 44100)
    _assert_is_tone(load_audio(str(path)), 1.0)


def test_load_mp3(tmp_path: Path) -> None:
    path = tmp_path / "tone.mp3"
    _encode_with_pyav(path, "libmp3lame", _tone(440.0, 22050, 1.0), 22050)
    # mp3 adds encoder delay/padding, hence the 1 % length tolerance.
    _assert_is_tone(load_audio(path), 1.0)


def test_load_from_bytes_and_file_object(tmp_path: Path) -> None:
    path = tmp_path / "tone.wav"
    sf.write(path, _tone(440.0, 16000, 0.5), 16000)
    from_path = load_audio(path)
    np.testing.assert_array_equal(load_audio(path.read_bytes()), from_path)
    with open(path, "rb") as handle:
        np.testing.assert_array_equal(load_audio(handle), from_path)


def test_load_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.wav"
    path.write_bytes(b"")
    with pytest.raises(AudioError, match=r"empty\.wav.*empty \(0 bytes\)"):
        load_audio(path)
    with pytest.raises(AudioError, match="empty"):
        load_audio(b"")


def test_load_corrupt_file(tmp_path: Path) -> None:
    path = tmp_path / "noise.wav"
    path.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    with pytest.raises(AudioError, match=r"noise\.wav") as info:
        load_audio(path)
    assert isinstance(info.value, ValueError)


def test_load_file_without_audio_stream(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("this is plain text, not audio\n" * 20)
    with pytest.raises(AudioError, match=r"notes\.txt"):
        load_audio(path)


def test_load_zero_frame_wav(tmp_path: Path) -> None:
    path = tmp_path / "silent.wav"
    sf.write(path, np.zeros(0, dtype=np.float32), 16000, subtype="PCM_16")
    assert path.stat().st_size > 0  # a header, but no frames
    with pytest.raises(AudioError, match="no audio samples"):
        load_audio(path)


def test_load_float_file_with_unusable_values(tmp_path: Path) -> None:
    audio = np.zeros(16000, dtype=np.float32)
    for value, message in ((np.nan, "NaN or infinite"), (1e25, "beyond any PCM scale")):
        audio[100] = value
        path = tmp_path / "float.wav"
        sf.write(path, audio, 16000, subtype="FLOAT")
        with pytest.raises(AudioError, match=rf"float\.wav: samples .*{message}"):
            load_audio(path)


def test_load_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.wav"
    with pytest.raises(FileNotFoundError, match="nope.wav"):
        load_audio(path)


# ----------------------------------------------------------------------------- validate


def test_validate_float32_passthrough() -> None:
    audio = _synthetic_speechlike(0.5)
    out = validate_samples(audio)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, audio)


def test_validate_rejects_non_finite() -> None:
    audio = np.zeros(1000, dtype=np.float32)
    audio[10] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        validate_samples(audio)
    audio[10] = np.inf
    with pytest.raises(ValueError, match="infinite"):
        validate_samples(audio)
    audio[10] = 3e22  # text read as float32 PCM: finite, but its power overflows the spectrogram
    with pytest.raises(ValueError, match="beyond any PCM scale"):
        validate_samples(audio)
    audio[10] = 2.0e9  # 32-bit PCM passed as float: odd (a warning), but audio
    assert validate_samples(audio)[10] == pytest.approx(2.0e9)


def test_validate_int16_is_scaled() -> None:
    pcm = np.array([0, 16384, -32768, 32767], dtype=np.int16)
    out = validate_samples(pcm)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [0.0, 0.5, -1.0, 32767 / 32768])


def test_validate_downmixes_channels() -> None:
    stereo = np.stack([np.ones(100), -np.ones(100) * 0.5], axis=1).astype(np.float64)
    out = validate_samples(stereo)
    assert out.shape == (100,) and out.dtype == np.float32
    np.testing.assert_allclose(out, 0.25)
    with pytest.raises(ValueError, match=r"\(channels, samples\)"):
        validate_samples(np.zeros((2, 16000), dtype=np.float32))


def test_validate_resamples() -> None:
    tone = _tone(440.0, 8000, 1.0)
    out = validate_samples(tone, sample_rate=8000)
    assert out.shape == (16000,) and out.dtype == np.float32
    assert abs(_peak_hz(out) - 440.0) < 2.0
    assert validate_samples(_tone(440.0, 44100, 1.0), sample_rate=44100).shape == (16000,)


@pytest.mark.parametrize(
    "bad", [np.zeros(10, dtype=np.complex64), np.zeros(10, dtype=bool), np.array(["a", "b"])]
)
def test_validate_rejects_bad_dtypes(bad: np.ndarray) -> None:
    with pytest.raises(TypeError, match="float32 16 kHz mono"):
        validate_samples(bad)


def test_validate_rejects_bad_shapes_and_rates() -> None:
    with pytest.raises(ValueError, match="float32 16 kHz mono"):
        validate_samples(np.zeros((2, 2, 2), dtype=np.float32))
    with pytest.raises(ValueError, match="sample_rate"):
        validate_samples(np.zeros(10, dtype=np.float32), sample_rate=0)


# ----------------------------------------------------------------------------- pad_or_trim


def test_pad_or_trim_numpy() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(pad_or_trim(x, 5), [[0, 1, 2, 0, 0], [3, 4, 5, 0, 0]])
    np.testing.assert_array_equal(pad_or_trim(x, 2), [[0, 1], [3, 4]])
    np.testing.assert_array_equal(pad_or_trim(x, 1, axis=0), [[0, 1, 2]])
    assert pad_or_trim(x, 3) is x
    assert pad_or_trim(np.zeros(10, dtype=np.float32)).shape == (480000,)


def test_pad_or_trim_torch() -> None:
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    assert pad_or_trim(x, 5).tolist() == [[0, 1, 2, 0, 0], [3, 4, 5, 0, 0]]
    assert pad_or_trim(x, 2).tolist() == [[0, 1], [3, 4]]
    assert pad_or_trim(x, 4, axis=0).tolist() == [[0, 1, 2], [3, 4, 5], [0, 0, 0], [0, 0, 0]]
    assert pad_or_trim(x, 1, axis=0).tolist() == [[0, 1, 2]]
