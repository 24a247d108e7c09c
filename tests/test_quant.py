"""int8 and bfloat16 layers: per-row weight scales, both int8 kernels, which CPUs get bfloat16,
and reduced-precision models close to float32."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from stenoflow.model.compute import INT8, INT8_BFLOAT16, cpu_compute
from stenoflow.model.cpu_features import cpu_flags, native_bfloat16, native_int8_dot
from stenoflow.model.quant import (
    FEW_ROWS,
    Int8Linear,
    SharedInput,
    TrainableInt8Linear,
    bfloat16_layers,
    quantize_rows,
    trainable_int8_layers,
)


def test_rows_keep_their_own_scale() -> None:
    w = torch.tensor([[1e-3, -2e-3, 5e-4], [10.0, -20.0, 5.0]])
    q, scale = quantize_rows(w)
    back = q.float() * scale[:, None]
    # A per-tensor scale (20/127) would round the whole first row to zero.
    assert torch.allclose(back, w, rtol=0.01, atol=0)
    assert q.dtype == torch.int8 and int(q.abs().max()) == 127


# The kernels for CPUs without 32-bit int8 sums (7-bit inputs), which run anywhere, and, where
# this CPU has such sums, those for it (elsewhere their 8-bit inputs saturate).
KERNELS = [False, *([True] if native_int8_dot() else [])]


@pytest.mark.parametrize("int8_dot", KERNELS)
@pytest.mark.parametrize("rows", [1, 5, FEW_ROWS, FEW_ROWS + 1, 300])
def test_int8_linear_matches_its_dequantized_weights(rows: int, int8_dot: bool) -> None:
    g = torch.Generator().manual_seed(rows)
    layer = torch.nn.Linear(256, 384)
    with torch.no_grad():
        layer.weight.copy_(torch.randn(384, 256, generator=g) * torch.rand(384, 1, generator=g))
    q = Int8Linear(layer.weight, layer.bias, int8_dot=int8_dot)
    x = torch.randn(rows, 256, generator=g)
    with torch.no_grad():
        exact = x @ q.dequantized().t() + layer.bias
        y, reference = q(x), layer(x)
    assert y.shape == (rows, 384)
    # Only the activations' rounding (8 or 7 bits per row) separates the two.
    assert float((y - exact).norm() / exact.norm()) < 0.02
    assert float((y - reference).norm() / reference.norm()) < 0.03


@pytest.mark.parametrize("int8_dot", KERNELS)
@pytest.mark.parametrize("rows", [2, 5, 13, FEW_ROWS])
def test_each_of_a_few_rows_gets_what_it_gets_alone(rows: int, int8_dot: bool) -> None:
    """A verification pass multiplies a drafted token's row together with K others; a greedy step
    multiplies that row alone. Each row is rounded to int8 by its own scale, so its product is the
    one-row product bit for bit, whatever the other rows hold (here rows of very different sizes
    and an outlier channel, which a scale spanning all rows would round coarsely)."""
    g = torch.Generator().manual_seed(rows)
    q = Int8Linear(torch.randn(512, 384, generator=g) * 0.05, torch.randn(512, generator=g) * 0.1, int8_dot=int8_dot)
    x = torch.randn(rows, 384, generator=g) * torch.logspace(-2, 2, rows)[:, None]
    x[:, 7] *= 30.0
    with torch.no_grad():
        together = q(x[None])[0]
        alone = torch.cat([q(x[i : i + 1][None])[0] for i in range(rows)])
    assert torch.equal(together, alone)


@pytest.mark.parametrize("rows", [1, 5, 300])
def test_an_outlier_channel_or_row_does_not_corrupt_the_others(rows: int) -> None:
    """Transformer activations carry a few channels far larger than the rest, and rows of very
    different sizes. Every row keeps its own precision: on a CPU without 32-bit int8 sums, 8-bit
    inputs would saturate the kernel's 16-bit pair sums there (errors of 15 % and more)."""
    g = torch.Generator().manual_seed(rows)
    q = Int8Linear(torch.randn(512, 384, generator=g) * 0.05, torch.randn(512, generator=g) * 0.1, int8_dot=False)
    x = torch.randn(rows, 384, generator=g)
    x[:, 7] *= 30.0
    x[0] *= 50.0
    with torch.no_grad():
        exact = x @ q.dequantized().t() + q.bias
        y = q(x)
    per_row = (y - exact).norm(dim=1) / exact.norm(dim=1)
    assert float(per_row.max()) < 0.15


@pytest.mark.parametrize("int8_dot", KERNELS)
@pytest.mark.parametrize("rows", [3, 300])
def test_layers_reading_one_input_share_its_rounding_and_each_get_their_own_product(rows: int,
                                                                                   int8_dot: bool) -> None:
    """The decoder's cross-attention keys and values all read the encoder output: rounded to int8
    once for every layer, each layer's product is exactly what it computes alone."""
    g = torch.Generator().manual_seed(rows)
    layers: list[torch.nn.Module] = [Int8Linear(torch.randn(n, 64, generator=g), bias, int8_dot=int8_dot)
                                     for n, bias in ((96, None), (64, torch.randn(64, generator=g)))]
    layers.append(torch.nn.Linear(64, 32))
    x = torch.randn(1, rows, 64, generator=g)
    shared = SharedInput(x)
    with torch.no_grad():
        for layer in layers:
            assert torch.equal(shared.through(layer), layer(x))


