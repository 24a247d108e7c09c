"""What a benchmark ran on: recorded beside every figure."""

from __future__ import annotations

import json
import os
import platform
from dataclasses import asdict
from importlib import metadata
from pathlib import Path

from stenoflow.streaming.threads import cpu_model


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def machine_record() -> dict[str, object]:
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": {p: _version(p) for p in ("stenoflow", "torch", "ctranslate2", "faster-whisper", "numpy")},
    }


def resident_mb() -> float:
    """This process's resident memory in MB (Linux /proc; peak RSS elsewhere)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            pages = int(f.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def write_results(out_dir: Path, stem: str, title: str, options: object, rows: list[dict[str, object]],
                  table: str, notes: str) -> dict[str, object]:
    """``STEM.json`` (machine, options, rows) and ``STEM.md`` (title, machine, options, notes, the
    table and the plot ``STEM.png``) in ``out_dir``; returns the record."""
    record = {"machine": machine_record(), "options": asdict(options), "rows": rows}  # type: ignore[call-overload]
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{stem}.json").write_text(json.dumps(record, indent=1), encoding="utf-8")
    (out_dir / f"{stem}.md").write_text(
        f"# {title}\n\nMachine: {record['machine']}.\n\nOptions: {json.dumps(record['options'])}.\n\n{notes}\n\n"
        f"{table}\n\n![{title}]({stem}.png)\n", encoding="utf-8")
    return record
