"""The whole-file transcriber as a streaming session: the accuracy reference of the benchmark.

It waits for the end of the stream and then runs long-form ``transcribe`` with word timestamps,
so it hears every word with full context; driven in ``offline`` mode its words are "emitted"
when the file ends plus the time transcription took.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np

from stenoflow.audio.features import N_FRAMES
from stenoflow.audio.io import validate_samples
from stenoflow.decoding.transcribe import TranscribeOptions, transcribe
from stenoflow.streaming.buffer import SAMPLE_RATE
from stenoflow.streaming.events import StreamUpdate, TimedWord

if TYPE_CHECKING:
    from stenoflow.model.protocol import SpeechModel


class OfflineSession:
    def __init__(self, model: SpeechModel, beam_size: int = 5, language: str | None = "en") -> None:
        self.model = model
        self.beam_size = beam_size
        self.language = language
        self._chunks: list[np.ndarray] = []
        self._finished = False

    def push(self, samples: np.ndarray, sample_rate: int = SAMPLE_RATE) -> StreamUpdate:
        if self._finished:
            raise RuntimeError("push() after finish(): start a new session for a new stream")
        if sample_rate != SAMPLE_RATE:
            raise ValueError(f"sessions take 16000 Hz samples, got sample_rate={sample_rate}")
        self._chunks.append(validate_samples(samples))
        return StreamUpdate()

    def finish(self) -> StreamUpdate:
        if self._finished:
            return StreamUpdate()
        self._finished = True
        audio = np.concatenate(self._chunks) if self._chunks else np.zeros(0, dtype=np.float32)
        if audio.size == 0:
            return StreamUpdate()
        windows = 0

        def progress(done: float, total: float) -> None:
            nonlocal windows
            windows += 1  # called once per decoded 30 s window

        t0 = time.perf_counter()
        options = TranscribeOptions(beam_size=self.beam_size, language=self.language, word_timestamps=True)
        segments, _ = transcribe(self.model, audio, options, progress)
        words = [TimedWord(w.word, w.start, w.end, w.probability) for s in segments for w in (s.words or [])]
        stats = {"audio_s": audio.size / SAMPLE_RATE, "encoder_mel_frames": float(windows * N_FRAMES),
                 "encoder_gflop": windows * self.model.dims.encoder_flops(N_FRAMES) / 1e9,
                 "windows": float(windows), "round_ms": 1000 * (time.perf_counter() - t0)}
        return StreamUpdate(tuple(words), (), (stats,))
