"""A cache of converted weights: a model file is converted once, later loads map the result.

Converting a CTranslate2 or ggml file into openai-whisper names (transposing, dequantising,
splitting fused projections) costs seconds on every start. The first load writes the converted
state dict as safetensors beside a JSON record of everything else ``LoadedWeights`` holds; later
loads memory-map the tensors. An entry is keyed by the source's path, size and modification
time and by ``CACHE_VERSION`` (bumped when a loader's output changes), so a changed file or a
changed loader never reads a stale entry. Writes are atomic; a damaged entry is reconverted.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable
from dataclasses import asdict, fields
from pathlib import Path
from typing import TYPE_CHECKING

from stenoflow.model.dims import ModelDims
from stenoflow.weights.loaded import LoadedWeights

if TYPE_CHECKING:
    from torch import Tensor

log = logging.getLogger(__name__)

CACHE_VERSION = 1
# Formats whose files hold the weights in other names or layouts; openai .pt and Hugging Face
# safetensors load about as fast as the cache would.
CONVERTED_FORMATS = ("ctranslate2", "ggml")


def cache_key(target: Path, fmt: str) -> str:
    """A key that changes with the source file(s) and the loader version."""
    files = sorted(p for p in target.rglob("*") if p.is_file()) if target.is_dir() else [target]
    h = hashlib.sha256(f"{CACHE_VERSION}:{fmt}:{target.resolve()}".encode())
    for p in files:
        st = p.stat()
        h.update(f"{p.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()[:24]


def load_converted(target: Path, fmt: str, loader: Callable[[Path], LoadedWeights], cache_root: Path) -> LoadedWeights:
    """``loader(target)``, through the cache under ``cache_root/converted``."""
    if fmt not in CONVERTED_FORMATS:
        return loader(target)
    stem = cache_root / "converted" / cache_key(target, fmt)
    cached = _read(stem)
    if cached is not None:
        return cached
    weights = loader(target)
    try:
        _write(stem, weights)
    except (OSError, RuntimeError, ValueError) as e:  # an unwritable cache only costs the conversion next time
        log.warning("could not cache converted weights at %s: %s", stem, e)
    return weights


def _read(stem: Path) -> LoadedWeights | None:
    tensors, record = stem.with_suffix(".safetensors"), stem.with_suffix(".json")
    if not (tensors.is_file() and record.is_file()):
        return None
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        meta = json.loads(record.read_text(encoding="utf-8"))
        weights = weights_from_record(meta, load_file(str(tensors)))  # memory-mapped
        weights.extra["converted_cache"] = str(tensors)
        return weights
    except (OSError, ValueError, KeyError, TypeError, SafetensorError) as e:
        log.warning("converted weights at %s are unreadable (%s): converting again", stem, e)
        return None


def _write(stem: Path, weights: LoadedWeights) -> None:
    from safetensors.torch import save_file

    stem.parent.mkdir(parents=True, exist_ok=True)
    meta = weights_record(weights)
    tmp = stem.with_name(f"{stem.name}.{os.getpid()}.tmp")
    state = {k: v.contiguous() for k, v in weights.state_dict.items()}
    save_file(state, str(tmp))
    os.replace(tmp, stem.with_suffix(".safetensors"))
    tmp.write_text(json.dumps(meta), encoding="utf-8")  # the record last: it marks the entry complete
    os.replace(tmp, stem.with_suffix(".json"))


def weights_record(weights: LoadedWeights) -> dict[str, object]:
    """What ``weights`` holds besides its tensors, as JSON values."""
    meta = {f.name: getattr(weights, f.name) for f in fields(weights) if f.name != "state_dict"}
    meta["dims"] = asdict(weights.dims)
    meta["tokenizer_file"] = str(weights.tokenizer_file) if weights.tokenizer_file else None
    meta["extra"] = {k: v for k, v in weights.extra.items() if isinstance(v, (str, int, float, bool))}
    return meta


def weights_from_record(meta: dict, state: dict[str, Tensor]) -> LoadedWeights:
    """The ``LoadedWeights`` of a ``weights_record`` and the tensors ``state``."""
    return LoadedWeights(
        dims=ModelDims(**meta["dims"]), state_dict=state, source=meta["source"], format=meta["format"],
        tokenizer_file=Path(meta["tokenizer_file"]) if meta["tokenizer_file"] else None,
        alignment_heads=_pairs(meta["alignment_heads"]), suppress_ids=_ints(meta["suppress_ids"]),
        suppress_ids_begin=_ints(meta["suppress_ids_begin"]), lang_ids=_ints(meta["lang_ids"]),
        extra=dict(meta["extra"]))


def _ints(value: object) -> tuple[int, ...] | None:
    return None if value is None else tuple(int(x) for x in value)  # type: ignore[union-attr]


def _pairs(value: object) -> tuple[tuple[int, int], ...] | None:
    return None if value is None else tuple((int(a), int(b)) for a, b in value)  # type: ignore[union-attr]
