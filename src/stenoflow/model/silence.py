"""The encoder on a short input padded with silence, computing only the speech's positions.

A live round hears a few seconds of speech padded with silence to a window of 15 s or more (see
``Model.encoder_input``): two thirds of the encoder's positions and more are silence. Every
padded window of a stream has the same silence after its speech, a constant log-mel column (the
window's floor, 80 dB under its loudest bin), and what the encoder makes of that silence barely
depends on the few seconds of speech before it. So the encoder runs on the speech and a short
margin after it only, and takes the silence's self-attention keys and values (each layer) and
outputs from one pass over a window of silence alone, of the same length and floor, kept here.
The speech's positions still attend to the whole window, as in the full pass; they differ from it
only through the silence they attend to, which in the full pass had also heard the speech.

The pass over the silence is the cost of a full encoder pass, paid once per (floor, window
length): a stream's floor moves with the loudest sound in its buffer, so floors are rounded to
``FLOOR_STEP`` and the last few kept. Not exact: a streaming benchmark trade (see docs/live-captions.md,
"The silence cache"), which ``StreamOptions.silence_cache`` turns off.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict

import torch
from torch import Tensor

from stenoflow.audio.features import HOP_LENGTH
from stenoflow.model.whisper import AudioEncoder, EncodedTail

MEL_FRAMES_PER_POSITION = 2  # the encoder's second convolution halves the mel frames
EXACT_AFTER = 25  # positions (20 ms each) after the speech computed in full: where speech and silence meet
FLOOR_STEP = 0.05  # log-mel units (a quarter of a bel): silences this close share a pass
BUDGET_BYTES = 256 << 20  # most memory the kept passes may take ...
MIN_KEPT = 4  # ... unless fewer than this many fit (a large model's pass: 250 MB and more)


class SilenceCache:
    """Encoder passes over windows of silence, by (floor, mel frames), most recent kept."""

    def __init__(self, encoder: AudioEncoder, budget_bytes: int = BUDGET_BYTES, min_kept: int = MIN_KEPT) -> None:
        self.encoder = encoder
        self.budget = budget_bytes
        # A stream's floor moves between a few values; with one pass kept, a model whose pass
        # fills the budget would pay a full pass at nearly every move, more than no cache.
        self.min_kept = max(1, min_kept)
        self._tails: OrderedDict[tuple[int, int, int], EncodedTail] = OrderedDict()
        self._lock = threading.Lock()  # sessions on several threads may share a model
        self.passes = 0  # passes over silence run so far

    def encode(self, mel: Tensor, samples: int, spent: list[float] | None = None) -> Tensor:
        """Encoder output (1, frames/2, D) of the log-mel window ``mel`` (1, n_mels, frames) whose
        first ``samples`` audio samples are speech and the rest silence; ``spent`` collects the
        FLOPs of each pass run (the pass over silence, when none is kept for this window)."""
        positions = (mel.shape[-1] + 1) // MEL_FRAMES_PER_POSITION
        rows = math.ceil(samples / (HOP_LENGTH * MEL_FRAMES_PER_POSITION)) + EXACT_AFTER
        if rows >= positions:
            return self.encoder(mel, spent=spent)
        return self.encoder(mel, rows, self.tail(mel, spent), spent=spent)

    def tail(self, mel: Tensor, spent: list[float] | None = None) -> EncodedTail:
        """The pass over a window of ``mel``'s length and shape that holds only its last column
        (its FLOPs added to ``spent`` when it runs)."""
        step = round(float(mel[0, :, -1].max()) / FLOOR_STEP)
        key = (step, mel.shape[1], mel.shape[-1])
        with self._lock:
            found = self._tails.get(key)
            if found is not None:
                self._tails.move_to_end(key)
                return found
        silence = torch.full_like(mel, step * FLOOR_STEP)
        keep: list[tuple[Tensor, Tensor]] = []
        out = self.encoder(silence, keep=keep, spent=spent)
        # Each layer's keys and values are views of its fused projection's output, which holds
        # the queries too: copied out, the pass keeps only what its budget counts.
        tail = EncodedTail(tuple((k.contiguous(), v.contiguous()) for k, v in keep), out)
        with self._lock:
            self.passes += 1
            self._tails[key] = tail
            while len(self._tails) > self.min_kept and sum(t.nbytes for t in self._tails.values()) > self.budget:
                self._tails.popitem(last=False)
        return tail
