"""Transcript writers produce files that their formats' parsers accept."""

from __future__ import annotations

import json
import re
from pathlib import Path

from stenoflow.decoding.transcribe import Segment, TranscribeOptions, TranscriptionInfo
from stenoflow.output import format_timestamp, write_outputs


def segs() -> list[Segment]:
    return [Segment(0, 0, 0.0, 2.5, " Hello there.", [1], 0.0, -0.2, 1.1, 0.01),
            Segment(1, 0, 2.5, 3661.25, " General Kenobi!", [2], 0.0, -0.3, 1.2, 0.02)]


def test_format_timestamp() -> None:
    assert format_timestamp(3661.25) == "01:01:01.250"
    assert format_timestamp(2.5, ",", always_hours=True) == "00:00:02,500"


def test_all_formats_parse(tmp_path: Path) -> None:
    info = TranscriptionInfo("en", 1.0, 3661.3, TranscribeOptions())
    paths = write_outputs(segs(), info, Path("talk.wav"), tmp_path, ["txt", "srt", "vtt", "json"])
    assert [p.name for p in paths] == ["talk.txt", "talk.srt", "talk.vtt", "talk.json"]
    assert (tmp_path / "talk.txt").read_text().splitlines() == ["Hello there.", "General Kenobi!"]
    srt = (tmp_path / "talk.srt").read_text().strip().split("\n\n")
    cue = re.compile(r"^(\d+)\n(\d\d:\d\d:\d\d,\d{3}) --> (\d\d:\d\d:\d\d,\d{3})\n(.+)$")
    assert [cue.match(b).group(1, 4) for b in srt] == [("1", "Hello there."), ("2", "General Kenobi!")]  # type: ignore[union-attr]
    vtt = (tmp_path / "talk.vtt").read_text()
    assert vtt.startswith("WEBVTT\n\n") and "01:01:01.250" in vtt
    doc = json.loads((tmp_path / "talk.json").read_text())
    assert doc["text"] == "Hello there. General Kenobi!" and len(doc["segments"]) == 2
    assert doc["options"]["beam_size"] == 5
