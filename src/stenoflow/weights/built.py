"""A cache of built networks: a model is built in a compute type once, later starts map the result.

Building a network from its weights (converting the file, fusing projections, rounding to int8)
costs seconds; a built network's tensors are stored as safetensors under
``<cache>/built/<key>.safetensors`` beside a JSON record of the model's other facts, and later
loads memory-map them into a skeleton of the network (:mod:`stenoflow.model.build`).

An entry's key changes with the source file(s) (path, size, modification time), the converter's
version, the compute type, ``BUILT_VERSION`` (bumped when the stored layout changes), the torch
version and the code that builds the network (:func:`code_digest`), so nothing stale is read.
The record holds the tensor file's size and CRC-32, checked before a load: a damaged or
truncated entry is built again and overwritten, never loaded. Writes are atomic, and a new entry
replaces (deletes) the older entries of the same source in the same compute type.
"""

from __future__ import annotations

import hashlib
import json
import logging
import mmap
import os
import time
import zlib
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from stenoflow.model import build, quant, whisper
from stenoflow.model.build import build_whisper, fill, pack_ahead, skeleton, tensors_of
from stenoflow.model.whisper import Whisper
from stenoflow.tokenizer import Tokenizer, repaired_json
from stenoflow.weights.converted import cache_key, weights_from_record, weights_record
from stenoflow.weights.loaded import LoadedWeights
from stenoflow.weights.registry import default_cache_dir, model_source, resolve_model

log = logging.getLogger(__name__)

BUILT_VERSION = 1
TOKENIZER_VERSION = 1  # bumped when repaired_json's output changes
# The modules whose code decides what a build holds: a change to any of them rebuilds.
BUILDERS: tuple[ModuleType, ...] = (build, quant, whisper)


def code_digest(modules: tuple[ModuleType, ...] = BUILDERS) -> str:
    """A digest of the source of ``modules``."""
    h = hashlib.sha256()
    for module in modules:
        h.update(Path(module.__file__ or "").read_bytes())
    return h.hexdigest()[:16]


def built_key(target: Path, fmt: str, compute: str) -> str:
    """The cache key of ``target``'s network built in ``compute`` (see the module docstring)."""
    h = hashlib.sha256(f"{BUILT_VERSION}:{compute}:{torch.__version__}:{code_digest()}".encode())
    h.update(cache_key(target, fmt).encode())
    return h.hexdigest()[:24]


def load_built(name_or_path: str, compute: str, cache_dir: Path | None = None) -> tuple[LoadedWeights, Whisper]:
    """The weights' facts (without their tensors once cached) and the network built in
    ``compute`` on the CPU, through the cache under ``cache_dir/built``."""
    cache_root = Path(cache_dir) if cache_dir else default_cache_dir()
    fmt, target = model_source(name_or_path, cache_root)
    stem = cache_root / "built" / built_key(target, fmt, compute)
    cached = read_built(stem, compute)
    if cached is not None:
        return cached
    start = time.perf_counter()
    weights = resolve_model(name_or_path, cache_dir=cache_root)
    network = build_whisper(weights.dims, weights.state_dict, compute)
    log.info("built %s in %s in %.2f s", name_or_path, compute, time.perf_counter() - start)
    try:
        write_built(stem, weights, network, compute)
    except (OSError, RuntimeError, ValueError) as e:  # an unwritable cache only costs the build next time
        log.warning("could not cache the built network at %s: %s", stem, e)
    return weights, network


def read_built(stem: Path, compute: str) -> tuple[LoadedWeights, Whisper] | None:
    """The entry at ``stem``, or None where there is none or it is damaged (logged)."""
    tensors_path, record_path = stem.with_suffix(".safetensors"), stem.with_suffix(".json")
    if not (tensors_path.is_file() and record_path.is_file()):
        return None
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        record = json.loads(record_path.read_text(encoding="utf-8"))
        if record["version"] != BUILT_VERSION or record["compute"] != compute:
            raise ValueError(f"entry of version {record['version']} in {record['compute']}")
        size, crc = file_crc32(tensors_path)
        if (size, crc) != (record["size"], record["crc32"]):
            raise ValueError(f"tensor file of {size} bytes with CRC-32 {crc:08x}, recorded "
                             f"{record['size']} bytes with {record['crc32']:08x}")
        weights = weights_from_record(record["weights"], {})
        network = fill(skeleton(weights.dims, compute), load_file(str(tensors_path)))  # memory-mapped
    except (OSError, ValueError, KeyError, TypeError, RuntimeError, SafetensorError) as e:
        log.warning("built network at %s is damaged or stale (%s): building it again", stem, e)
        return None
    weights.extra["built_cache"] = str(tensors_path)
    pack_ahead(network)
    return weights, network


