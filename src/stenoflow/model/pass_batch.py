"""Decoder passes of several jobs in one forward: the jobs take turns, their passes meet.

A server runs the rounds of several sessions on one model. Alone, each session's decoding step
reads every weight of the decoder to compute one row; on a CPU that read, not the arithmetic, is
most of a step, so the steps of two sessions cost little more together than one alone. Their
decoding loops are separate Python code, though, so the batcher runs each job in a thread of its
own and lets them take turns: only the job holding the turn computes (the jobs never compete for
the cores), and a job that asks for a decoder pass gives the turn away until its pass is done.
When every running job is waiting for a pass, the last to ask runs all of them in one forward
(``TextDecoder.hidden_many``) and each job goes on with its own result.

No job waits for one that is not running: a job that finishes, or one still encoding, ends or
joins the round, so a pass waits at most for the other jobs' work up to their next pass. Passes
without a decoder cache (training) run at once, in the caller's turn.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import torch
from torch import Tensor

from stenoflow.model.whisper import DecoderCall, TextDecoder

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass
class _Request:
    call: DecoderCall
    result: Tensor | None = None
    error: BaseException | None = None
    done: bool = False


@dataclass
class PassStats:
    """How often passes met: ``calls / passes`` is the mean number of callers per forward."""

    by_size: dict[int, int] = field(default_factory=dict)  # callers in a forward -> forwards run

    @property
    def passes(self) -> int:
        return sum(self.by_size.values())

    @property
    def calls(self) -> int:
        return sum(size * n for size, n in self.by_size.items())

    @property
    def merged(self) -> int:
        """Forwards that served more than one caller."""
        return sum(n for size, n in self.by_size.items() if size > 1)


class PassBatcher:
    """Turn-taking between jobs run by ``run`` (each in its own thread), with their decoder
    passes merged into one forward of ``forward`` (callers' calls -> each caller's output)."""

    def __init__(self, forward: Callable[[Sequence[DecoderCall]], list[Tensor]]) -> None:
        self._forward = forward
        self._cv = threading.Condition()
        self._turn: int | None = None  # the thread computing now
        self._members: set[int] = set()  # threads with a job running (computing or waiting)
        self._waiting: list[_Request] = []
        self.stats = PassStats()

    @classmethod
    def over(cls, decoder: TextDecoder) -> PassBatcher:
        """A batcher whose merged passes run ``decoder.hidden_many``."""
        def forward(calls: Sequence[DecoderCall]) -> list[Tensor]:
            with torch.inference_mode():  # the callers' caches are inference tensors
                return decoder.hidden_many(calls)

        return cls(forward)

    @property
    def jobs(self) -> int:
        """Jobs running now (computing, or waiting for the turn or a pass)."""
        return len(self._members)

    def joined(self) -> bool:
        """Whether the calling thread runs a job of this batcher."""
        return threading.get_ident() in self._members

    def run(self, job: Callable[[], T]) -> T:
        """Run ``job`` in this thread, in turns with the other jobs and their passes merged."""
        me = threading.get_ident()
        with self._cv:
            self._members.add(me)
            self._take_turn(me)
        try:
            return job()
        finally:
            with self._cv:
                self._members.discard(me)
                batch = self._due()
            if batch:  # the others all wait for a pass: this thread, still holding the turn, runs it
                self._run_batch(batch)
            with self._cv:
                self._turn = None
                self._cv.notify_all()

    def submit(self, call: DecoderCall) -> Tensor:
        """The pass ``call`` of the calling job, run together with the other jobs' passes."""
        me = threading.get_ident()
        request = _Request(call)
        with self._cv:
            self._waiting.append(request)
            batch = self._due()
            if not batch:
                self._turn = None
                self._cv.notify_all()
                self._cv.wait_for(lambda: request.done)
                self._take_turn(me)
        if batch:
            self._run_batch(batch)
        if request.error is not None:
            raise request.error
        assert request.result is not None
        return request.result

    def _take_turn(self, me: int) -> None:
        self._cv.wait_for(lambda: self._turn is None)
        self._turn = me

    def _due(self) -> list[_Request]:
        """All waiting requests, taken, once every running job waits for one (call under the lock)."""
        if not self._waiting or len(self._waiting) < len(self._members):
            return []
        batch, self._waiting = self._waiting, []
        return batch

    def _run_batch(self, batch: list[_Request]) -> None:
        try:
            results = self._forward([r.call for r in batch])
            for r, x in zip(batch, results, strict=True):
                r.result = x
        except Exception as exc:  # noqa: BLE001 - a caller's bad pass must fail only that caller
            if len(batch) == 1:
                batch[0].error = exc
            else:
                log.debug("merged decoder pass failed (%s); running its calls one by one", exc)
                for r in batch:  # caches grow only once a pass completes, so a retry is clean
                    try:
                        r.result = self._forward([r.call])[0]
                    except Exception as one:  # noqa: BLE001
                        r.error = one
        with self._cv:
            self.stats.by_size[len(batch)] = self.stats.by_size.get(len(batch), 0) + 1
            for r in batch:
                r.done = True
            self._cv.notify_all()
