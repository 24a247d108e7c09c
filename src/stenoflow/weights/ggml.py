"""Read and write whisper.cpp's legacy ggml model files (float32 and float16 tensors).

Layout: magic, eleven int32 hyperparameters, the mel filterbank, the vocabulary (token bytes),
then tensors until the end of the file, each with its dims in ggml's reversed order. Names are
openai-whisper's, as whisper.cpp's converter writes them; it stores conv biases as (D, 1),
which is accepted and reshaped. Quantised ggml types (q4_0, q8_0, ...) are refused with a clear
message: dequantising them is out of scope and would silently lose precision anyway.
The vocabulary and filterbank are kept in ``extra`` so a file can be rewritten unchanged.
"""

from __future__ import annotations

import logging
import struct
from pathlib import Path
from types import MappingProxyType

import numpy as np
import torch
from torch import Tensor

from stenoflow.model.dims import ModelDims
from stenoflow.weights.loaded import LoadedWeights
from stenoflow.weights.schema import check_state_dict, expected_shapes

log = logging.getLogger(__name__)

MAGIC = 0x67676D6C  # "ggml" as a little-endian uint32, so the file starts with b"lmgg"
MAGIC_BYTES = struct.pack("<I", MAGIC)
N_FFT_BINS = 201  # whisper's 400-point FFT keeps 201 frequency bins
_HPARAMS = (
    "n_vocab",
    "n_audio_ctx",
    "n_audio_state",
    "n_audio_head",
    "n_audio_layer",
    "n_text_ctx",
    "n_text_state",
    "n_text_head",
    "n_text_layer",
    "n_mels",
    "ftype",
)
_TTYPES = MappingProxyType({0: ("<f4", "float32"), 1: ("<f2", "float16")})
_CONV_BIASES = ("encoder.conv1.bias", "encoder.conv2.bias")


class _Reader:
    """Bounds-checked reads that say what was being read when the file ends early."""

    def __init__(self, data: bytes, source: str) -> None:
        self.data, self.pos, self.source = data, 0, source

    def take(self, n: int, what: str) -> int:
        start = self.pos
        if n < 0 or start + n > len(self.data):
            raise ValueError(
                f"{self.source}: truncated or corrupt ggml file: {what} needs {n} bytes at offset "
                f"{start}, but the file has {len(self.data)} bytes"
            )
        self.pos += n
        return start

    def ints(self, count: int, what: str) -> tuple[int, ...]:
        return struct.unpack_from(f"<{count}i", self.data, self.take(4 * count, what))

    def int(self, what: str) -> int:
        return self.ints(1, what)[0]


