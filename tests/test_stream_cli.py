"""``stenoflow stream``: the word-emission log honours the contract in architecture.md."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from stenoflow.cli import main

pytestmark = pytest.mark.slow


def test_stream_cli_writes_a_valid_word_log(jfk_path: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    out, rounds = tmp_path / "out.jsonl", tmp_path / "rounds.jsonl"
    assert main(["stream", str(jfk_path), "--model", "tiny.en", "--simulate", "unaware", "--log-words", str(out),
                 "--log-rounds", str(rounds)]) == 0
    printed = capsys.readouterr().out
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines
    previous = 0.0
    words = []
    for line in lines:
        record = json.loads(line)
        assert list(record) == ["word", "start", "end", "emitted_at"]
        assert isinstance(record["word"], str) and record["word"].strip()
        assert all(isinstance(record[k], float) for k in ("start", "end", "emitted_at"))
        assert 0.0 <= record["start"] <= record["end"] <= 11.1
        assert record["emitted_at"] >= previous
        assert record["emitted_at"] >= record["end"]  # unaware clock: emitted once heard
        previous = record["emitted_at"]
        words.append(record["word"])
    assert " ".join("".join(words).split()) == " ".join(printed.split())  # stdout shows the same words
    assert "country" in printed
    # The round log: strict JSON, one line per round with its timings, and the committed text of
    # all lines together is the word log's; the stream's end leaves no tail.
    records = [json.loads(line) for line in rounds.read_text(encoding="utf-8").splitlines()]
    timed = [r for r in records if "round_ms" in r]
    assert len(timed) >= 5 and all(r["round_ms"] > 0 for r in timed)
    assert sum((r.get("encoder_ms") or 0) > 0 and (r.get("decoder_ms") or 0) > 0 for r in timed) >= 5
    assert [r["emitted_at"] for r in records] == sorted(r["emitted_at"] for r in records)
    assert "".join(r.get("text", "") for r in records) == "".join(words)
    assert sum(r.get("committed") or 0 for r in records) == len(words)
    assert records[-1]["tail"] == ""


def test_stream_cli_reads_pcm_from_stdin(jfk_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    audio, _ = sf.read(str(jfk_path), dtype="int16")
    pcm = tmp_path / "jfk.s16le"
    pcm.write_bytes(audio[: 5 * 16000].astype("<i2").tobytes())
    with pcm.open("rb") as f:
        monkeypatch.setattr("sys.stdin", type("Stdin", (), {"buffer": f})())
        assert main(["stream", "-", "--stdin-format", "s16le", "--step", "2"]) == 0
    assert "fellow" in capsys.readouterr().out.lower()


def test_stream_cli_rejects_bad_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        caplog: pytest.LogCaptureFixture) -> None:
    empty = tmp_path / "empty.wav"
    sf.write(str(empty), np.zeros(0, dtype=np.float32), 16000)
    assert main(["stream", str(empty), "--simulate", "unaware"]) == 2  # an empty stream: a clear error
    text = tmp_path / "notes.txt"  # text piped in where PCM belongs
    text.write_bytes(b"this is not audio, only a line of text\n" * 400)
    with text.open("rb") as f:
        monkeypatch.setattr("sys.stdin", type("Stdin", (), {"buffer": f})())
        assert main(["stream", "-", "--model", "tiny.en"]) == 2
    assert "beyond any PCM scale" in caplog.text
    assert main(["stream", str(tmp_path / "missing.wav")]) == 2
    assert main(["stream"]) == 2  # no source
    with pytest.raises(SystemExit) as exit_:  # argparse names the known policies
        main(["stream", "--policy", "nope", str(empty)])
    assert exit_.value.code == 2


def test_stream_cli_runs_a_named_variant(jfk_path: Path, capsys: pytest.CaptureFixture[str],
                                        caplog: pytest.LogCaptureFixture) -> None:
    args = ["stream", str(jfk_path), "--model", "tiny.en", "--simulate", "unaware", "--step", "2"]
    assert main([*args, "--variant", "whisper-s+hush+verify"]) == 0
    assert "country" in capsys.readouterr().out
    assert main([*args, "--variant", "whisper-s+louder"]) == 2  # unknown option: a clear error
    assert "louder" in caplog.text
    assert main([*args, "--cold-margin", "-1"]) == 2
    assert "cold_margin_s" in caplog.text


def test_stream_cli_turns_commit_rules_off_or_sets_them(tmp_path: Path) -> None:
    from stenoflow.cli import build_parser, stream_options
    from stenoflow.streaming.options import StreamOptions

    def options(*flags: str) -> StreamOptions:
        return stream_options(build_parser().parse_args(["stream", str(tmp_path / "a.wav"), "--pipeline", "off",
                                                         *flags]))

    assert options().commit_flanked == StreamOptions().commit_flanked == 2
    assert options("--commit-flanked", "off", "--commit-confident", "off").commit_flanked is None
    assert options("--commit-flanked", "3").commit_flanked == 3
    assert options("--commit-confident", "off").commit_confident is None
    assert options().settle_beam == StreamOptions().settle_beam == 1
    assert options("--settle-beam", "5").settle_beam == 5
    with pytest.raises(SystemExit):
        build_parser().parse_args(["stream", "x.wav", "--commit-flanked", "two"])
