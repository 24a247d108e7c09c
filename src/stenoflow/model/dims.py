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

    def encoder_flops(self, mel_frames: int, rows: int | None = None) -> float:
        """Multiply-add FLOPs (2 per MAC) of one encoder pass over a window of ``mel_frames``
        log-mel frames that computes its first ``rows`` positions (None: all of them) attending to
        every position of the window (see :mod:`stenoflow.model.silence`).

        conv1 (k=3) over the mel frames, conv2 (k=3, stride 2) down to the positions, then per
        layer: Q/K/V/out projections, attention scores and values, and the 4x MLP. Norms, softmax
        and GELU are left out (they are a rounding error next to the matrix products)."""
        d, n = self.n_audio_state, (mel_frames + 1) // 2
        r = n if rows is None else min(rows, n)
        conv = 2 * min(mel_frames, 2 * r) * self.n_mels * d * 3 + 2 * r * d * d * 3
        layer = 2 * r * d * d * 4 + 2 * r * n * d * 2 + 2 * r * d * (4 * d) * 2
        return float(conv + self.n_audio_layer * layer)

    def to_dict(self) -> dict[str, int]:
        return asdict(self)
