"""Live audio sources for the CLI: raw PCM on stdin and the default microphone.

A live source must keep reading while a round computes, or the sender blocks (a pipe holds
about a second of audio) or the sound card overruns. ``Backlog`` therefore reads in a thread,
and hands the session everything that arrived since the last push in one piece, which is what
makes a slow round followed by a best-effort round on the latest audio.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Iterable, Iterator
from typing import BinaryIO

import numpy as np

log = logging.getLogger(__name__)

SAMPLE_RATE = 16000
PCM_FORMATS = {"f32le": np.dtype("<f4"), "s16le": np.dtype("<i2")}


class MicrophoneUnavailable(RuntimeError):
    """No microphone could be opened (no sounddevice package, no PortAudio, no input device)."""


def pcm_chunks(stream: BinaryIO, fmt: str = "f32le", chunk_s: float = 0.1) -> Iterator[np.ndarray]:
    """16 kHz mono float32 chunks decoded from raw little-endian PCM (f32le or s16le)."""
    if fmt not in PCM_FORMATS:
        raise ValueError(f"stdin format must be one of {', '.join(PCM_FORMATS)}, got {fmt!r}")
    dtype = PCM_FORMATS[fmt]
    size = max(1, round(chunk_s * SAMPLE_RATE)) * dtype.itemsize
    leftover = b""
    while True:
        data = stream.read(size)
        if not data:
            break
        data = leftover + data
        whole = len(data) - len(data) % dtype.itemsize
        leftover = data[whole:]
        samples = np.frombuffer(data[:whole], dtype=dtype)
        yield (samples.astype(np.float32) / 32768.0) if fmt == "s16le" else samples.astype(np.float32)
    if leftover:
        log.warning("stdin ended inside a sample: %d trailing byte(s) ignored", len(leftover))


def open_microphone(chunk_s: float = 0.1, device: int | str | None = None) -> Iterator[np.ndarray]:
    """Open the default (or given) input device now; iterate over its 16 kHz mono float32 chunks.

    Opening eagerly means a missing package or device fails here, with a clear message, rather
    than later inside a reader thread.
    """
    try:
        import sounddevice as sd
    except ImportError as e:
        raise MicrophoneUnavailable("--mic needs the 'sounddevice' package (pip install sounddevice) "
                                    "and a PortAudio library; it is not installed here") from e
    except OSError as e:  # the package is there but libportaudio is not
        raise MicrophoneUnavailable(f"--mic: PortAudio could not be loaded ({e})") from e
    chunks: queue.Queue[np.ndarray] = queue.Queue()

    def callback(indata: np.ndarray, frames: int, when: object, status: object) -> None:
        if status:
            log.warning("microphone: %s", status)
        chunks.put(indata[:, 0].copy())

    try:
        stream = sd.InputStream(samplerate=SAMPLE_RATE, channels=1, dtype="float32", device=device,
                                blocksize=max(1, round(chunk_s * SAMPLE_RATE)), callback=callback)
    except (sd.PortAudioError, ValueError) as e:
        raise MicrophoneUnavailable(f"--mic: no usable input device ({e})") from e

    def read() -> Iterator[np.ndarray]:
        with stream:
            while True:
                yield chunks.get()

    return read()


class Backlog:
    """Read a chunk iterator in a background thread; iterate over what piled up meanwhile."""

    def __init__(self, source: Iterable[np.ndarray]) -> None:
        self._queue: queue.Queue[np.ndarray | BaseException | None] = queue.Queue()
        self._thread = threading.Thread(target=self._pump, args=(iter(source),), daemon=True)
        self._thread.start()

    def _pump(self, source: Iterator[np.ndarray]) -> None:
        try:
            for chunk in source:
                self._queue.put(chunk)
        except BaseException as e:  # noqa: BLE001 - not swallowed: the consumer re-raises it
            self._queue.put(e)
        self._queue.put(None)

    def __iter__(self) -> Iterator[np.ndarray]:
        while True:
            items = [self._queue.get()]
            while not self._queue.empty():
                items.append(self._queue.get())
            chunks = [i for i in items if isinstance(i, np.ndarray)]
            if chunks:
                yield np.concatenate(chunks)
            for item in items:
                if isinstance(item, BaseException):
                    raise item
                if item is None:
                    return
