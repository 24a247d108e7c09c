"""End-to-end file transcription on real models and real (or synthesized) speech."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from stenoflow.api import Model, load_model
from stenoflow.audio.io import AudioError
from stenoflow.bench.metrics import wer
from stenoflow.cli import main as cli_main

pytestmark = pytest.mark.slow

JFK_PHRASE = "ask not what your country can do for you"


def norm(text: str) -> str:
    return re.sub(r"[^a-z ]", "", text.lower())


@pytest.fixture(scope="module")
def long_clip():  # type: ignore[no-untyped-def]
    from stenoflow.bench.datasets import long_form

    return long_form(minutes=2.0)


@pytest.fixture(scope="module")
def long_result(tiny: Model, long_clip):  # type: ignore[no-untyped-def]
    segments, info = tiny.transcribe(long_clip.audio_path, beam_size=5, word_timestamps=True)
    return list(segments), info


def test_long_form_timestamps_and_text(long_clip, long_result) -> None:  # type: ignore[no-untyped-def]
    segments, info = long_result
    assert info.duration == pytest.approx(long_clip.duration, abs=0.05) and info.duration >= 120
    assert len(segments) >= 10
    previous_end = 0.0
    for s in segments:
        assert previous_end <= s.start < s.end <= info.duration + 0.01, (previous_end, s)
        previous_end = s.end
        assert s.words, "word timestamps were asked for"
        starts = [w.start for w in s.words]
        assert starts == sorted(starts) and all(w.start <= w.end for w in s.words)
        assert s.words[0].start >= s.start - 1e-6 and s.words[-1].end <= s.end + 1e-6
    # the late part of the file is transcribed too (seek advanced through every window)
    assert segments[-1].end > info.duration - 10
    text = "".join(s.text for s in segments)
    assert wer([long_clip.text], [text]).wer < 0.2


def test_long_form_outputs_parse(long_result, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from stenoflow.output import write_outputs

    segments, info = long_result
    paths = write_outputs(segments, info, Path("long.wav"), tmp_path, ["srt", "vtt", "json"])
    srt_blocks = paths[0].read_text().strip().split("\n\n")
    assert len(srt_blocks) == len(segments)
    for i, block in enumerate(srt_blocks, start=1):
        lines = block.split("\n")
        assert lines[0] == str(i)
        assert re.fullmatch(r"\d\d:\d\d:\d\d,\d{3} --> \d\d:\d\d:\d\d,\d{3}", lines[1])
    vtt = paths[1].read_text()
    assert vtt.startswith("WEBVTT") and vtt.count(" --> ") == len(segments)
    doc = json.loads(paths[2].read_text())
    assert [s["start"] for s in doc["segments"]] == [s.start for s in segments]
    assert doc["options"]["word_timestamps"] is True


def test_word_timestamps_on_jfk_match_faster_whisper(tiny: Model, jfk_path: Path) -> None:
    """Same model, same alignment heads, same DTW: word times agree with the reference
    implementation's (the last word's end is capped differently at the window's end)."""
    faster_whisper = pytest.importorskip("faster_whisper")
    segments, _ = tiny.transcribe(jfk_path, word_timestamps=True)
    words = [w for s in segments for w in s.words or []]
    fw = faster_whisper.WhisperModel(str(tiny.weights_info["source"]), device="cpu", compute_type="float32")
    fw_segments, _ = fw.transcribe(str(jfk_path), word_timestamps=True, beam_size=5)
    reference = [w for s in fw_segments for w in s.words]
    assert [norm(w.word) for w in words] == [norm(w.word) for w in reference]
    for ours, theirs in zip(words[:-1], reference[:-1]):
        assert abs(ours.start - theirs.start) < 0.06 and abs(ours.end - theirs.end) < 0.06, (ours, theirs)
    assert 9.5 < words[-1].start < 11.0


def test_language_detection_multilingual(base: Model, jfk_audio: np.ndarray) -> None:
    code, probs = base.detect_language(jfk_audio)
    assert code == "en" and probs["en"] > 0.9
    segments, info = base.transcribe(jfk_audio)
    assert info.language == "en" and info.all_language_probs is not None
    assert JFK_PHRASE in norm("".join(s.text for s in segments))


@pytest.mark.parametrize("compute", ["int8", "int8_bfloat16"])
def test_int8_transcribes(jfk_audio: np.ndarray, compute: str) -> None:
    model = load_model("tiny.en", compute=compute)
    segments, info = model.transcribe(jfk_audio, beam_size=1)
    assert JFK_PHRASE in norm("".join(s.text for s in segments))
    assert info.model["compute"] == compute


def test_temperature_fallback_runs_each_temperature(tiny: Model, jfk_audio: np.ndarray) -> None:
    segments, _ = tiny.transcribe(jfk_audio, beam_size=1)
    assert {s.temperature for s in segments} == {0.0}
    # a threshold nothing can meet forces every fallback temperature; the last result is kept
    segments, _ = tiny.transcribe(jfk_audio, beam_size=1, compression_ratio_threshold=0.01,
                                  temperature=(0.0, 0.5, 1.0))
    assert segments and {s.temperature for s in segments} == {1.0}


