"""The byte layout of a CTranslate2 ``model.bin``: parsing it into a variable table, and
encoding variables back. Kept apart from the Whisper name mapping in ``ctranslate2.py`` so each
stays small; nothing here knows about Whisper beyond the expected spec name.

Layout (little-endian): uint32 version; spec name (uint16 length incl. NUL, bytes); uint32
revision; uint32 variable count; per variable: name, uint8 rank, rank x uint32 shape, uint8
dtype id, uint32 byte count, raw bytes; then uint32 alias count and (alias, target) names.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

SUPPORTED_VERSIONS = (5, 6)
SPEC_NAME = "WhisperSpec"
# CT2 DataType ids -> (numpy dtype of the raw bytes, name). bfloat16 is read as raw uint16.
DTYPES = MappingProxyType(
    {
        0: ("<f4", "float32"),
        1: ("i1", "int8"),
        2: ("<i2", "int16"),
        3: ("<i4", "int32"),
        4: ("<f2", "float16"),
        5: ("<u2", "bfloat16"),
    }
)
DTYPE_IDS = MappingProxyType({name: i for i, (_, name) in DTYPES.items()})


@dataclass(frozen=True)
class RawVar:
    """Where one variable's bytes sit in the file; converted lazily so nothing is copied twice."""

    shape: tuple[int, ...]
    dtype_id: int
    offset: int
    nbytes: int


class Reader:
    """Bounds-checked little-endian reads that name the file and field when the file is short."""

    def __init__(self, data: bytes, source: str) -> None:
        self.data = data
        self.pos = 0
        self.source = source

    def take(self, n: int, what: str) -> int:
        start = self.pos
        if n < 0 or start + n > len(self.data):
            raise ValueError(
                f"{self.source}: truncated or corrupt CTranslate2 model: reading {what} needs "
                f"{n} bytes at offset {start}, but the file has {len(self.data)} bytes"
            )
        self.pos += n
        return start

    def unpack(self, fmt: str, what: str) -> int:
        size = struct.calcsize(fmt)
        return struct.unpack_from(fmt, self.data, self.take(size, what))[0]

    def string(self, what: str) -> str:
        n = self.unpack("<H", f"the length of {what}")
        raw = self.data[self.take(n, what) : self.pos]
        try:
            return raw.rstrip(b"\0").decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(
                f"{self.source}: corrupt CTranslate2 model: {what} is not UTF-8"
            ) from e


def parse_model_bin(data: bytes, source: str) -> tuple[int, dict[str, RawVar], dict[str, str]]:
    """Index a model.bin: (binary version, variables by name, aliases). Validates every size."""
    r = Reader(data, source)
    version = r.unpack("<I", "the binary version")
    if version not in SUPPORTED_VERSIONS:
        raise ValueError(
            f"{source}: unsupported CTranslate2 binary version {version}; expected one of "
            f"{SUPPORTED_VERSIONS} (re-convert the model with ctranslate2 >= 3)"
        )
    spec = r.string("the spec name")
    if spec != SPEC_NAME:
        raise ValueError(f"{source}: this CTranslate2 model is a {spec!r}, expected {SPEC_NAME!r}")
    r.unpack("<I", "the spec revision")
    count = r.unpack("<I", "the variable count")
    variables: dict[str, RawVar] = {}
    for i in range(count):
        name = r.string(f"the name of variable {i}")
        rank = r.unpack("<B", f"the rank of {name}")
        shape = struct.unpack_from(f"<{rank}I", data, r.take(4 * rank, f"the shape of {name}"))
        dtype_id = r.unpack("<B", f"the dtype of {name}")
        if dtype_id not in DTYPES:
            raise ValueError(
                f"{source}: variable {name} has unknown dtype id {dtype_id}; expected 0-5"
            )
        nbytes = r.unpack("<I", f"the byte count of {name}")
        itemsize = np.dtype(DTYPES[dtype_id][0]).itemsize
        if nbytes != int(np.prod(shape, dtype=np.int64)) * itemsize:
            raise ValueError(
                f"{source}: corrupt CTranslate2 model: {name} has shape {tuple(shape)} of "
                f"{DTYPES[dtype_id][1]} but {nbytes} bytes"
            )
        variables[name] = RawVar(
            tuple(shape), dtype_id, r.take(nbytes, f"the data of {name}"), nbytes
        )
    aliases: dict[str, str] = {}
    n_alias = r.unpack("<I", "the alias count")
    for i in range(n_alias):
        alias = r.string(f"alias {i}")
        aliases[alias] = r.string(f"the target of alias {alias}")
    if r.pos != len(data):
        raise ValueError(
            f"{source}: corrupt CTranslate2 model: {len(data) - r.pos} unexpected bytes "
            f"after the aliases"
        )
    return version, variables, aliases


def raw_array(data: bytes, var: RawVar) -> np.ndarray:
    code = DTYPES[var.dtype_id][0]
    count = var.nbytes // np.dtype(code).itemsize
    return np.frombuffer(data, dtype=code, count=count, offset=var.offset).reshape(var.shape)


def to_float32(data: bytes, name: str, variables: dict[str, RawVar]) -> np.ndarray:
    """One variable as a fresh float32 array, dequantising int8/int16 with its ``_scale`` row."""
    var = variables[name]
    arr = raw_array(data, var)
    kind = DTYPES[var.dtype_id][1]
    if kind == "bfloat16":
        return (arr.astype(np.uint32) << 16).view(np.float32)
    if kind in ("int8", "int16"):
        scale_var = variables.get(f"{name}_scale")
        if scale_var is None:
            raise ValueError(f"corrupt CTranslate2 model: quantised {name} has no {name}_scale")
        scale = to_float32(data, f"{name}_scale", variables)
        if scale.size not in (1, var.shape[0]):
            raise ValueError(
                f"corrupt CTranslate2 model: {name}_scale has {scale.size} values for "
                f"{var.shape[0]} rows"
            )
        return arr.astype(np.float32) / scale.reshape((-1,) + (1,) * (arr.ndim - 1))
    return arr.astype(np.float32)


def scalar_value(data: bytes, variables: dict[str, RawVar], name: str, source: str) -> int:
    var = variables.get(name)
    if var is None or var.shape != ():
        raise ValueError(f"{source}: CTranslate2 Whisper model lacks the scalar {name}")
    return int(raw_array(data, var).reshape(()).item())


def encode_string(s: str) -> bytes:
    raw = s.encode("utf-8") + b"\0"
    return struct.pack("<H", len(raw)) + raw


def encode_variable(name: str, arr: np.ndarray, dtype_id: int) -> bytes:
    head = encode_string(name) + struct.pack(f"<B{arr.ndim}I", arr.ndim, *arr.shape)
    payload = np.ascontiguousarray(arr).tobytes()
    return head + struct.pack("<BI", dtype_id, len(payload)) + payload
