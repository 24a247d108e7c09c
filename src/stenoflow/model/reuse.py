"""A live stream's encoder passes, reused from one round to the next for the audio already heard.

A live round's buffer keeps its start for several rounds in a row (it is cut only when it grows
past its trim length) while a step of new audio arrives at its end: the encoder would compute
again every position it computed a round earlier. Whisper's encoder attends over the whole
window, so a position's output does change with audio after it; but less and less as that audio
moves away. So a round computes only its positions from ``overlap_s`` before the end of the
previous round's speech on (the new audio, the last ``overlap_s`` before it, and the margin where
the speech meets the silence), attending to the kept keys and values of the positions before
them (and of the silence after them, :mod:`.silence`); those earlier positions keep the outputs
and cross-attention keys and values of the pass that last computed them, which heard at least
``overlap_s`` of audio after them.

Not exact: a streaming trade, measured against the full pass in docs/benchmarks.md ("Encoder reuse"). The kept
pass is used only while the buffer keeps its start, its window length and (to within
``MEL_TOLERANCE``) its log-mel frames: a louder sound lifts the floor of the whole log-mel, and
then the window is computed anew.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from stenoflow.audio.features import HOP_LENGTH
from stenoflow.model.kv_cache import CrossKV
from stenoflow.model.whisper import EncodedTail

MEL_FRAMES_PER_POSITION = 2  # the encoder's second convolution halves the mel frames
SAMPLES_PER_POSITION = HOP_LENGTH * MEL_FRAMES_PER_POSITION
POSITIONS_PER_S = 50
MEL_TOLERANCE = 1e-3  # largest change of a kept log-mel frame (normalised units) that keeps the pass


@dataclass(frozen=True)
class KeptPass:
    """The first ``rows`` positions of a round's encoder pass: keys and values per layer, outputs,
    the decoder's cross keys and values, and the log-mel they were computed from."""

    offset: float  # absolute start of the buffer the round heard
    samples: int  # speech samples in its window
    frames: int  # mel frames of its window
    mel: Tensor  # (1, n_mels, 2 * rows)
    encoded: EncodedTail
    cross: CrossKV
    rows: int


class EncoderReuse:
    """One stream's kept encoder pass (see the module)."""

    def __init__(self, overlap_s: float) -> None:
        if not overlap_s > 0:
            raise ValueError(f"the reuse overlap must be > 0 seconds, got {overlap_s}")
        self.overlap_rows = math.ceil(overlap_s * POSITIONS_PER_S)
        self.kept: KeptPass | None = None
        self.reused_rows = 0  # positions taken from kept passes so far ...
        self.computed_rows = 0  # ... and computed

    def start(self, mel: Tensor, samples: int, offset: float) -> int:
        """How many first positions of the window ``mel`` (``samples`` of speech, the buffer
        starting at absolute ``offset``) the kept pass serves (0: none)."""
        kept = self.kept
        if kept is None or kept.offset != offset or kept.frames != mel.shape[-1] or samples < kept.samples:
            return 0
        start = min(kept.rows, math.ceil(kept.samples / SAMPLES_PER_POSITION) - self.overlap_rows)
        if start <= 0:
            return 0
        frames = MEL_FRAMES_PER_POSITION * start
        if float((mel[..., :frames] - kept.mel[..., :frames]).abs().max()) > MEL_TOLERANCE:
            return 0
        return start

    def keep(self, mel: Tensor, samples: int, offset: float, rows: int, start: int, kv: list[tuple[Tensor, Tensor]],
             out: Tensor, cross: CrossKV) -> None:
        """Keep the pass that computed positions ``start:rows`` (``kv``: their keys and values per
        layer; the kept pass's before them), with ``out`` and ``cross`` over its first ``rows``."""
        kept = self.kept
        if start and kept is not None:
            kv = [(torch.cat([k0[:, :, :start], k], dim=2), torch.cat([v0[:, :, :start], v], dim=2))
                  for (k0, v0), (k, v) in zip(kept.encoded.kv, kv)]
        else:  # views of the fused projection, which holds the queries too
            kv = [(k.contiguous(), v.contiguous()) for k, v in kv]
        self.reused_rows += start
        self.computed_rows += rows - start
        self.kept = KeptPass(offset, samples, mel.shape[-1], mel[..., : MEL_FRAMES_PER_POSITION * rows].clone(),
                             EncodedTail(tuple(kv), out[:, :rows]), cross, rows)

    def forget(self) -> None:
        self.kept = None
