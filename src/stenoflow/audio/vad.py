"""Voice activity: Silero VAD's speech probability for every 32 ms of 16 kHz audio.

The model is the TorchScript file that ships in the ``silero-vad`` package (MIT), run on the
torch that stenoflow already uses; it keeps a recurrent state across chunks, so one ``SileroVad``
follows one stream. Samples that do not fill a chunk wait for the next call.
"""

from __future__ import annotations

import importlib.util
import logging
import warnings
from pathlib import Path

import numpy as np
import torch

log = logging.getLogger(__name__)

SAMPLE_RATE = 16000
CHUNK = 512  # samples per probability (32 ms): the window Silero VAD takes at 16 kHz


def silero_model_path() -> Path:
    """The TorchScript Silero VAD model inside the installed ``silero-vad`` package. The package is
    located, not imported: importing it sets torch to one thread for the whole process."""
    spec = importlib.util.find_spec("silero_vad")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("voice activity detection needs the silero-vad package (a dependency of "
                           "stenoflow): pip install 'silero-vad>=5.1,<7'")
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "silero_vad.jit"
    if not path.is_file():
        raise RuntimeError(f"the silero-vad package has no model file at {path}; reinstall silero-vad")
    return path


class SileroVad:
    """Speech probabilities of a stream, one per ``CHUNK`` samples, in order."""

    def __init__(self, path: Path | None = None) -> None:
        with warnings.catch_warnings():  # torch deprecates TorchScript loading; the file is TorchScript
            warnings.simplefilter("ignore", DeprecationWarning)
            self.model = torch.jit.load(str(path or silero_model_path()), map_location="cpu").eval()
        self._pending = np.zeros(0, dtype=np.float32)
        self.model.reset_states()

    def reset(self) -> None:
        self.model.reset_states()
        self._pending = np.zeros(0, dtype=np.float32)

    @torch.inference_mode()
    def __call__(self, samples: np.ndarray) -> np.ndarray:
        """Probabilities (float32) of every chunk completed by ``samples``: ``(len(pending) + n) // CHUNK``."""
        audio = np.concatenate([self._pending, np.asarray(samples, dtype=np.float32)])
        n = audio.size // CHUNK
        self._pending = audio[n * CHUNK :].copy()
        if n == 0:
            return np.zeros(0, dtype=np.float32)
        chunks = torch.from_numpy(np.ascontiguousarray(audio[: n * CHUNK])).view(n, CHUNK)
        return np.array([float(self.model(chunk, SAMPLE_RATE)) for chunk in chunks], dtype=np.float32)
