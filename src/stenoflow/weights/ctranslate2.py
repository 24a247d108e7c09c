"""Read and write CTranslate2 Whisper model directories (``model.bin`` + ``config.json``).

The binary is parsed by ``ct2_binary`` rather than the ``ctranslate2`` package, so loading
needs no native library and no CT2 version pin. Tensors come out float32 in openai names.

CT2 fuses some projections, which this module splits:

* self-attention ``linear_0`` holds q, k and v stacked along dim 0, with a zero key bias;
* cross-attention ``linear_1`` holds k and v stacked, again with a zero key bias.

Dropping the key bias is exact even if it were not zero: it adds ``q . b`` to every score of a
query row, and softmax is invariant to a per-row constant. openai-whisper has no key bias.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from stenoflow.model.dims import ModelDims
from stenoflow.weights.ct2_binary import (
    DTYPE_IDS,
    DTYPES,
    SPEC_NAME,
    RawVar,
    encode_string,
    encode_variable,
    parse_model_bin,
    scalar_value,
    to_float32,
)
from stenoflow.weights.loaded import LoadedWeights, alignment_heads_from, tokenizer_in
from stenoflow.weights.schema import check_state_dict, expected_shapes

log = logging.getLogger(__name__)

GELU = 3  # CT2 ActivationType::GELU, the only activation Whisper uses
_LAYER = re.compile(r"^(encoder|decoder)/layer_(\d+)/")

# ---- the name plan shared by the reader and the writer --------------------------------------


def _plain_names(dims: ModelDims) -> Iterator[tuple[str, str]]:
    """(ct2 name, openai name) of every tensor that maps one to one."""
    yield from (
        ("encoder/conv1/weight", "encoder.conv1.weight"),
        ("encoder/conv1/bias", "encoder.conv1.bias"),
        ("encoder/conv2/weight", "encoder.conv2.weight"),
        ("encoder/conv2/bias", "encoder.conv2.bias"),
        ("encoder/position_encodings/encodings", "encoder.positional_embedding"),
        ("encoder/layer_norm/gamma", "encoder.ln_post.weight"),
        ("encoder/layer_norm/beta", "encoder.ln_post.bias"),
        ("decoder/embeddings/weight", "decoder.token_embedding.weight"),
        ("decoder/position_encodings/encodings", "decoder.positional_embedding"),
        ("decoder/layer_norm/gamma", "decoder.ln.weight"),
        ("decoder/layer_norm/beta", "decoder.ln.bias"),
    )
    for side, n_layer in (("encoder", dims.n_audio_layer), ("decoder", dims.n_text_layer)):
        for i in range(n_layer):
            c, o = f"{side}/layer_{i}", f"{side}.blocks.{i}"
            pairs = [
                ("self_attention/layer_norm", "attn_ln", ("gamma", "beta")),
                ("self_attention/linear_1", "attn.out", ("weight", "bias")),
                ("ffn/layer_norm", "mlp_ln", ("gamma", "beta")),
                ("ffn/linear_0", "mlp.0", ("weight", "bias")),
                ("ffn/linear_1", "mlp.2", ("weight", "bias")),
            ]
            if side == "decoder":
                pairs += [
                    ("attention/layer_norm", "cross_attn_ln", ("gamma", "beta")),
                    ("attention/linear_0", "cross_attn.query", ("weight", "bias")),
                    ("attention/linear_2", "cross_attn.out", ("weight", "bias")),
                ]
            for ct2, oa, (w, b) in pairs:
                yield f"{c}/{ct2}/{w}", f"{o}.{oa}.weight"
                yield f"{c}/{ct2}/{b}", f"{o}.{oa}.bias"


def _fused_linears(dims: ModelDims) -> Iterator[tuple[str, tuple[str, ...]]]:
    """(ct2 linear prefix, openai linear prefixes stacked along dim 0 in it)."""
    for side, n_layer in (("encoder", dims.n_audio_layer), ("decoder", dims.n_text_layer)):
        for i in range(n_layer):
            o = f"{side}.blocks.{i}"
            yield (
                f"{side}/layer_{i}/self_attention/linear_0",
                (f"{o}.attn.query", f"{o}.attn.key", f"{o}.attn.value"),
            )
            if side == "decoder":
                yield (
                    f"decoder/layer_{i}/attention/linear_1",
                    (f"{o}.cross_attn.key", f"{o}.cross_attn.value"),
                )


def _dims(data: bytes, variables: dict[str, RawVar], source: str) -> ModelDims:
    def shape(name: str) -> tuple[int, ...]:
        if name not in variables:
            raise ValueError(f"{source}: CTranslate2 Whisper model lacks the variable {name}")
        return variables[name].shape

    layers = {"encoder": -1, "decoder": -1}
    for name in variables:
        m = _LAYER.match(name)
        if m:
            layers[m[1]] = max(layers[m[1]], int(m[2]))
    conv1 = shape("encoder/conv1/weight")
    emb = shape("decoder/embeddings/weight")
    return ModelDims(
        n_mels=conv1[1],
        n_audio_ctx=shape("encoder/position_encodings/encodings")[0],
        n_audio_state=conv1[0],
        n_audio_head=scalar_value(data, variables, "encoder/num_heads", source),
        n_audio_layer=layers["encoder"] + 1,
        n_vocab=emb[0],
        n_text_ctx=shape("decoder/position_encodings/encodings")[0],
        n_text_state=emb[1],
        n_text_head=scalar_value(data, variables, "decoder/num_heads", source),
        n_text_layer=layers["decoder"] + 1,
    )


def _check_architecture(data: bytes, variables: dict[str, RawVar], source: str) -> None:
    """Refuse CT2 Whisper variants this network cannot run rather than compute wrong outputs."""
    for name, want in (
        ("decoder/activation", GELU),
        ("decoder/pre_norm", 1),
        ("decoder/alibi", 0),
        ("decoder/scale_embeddings", 0),
    ):
        got = scalar_value(data, variables, name, source) if name in variables else want
        if got != want:
            raise ValueError(f"{source}: {name} is {got}, expected {want} (not a Whisper model)")


def _check_projection(
    data: bytes, variables: dict[str, RawVar], embedding: Tensor, used: set[str], source: str
) -> None:
    """The output projection is normally an alias of the embedding; a stored copy must equal it,
    since the network ties the two."""
    name = "decoder/projection/weight"
    if name not in variables:
        return
    if not np.array_equal(to_float32(data, name, variables), embedding.numpy()):
        raise ValueError(
            f"{source}: {name} differs from the embeddings; only tied models are supported"
        )
    used.update((name, f"{name}_scale"))


def _tuple(value: object) -> tuple[int, ...] | None:
    return tuple(int(v) for v in value) if isinstance(value, list) else None


def load_ctranslate2(model_dir: Path) -> LoadedWeights:
    """Load a CTranslate2 Whisper directory (model.bin, config.json, tokenizer.json) as float32."""
    model_dir = Path(model_dir)
    source = str(model_dir)
    bin_path = model_dir / "model.bin"
    if not bin_path.is_file():
        raise ValueError(f"{source}: no model.bin; expected a CTranslate2 model directory")
    data = bin_path.read_bytes()
    _, variables, _aliases = parse_model_bin(data, str(bin_path))
    dims = _dims(data, variables, str(bin_path))
    _check_architecture(data, variables, str(bin_path))

    state: dict[str, Tensor] = {}
    used: set[str] = set()

    def take(name: str) -> np.ndarray:
        if name not in variables:
            raise ValueError(f"{bin_path}: missing variable {name} for a Whisper model of {dims}")
        used.add(name)
        used.add(f"{name}_scale")
        return to_float32(data, name, variables)

    for ct2, oa in _plain_names(dims):
        state[oa] = torch.from_numpy(take(ct2))
    want = expected_shapes(dims)
    for ct2, targets in _fused_linears(dims):
        weights = np.split(take(f"{ct2}/weight"), len(targets), axis=0)
        biases = np.split(take(f"{ct2}/bias"), len(targets), axis=0)
        for target, w, b in zip(targets, weights, biases, strict=True):
            state[f"{target}.weight"] = torch.from_numpy(w.copy())  # own storage, not a view
            if f"{target}.bias" in want:
                state[f"{target}.bias"] = torch.from_numpy(b.copy())
    _check_projection(data, variables, state["decoder.token_embedding.weight"], used, str(bin_path))
    leftover = sorted(n for n, v in variables.items() if n not in used and v.shape != ())
    if leftover:
        raise ValueError(f"{bin_path}: {len(leftover)} unexpected tensors, e.g. {leftover[:3]}")
    check_state_dict(dims, state, str(bin_path))

    config = _read_config(model_dir)
    heads = config.get("alignment_heads")
    stored = sorted({DTYPES[v.dtype_id][1] for v in variables.values() if len(v.shape) >= 2})
    return LoadedWeights(
        dims=dims,
        state_dict=state,
        source=source,
        format="ctranslate2",
        tokenizer_file=tokenizer_in(model_dir),
        alignment_heads=alignment_heads_from(heads),
        suppress_ids=_tuple(config.get("suppress_ids")),
        suppress_ids_begin=_tuple(config.get("suppress_ids_begin")),
        lang_ids=_tuple(config.get("lang_ids")),
        extra={"stored_dtype": "+".join(stored)},
    )


def _read_config(model_dir: Path) -> dict[str, object]:
    path = model_dir / "config.json"
    if not path.is_file():
        log.warning("%s: no config.json; alignment heads and suppression ids unknown", model_dir)
        return {}
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: not valid JSON: {e}") from e
    if not isinstance(config, dict):
        raise ValueError(f"{path}: expected a JSON object")
    return config


# ---- writer -------------------------------------------------------------------------------


def _quantize_rows(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric per-row int8, CT2's convention: q = round(w * scale), w = q / scale."""
    amax = np.abs(w).max(axis=1)
    scale = np.where(amax > 0, 127.0 / np.where(amax > 0, amax, 1.0), 1.0).astype(np.float32)
    q = np.clip(np.rint(w * scale[:, None]), -127, 127).astype(np.int8)
    return q, scale


