"""What the CPU here can multiply natively, read without importing torch (the CLI's choice of a
default compute type must not cost the torch import)."""

from __future__ import annotations

from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")
# bfloat16 matrix tiles (Intel AMX): oneDNN's bf16 matrix products and PyTorch's bf16 attention
# run on them at several times the float32 rate, and faster than int8 with per-row quantisation.
BFLOAT16_FLAGS = frozenset({"amx_tile", "amx_bf16"})


def cpu_flags(cpuinfo: Path = CPUINFO) -> frozenset[str]:
    """The feature flags of the first CPU in ``cpuinfo`` (empty where there is no such file)."""
    try:
        with cpuinfo.open(encoding="utf-8", errors="replace") as lines:  # the first CPU's lines only
            for line in lines:
                key, sep, value = line.partition(":")
                if sep and key.strip() == "flags":
                    return frozenset(value.split())
    except OSError:
        pass
    return frozenset()


def native_bfloat16(cpuinfo: Path = CPUINFO) -> bool:
    """Whether the CPU has bfloat16 matrix units (see ``BFLOAT16_FLAGS``)."""
    return BFLOAT16_FLAGS <= cpu_flags(cpuinfo)
