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


def resident_mb() -> float:
    """This process's resident memory in MB (Linux /proc; peak RSS elsewhere)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            pages = int(f.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
