"""Stored thread splits of pipelined live streams (the offline profiler's choice, per machine).

``stenoflow profile-threads`` measures per-word latency of a live stream for each way of giving
the machine's cores to the encoder and decoder executors (or none: one after the other on all
cores) and stores the best here; ``stenoflow stream`` reads it. Keyed by the CPU model and core
count, the model and its compute type, so a copied cache never applies one machine's choice to
another.
"""

from __future__ import annotations

import json
import logging
import os
import platform
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from stenoflow.weights.registry import default_cache_dir

if TYPE_CHECKING:
    from stenoflow.streaming.options import StreamOptions

log = logging.getLogger(__name__)

SEQUENTIAL = "sequential"


def cpu_model() -> str:
    """The CPU's model name (from /proc/cpuinfo), or what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def profile_file(cache_dir: Path | None = None) -> Path:
    return (cache_dir or default_cache_dir()) / "threads.json"


def split_key(model: str, compute: str) -> str:
    return f"{cpu_model()}|{os.cpu_count()}|{model}|{compute}"


def stored_choice(model: str, compute: str, cache_dir: Path | None = None) -> dict[str, object] | None:
    """The stored record for this machine, model and compute type, or None."""
    path = profile_file(cache_dir)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, json.JSONDecodeError) as e:
        log.warning("ignoring unreadable thread profile %s: %s", path, e)
        return None
    record = data.get(split_key(model, compute)) if isinstance(data, dict) else None
    return record if isinstance(record, dict) else None


def stored_split(model: str, compute: str, cache_dir: Path | None = None) -> tuple[int, int] | None | str:
    """The stored split as (encoder threads, decoder threads), ``SEQUENTIAL`` when the profile
    found no split better than running the stages one after the other, or None if never profiled."""
    record = stored_choice(model, compute, cache_dir)
    if record is None:
        return None
    split = record.get("split")
    if split == SEQUENTIAL:
        return SEQUENTIAL
    if isinstance(split, list) and len(split) == 2 and all(isinstance(x, int) and x >= 1 for x in split):
        return (split[0], split[1])
    log.warning("ignoring a malformed thread split %r in %s", split, profile_file(cache_dir))
    return None


def store_split(model: str, compute: str, split: tuple[int, int] | None, record: dict[str, object],
                cache_dir: Path | None = None) -> Path:
    """Store the chosen split (None: sequential) with what was measured; returns the file."""
    path = profile_file(cache_dir)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            data = {}
    except (FileNotFoundError, json.JSONDecodeError):
        data = {}
    data[split_key(model, compute)] = {**record, "split": SEQUENTIAL if split is None else list(split)}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def with_stored_split(options: StreamOptions, model: str, compute: str, cache_dir: Path | None = None) -> StreamOptions:
    """Live ``options`` pipelined as ``stenoflow profile-threads`` chose for ``model`` at
    ``compute`` (unchanged when it chose one executor, was never run, or the policy is not live)."""
    if options.policy != "live":
        return options
    split = stored_split(model, compute, cache_dir)
    if split is None:
        return options
    return replace(options, pipeline=split if isinstance(split, tuple) else None)
