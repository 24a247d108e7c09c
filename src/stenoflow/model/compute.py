"""The compute types a model runs in, and the one rule that picks one when none is given.

Read without importing torch: the command line resolves its default before anything heavy loads.
Every entry point (``stenoflow.load_model``, the command line, the server, the benchmarks'
defaults) asks :func:`default_compute`, so they all run the same precision on the same machine.
"""

from __future__ import annotations

from functools import cache

from stenoflow.model.cpu_features import native_bfloat16

FLOAT32 = "float32"
FLOAT16 = "float16"
# int8 with per-channel weight scales and per-row activation scales holds float32's accuracy
# (see stenoflow.model.quant) at a fraction of its time on a CPU.
INT8 = "int8"
# The encoder in bfloat16 (its products and attention on the CPU's bfloat16 matrix units), the
# decoder in int8 (a decoding step reads few rows, where int8's smaller weights are faster).
INT8_BFLOAT16 = "int8_bfloat16"
COMPUTE_TYPES = (FLOAT32, INT8, INT8_BFLOAT16, FLOAT16)
CPU_ONLY = (INT8, INT8_BFLOAT16)


@cache
def cpu_compute() -> str:
    """What a model loads on this CPU when no compute type is given: int8, with the encoder in
    bfloat16 where the CPU has bfloat16 matrix units (AMX). Read once per process."""
    return INT8_BFLOAT16 if native_bfloat16() else INT8


def default_compute(device: str = "cpu") -> str:
    """The compute type a model loads on ``device`` when none is given: :func:`cpu_compute` on
    the CPU, float16 on CUDA (and any other accelerator), as int8 is a CPU kernel."""
    return cpu_compute() if device_kind(device) == "cpu" else FLOAT16


def resolve_compute(device: str, compute: str | None) -> str:
    """``compute`` if given, else the default for ``device``; checked against the device."""
    resolved = default_compute(device) if compute is None else compute
    check_compute(device, resolved)
    return resolved


def check_compute(device: str, compute: str) -> None:
    """ValueError where ``compute`` is unknown or cannot run on ``device``."""
    if compute not in COMPUTE_TYPES:
        raise ValueError(f"compute must be one of {', '.join(COMPUTE_TYPES)}, got {compute!r}")
    kind = device_kind(device)
    if compute == FLOAT16 and kind != "cuda":
        raise ValueError("compute='float16' needs a CUDA device; use float32 or int8 on the CPU")
    if compute in CPU_ONLY and kind != "cpu":
        raise ValueError(f"compute={compute!r} runs on the CPU only")


def device_kind(device: str) -> str:
    """``cuda`` of ``cuda:1``, ``cpu`` of ``cpu``."""
    return str(device).split(":", 1)[0]
