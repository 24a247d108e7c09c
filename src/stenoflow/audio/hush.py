"""The hush word: a learned 0.5 s of audio appended after speech instead of 30 s of padding.

Whisper was trained on 30 s windows; fed a shorter input it tends not to stop. A hush word is
an audio segment optimised (with the model frozen) so that the model ends its transcript when
it hears it, which lets the encoder run on the speech plus 0.5 s instead of a full window.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np
import torch

log = logging.getLogger(__name__)

HUSH_SAMPLES = 8000  # 0.5 s at 16 kHz
HUSH_SAMPLE_RATE = 16000


@dataclass(frozen=True)
class HushWord:
    samples: np.ndarray  # float32 (8000,)
    model: str  # the model it was trained for
    record: dict[str, object] = field(default_factory=dict)  # how it was trained

    def __post_init__(self) -> None:
        s = self.samples
        if not isinstance(s, np.ndarray) or s.ndim != 1 or s.dtype != np.float32:
            raise ValueError("a hush word is a 1-D float32 array of 16 kHz samples")
        if s.shape[0] != HUSH_SAMPLES:
            raise ValueError(f"a hush word has {HUSH_SAMPLES} samples (0.5 s at 16 kHz), got {s.shape[0]}")
        if not np.isfinite(s).all():
            raise ValueError("hush word samples must be finite")

    @classmethod
    def load(cls, path: Path | str) -> HushWord:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"hush word file not found: {path}")
        try:
            with np.load(path, allow_pickle=False) as f:
                samples = np.asarray(f["samples"])
                rate = int(f["sample_rate"])
                model = str(f["model"])
                record = json.loads(str(f["record"])) if "record" in f else {}
        except (KeyError, ValueError, OSError) as e:
            raise ValueError(f"{path}: not a hush word file (expected an .npz with samples, "
                             f"sample_rate, model): {e}") from e
        if rate != HUSH_SAMPLE_RATE:
            raise ValueError(f"{path}: hush word sampled at {rate} Hz; stenoflow needs {HUSH_SAMPLE_RATE} Hz")
        return cls(samples.astype(np.float32) if samples.dtype == np.float64 else samples, model, record)

    def save(self, path: Path | str) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp.npz")
        np.savez(tmp, samples=self.samples, sample_rate=np.int64(HUSH_SAMPLE_RATE), model=np.str_(self.model),
                 record=np.str_(json.dumps(self.record)))
        tmp.replace(path)
        return path

    def append(self, speech: np.ndarray) -> np.ndarray:
        """speech ⊕ hush word, the encoder input that replaces padding."""
        return np.concatenate([np.asarray(speech, dtype=np.float32), self.samples])

    def tensor(self, device: torch.device | str = "cpu") -> torch.Tensor:
        return torch.from_numpy(self.samples).to(device)


def hush_file_names(stem: str, compute: str) -> list[str]:
    """File names a hush word for ``stem`` run in ``compute`` may have, most specific first.

    A hush word is optimised through the model as it runs: one trained through the int8 model
    (``base.int8.npz``) is preferred there, and the precision-free one serves every other."""
    return [f"{stem}.{compute}.npz", f"{stem}.npz"]


def bundled_hush_path(model_name: str, compute: str = "float32") -> Path | None:
    """The hush word shipped with stenoflow for a named model run in ``compute``, if there is one."""
    folder = Path(str(resources.files("stenoflow") / "assets" / "hush"))
    return next((folder / n for n in hush_file_names(model_name, compute) if (folder / n).is_file()), None)


def find_hush(model_name: str, model_path: Path | None, compute: str = "float32") -> HushWord | None:
    """The hush word for a model run in ``compute``: ``hush[.COMPUTE].npz`` beside a model
    file/directory, else the bundled one."""
    candidates = []
    if model_path is not None:
        base = model_path if model_path.is_dir() else model_path.parent
        candidates += [base / n for n in hush_file_names("hush", compute)]
    bundled = bundled_hush_path(model_name, compute)
    if bundled is not None:
        candidates.append(bundled)
    for c in candidates:
        if c.is_file():
            hush = HushWord.load(c)
            log.info("hush word for %s: %s", model_name, c)
            return hush
    return None
