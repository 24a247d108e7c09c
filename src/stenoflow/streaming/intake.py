"""Audio that arrived and waits for a round, and when the next round is due.

Both session kinds take samples the same way: a push is checked (16 kHz only, valid samples)
and queued; a round is due once ``step`` seconds arrived since the last round took its
snapshot (or, before the first round, once ``first_s`` arrived); a round moves what it takes
from the queue into its buffer, which marks its snapshot.
"""

from __future__ import annotations

import numpy as np

from stenoflow.audio.io import validate_samples
from stenoflow.streaming.buffer import SAMPLE_RATE, AudioBuffer


class Intake:
    def __init__(self) -> None:
        self._chunks: list[np.ndarray] = []
        self.pending = 0  # samples arrived, not yet taken by a round
        self.arrived = 0  # samples pushed so far
        self._snapshot_at: int | None = None  # samples arrived when the last round took its snapshot
        self.closed = False  # the stream ended: nothing more may arrive

    def accept(self, samples: np.ndarray, sample_rate: int) -> None:
        """Queue a push. Accepts float (or int16 PCM) samples, 1-D mono or (n, channels). Only
        16 kHz is taken: resampling chunk by chunk would click at every chunk edge, so other
        rates are rejected. A rejected chunk (wrong rate, dtype or shape, NaN) changes nothing."""
        if self.closed:
            raise RuntimeError("push() after finish(): start a new session for a new stream")
        if sample_rate != SAMPLE_RATE:
            raise ValueError(f"streaming sessions take 16000 Hz samples, got sample_rate={sample_rate}; "
                             "resample the stream to 16 kHz before pushing")
        chunk = validate_samples(samples)
        if chunk.size:
            self._chunks.append(chunk)
            self.pending += chunk.size
            self.arrived += chunk.size

    def due(self, step_s: float, first_s: float) -> bool:
        """Whether a round is due: audio waits, and enough of it arrived since the last snapshot."""
        if not self.pending:
            return False
        if self._snapshot_at is None:
            return self.arrived >= first_s * SAMPLE_RATE
        return self.arrived - self._snapshot_at >= step_s * SAMPLE_RATE

    def take(self, limit: int, buffer: AudioBuffer) -> None:
        """Move up to ``limit`` waiting samples into ``buffer``; the round's snapshot is taken."""
        while self._chunks and limit > 0:
            chunk = self._chunks[0]
            if chunk.size <= limit:
                self._chunks.pop(0)
            else:
                self._chunks[0] = chunk[limit:]
                chunk = chunk[:limit]
            buffer.append(chunk)
            self.pending -= chunk.size
            limit -= chunk.size
        self._snapshot_at = self.arrived - self.pending
