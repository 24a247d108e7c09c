"""The network in a compute type: built from float weights, or as an empty skeleton that a stored
build fills without computing anything.

Building from weights costs seconds on every start (the layers' random initialisation, the fused
projections, int8 rounding, fbgemm's packing). A built network is therefore stored once
(:mod:`stenoflow.weights.built`) and later starts only lay its tensors into a skeleton built on
the meta device, which allocates and initialises nothing. Stored int8 layers pack their weights
for fbgemm, which only the few-row kernel reads (:class:`StoredInt8Linear`); on a CPU with 32-bit
int8 sums the encoder never takes it, so its layers are never packed. The decoder's packing
runs on two threads of its own from the load on (:func:`pack_ahead`), beside the audio's decoding
and the encoder's first pass.
"""

from __future__ import annotations

import threading

import torch
from torch import Tensor, nn

from stenoflow.model.compute import FLOAT16, INT8, INT8_BFLOAT16
from stenoflow.model.dims import ModelDims
from stenoflow.model.quant import (
    Int8Linear,
    _int8_dot,
    _prepack,
    bfloat16_layers,
    quantize_linear_layers,
)
from stenoflow.model.whisper import Whisper

# Tensors a built network holds outside its parameters and buffers.
ATTRIBUTES = ("decoder.proj_t",)


def quantize_int8(model: Whisper, part: nn.Module | None = None) -> Whisper:
    """int8 weights per output channel, activations per row at run time (as CTranslate2 does),
    for every linear layer of ``part`` (default: the whole model) and the tied output projection
    (see :mod:`stenoflow.model.quant`)."""
    decoder = model.decoder
    decoder.logits_proj = Int8Linear(decoder.token_embedding.weight, None)
    decoder.proj_t = None
    quantize_linear_layers(model if part is None else part)
    return model


def build_whisper(dims: ModelDims, state_dict: dict[str, Tensor], compute: str) -> Whisper:
    """The network of ``state_dict`` (openai-whisper names) in ``compute``, on the CPU."""
    whisper = Whisper(dims, device="meta")  # no allocation and no random initialisation: the weights replace it
    whisper.load_state_dict({k: v.float().contiguous() for k, v in state_dict.items()}, strict=True, assign=True)
    whisper.eval().requires_grad_(False).fuse()
    if compute == INT8:
        whisper = quantize_int8(whisper)
    elif compute == INT8_BFLOAT16:
        bfloat16_layers(whisper.encoder)
        whisper = quantize_int8(whisper, whisper.decoder)
    elif compute == FLOAT16:
        whisper = whisper.half()
    return whisper


class StoredInt8Linear(Int8Linear):
    """An :class:`Int8Linear` whose int8 weights, scales and bias come from a stored build
    (assigned by :func:`fill`), not from rounding a float weight. fbgemm's packed weight, which
    only the few-row kernel reads, is made once, on first use or ahead of it (:func:`pack_ahead`):
    a thread that needs it while another makes it waits for that one."""

    def __init__(self, out_features: int, in_features: int, bias: bool, int8_dot: bool | None = None) -> None:
        nn.Module.__init__(self)
        self.out_features, self.in_features = out_features, in_features
        meta = torch.device("meta")
        self.register_buffer("q", torch.empty(out_features, in_features, dtype=torch.int8, device=meta))
        self.register_buffer("scale", torch.empty(out_features, device=meta))
        self.register_buffer("bias", torch.empty(out_features, device=meta) if bias else None)
        self.int8_dot = _int8_dot() if int8_dot is None else int8_dot
        self._packing: object | None = None
        self._packing_lock = threading.Lock()
        self._ends = torch.tensor([[1.0, -1.0]])  # the range columns (see Int8Linear)

    @property
    def _packed(self) -> object:  # type: ignore[override]
        return self.pack()

    def pack(self) -> object:
        """fbgemm's packed weight, made now if it has not been."""
        packed = self._packing
        if packed is None:
            with self._packing_lock:
                packed = self._packing
                if packed is None:
                    packed = self._packing = _prepack(self.q, self.scale)
        return packed

    @property
    def packed(self) -> bool:
        """Whether fbgemm's packed weight has been made."""
        return self._packing is not None


