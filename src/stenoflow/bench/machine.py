"""What a benchmark ran on: recorded beside every figure."""

from __future__ import annotations

import os
import platform
from importlib import metadata


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def machine_record() -> dict[str, object]:
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": {p: _version(p) for p in ("stenoflow", "torch", "ctranslate2", "faster-whisper", "numpy")},
    }
