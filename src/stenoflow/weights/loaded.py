"""What a weight loader hands to the model builder."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from torch import Tensor

from stenoflow.model.dims import ModelDims


@dataclass
class LoadedWeights:
    """Weights in openai-whisper names plus what the format says about the model around them."""

    dims: ModelDims
    state_dict: dict[str, Tensor]  # checked by schema.check_state_dict
    source: str  # the file or directory read, for messages and the info record
    format: str  # "ctranslate2" | "openai" | "huggingface" | "ggml"
    tokenizer_file: Path | None = None  # a Hugging Face tokenizer.json, when the format has one
    alignment_heads: tuple[tuple[int, int], ...] | None = None  # (layer, head) for word timing
    suppress_ids: tuple[int, ...] | None = None  # the "-1" non-speech suppression set
    suppress_ids_begin: tuple[int, ...] | None = None
    lang_ids: tuple[int, ...] | None = None
    extra: dict[str, object] = field(default_factory=dict)


def alignment_heads_from(value: object) -> tuple[tuple[int, int], ...] | None:
    """(layer, head) pairs from a config's JSON list; None where the file gives none."""
    if isinstance(value, list) and value:
        return tuple((int(layer), int(head)) for layer, head in value)
    return None


def tokenizer_in(model_dir: Path) -> Path | None:
    """The Hugging Face tokenizer.json of a model directory, if it has one."""
    path = model_dir / "tokenizer.json"
    return path if path.is_file() else None