def test_int8_linear_keeps_leading_shape() -> None:
    q = Int8Linear(torch.randn(8, 4), None)
    assert q(torch.randn(2, 3, 4)).shape == (2, 3, 8)
    assert q(torch.randn(2, 20, 4)).shape == (2, 20, 8)


def test_trainable_int8_layers_compute_what_int8_does_and_pass_gradients() -> None:
    """Over many rows (the encoder, a teacher-forced decoder pass) the trainable copy rounds the
    input as the int8 kernel of a CPU with 32-bit int8 sums does; its gradient passes the
    rounding straight through."""
    g = torch.Generator().manual_seed(0)
    net = torch.nn.Sequential(Int8Linear(torch.randn(48, 32, generator=g) * 0.1, torch.randn(48, generator=g), True),
                              torch.nn.Sequential(torch.nn.GELU(), Int8Linear(torch.randn(16, 48, generator=g), None, True)))
    x = torch.randn(FEW_ROWS + 40, 32, generator=g)
    with torch.no_grad():
        reference = net(x)
    first: Int8Linear = net[0]  # type: ignore[assignment]
    weight = first.dequantized()
    trainable_int8_layers(net)
    assert not any(isinstance(m, Int8Linear) for m in net.modules())
    assert sum(isinstance(m, TrainableInt8Linear) for m in net.modules()) == 2
    x.requires_grad_(True)
    y = net(x)
    assert torch.allclose(y, reference, rtol=0, atol=1e-4 * float(reference.abs().max()))
    layer = net[0]
    x.grad = None
    layer(x).sum().backward()
    assert x.grad is not None and torch.allclose(x.grad, weight.sum(0).expand_as(x), atol=1e-5)


def test_bfloat16_matrix_units_are_read_from_the_cpu_flags(tmp_path: Path) -> None:
    """Only a CPU with AMX bfloat16 tiles counts as native bfloat16 (AVX-512 alone does not); no
    cpuinfo (not Linux) means none; the default compute type follows."""
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu avx512f avx512_bf16 amx_tile amx_bf16 amx_int8\n\n"
                    "processor\t: 1\nflags\t\t: fpu\n")
    assert {"amx_tile", "amx_bf16"} <= cpu_flags(info)
    assert native_bfloat16(info)
    info.write_text("processor\t: 0\nflags\t\t: fpu avx512f avx512_bf16 avx512_vnni\n")
    assert not native_bfloat16(info)
    assert cpu_flags(tmp_path / "absent") == frozenset()
    assert not native_bfloat16(tmp_path / "absent")
    assert cpu_compute() == (INT8_BFLOAT16 if native_bfloat16() else INT8)


def test_bfloat16_layers_keep_layer_norms_in_float32() -> None:
    net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8), torch.nn.Conv1d(8, 8, 3))
    bfloat16_layers(net)
    assert net[0].weight.dtype == net[2].weight.dtype == torch.bfloat16
    assert net[1].weight.dtype == net[1].bias.dtype == torch.float32


@pytest.mark.slow
@pytest.mark.parametrize("compute", ["int8", INT8_BFLOAT16])
def test_reduced_precision_model_logits_stay_close_to_float32(base: object, jfk_audio: np.ndarray,
                                                              compute: str) -> None:
    """Teacher-forced on the float32 transcript of jfk.wav, base in int8 (or with its encoder in
    bfloat16) gives each token a log probability within 0.1 nats of float32's on average and
    within 0.5 nats at worst, and the same best token at >= 90 % of positions; the encoder hands
    the decoder float32 features. A CPU without 32-bit int8 sums rounds the activations to 7 bits
    (half the steps of 8), so there the worst token may stray further: 0.8 nats."""
    from stenoflow.api import load_model
    from stenoflow.decoding.options import DecodingOptions

    fp32 = base
    int8 = load_model("base", compute=compute)
    mel = fp32.features(jfk_audio, padding=480000 - jfk_audio.size)  # type: ignore[attr-defined]
    result = fp32.decode(mel, DecodingOptions(language="en", without_timestamps=True))  # type: ignore[attr-defined]
    tok = fp32.tokenizer  # type: ignore[attr-defined]
    seq = torch.tensor([[*tok.sot_sequence, tok.no_timestamps, *result.tokens, tok.eot]])
    logprobs = []
    for model in (fp32, int8):
        with torch.inference_mode():
            features = model.encode(mel)
            assert features.dtype == torch.float32
            cross = model.whisper.decoder.cross_kv(features)
            logits = model.whisper.decoder(seq, cross, model.whisper.new_cache(1))
        logprobs.append(logits[0].log_softmax(-1))
    start = len(tok.sot_sequence)  # the position that predicts the first text token
    chosen = seq[0, start + 1:, None]
    lp32 = logprobs[0][start:-1].gather(1, chosen)
    lp8 = logprobs[1][start:-1].gather(1, chosen)
    gap = (lp32 - lp8).abs()
    assert float(gap.mean()) < 0.1
    assert float(gap.max()) < (0.5 if native_int8_dot() else 0.8)
    agree = (logprobs[0][start:-1].argmax(-1) == logprobs[1][start:-1].argmax(-1)).float().mean()
    assert float(agree) >= 0.9
    assert int8.transcribe(jfk_audio, beam_size=None)[0]  # the int8 model runs end to end
