"""Pipelined rounds (WhisperFlow §4.3 on a CPU): two executors, each with its own thread pool.

The encoder stage of a round (encoder, cross-attention keys/values, prompt prefill) is parallel
work that scales with threads; the decoder stage is a chain of small passes that does not. On
a few cores it can pay to give each its own executor and run the encoder stage of round n+1
beside the decoding of round n, instead of running both one after another on every core.
Which split pays depends on the machine and the model: ``stenoflow profile-threads`` measures
per-word latency for each split and stores the best (see :mod:`stenoflow.streaming.threads`).

Each executor is one worker thread whose PyTorch intra-op pool is set once, in that thread
(OpenMP keeps the setting per thread), so the two stages never fight over one pool. All of a
session's model work runs on the executors, overlapped or not, so its numbers are the same
either way.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import torch

A = TypeVar("A")
B = TypeVar("B")


class Pipeline:
    def __init__(self, encoder_threads: int, decoder_threads: int) -> None:
        if encoder_threads < 1 or decoder_threads < 1:
            raise ValueError(f"each executor needs >= 1 thread, got {encoder_threads}:{decoder_threads}")
        self.threads = (encoder_threads, decoder_threads)
        self._encoder = ThreadPoolExecutor(1, "stenoflow-encoder", torch.set_num_threads, (encoder_threads,))
        self._decoder = ThreadPoolExecutor(1, "stenoflow-decoder", torch.set_num_threads, (decoder_threads,))

    def encode(self, stage: Callable[[], A]) -> A:
        """Run an encoder stage on its executor and wait for it."""
        return self._encoder.submit(stage).result()

    def decode(self, stage: Callable[[], A]) -> A:
        """Run a decoder stage on its executor and wait for it."""
        return self._decoder.submit(stage).result()

    def run(self, decode: Callable[[], A], encode: Callable[[], B]) -> tuple[A, B]:
        """Run a decoder stage and an encoder stage side by side; wait for both."""
        encoding = self._encoder.submit(encode)
        decoding = self._decoder.submit(decode)
        return decoding.result(), encoding.result()

    def close(self) -> None:
        self._encoder.shutdown(wait=True)
        self._decoder.shutdown(wait=True)
