"""What decoding needs from a loaded model besides the network."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stenoflow.model.whisper import Whisper
    from stenoflow.tokenizer import Tokenizer


@dataclass(frozen=True)
class DecoderContext:
    """A network with its tokenizer, the tokens it may not write as speech, and the attention
    heads that follow the audio."""

    model: Whisper
    tokenizer: Tokenizer
    non_speech_tokens: tuple[int, ...]
    alignment_heads: tuple[tuple[int, int], ...] = ()  # (layer, head) pairs that follow the audio
