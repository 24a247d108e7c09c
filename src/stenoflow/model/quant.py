"""int8 linear layers on the CPU, quantised the way CTranslate2 does it.

Weights are int8 with one scale per output channel (row), so a row of small weights keeps its
precision next to a row of large ones; activations are quantised on the fly, one scale per
input row, so a token with outlier activations does not flatten the others. The product runs
in integer arithmetic (int8 x int8 -> int32) and is rescaled to float32 by the two scales.

On a CPU that sums int8 products in 32 bits (VNNI, AMX), two kernels compute it, chosen by
the number of rows:

* many rows (the encoder, a decoder pass over a prompt): the activations are quantised per row
  here and multiplied with ``torch._int_mm``;
* a few rows (a decoding step, a pass that verifies a draft, the beams): fbgemm's dynamic linear
  with the same per-channel weights. For the output projection over the vocabulary it is several
  times faster than ``_int_mm``.

fbgemm quantises its whole input with one scale (from the input's minimum and maximum), so on
its own a row's product would depend on the rows beside it, and the K+1 rows that verify a draft
would not compute what K+1 one-row steps compute. Each row is therefore first divided by its own
largest magnitude, and two constant columns, +1 and -1 (against zero weights), fix the input's
range at [-1, 1] whatever the row count: fbgemm's one scale is every row's own, the integer
product of a row does not see the others, and the result is multiplied back per row. A row's
product is the same bit for bit alone or among up to ``FEW_ROWS`` rows, so speculative decoding
verifies with the very logits greedy steps compute.

Without 32-bit sums (plain AVX2) ``_int_mm`` runs a reference loop some twenty times slower than a
float32 product, and fbgemm multiplies unsigned by signed bytes into 16-bit pairs that saturate for
8-bit inputs: one outlier channel corrupts whole rows. There fbgemm computes every product, at any
row count, with 7-bit inputs (its ``reduce_range``, which cannot saturate), rows scaled as above.

All kernels dequantise exactly the same int8 weights, and the float model is untouched: a model
is quantised by replacing its layers (``quantize_linear_layers``).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from stenoflow.model.cpu_features import native_int8_dot

FEW_ROWS = 16  # at most this many rows take the fbgemm kernel (with 32-bit int8 sums)
_RANGE = 2  # the constant columns +1 and -1 that fix fbgemm's input range (see the module docstring)


@functools.cache
def _int8_dot() -> bool:
    """The CPU's answer to :func:`native_int8_dot`, read once per process."""
    return native_int8_dot()


def quantize_rows(weight: Tensor) -> tuple[Tensor, Tensor]:
    """Symmetric int8 per output row: ``weight ≈ q * scale[:, None]``; returns (q, scale)."""
    scale = weight.abs().amax(dim=1).clamp_min(1e-12) / 127.0
    q = torch.round(weight / scale[:, None]).clamp_(-127, 127).to(torch.int8)
    return q, scale.float()


def _prepack(q: Tensor, scale: Tensor) -> object:
    """fbgemm's packed weight for ``quantized.linear_dynamic`` (per-channel int8 scales), with zero
    weights for the two range columns after the input's own."""
    q = torch.cat([q, q.new_zeros(q.shape[0], _RANGE)], dim=1)
    with warnings.catch_warnings():  # quantized tensor types are deprecated, not removed, in 2.x
        warnings.simplefilter("ignore", UserWarning)
        zero = torch.zeros(q.shape[0], dtype=torch.long)
        qw = torch._make_per_channel_quantized_tensor(q, scale.double(), zero, 0)
        return torch.ops.quantized.linear_prepack(qw, None)


class Int8Linear(nn.Module):
    """y = x W^T + b with W stored as per-row int8; x quantised per row at run time."""

    def __init__(self, weight: Tensor, bias: Tensor | None, int8_dot: bool | None = None) -> None:
        """``int8_dot``: whether the CPU sums int8 products in 32 bits (default: read from it),
        which chooses the kernels (see the module docstring)."""
        super().__init__()
        q, scale = quantize_rows(weight.detach().float())
        self.out_features, self.in_features = q.shape
        # (in, out) view of the row-major int8 weight: the layout _int_mm reads fastest.
        self.register_buffer("q", q)
        self.register_buffer("scale", scale)
        self.register_buffer("bias", None if bias is None else bias.detach().float().clone())
        self.int8_dot = _int8_dot() if int8_dot is None else int8_dot
        # The rows are rescaled after the product, so the bias is added then.
        self._packed = _prepack(q, scale)
        self._ends = torch.tensor([[1.0, -1.0]])  # the range columns

    @classmethod
    def from_linear(cls, layer: nn.Linear) -> Int8Linear:
        return cls(layer.weight, layer.bias)

    def dequantized(self) -> Tensor:
        """The float weight these int8 values stand for (tests compare against it)."""
        return self.q.float() * self.scale[:, None]

    def forward(self, x: Tensor) -> Tensor:
        if self.takes_rows(x):
            return self.of_rows(QuantizedRows.of(x))
        shape = x.shape
        y = self._few_rows(x.reshape(-1, shape[-1]).float())
        return y.reshape(*shape[:-1], self.out_features)

    def takes_rows(self, x: Tensor) -> bool:
        """Whether this layer multiplies ``x`` as int8 rows (:class:`QuantizedRows`)."""
        return self.int8_dot and x.numel() // x.shape[-1] > FEW_ROWS

    def of_rows(self, x: QuantizedRows) -> Tensor:
        """The product with an input already rounded to int8 rows (for an input that
        ``takes_rows``): what ``forward`` gives for it."""
        y = torch._int_mm(x.q, self.q.t()).float().mul_(x.scale * self.scale)
        if self.bias is not None:
            y.add_(self.bias)
        return y.reshape(*x.shape[:-1], self.out_features)

    def _few_rows(self, flat: Tensor) -> Tensor:
        """fbgemm on rows (R, in) each divided by its largest magnitude, the range fixed by the two
        constant columns (see the module docstring): each row's result is its own alone. 8-bit
        inputs with 32-bit sums, else 7-bit ones."""
        top = torch.linalg.vector_norm(flat, float("inf"), dim=1, keepdim=True).clamp_min_(1e-12)
        scaled = torch.cat([flat / top, self._ends.expand(flat.shape[0], _RANGE)], dim=1)
        y = torch.ops.quantized.linear_dynamic(scaled, self._packed, not self.int8_dot)
        return y.mul_(top) if self.bias is None else torch.addcmul(self.bias, y, top)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8 per-row"


