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

The decoder's cross-attention keys and values are projected row by row (int8 layers round each
row with a scale of its own), so those of the silence's positions are kept too, projected once
from the kept output: a round projects its speech's positions only (``encode_cross``), and gets
what projecting the whole window gives.

The pass over the silence is the cost of a full encoder pass, paid once per (floor, window
length): a stream's floor moves with the loudest sound in its buffer, so floors are rounded to
``FLOOR_STEP`` and the last few kept. Not exact: a streaming benchmark trade (see docs/benchmarks.md,
"The silence cache"), which ``StreamOptions.silence_cache`` turns off.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict

import torch
from torch import Tensor

from stenoflow.model.kv_cache import CrossKV
from stenoflow.model.reuse import MEL_FRAMES_PER_POSITION, SAMPLES_PER_POSITION, EncoderReuse
from stenoflow.model.whisper import AudioEncoder, EncodedTail, TextDecoder

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
        self._cross: dict[int, CrossKV] = {}  # by id of a kept tail: its positions' cross keys and values
        self._lock = threading.Lock()  # sessions on several threads may share a model
        self.passes = 0  # passes over silence run so far

    def encode(self, mel: Tensor, samples: int, spent: list[float] | None = None) -> Tensor:
        """Encoder output (1, frames/2, D) of the log-mel window ``mel`` (1, n_mels, frames) whose
        first ``samples`` audio samples are speech and the rest silence; ``spent`` collects the
        FLOPs of each pass run (the pass over silence, when none is kept for this window)."""
        rows, positions = self._rows(mel, samples)
        if rows >= positions:
            return self.encoder(mel, spent=spent)
        return self.encoder(mel, rows, self.tail(mel, spent), spent=spent)

    def encode_cross(self, mel: Tensor, samples: int, decoder: TextDecoder, dtype: torch.dtype,
                     spent: list[float] | None = None, reuse: EncoderReuse | None = None,
                     offset: float = 0.0) -> CrossKV:
        """``decoder``'s cross-attention keys and values over ``encode``'s output (in ``dtype``),
        projected for the speech's positions only: the silence's come from its kept pass. With
        ``reuse`` (a stream's, whose buffer starts at absolute ``offset``), the positions its kept
        pass serves come from there too (:mod:`.reuse`), and this pass is kept in its place."""
        rows, positions = self._rows(mel, samples)
        if rows >= positions:
            if reuse is not None:
                reuse.forget()
            return decoder.cross_kv(self.encoder(mel, spent=spent).to(dtype))
        tail = self.tail(mel, spent)
        start = reuse.start(mel, samples, offset) if reuse is not None else 0
        kept = reuse.kept if reuse is not None and start else None
        keep: list[tuple[Tensor, Tensor]] | None = [] if reuse is not None else None
        out = self.encoder(mel, rows, tail, keep=keep, spent=spent,
                           head=kept.encoded if kept is not None else None, start=start)
        speech = decoder.cross_kv(out[:, start:rows].to(dtype))
        if kept is not None:  # the kept pass's positions first
            speech = kept.cross.first(start).then(speech, 0, rows - start)
        cross = speech.then(self._silence_cross(tail, decoder, dtype), rows, positions)
        if reuse is not None and keep is not None:
            reuse.keep(mel, samples, offset, rows, start, keep, out, cross.first(rows))
        return cross

    def _silence_cross(self, tail: EncodedTail, decoder: TextDecoder, dtype: torch.dtype) -> CrossKV:
        """``decoder``'s cross keys and values over the kept pass ``tail``, projected once."""
        with self._lock:
            kept = self._cross.get(id(tail))
        if kept is None or kept.k[0].dtype != dtype:
            kept = decoder.cross_kv(tail.out.to(dtype))
            with self._lock:
                if any(t is tail for t in self._tails.values()):
                    self._cross[id(tail)] = kept
        return kept

    @staticmethod
    def _rows(mel: Tensor, samples: int) -> tuple[int, int]:
        """Positions of ``mel``'s window computed for its first ``samples`` of speech, and all."""
        positions = (mel.shape[-1] + 1) // MEL_FRAMES_PER_POSITION
        return math.ceil(samples / SAMPLES_PER_POSITION) + EXACT_AFTER, positions

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
            while len(self._tails) > self.min_kept and self._kept_bytes() > self.budget:
                _, gone = self._tails.popitem(last=False)
                self._cross.pop(id(gone), None)
        return tail

    def _kept_bytes(self) -> int:
        cross = sum(t.nbytes for kv in self._cross.values() for t in (*kv.k, *kv.v))
        return sum(t.nbytes for t in self._tails.values()) + cross
