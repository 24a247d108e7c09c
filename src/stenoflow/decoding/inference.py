"""The decoder's forward pass over a growing token batch, with its caches."""

from __future__ import annotations

from torch import Tensor

from stenoflow.model.kv_cache import CrossKV
from stenoflow.model.whisper import Whisper


class Inference:
    """Feeds only the tokens the cache has not seen yet, so callers pass whole sequences.

    ``forward_passes`` counts decoder calls: later strategies (reference verification,
    speculative decoding) are judged by how many they save. ``pass_rows`` holds the batch rows
    of each call after the prompt, the beam width beam pruning reduces.
    """

    def __init__(self, model: Whisper, cross: CrossKV, batch: int, max_len: int | None = None) -> None:
        assert cross.k[0].shape[0] == 1, "one audio window per decoding"
        self.model = model
        self.cross = cross
        self.cache = model.new_cache(batch, max_len)
        self.forward_passes = 0
        self.pass_rows: list[int] = []

    @property
    def length(self) -> int:
        return self.cache.length

    def prefill(self, tokens: Tensor) -> Tensor:
        """Run the shared prompt (1, T) once and copy its keys/values to every row.

        Returns the logits of every prompt position (1, T, V): the no-speech probability is read
        at the start-of-transcript position.
        """
        assert tokens.shape[0] == 1 and self.cache.length == 0
        one = self.model.new_cache(1, tokens.shape[1])
        logits, _ = self.model.decoder(tokens, self.cross, one)
        t = tokens.shape[1]
        self.cache.k[:, :, :, :t] = one.k[:, :, :, :t]
        self.cache.v[:, :, :, :t] = one.v[:, :, :, :t]
        self.cache.length = t
        self.forward_passes += 1
        return logits

    def logits(self, tokens: Tensor) -> Tensor:
        """Next-token logits (B, V) for sequences tokens (B, T) that extend the cached ones."""
        new = tokens[:, self.cache.length :]
        logits, _ = self.model.decoder(new, self.cross, self.cache, last_only=True)
        self.forward_passes += 1
        self.pass_rows.append(new.shape[0])
        return logits[:, -1]

    def all_logits(self, tokens: Tensor) -> Tensor:
        """Logits (B, T_new, V) at every new position: verifies several drafted tokens at once."""
        new = tokens[:, self.cache.length :]
        logits, _ = self.model.decoder(new, self.cross, self.cache)
        self.forward_passes += 1
        self.pass_rows.append(new.shape[0])
        return logits

    def rearrange(self, index: Tensor) -> None:
        self.cache.reorder(index)

    def rollback(self, length: int) -> None:
        self.cache.truncate(length)
