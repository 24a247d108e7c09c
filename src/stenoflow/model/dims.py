"""Model hyperparameters, in the names openai-whisper uses for them."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class ModelDims:
    n_mels: int  # mel bins of the frontend: 80, or 128 for large-v3
    n_audio_ctx: int  # encoder positions: 1500 for 30 s
    n_audio_state: int  # encoder width
    n_audio_head: int
    n_audio_layer: int
    n_vocab: int  # 51864 for English-only models, 51865 multilingual, 51866 large-v3
    n_text_ctx: int  # decoder positions: 448
    n_text_state: int  # decoder width
    n_text_head: int
    n_text_layer: int

    @property
    def is_multilingual(self) -> bool:
        return self.n_vocab >= 51865

    @property
    def num_languages(self) -> int:
        # 99 languages, plus Cantonese from large-v3 on (one more vocabulary entry).
        return self.n_vocab - 51765 - int(self.is_multilingual)

    def to_dict(self) -> dict[str, int]:
        return asdict(self)