@dataclass(frozen=True)
class QuantizedRows:
    """An input (..., in) rounded to int8 with one scale per row, as :class:`Int8Linear` rounds
    the many rows it multiplies with ``torch._int_mm``. Layers that read the same input (every
    decoder layer's cross-attention keys and values read the encoder output) round it once."""

    q: Tensor  # (rows, in) int8
    scale: Tensor  # (rows, 1) float32
    shape: torch.Size  # the input's

    @classmethod
    def of(cls, x: Tensor) -> QuantizedRows:
        flat = x.reshape(-1, x.shape[-1]).float()
        # In place where a temporary would be as large as x: on 2 cores, allocating (and
        # faulting in) a fresh encoder-sized buffer costs more than the rounding itself.
        sx = flat.abs().amax(dim=1, keepdim=True).clamp_min_(1e-12).div_(127.0)
        return cls(torch.div(flat, sx).round_().to(torch.int8), sx, x.shape)


class SharedInput:
    """One input that several linear layers read: the int8 layers that take it as int8 rows
    share one rounding of it; any other layer just runs on it."""

    def __init__(self, x: Tensor) -> None:
        self.x = x
        self._rows: QuantizedRows | None = None

    def through(self, layer: nn.Module) -> Tensor:
        if isinstance(layer, Int8Linear) and layer.takes_rows(self.x):
            if self._rows is None:
                self._rows = QuantizedRows.of(self.x)
            return layer.of_rows(self._rows)
        return layer(self.x)


def fake_quantize_rows(x: Tensor) -> Tensor:
    """``x`` rounded to int8 with one scale per row, as :class:`Int8Linear` rounds its input,
    with the rounding passed straight through for gradients."""
    sx = x.abs().amax(dim=-1, keepdim=True).clamp_min(1e-12) / 127.0
    return x + (torch.round(x / sx) * sx - x).detach()


class TrainableInt8Linear(nn.Module):
    """An :class:`Int8Linear`'s arithmetic in float, differentiable in its input.

    Same int8 weights, same per-row rounding of the input; the product is summed in float32
    instead of int32, which changes nothing but the last bits. For optimising an input (a hush
    word) through the model as int8 runs it.
    """

    def __init__(self, layer: Int8Linear) -> None:
        super().__init__()
        self.register_buffer("weight", layer.dequantized())
        self.register_buffer("bias", None if layer.bias is None else layer.bias.clone())

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(fake_quantize_rows(x.float()), self.weight, self.bias)


def _replace_layers(module: nn.Module, kind: type[nn.Module], build: Callable[[nn.Module], nn.Module]) -> None:
    """Replace every ``kind`` layer below ``module`` (in place) by ``build(layer)``."""
    for name, child in list(module.named_children()):
        if isinstance(child, kind):
            setattr(module, name, build(child))
        else:
            _replace_layers(child, kind, build)


def trainable_int8_layers(module: nn.Module) -> None:
    """Replace every ``Int8Linear`` below ``module`` (in place) by its ``TrainableInt8Linear``."""
    _replace_layers(module, Int8Linear, TrainableInt8Linear)  # type: ignore[arg-type]


def bfloat16_layers(module: nn.Module) -> None:
    """Every weight and buffer below ``module`` in bfloat16 (in place), except layer norms, which
    keep float32 parameters and normalise in float32. For a stack that runs many rows at once (the
    encoder): on bfloat16 matrix units its products and attention run faster than int8's, and its
    rounding (8 bits of mantissa, no per-row scale) is finer than int8's for typical values."""
    module.bfloat16()
    for child in module.modules():
        if isinstance(child, nn.LayerNorm):
            child.float()


def quantize_linear_layers(module: nn.Module) -> None:
    """Replace every ``nn.Linear`` below ``module`` (in place) by its ``Int8Linear``."""
    _replace_layers(module, nn.Linear, Int8Linear.from_linear)  # type: ignore[arg-type]
