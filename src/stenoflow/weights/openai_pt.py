"""Read and write openai-whisper ``.pt`` checkpoints: {"dims": {...}, "model_state_dict": {...}}.

The names already are the ones the model uses, so loading is mostly validation. Files are read
with ``torch.load(weights_only=True)``: a checkpoint is only tensors, ints and dicts, and
refusing anything else means a downloaded file cannot run code on load. Alignment heads are
not in these files (openai-whisper keeps them in its source), so they stay ``None`` here.
"""

from __future__ import annotations

import logging
import pickle
from dataclasses import fields
from pathlib import Path

import torch
from torch import Tensor

from stenoflow.model.dims import ModelDims
from stenoflow.weights.loaded import LoadedWeights
from stenoflow.weights.schema import check_state_dict

log = logging.getLogger(__name__)

_DIM_NAMES = tuple(f.name for f in fields(ModelDims))


def _dims_from(raw: object, source: str) -> ModelDims:
    if not isinstance(raw, dict):
        raise ValueError(
            f"{source}: 'dims' is a {type(raw).__name__}, expected a dict of {_DIM_NAMES}"
        )
    missing = [k for k in _DIM_NAMES if k not in raw]
    if missing:
        raise ValueError(f"{source}: 'dims' lacks {missing}; expected all of {_DIM_NAMES}")
    try:
        return ModelDims(**{k: int(raw[k]) for k in _DIM_NAMES})
    except (TypeError, ValueError) as e:
        raise ValueError(f"{source}: 'dims' values must be integers: {e}") from e


def _heads_from_mask(mask: object, dims: ModelDims) -> tuple[tuple[int, int], ...] | None:
    """Some conversions keep openai's (n_text_layer, n_text_head) bool buffer; use it if so."""
    if not isinstance(mask, Tensor) or tuple(mask.shape) != (dims.n_text_layer, dims.n_text_head):
        return None
    heads = tuple((int(layer), int(h)) for layer, h in mask.to(torch.bool).nonzero().tolist())
    return heads or None


def load_openai_pt(path: Path) -> LoadedWeights:
    """Load an openai-whisper checkpoint as float32 tensors."""
    path = Path(path)
    source = str(path)
    if not path.is_file():
        raise ValueError(f"{source}: no such file; expected an openai-whisper .pt checkpoint")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        raise ValueError(
            f"{source}: not a plain openai-whisper checkpoint: it is corrupt, or holds objects "
            f"other than tensors and numbers, which are not unpickled for safety ({e})"
        ) from e
    except Exception as e:  # torch.load fails on damaged files with many exception types
        raise ValueError(f"{source}: truncated or corrupt torch checkpoint: {e}") from e
    if not isinstance(ckpt, dict) or "dims" not in ckpt or "model_state_dict" not in ckpt:
        keys = sorted(ckpt) if isinstance(ckpt, dict) else type(ckpt).__name__
        raise ValueError(
            f"{source}: expected a dict with 'dims' and 'model_state_dict', got {keys}"
        )
    dims = _dims_from(ckpt["dims"], source)
    raw_state = ckpt["model_state_dict"]
    if not isinstance(raw_state, dict):
        raise ValueError(
            f"{source}: 'model_state_dict' is a {type(raw_state).__name__}, expected a dict"
        )
    raw_state = dict(raw_state)
    heads = _heads_from_mask(raw_state.pop("alignment_heads", None), dims)
    bad = [k for k, v in raw_state.items() if not isinstance(v, Tensor)]
    if bad:
        raise ValueError(f"{source}: model_state_dict entries are not tensors: {bad[:3]}")
    stored = sorted({str(v.dtype).removeprefix("torch.") for v in raw_state.values()})
    state = {k: v.float().contiguous() for k, v in raw_state.items()}
    check_state_dict(dims, state, source)
    return LoadedWeights(
        dims=dims,
        state_dict=state,
        source=source,
        format="openai",
        alignment_heads=heads,
        extra={"stored_dtype": "+".join(stored)},
    )


def save_openai_pt(weights: LoadedWeights, path: Path, dtype: str = "float16") -> Path:
    """Write an openai-whisper checkpoint (openai ships float16; float32 keeps every bit)."""
    if dtype not in ("float16", "float32"):
        raise ValueError(f"dtype must be float16 or float32, got {dtype!r}")
    check_state_dict(weights.dims, weights.state_dict, weights.source)
    torch_dtype = torch.float16 if dtype == "float16" else torch.float32
    state = {k: v.detach().to(torch_dtype).contiguous() for k, v in weights.state_dict.items()}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"dims": weights.dims.to_dict(), "model_state_dict": state}, path)
    log.info("wrote %s (%s)", path, dtype)
    return path