def _ct2_tensors(weights: LoadedWeights) -> dict[str, np.ndarray]:
    dims, sd = weights.dims, weights.state_dict
    out = {ct2: sd[oa].detach().float().numpy() for ct2, oa in _plain_names(dims)}
    for ct2, targets in _fused_linears(dims):
        out[f"{ct2}/weight"] = np.concatenate([sd[f"{t}.weight"].float().numpy() for t in targets])
        out[f"{ct2}/bias"] = np.concatenate(
            [
                sd[f"{t}.bias"].float().numpy()
                if f"{t}.bias" in sd
                else np.zeros(sd[f"{t}.weight"].shape[0], np.float32)
                for t in targets
            ]
        )
    return out


def save_ctranslate2(weights: LoadedWeights, out_dir: Path, dtype: str = "float16") -> Path:
    """Write a CTranslate2 Whisper directory that CT2 itself and ``load_ctranslate2`` can read.

    ``dtype`` is the storage type of the float tensors: "float16", "float32", or "int8" (linear
    weights per-row int8 with float32 ``weight_scale``, everything else float32, like CT2's
    int8_float32). config.json gets the ids and heads; tokenizer.json and vocabulary.txt are
    copied when the source directory has them.
    """
    if dtype not in ("float16", "float32", "int8"):
        raise ValueError(f"dtype must be float16, float32 or int8, got {dtype!r}")
    check_state_dict(weights.dims, weights.state_dict, weights.source)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    dims = weights.dims
    scalars = {
        "decoder/activation": np.int8(GELU),
        "decoder/alibi": np.int8(0),
        "decoder/alignment_heads": np.int16(1),
        "decoder/alignment_layer": np.int16(-1),
        "decoder/num_heads": np.int16(dims.n_text_head),
        "decoder/pre_norm": np.int8(1),
        "decoder/scale_embeddings": np.int8(0),
        "decoder/start_from_zero_embedding": np.int8(0),
        "encoder/num_heads": np.int16(dims.n_audio_head),
    }
    chunks: list[bytes] = []
    tensors: dict[str, np.ndarray] = {
        **_ct2_tensors(weights),
        **{k: np.asarray(v) for k, v in scalars.items()},
    }
    for name, arr in sorted(tensors.items()):  # CT2's own order: by name
        if arr.ndim == 0:
            chunks.append(encode_variable(name, arr, DTYPE_IDS[arr.dtype.name]))
        elif dtype == "int8" and re.search(r"/linear_\d+/weight$", name):
            q, scale = _quantize_rows(arr)
            chunks += [
                encode_variable(name, q, DTYPE_IDS["int8"]),
                encode_variable(f"{name}_scale", scale, 0),
            ]
        elif dtype == "float16":
            chunks.append(encode_variable(name, arr.astype(np.float16), DTYPE_IDS["float16"]))
        else:
            chunks.append(encode_variable(name, arr.astype(np.float32), DTYPE_IDS["float32"]))
    header = struct.pack("<I", 6) + encode_string(SPEC_NAME) + struct.pack("<II", 3, len(chunks))
    aliases = (
        struct.pack("<I", 1)
        + encode_string("decoder/projection/weight")
        + encode_string("decoder/embeddings/weight")
    )
    with open(out_dir / "model.bin", "wb") as f:
        f.writelines([header, *chunks, aliases])
    config: dict[str, object] = {
        "alignment_heads": [list(h) for h in weights.alignment_heads or ()],
        "lang_ids": list(weights.lang_ids or ()),
        "suppress_ids": list(weights.suppress_ids or ()),
        "suppress_ids_begin": list(weights.suppress_ids_begin or ()),
    }
    (out_dir / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    _write_vocabulary(weights, out_dir)
    log.info("wrote %s (%s)", out_dir / "model.bin", dtype)
    return out_dir


def _write_vocabulary(weights: LoadedWeights, out_dir: Path) -> None:
    """Give the directory the tokenizer.json and vocabulary.txt CT2 itself needs, if obtainable.

    vocabulary.txt is copied from a CT2 source, otherwise derived from tokenizer.json: one token
    per line in id order, special tokens included.
    """
    tok = weights.tokenizer_file
    if (
        tok is not None
        and Path(tok).is_file()
        and Path(tok).resolve() != (out_dir / "tokenizer.json").resolve()
    ):
        shutil.copyfile(tok, out_dir / "tokenizer.json")
    src_vocab = Path(weights.source) / "vocabulary.txt"
    target = out_dir / "vocabulary.txt"
    if weights.format == "ctranslate2" and src_vocab.is_file():
        if src_vocab.resolve() != target.resolve():
            shutil.copyfile(src_vocab, target)
        return
    if tok is None or not Path(tok).is_file():
        log.warning(
            "%s: no tokenizer.json to derive vocabulary.txt from; CT2 itself will not load it",
            out_dir,
        )
        return
    spec = json.loads(Path(tok).read_text(encoding="utf-8"))
    ids: dict[int, str] = {int(i): t for t, i in spec.get("model", {}).get("vocab", {}).items()}
    ids |= {int(a["id"]): a["content"] for a in spec.get("added_tokens", [])}
    if sorted(ids) != list(range(len(ids))):
        log.warning("%s: token ids are not contiguous; vocabulary.txt not written", tok)
        return
    # tokenizer.json stops before the timestamp tokens; the model's vocabulary ends with them.
    lines = [ids[i] for i in range(len(ids))]
    lines += [f"<|{0.02 * k:.2f}|>" for k in range(weights.dims.n_vocab - len(lines))]
    target.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