def skeleton(dims: ModelDims, compute: str) -> Whisper:
    """:func:`build_whisper`'s network with every tensor on the meta device: the modules of a
    build in ``compute``, for :func:`fill` to give a stored build's tensors."""
    whisper = Whisper(dims, device="meta").eval().requires_grad_(False).fuse()
    if compute in (INT8, INT8_BFLOAT16):
        decoder = whisper.decoder
        decoder.logits_proj = StoredInt8Linear(dims.n_vocab, dims.n_text_state, bias=False)
        decoder.proj_t = None
        _stored_int8_layers(whisper if compute == INT8 else decoder)
    return whisper


def pack_ahead(whisper: Whisper) -> list[threading.Thread]:
    """Start packing the stored int8 layers of ``whisper``'s decoder while the encoder runs, on two
    threads of their own: the projection onto the vocabulary (the largest, some two thirds of the
    work) on one, the layers in the order decoding first reads them on the other. Returns the
    threads started (none if nothing is left to pack). The encoder's layers (which take the
    few-row kernel only where the CPU has no 32-bit int8 sums) are needed at once and are packed
    where they are used."""
    layers = [m for m in whisper.decoder.modules() if isinstance(m, StoredInt8Linear) and not m.packed]
    vocabulary = [m for m in layers if m is whisper.decoder.logits_proj]
    rest = [m for m in layers if m is not whisper.decoder.logits_proj]

    def pack(group: list[StoredInt8Linear]) -> None:
        for layer in group:
            layer.pack()

    # Not daemons: the interpreter waits for them at exit (well under a second) rather than stop
    # them inside fbgemm, which aborts the process.
    threads = [threading.Thread(target=pack, args=(group,), name="stenoflow-pack") for group in (vocabulary, rest) if group]
    for thread in threads:
        thread.start()
    return threads


def _stored_int8_layers(module: nn.Module) -> None:
    for name, child in list(module.named_children()):
        if isinstance(child, nn.Linear):
            setattr(module, name, StoredInt8Linear(child.out_features, child.in_features, child.bias is not None))
        else:
            _stored_int8_layers(child)


def tensors_of(whisper: Whisper) -> dict[str, Tensor]:
    """Every tensor a built network holds, by name: what :func:`fill` gives a skeleton."""
    held: dict[str, Tensor] = dict(whisper.named_parameters())
    held.update((name, b) for name, b in whisper.named_buffers() if b is not None)
    for name in ATTRIBUTES:
        value = _owner(whisper, name)[0].__dict__.get(name.rsplit(".", 1)[1])
        if isinstance(value, Tensor):
            held[name] = value
    return {name: t.detach() for name, t in held.items()}


def fill(whisper: Whisper, tensors: dict[str, Tensor]) -> Whisper:
    """Give the skeleton ``whisper`` the tensors of a stored build (``tensors_of`` of one).
    ValueError where they do not make the skeleton whole: a missing, extra or misshapen tensor."""
    expected = tensors_of(whisper)
    missing, extra = sorted(expected.keys() - tensors.keys()), sorted(tensors.keys() - expected.keys())
    if missing or extra:
        raise ValueError(f"stored build does not fit the network: missing {missing[:5]}, extra {extra[:5]}")
    for name, tensor in tensors.items():
        want = expected[name]
        if tensor.shape != want.shape:
            raise ValueError(f"stored tensor {name} has shape {tuple(tensor.shape)}, not {tuple(want.shape)}")
        owner, leaf = _owner(whisper, name)
        if leaf in owner._parameters:
            owner._parameters[leaf] = nn.Parameter(tensor, requires_grad=False)
        elif leaf in owner._buffers:
            owner._buffers[leaf] = tensor
        else:
            setattr(owner, leaf, tensor)
    return whisper


def to_device(whisper: Whisper, device: torch.device) -> Whisper:
    """``whisper`` on ``device``, with the tensors it holds outside its parameters and buffers
    (the transposed output projection: ``Module.to`` leaves it) on the device and in the dtype of
    the embedding it copies."""
    whisper = whisper.to(device)
    decoder = whisper.decoder
    if decoder.proj_t is not None:
        decoder.proj_t = decoder.proj_t.to(device, decoder.token_embedding.weight.dtype)
    return whisper


def _owner(whisper: Whisper, name: str) -> tuple[nn.Module, str]:
    path, _, leaf = name.rpartition(".")
    return (whisper.get_submodule(path) if path else whisper), leaf