def is_ggml_file(path: Path) -> bool:
    """True when the file starts with the ggml magic (used by the registry to detect the format)."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == MAGIC_BYTES
    except OSError:
        return False


def load_ggml(path: Path) -> LoadedWeights:
    """Load a whisper.cpp ggml file as float32 tensors in openai names."""
    path = Path(path)
    source = str(path)
    if not path.is_file():
        raise ValueError(f"{source}: no such file; expected a whisper.cpp ggml model")
    data = path.read_bytes()
    r = _Reader(data, source)
    magic = struct.unpack_from("<I", data, r.take(4, "the magic"))[0]
    if magic != MAGIC:
        raise ValueError(
            f"{source}: bad magic 0x{magic:08x}; expected 0x{MAGIC:08x} (a whisper.cpp ggml file)"
        )
    hp = dict(zip(_HPARAMS, r.ints(len(_HPARAMS), "the hyperparameters"), strict=True))
    dims = ModelDims(**{k: v for k, v in hp.items() if k != "ftype"})
    n_mel, n_fft = r.ints(2, "the mel filter shape")
    if n_mel < 0 or n_fft < 0:
        raise ValueError(f"{source}: corrupt ggml file: mel filter shape ({n_mel}, {n_fft})")
    filters = np.frombuffer(
        data, "<f4", n_mel * n_fft, r.take(4 * n_mel * n_fft, "the mel filters")
    )
    mel_filters = filters.reshape(n_mel, n_fft).copy()
    n_tokens = r.int("the vocabulary size")
    vocabulary: list[bytes] = []
    for i in range(n_tokens):
        length = r.int(f"the length of token {i}")
        vocabulary.append(data[r.take(length, f"token {i}") : r.pos])

    want = expected_shapes(dims)
    state: dict[str, Tensor] = {}
    stored: set[str] = set()
    while r.pos < len(data):
        n_dims, name_len, ttype = r.ints(3, f"the header of tensor {len(state)}")
        if not 0 < n_dims <= 4:
            raise ValueError(f"{source}: corrupt ggml file: tensor {len(state)} has {n_dims} dims")
        shape = tuple(reversed(r.ints(n_dims, f"the dims of tensor {len(state)}")))
        name = data[r.take(name_len, f"the name of tensor {len(state)}") : r.pos].decode(
            "utf-8", "replace"
        )
        if ttype not in _TTYPES:
            raise ValueError(
                f"{source}: tensor {name} has ggml type {ttype}; only f32 (0) and f16 (1) are "
                f"supported, not quantised ggml models"
            )
        code, kind = _TTYPES[ttype]
        count = int(np.prod(shape, dtype=np.int64))
        if count < 0 or min(shape) < 0:
            raise ValueError(f"{source}: corrupt ggml file: tensor {name} has shape {shape}")
        raw = np.frombuffer(
            data, code, count, r.take(count * np.dtype(code).itemsize, f"the data of {name}")
        )
        if name in state:
            raise ValueError(f"{source}: tensor {name} appears twice")
        if name in _CONV_BIASES and len(shape) == 2 and shape[1] == 1:
            shape = shape[:1]
        state[name] = torch.from_numpy(raw.reshape(shape).astype(np.float32))
        if name in want:
            stored.add(kind)
    check_state_dict(dims, state, source)
    return LoadedWeights(
        dims=dims,
        state_dict=state,
        source=source,
        format="ggml",
        extra={
            "vocabulary": vocabulary,
            "mel_filters": mel_filters,
            "ftype": hp["ftype"],
            "stored_dtype": "+".join(sorted(stored)),
        },
    )


def _keep_f32(name: str, ndim: int) -> bool:
    """Tensors whisper.cpp expects in f32 even in an f16 file (its converter's rule)."""
    return ndim < 2 or name in _CONV_BIASES or name.endswith("positional_embedding")


def save_ggml(
    weights: LoadedWeights,
    path: Path,
    dtype: str = "float16",
    mel_filters: np.ndarray | None = None,
    vocabulary: list[bytes] | None = None,
) -> Path:
    """Write a whisper.cpp ggml file.

    ``mel_filters`` (n_mels, 201) and ``vocabulary`` (token bytes in id order) default to what
    a ggml source carried in ``extra``; failing that, zeros and the token ids as decimal
    strings, which keep the file loadable but make its vocabulary useless to whisper.cpp.
    """
    if dtype not in ("float16", "float32"):
        raise ValueError(f"dtype must be float16 or float32, got {dtype!r}")
    dims = weights.dims
    check_state_dict(dims, weights.state_dict, weights.source)
    if mel_filters is None:
        mel_filters = weights.extra.get("mel_filters")  # type: ignore[assignment]
    if mel_filters is None:
        mel_filters = np.zeros((dims.n_mels, N_FFT_BINS), np.float32)
    filters = np.ascontiguousarray(mel_filters, dtype="<f4")
    if filters.ndim != 2:
        raise ValueError(f"mel_filters must be 2-D (n_mels, n_fft), got shape {filters.shape}")
    if vocabulary is None:
        vocabulary = weights.extra.get("vocabulary")  # type: ignore[assignment]
    if vocabulary is None:
        vocabulary = [str(i).encode() for i in range(dims.n_vocab)]
    ftype = 1 if dtype == "float16" else 0
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(MAGIC_BYTES)
        hp = [*(getattr(dims, k) for k in _HPARAMS[:-1]), ftype]
        f.write(struct.pack(f"<{len(hp)}i", *hp))
        f.write(struct.pack("<2i", *filters.shape))
        f.write(filters.tobytes())
        f.write(struct.pack("<i", len(vocabulary)))
        f.writelines(struct.pack("<i", len(token)) + bytes(token) for token in vocabulary)
        for name in expected_shapes(dims):
            arr = weights.state_dict[name].detach().float().numpy()
            if name in _CONV_BIASES:
                arr = arr.reshape(-1, 1)
            ttype = 1 if dtype == "float16" and not _keep_f32(name, arr.ndim) else 0
            encoded = name.encode("utf-8")
            f.write(struct.pack("<3i", arr.ndim, len(encoded), ttype))
            f.write(struct.pack(f"<{arr.ndim}i", *reversed(arr.shape)))
            f.write(encoded)
            f.write(np.ascontiguousarray(arr, dtype=_TTYPES[ttype][0]).tobytes())
    log.info("wrote %s (%s)", path, dtype)
    return path
