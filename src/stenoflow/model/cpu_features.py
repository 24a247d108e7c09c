"""What the CPU here can multiply natively, read without importing torch (the CLI's choice of a
default compute type must not cost the torch import)."""

from __future__ import annotations

from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")
# bfloat16 matrix tiles (Intel AMX): oneDNN's bf16 matrix products and PyTorch's bf16 attention
# run on them at several times the float32 rate, and faster than int8 with per-row quantisation.
BFLOAT16_FLAGS = frozenset({"amx_tile", "amx_bf16"})
# Instructions that sum int8 products in 32 bits (VNNI, AMX): without them (plain AVX2) x86
# kernels multiply unsigned by signed bytes into 16-bit pairs, which saturate for 8-bit inputs,
# and ``torch._int_mm`` has no fast kernel.
INT8_DOT_FLAGS = frozenset({"avx512_vnni", "avx_vnni", "amx_int8"})


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


def native_int8_dot(cpuinfo: Path = CPUINFO) -> bool:
    """Whether the CPU sums int8 products in 32 bits (any of ``INT8_DOT_FLAGS``)."""
    return bool(INT8_DOT_FLAGS & cpu_flags(cpuinfo))