def test_silence_gives_no_segments(tiny: Model, base: Model) -> None:
    rng = np.random.default_rng(0)
    silence = (rng.standard_normal(16000 * 8) * 1e-4).astype(np.float32)
    segments, _ = tiny.transcribe(silence)
    assert list(segments) == []
    for model in (tiny, base):  # digital silence, where Whisper likes to hear "You"
        segments, _ = model.transcribe(np.zeros(16000 * 5, np.float32), beam_size=5)
        assert list(segments) == []


def test_8khz_stereo_is_resampled(tiny: Model, jfk_audio: np.ndarray, tmp_path: Path) -> None:
    import soundfile as sf
    from scipy.signal import resample_poly

    low = resample_poly(jfk_audio, 1, 2).astype(np.float32)
    stereo = np.stack([low, 0.8 * low], axis=1)
    path = tmp_path / "jfk-8k-stereo.wav"
    sf.write(path, stereo, 8000)
    segments, info = tiny.transcribe(path)
    assert info.duration == pytest.approx(11.0, abs=0.1)
    assert JFK_PHRASE in norm("".join(s.text for s in segments))


def test_bad_inputs_give_clear_errors(tiny: Model, tmp_path: Path) -> None:
    empty = tmp_path / "empty.wav"
    empty.write_bytes(b"")
    with pytest.raises(AudioError, match="empty"):
        tiny.transcribe(empty)
    corrupt = tmp_path / "corrupt.mp3"
    corrupt.write_bytes(np.random.default_rng(1).bytes(5000))
    with pytest.raises(AudioError, match="corrupt.mp3"):
        tiny.transcribe(corrupt)
    with pytest.raises(ValueError, match="tiny.en"):
        load_model("no-such-model")
    with pytest.raises(TypeError, match="unknown transcribe option"):
        tiny.transcribe(np.zeros(16000, np.float32), beam=3)
    with pytest.raises(ValueError, match="NaN|finite"):
        tiny.transcribe(np.full(16000, np.nan, np.float32))


def test_cli_transcribe_and_errors(jfk_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli_main(["transcribe", str(jfk_path), "--model", "tiny.en", "--beam-size", "1", "-f", "all",
                     "-o", str(tmp_path), "--no-progress"])
    assert code == 0
    assert {p.suffix for p in tmp_path.iterdir()} == {".txt", ".srt", ".vtt", ".json"}
    assert JFK_PHRASE in norm((tmp_path / "jfk.txt").read_text())
    empty = tmp_path / "empty.wav"
    empty.write_bytes(b"")
    # A bad file among good ones is reported; the files after it are still transcribed.
    later = tmp_path / "later" / "jfk-again.wav"
    later.parent.mkdir()
    later.write_bytes(jfk_path.read_bytes())
    code = cli_main(["transcribe", str(empty), str(later), "--model", "tiny.en", "--beam-size", "1",
                     "--no-progress", "-o", str(later.parent)])
    assert code == 1
    assert JFK_PHRASE in norm((later.parent / "jfk-again.txt").read_text())
    assert cli_main(["transcribe", str(jfk_path), "--model", "nope", "--no-progress"]) == 2


def test_the_command_ends_at_once_with_its_output_written_and_its_status(jfk_path: Path, tmp_path: Path) -> None:
    """The console script leaves without the interpreter's teardown after `transcribe`: what it
    printed (through a pipe), logged and wrote is all there, and the exit status is main's."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # stdout block-buffered, as in a pipe
    empty = tmp_path / "empty.wav"
    empty.write_bytes(b"")
    run = subprocess.run([sys.executable, "-m", "stenoflow", "transcribe", str(jfk_path), str(empty),
                          "--model", "tiny.en", "--beam-size", "1", "--no-progress", "-f", "all", "-o", str(tmp_path)],
                         check=False, capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 1, run.stderr  # the empty file failed
    assert JFK_PHRASE in norm(run.stdout)  # the segment line, flushed through the pipe
    assert "1 of 2 files failed" in run.stderr
    assert JFK_PHRASE in norm((tmp_path / "jfk.txt").read_text())
    assert json.loads((tmp_path / "jfk.json").read_text())["segments"]

def test_model_commands_run_int8_on_the_cpu_unless_told(jfk_path: Path, tmp_path: Path) -> None:
    """int8, with the encoder in bfloat16 where the CPU has bfloat16 matrix units."""
    from stenoflow.cli import build_parser, compute_for
    from stenoflow.model.cpu_features import native_bfloat16

    expected = "int8_bfloat16" if native_bfloat16() else "int8"
    for command in ("transcribe", "listen", "stream", "serve"):
        args = build_parser().parse_args([command] + ([] if command == "serve" else [str(jfk_path)]))
        assert args.compute is None and compute_for(args.device) == expected
    assert compute_for("cuda:0") == "float16"  # int8 is a CPU kernel
    assert build_parser().parse_args(["transcribe", str(jfk_path), "--compute", "float32"]).compute == "float32"
