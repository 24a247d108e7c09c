"""The one set of parameter names and shapes every weight loader must produce.

Names are openai-whisper's. Each loader maps its own format onto these names and then calls
``check_state_dict``, which asserts the names, the count and every shape before the weights
reach the model.
"""

from __future__ import annotations

from collections.abc import Mapping

from torch import Tensor

from stenoflow.model.dims import ModelDims


def _attention(prefix: str, d: int) -> dict[str, tuple[int, ...]]:
    return {
        f"{prefix}.query.weight": (d, d),
        f"{prefix}.query.bias": (d,),
        f"{prefix}.key.weight": (d, d),
        f"{prefix}.value.weight": (d, d),
        f"{prefix}.value.bias": (d,),
        f"{prefix}.out.weight": (d, d),
        f"{prefix}.out.bias": (d,),
    }


def _norm(prefix: str, d: int) -> dict[str, tuple[int, ...]]:
    return {f"{prefix}.weight": (d,), f"{prefix}.bias": (d,)}


def _block(prefix: str, d: int, cross: bool) -> dict[str, tuple[int, ...]]:
    shapes = {**_attention(f"{prefix}.attn", d), **_norm(f"{prefix}.attn_ln", d)}
    if cross:
        shapes |= _attention(f"{prefix}.cross_attn", d) | _norm(f"{prefix}.cross_attn_ln", d)
    shapes |= {
        f"{prefix}.mlp.0.weight": (4 * d, d),
        f"{prefix}.mlp.0.bias": (4 * d,),
        f"{prefix}.mlp.2.weight": (d, 4 * d),
        f"{prefix}.mlp.2.bias": (d,),
    }
    return shapes | _norm(f"{prefix}.mlp_ln", d)


def expected_shapes(dims: ModelDims) -> dict[str, tuple[int, ...]]:
    """Every parameter of a Whisper model of these dimensions, with its shape."""
    a, t = dims.n_audio_state, dims.n_text_state
    shapes: dict[str, tuple[int, ...]] = {
        "encoder.conv1.weight": (a, dims.n_mels, 3),
        "encoder.conv1.bias": (a,),
        "encoder.conv2.weight": (a, a, 3),
        "encoder.conv2.bias": (a,),
        "encoder.positional_embedding": (dims.n_audio_ctx, a),
    }
    for i in range(dims.n_audio_layer):
        shapes |= _block(f"encoder.blocks.{i}", a, cross=False)
    shapes |= _norm("encoder.ln_post", a)
    shapes |= {
        "decoder.token_embedding.weight": (dims.n_vocab, t),
        "decoder.positional_embedding": (dims.n_text_ctx, t),
    }
    for i in range(dims.n_text_layer):
        shapes |= _block(f"decoder.blocks.{i}", t, cross=True)
    return shapes | _norm("decoder.ln", t)


def check_state_dict(dims: ModelDims, state: Mapping[str, Tensor], source: str) -> None:
    """Raise ValueError naming what is missing, unexpected or misshapen."""
    want = expected_shapes(dims)
    missing = sorted(set(want) - set(state))
    extra = sorted(set(state) - set(want))
    if missing or extra:
        raise ValueError(
            f"{source}: weights do not match a Whisper model of {dims}: "
            f"{len(missing)} missing (e.g. {missing[:3]}), {len(extra)} unexpected (e.g. {extra[:3]})"
        )
    bad = [(k, tuple(state[k].shape), s) for k, s in want.items() if tuple(state[k].shape) != s]
    if bad:
        name, got, exp = bad[0]
        raise ValueError(
            f"{source}: {len(bad)} tensors have the wrong shape, e.g. {name}: got {got}, expected {exp}"
        )
