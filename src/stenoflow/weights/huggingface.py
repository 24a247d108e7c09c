"""Read and write Hugging Face ``transformers`` Whisper directories (config.json + safetensors).

Only the safetensors format is read: it is a plain tensor container, so loading cannot run
code, and it needs no ``transformers`` install. Sharded checkpoints (several ``*.safetensors``)
are merged. The output projection ``proj_out.weight`` is tied to the token embedding in every
Whisper model; it is accepted when equal to the embedding and refused otherwise, because the
network here has no separate projection.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import MappingProxyType

import torch
from torch import Tensor

from stenoflow.model.dims import ModelDims
from stenoflow.weights.loaded import LoadedWeights, alignment_heads_from, tokenizer_in
from stenoflow.weights.schema import check_state_dict

log = logging.getLogger(__name__)

# ModelDims field -> Hugging Face WhisperConfig key
_CONFIG_KEYS = MappingProxyType(
    {
        "n_mels": "num_mel_bins",
        "n_audio_ctx": "max_source_positions",
        "n_audio_state": "d_model",
        "n_audio_head": "encoder_attention_heads",
        "n_audio_layer": "encoder_layers",
        "n_vocab": "vocab_size",
        "n_text_ctx": "max_target_positions",
        "n_text_state": "d_model",
        "n_text_head": "decoder_attention_heads",
        "n_text_layer": "decoder_layers",
    }
)
_TIED = "proj_out.weight"


def _name_pairs(dims: ModelDims) -> Iterator[tuple[str, str]]:
    """(hf name, openai name) for every parameter; used in both directions."""
    yield from (
        ("model.encoder.conv1.weight", "encoder.conv1.weight"),
        ("model.encoder.conv1.bias", "encoder.conv1.bias"),
        ("model.encoder.conv2.weight", "encoder.conv2.weight"),
        ("model.encoder.conv2.bias", "encoder.conv2.bias"),
        ("model.encoder.embed_positions.weight", "encoder.positional_embedding"),
        ("model.encoder.layer_norm.weight", "encoder.ln_post.weight"),
        ("model.encoder.layer_norm.bias", "encoder.ln_post.bias"),
        ("model.decoder.embed_tokens.weight", "decoder.token_embedding.weight"),
        ("model.decoder.embed_positions.weight", "decoder.positional_embedding"),
        ("model.decoder.layer_norm.weight", "decoder.ln.weight"),
        ("model.decoder.layer_norm.bias", "decoder.ln.bias"),
    )
    modules = [
        ("self_attn.q_proj", "attn.query", True),
        ("self_attn.k_proj", "attn.key", False),  # Whisper's key projections have no bias
        ("self_attn.v_proj", "attn.value", True),
        ("self_attn.out_proj", "attn.out", True),
        ("self_attn_layer_norm", "attn_ln", True),
        ("fc1", "mlp.0", True),
        ("fc2", "mlp.2", True),
        ("final_layer_norm", "mlp_ln", True),
    ]
    cross = [
        ("encoder_attn.q_proj", "cross_attn.query", True),
        ("encoder_attn.k_proj", "cross_attn.key", False),
        ("encoder_attn.v_proj", "cross_attn.value", True),
        ("encoder_attn.out_proj", "cross_attn.out", True),
        ("encoder_attn_layer_norm", "cross_attn_ln", True),
    ]
    for side, n_layer in (("encoder", dims.n_audio_layer), ("decoder", dims.n_text_layer)):
        for i in range(n_layer):
            for hf, oa, has_bias in modules + (cross if side == "decoder" else []):
                yield f"model.{side}.layers.{i}.{hf}.weight", f"{side}.blocks.{i}.{oa}.weight"
                if has_bias:
                    yield f"model.{side}.layers.{i}.{hf}.bias", f"{side}.blocks.{i}.{oa}.bias"


def _read_json(path: Path) -> dict[str, object]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: not valid JSON: {e}") from e
    if not isinstance(value, dict):
        raise ValueError(f"{path}: expected a JSON object")
    return value


def _dims(config: dict[str, object], source: str) -> ModelDims:
    missing = sorted({k for k in _CONFIG_KEYS.values() if k not in config})
    if missing:
        raise ValueError(f"{source}: config.json lacks {missing}; expected a Whisper config")
    try:
        return ModelDims(**{f: int(config[k]) for f, k in _CONFIG_KEYS.items()})  # type: ignore[arg-type]
    except (TypeError, ValueError) as e:
        raise ValueError(f"{source}: config.json dimensions must be integers: {e}") from e


def _read_tensors(files: list[Path]) -> dict[str, Tensor]:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    tensors: dict[str, Tensor] = {}
    for f in files:
        try:
            part = load_file(str(f), device="cpu")
        except (SafetensorError, OSError) as e:
            raise ValueError(f"{f}: truncated or corrupt safetensors file: {e}") from e
        dup = sorted(set(part) & set(tensors))
        if dup:
            raise ValueError(f"{f}: tensors also in another shard, e.g. {dup[:3]}")
        tensors |= part
    return tensors


def _int_tuple(value: object) -> tuple[int, ...] | None:
    return tuple(int(v) for v in value) if isinstance(value, list) and value else None


def load_huggingface(model_dir: Path) -> LoadedWeights:
    """Load a transformers Whisper directory (config.json + model*.safetensors) as float32."""
    model_dir = Path(model_dir)
    source = str(model_dir)
    config_path = model_dir / "config.json"
    files = sorted(model_dir.glob("*.safetensors"))
    if not config_path.is_file() or not files:
        raise ValueError(
            f"{source}: expected a Hugging Face Whisper directory with config.json and "
            f"*.safetensors (found config.json: {config_path.is_file()}, "
            f"safetensors files: {len(files)})"
        )
    config = _read_json(config_path)
    dims = _dims(config, source)
    tensors = _read_tensors(files)
    stored = sorted({str(v.dtype).removeprefix("torch.") for v in tensors.values()})
    tied = tensors.pop(_TIED, None)
    embed = tensors.get("model.decoder.embed_tokens.weight")
    if tied is not None and embed is not None and not torch.equal(tied, embed):
        raise ValueError(
            f"{source}: {_TIED} differs from the token embedding; "
            f"only tied Whisper models are supported"
        )
    state: dict[str, Tensor] = {}
    for hf, oa in _name_pairs(dims):
        if hf in tensors:
            state[oa] = tensors.pop(hf).float().contiguous()
    if tensors:
        extra = sorted(tensors)
        raise ValueError(f"{source}: {len(extra)} unexpected tensors, e.g. {extra[:3]}")
    check_state_dict(dims, state, source)

    gen_path = model_dir / "generation_config.json"
    gen = _read_json(gen_path) if gen_path.is_file() else {}
    heads = config.get("alignment_heads") or gen.get("alignment_heads")
    lang_to_id = gen.get("lang_to_id")
    return LoadedWeights(
        dims=dims,
        state_dict=state,
        source=source,
        format="huggingface",
        tokenizer_file=tokenizer_in(model_dir),
        alignment_heads=alignment_heads_from(heads),
        suppress_ids=_int_tuple(config.get("suppress_tokens") or gen.get("suppress_tokens")),
        suppress_ids_begin=_int_tuple(
            config.get("begin_suppress_tokens") or gen.get("begin_suppress_tokens")
        ),
        lang_ids=tuple(sorted(int(v) for v in lang_to_id.values()))
        if isinstance(lang_to_id, dict)
        else None,
        extra={"stored_dtype": "+".join(stored)},
    )


def save_huggingface(weights: LoadedWeights, out_dir: Path, dtype: str = "float32") -> Path:
    """Write config.json + model.safetensors (tied projection omitted) and copy tokenizer.json."""
    from safetensors.torch import save_file

    if dtype not in ("float16", "float32"):
        raise ValueError(f"dtype must be float16 or float32, got {dtype!r}")
    dims = weights.dims
    if dims.n_audio_state != dims.n_text_state:
        raise ValueError(
            f"Hugging Face Whisper has one d_model; "
            f"encoder {dims.n_audio_state} != decoder {dims.n_text_state}"
        )
    check_state_dict(dims, weights.state_dict, weights.source)
    torch_dtype = torch.float16 if dtype == "float16" else torch.float32
    sd = weights.state_dict
    tensors = {hf: sd[oa].detach().to(torch_dtype).contiguous() for hf, oa in _name_pairs(dims)}
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    config: dict[str, object] = {
        "architectures": ["WhisperForConditionalGeneration"],
        "model_type": "whisper",
        **{k: getattr(dims, f) for f, k in _CONFIG_KEYS.items()},
        "encoder_ffn_dim": 4 * dims.n_audio_state,
        "decoder_ffn_dim": 4 * dims.n_text_state,
        "activation_function": "gelu",
        "scale_embedding": False,
        "tie_word_embeddings": True,
        "torch_dtype": dtype,
    }
    if weights.alignment_heads:
        config["alignment_heads"] = [list(h) for h in weights.alignment_heads]
    if weights.suppress_ids:
        config["suppress_tokens"] = list(weights.suppress_ids)
    if weights.suppress_ids_begin:
        config["begin_suppress_tokens"] = list(weights.suppress_ids_begin)
    (out_dir / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    tok = weights.tokenizer_file
    if (
        tok is not None
        and Path(tok).is_file()
        and Path(tok).resolve() != (out_dir / "tokenizer.json").resolve()
    ):
        shutil.copyfile(tok, out_dir / "tokenizer.json")
    log.info("wrote %s (%s)", out_dir / "model.safetensors", dtype)
    return out_dir
