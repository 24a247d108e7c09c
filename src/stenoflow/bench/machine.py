"""What a benchmark ran on: recorded beside every figure."""

from __future__ import annotations

import os
import platform
from importlib import metadata

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
