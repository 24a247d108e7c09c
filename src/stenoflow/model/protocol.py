"""What the layers above the network need of a loaded model.

``stenoflow.api.Model`` is the one implementation. Decoding, streaming and voice-command code
types its model as ``SpeechModel`` so that it depends on this small protocol, not on the API that
composes it: the API sits above everything it builds on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np
    from torch import Tensor

    from stenoflow.audio.hush import HushWord
    from stenoflow.model.context import DecoderContext
    from stenoflow.model.dims import ModelDims
    from stenoflow.model.kv_cache import CrossKV
    from stenoflow.model.medusa import MedusaHeads
    from stenoflow.model.reuse import EncoderReuse
    from stenoflow.model.whisper import Whisper
    from stenoflow.tokenizer import Tokenizer


class SpeechModel(Protocol):
    """A loaded Whisper model: its network, tokenizer and hush word, and the passes over audio."""

    name: str
    compute: str
    dims: ModelDims
    whisper: Whisper
    tokenizer: Tokenizer
    context: DecoderContext
    hush: HushWord | None
    alignment_heads: list[tuple[int, int]] | tuple[tuple[int, int], ...]

    @property
    def is_multilingual(self) -> bool: ...

    def describe(self) -> dict[str, object]:
        """Name, source, format, compute type, device and dimensions (for run records)."""
        ...

    def features(self, audio: np.ndarray | Tensor, padding: int = 0) -> Tensor:
        """Log-mel (n_mels, frames) of 16 kHz mono samples, with ``padding`` zero samples appended."""
        ...

    def encoder_input(self, samples: np.ndarray, hush: bool = True, window_s: float = 30.0) -> Tensor:
        """The log-mel the encoder hears for a short input (hush word or a window of silence)."""
        ...

    def encode(self, mel: Tensor, speech_samples: int | None = None, spent: list[float] | None = None) -> Tensor:
        """Encoder output (1, frames/2, D) of a log-mel window."""
        ...

    def encode_cross(self, mel: Tensor, speech_samples: int | None = None, spent: list[float] | None = None,
                     reuse: EncoderReuse | None = None, offset: float = 0.0) -> CrossKV:
        """The decoder's cross-attention keys and values over ``encode``'s output."""
        ...

    def detect_language_mel(self, mel: Tensor) -> tuple[str, dict[str, float]]:
        """Most likely language of a log-mel window and every language's probability."""
        ...

    def medusa(self, kind_or_path: str = "linear") -> MedusaHeads:
        """This model's Medusa heads, ready to draft."""
        ...

    def draft_model(self, name_or_path: str) -> SpeechModel:
        """A smaller model that drafts tokens for this one."""
        ...
