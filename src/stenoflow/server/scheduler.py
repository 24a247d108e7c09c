"""One model, many clients: model jobs run in arrival order, a few at a time, in turns.

Each stream submits one job at a time (a push of the audio that arrived, or its finish) and waits
for it before submitting the next, and a REST transcription submits one window at a time; so the
queue takes turns between clients (round robin) and a long file never holds the model for more
than a window. On a saturated machine every client's jobs wait longer in turn: latency grows for
all alike, and the streams' unprocessed audio is kept, not dropped (see ``server.stream``).

With ``batch`` > 1, up to that many jobs run at once, each in a worker thread of its own, taking
turns on the model through a :class:`~stenoflow.model.pass_batch.PassBatcher`: only one computes at
a time, and their decoder passes run together in one forward (a decoding step of several sessions
costs little more than one). With ``batch`` = 1, jobs run one after the other.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import TypeVar

from stenoflow.memory import HeapTrimmer
from stenoflow.model.pass_batch import PassBatcher
from stenoflow.model.whisper import TextDecoder
from stenoflow.server.metrics import Metrics

T = TypeVar("T")


class ModelScheduler:
    def __init__(self, metrics: Metrics, decoder: TextDecoder | None = None, batch: int = 1) -> None:
        if batch < 1:
            raise ValueError(f"batch must be >= 1, got {batch}")
        if batch > 1 and decoder is None:
            raise ValueError("batching jobs needs the model's decoder")
        self.metrics = metrics
        self._executor = ThreadPoolExecutor(batch, thread_name_prefix="stenoflow-model")
        self._heap = HeapTrimmer()
        self._decoder = decoder
        self.batcher: PassBatcher | None = None
        if batch > 1:
            assert decoder is not None
            self.batcher = PassBatcher.over(decoder)
            decoder.batcher = self.batcher

    async def run(self, job: Callable[[], T]) -> T:
        with self.metrics.lock:
            self.metrics.queue_depth += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, partial(self._job, job))
        finally:
            with self.metrics.lock:
                self.metrics.queue_depth -= 1

    def _job(self, job: Callable[[], T]) -> T:
        def trimmed() -> T:
            try:
                return job()
            finally:
                self._heap.maybe()  # freed tensors of every shape: give the heap back now and then

        return trimmed() if self.batcher is None else self.batcher.run(trimmed)

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)
        if self._decoder is not None and self._decoder.batcher is self.batcher:
            self._decoder.batcher = None
