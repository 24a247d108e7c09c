"""One model, many clients: model work runs on one worker thread, one job at a time, in arrival order.

Each stream submits one job at a time (a push of the audio that arrived, or its finish) and waits
for it before submitting the next, and a REST transcription submits one window at a time; so the
queue takes turns between clients (round robin) and a long file never holds the model for more
than a window. On a saturated machine every client's jobs wait longer in turn: latency grows for
all alike, and the streams' unprocessed audio is kept, not dropped (see ``server.stream``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import TypeVar

from stenoflow.memory import HeapTrimmer
from stenoflow.server.metrics import Metrics

T = TypeVar("T")


class ModelScheduler:
    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="stenoflow-model")
        self._heap = HeapTrimmer()

    async def run(self, job: Callable[[], T]) -> T:
        with self.metrics.lock:
            self.metrics.queue_depth += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, partial(self._job, job))
        finally:
            with self.metrics.lock:
                self.metrics.queue_depth -= 1

    def _job(self, job: Callable[[], T]) -> T:
        try:
            return job()
        finally:
            self._heap.maybe()  # freed tensors of every shape: give the heap back now and then

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)