def write_built(stem: Path, weights: LoadedWeights, network: Whisper, compute: str) -> None:
    """Store ``network`` (built from ``weights`` in ``compute``) at ``stem``, atomically."""
    from safetensors.torch import save_file

    stem.parent.mkdir(parents=True, exist_ok=True)
    tmp = stem.with_name(f"{stem.name}.{os.getpid()}.tmp")
    try:
        save_file({name: t.contiguous() for name, t in tensors_of(network).items()}, str(tmp))
        size, crc = file_crc32(tmp)
        os.replace(tmp, stem.with_suffix(".safetensors"))
        record = {"version": BUILT_VERSION, "compute": compute, "size": size, "crc32": crc,
                  "weights": weights_record(weights)}
        tmp.write_text(json.dumps(record), encoding="utf-8")  # the record last: it marks the entry complete
        os.replace(tmp, stem.with_suffix(".json"))
    finally:
        tmp.unlink(missing_ok=True)
    remove_superseded(stem, record)


def remove_superseded(stem: Path, record: dict[str, Any]) -> None:
    """Delete the other entries beside ``stem`` built from the same source in the same compute
    type (by an earlier version of the code or of the source file): each new version would
    otherwise leave its predecessor's copy of the model on disk. A process that still maps one
    keeps reading it (the file goes when it is closed)."""
    source, compute = record["weights"]["source"], record["compute"]
    for other in stem.parent.glob("*.json"):
        if other.stem == stem.name:
            continue
        try:
            old = json.loads(other.read_text(encoding="utf-8"))
            if old["weights"]["source"] != source or old["compute"] != compute:
                continue
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not an entry of ours, or one being written
        other.unlink(missing_ok=True)  # the record first: without it the tensors are never read
        other.with_suffix(".safetensors").unlink(missing_ok=True)
        log.info("removed the superseded build %s", other.with_suffix(""))


def file_crc32(path: Path) -> tuple[int, int]:
    """(size, CRC-32) of the file at ``path``."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return 0, 0
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            return size, zlib.crc32(mapped)


def load_tokenizer(path: Path, multilingual: bool, cache_dir: Path | None = None) -> Tokenizer:
    """The tokenizer of the ``tokenizer.json`` at ``path``, through the cache under
    ``cache_dir/tokenizers``: its repaired text (``repaired_json``, which parses and rewrites the
    whole file) is kept as ``<key>-<CRC-32>.json``, the key following the file's path, size and
    modification time; an entry whose text does not match its CRC is written again."""
    cache_root = Path(cache_dir) if cache_dir else default_cache_dir()
    st = path.stat()
    key = hashlib.sha256(f"{TOKENIZER_VERSION}:{path.resolve()}:{st.st_size}:{st.st_mtime_ns}".encode())
    stem = key.hexdigest()[:24]
    folder = cache_root / "tokenizers"
    for entry in sorted(folder.glob(f"{stem}-*.json")) if folder.is_dir() else []:
        try:
            data = entry.read_bytes()
            if f"{zlib.crc32(data):08x}" == entry.stem.rpartition("-")[2]:
                return Tokenizer.from_json(data.decode("utf-8"), multilingual=multilingual, path=path)
            log.warning("cached tokenizer %s is damaged: repairing %s again", entry, path)
        except Exception as e:  # noqa: BLE001 (tokenizers raises a bare Exception on a malformed file)
            log.warning("cached tokenizer %s is unreadable (%s): repairing %s again", entry, e, path)
        entry.unlink(missing_ok=True)
    text = repaired_json(path)
    tokenizer = Tokenizer.from_json(text, multilingual=multilingual, path=path)
    data = text.encode("utf-8")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f"{stem}.{os.getpid()}.tmp"
        tmp.write_bytes(data)
        os.replace(tmp, folder / f"{stem}-{zlib.crc32(data):08x}.json")
    except OSError as e:
        log.warning("could not cache the tokenizer at %s: %s", folder, e)
    return tokenizer
