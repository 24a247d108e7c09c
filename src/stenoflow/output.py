"""Transcript writers: plain text, SubRip, WebVTT and JSON."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:  # the CLI imports this module for FORMATS: it must not pull in torch
    from stenoflow.decoding.transcribe import Segment, TranscriptionInfo

FORMATS = ("txt", "srt", "vtt", "json")


def format_timestamp(seconds: float, decimal: str = ".", always_hours: bool = False) -> str:
    if seconds < 0:
        raise ValueError(f"negative timestamp {seconds}")
    ms = round(seconds * 1000.0)
    hours, ms = divmod(ms, 3_600_000)
    minutes, ms = divmod(ms, 60_000)
    secs, ms = divmod(ms, 1000)
    head = f"{hours:02d}:" if always_hours or hours else ""
    return f"{head}{minutes:02d}:{secs:02d}{decimal}{ms:03d}"


def write_txt(segments: Sequence[Segment], info: TranscriptionInfo, out: TextIO) -> None:
    out.writelines(s.text.strip() + "\n" for s in segments)


def write_srt(segments: Sequence[Segment], info: TranscriptionInfo, out: TextIO) -> None:
    for i, s in enumerate(segments, start=1):
        start = format_timestamp(s.start, ",", always_hours=True)
        end = format_timestamp(s.end, ",", always_hours=True)
        out.write(f"{i}\n{start} --> {end}\n{s.text.strip()}\n\n")


def write_vtt(segments: Sequence[Segment], info: TranscriptionInfo, out: TextIO) -> None:
    out.write("WEBVTT\n\n")
    out.writelines(f"{format_timestamp(s.start)} --> {format_timestamp(s.end)}\n{s.text.strip()}\n\n" for s in segments)


def write_json(segments: Sequence[Segment], info: TranscriptionInfo, out: TextIO) -> None:
    doc = {
        "text": "".join(s.text for s in segments).strip(),
        "language": info.language,
        "language_probability": info.language_probability,
        "duration": info.duration,
        "model": info.model,
        "options": {k: v for k, v in vars(info.options).items()},
        "segments": [s.to_dict() for s in segments],
    }
    json.dump(doc, out, ensure_ascii=False, indent=1)
    out.write("\n")


WRITERS: dict[str, Callable[[Sequence[Segment], TranscriptionInfo, TextIO], None]] = {
    "txt": write_txt,
    "srt": write_srt,
    "vtt": write_vtt,
    "json": write_json,
}


def write_outputs(segments: Sequence[Segment], info: TranscriptionInfo, audio_path: Path, output_dir: Path,
                  formats: Sequence[str]) -> list[Path]:
    """Write ``<output_dir>/<audio stem>.<fmt>`` for each format; return the paths."""
    output_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in formats:
        if fmt not in WRITERS:
            raise ValueError(f"unknown output format {fmt!r}; expected one of {', '.join(FORMATS)} or all")
        path = output_dir / f"{audio_path.stem}.{fmt}"
        with path.open("w", encoding="utf-8") as f:
            WRITERS[fmt](segments, info, f)
        paths.append(path)
    return paths
