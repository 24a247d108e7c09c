"""The WebSocket stream protocol (``/v1/stream``): audio in, committed words and the tentative tail out.

1. The client sends one JSON text message: ``{"format": "s16le" | "f32le" | "container",
   "sample_rate": 16000, "language": "en", "step": 0.5, "policy": "live", "window": 15, "hush":
   false, "task": "transcribe"}`` (all optional; raw PCM must be 16 kHz mono; "container" is any
   file format FFmpeg reads, decoded here as it arrives; "window" and "hush" choose how a round
   hears its buffer, see ``StreamOptions``: the hush word costs less compute per stream, the window
   is more accurate; "language": "auto" detects the language, "task": "translate" writes English).
2. The server answers ``{"type": "ready", ...}``; the client sends binary messages of audio, any
   size up to the server's message limit, and ends with the text message ``{"type": "end"}``.
3. The server sends ``{"type": "update", "committed": [words], "tail": [words], "audio_s": ...}``
   after each round (words are ``{"word", "start", "end"}``, and ``"language"`` where the stream
   detects it; committed words are final and never repeated), then ``{"type": "end", "text": ...,
   "words": n}`` and closes.

With ``"mode": "utterances"`` in the config (voice commands, see ``stenoflow.utterance``) the server
instead sends one ``{"type": "utterance", "text", "start", "end", "endpoint", "perplexity", ...}`` per
utterance as soon as the person stops speaking, then ``{"type": "end", "utterances": n}``.

Bad input is answered with ``{"type": "error", "code", "message"}``; the audio received before it is
still transcribed and its words sent (and ``end``), then the socket closes. Audio is never dropped:
when rounds fall behind, the server stops reading until they catch up (TCP backpressure), so a
client that sends faster than real time is slowed down, not cut.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol

import numpy as np
from starlette.websockets import WebSocket, WebSocketDisconnect

from stenoflow.api import Model
from stenoflow.audio.io import AudioError, load_audio
from stenoflow.server.load import Load, StreamLoad
from stenoflow.server.metrics import Metrics
from stenoflow.server.options import ServerOptions
from stenoflow.server.scheduler import ModelScheduler
from stenoflow.streaming.events import StreamingSession, StreamUpdate, TimedWord
from stenoflow.utterance.session import Utterance, UtteranceSession

log = logging.getLogger(__name__)

SAMPLE_RATE = 16000
PCM_WIDTH = {"s16le": 2, "f32le": 4}
CONTAINER = "container"
CONTAINER_DECODE_BYTES = 32 * 1024  # re-decode a container stream after this much new data
# Close codes (RFC 6455): 1000 normal, 1003 unsupported data, 1008 policy, 1009 too big, 1013 try later.
CLOSE_NORMAL, CLOSE_DATA, CLOSE_POLICY, CLOSE_TOO_BIG, CLOSE_BUSY = 1000, 1003, 1008, 1009, 1013
CAPTIONS, UTTERANCES = "captions", "utterances"  # what a stream sends back: words as they commit, or commands
MODES = (CAPTIONS, UTTERANCES)


class ProtocolError(Exception):
    """Bad input from the client: ``code`` names it, the message says what to send instead."""

    def __init__(self, code: str, message: str, close_code: int = CLOSE_DATA) -> None:
        super().__init__(message)
        self.code = code
        self.close_code = close_code


CAPTION_FIELDS = ("step", "policy", "window", "hush", "task")
CONFIG_FIELDS = ("format", "sample_rate", "language", "mode", *CAPTION_FIELDS)
OPTION_NAMES = {"window": "window_s"}  # config fields named otherwise in StreamOptions


def seconds_field(doc: dict[str, object], name: str, low: float, high: float) -> float | None:
    """Config field ``name``, a number of seconds in [low, high], or None when it is not given."""
    value = doc.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise ProtocolError("bad_config", f"{name} must be a number of seconds in [{low:g}, {high:g}], got {value!r}")
    return float(value)


@dataclass(frozen=True)
class StreamConfig:
    format: str = "s16le"
    sample_rate: int = SAMPLE_RATE
    language: str | None = None
    step: float | None = None
    policy: str | None = None
    mode: str = CAPTIONS
    window: float | None = None  # captions: seconds of the window a live round hears (StreamOptions.window_s)
    hush: bool | None = None  # captions: the model's hush word instead of the window (cheaper, less accurate)
    task: str | None = None  # captions: "translate" for English text of speech in any language

    @classmethod
    def parse(cls, text: str) -> StreamConfig:
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise ProtocolError("bad_config", f"the first message must be a JSON object: {e}") from e
        if not isinstance(doc, dict):
            raise ProtocolError("bad_config", "the first message must be a JSON object")
        doc.pop("type", None)
        unknown = sorted(set(doc) - set(CONFIG_FIELDS))
        if unknown:
            raise ProtocolError("bad_config", f"unknown config field(s) {unknown}; known: {', '.join(CONFIG_FIELDS)}")
        mode = doc.get("mode", CAPTIONS)
        if mode not in MODES:
            raise ProtocolError("bad_config", f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        if mode == UTTERANCES and any(doc.get(k) is not None for k in CAPTION_FIELDS):
            raise ProtocolError("bad_config", f"{', '.join(CAPTION_FIELDS)} are caption settings; utterances take "
                                              "language only")
        fmt = doc.get("format", "s16le")
        if fmt not in (*PCM_WIDTH, CONTAINER):
            raise ProtocolError("bad_config", f"format must be s16le, f32le or container, got {fmt!r}")
        rate = doc.get("sample_rate", SAMPLE_RATE)
        if fmt != CONTAINER and rate != SAMPLE_RATE:
            raise ProtocolError("bad_sample_rate", f"raw PCM must be {SAMPLE_RATE} Hz mono, got sample_rate {rate!r}: "
                                                   "resample on the client, or send format 'container' (wav, "
                                                   "ogg, webm...) for the server to decode")
        step, window = seconds_field(doc, "step", 0.1, 10), seconds_field(doc, "window", 1, 30)
        hush = doc.get("hush")
        if hush is not None and not isinstance(hush, bool):
            raise ProtocolError("bad_config", f"hush must be true or false, got {hush!r}")
        language, policy, task = doc.get("language"), doc.get("policy"), doc.get("task")
        for name, value in (("language", language), ("policy", policy), ("task", task)):
            if value is not None and not isinstance(value, str):
                raise ProtocolError("bad_config", f"{name} must be a string, got {value!r}")
        return cls(fmt, int(rate), language, step, policy, mode, window, hush, task)

    def settings(self) -> dict[str, object]:
        """The session settings this config gives, by their config names (the rest stay the
        server's defaults)."""
        given = (("language", self.language), ("step", self.step), ("policy", self.policy),
                 ("window", self.window), ("hush", self.hush), ("task", self.task))
        return {k: v for k, v in given if v is not None}

    def overrides(self) -> dict[str, object]:
        """``settings`` as the session's options."""
        return {OPTION_NAMES.get(k, k): v for k, v in self.settings().items()}

    def open(self, model: Model) -> EventSession:
        """The session this stream runs, as events to send."""
        if self.mode == UTTERANCES:
            return UtteranceEvents(model.listen(**self.overrides()))
        return CaptionEvents(model.stream(**self.overrides()))


def words_json(words: tuple[TimedWord, ...]) -> list[dict[str, object]]:
    """Words as events carry them: ``language`` too where the stream detects it."""
    return [{"word": w.word, "start": round(w.start, 3), "end": round(w.end, 3),
             **({"language": w.language} if w.language is not None else {})} for w in words]


@dataclass
class ClientAudio:
    """Audio received and not yet handed to the session, decoded from the client's messages."""

    config: StreamConfig
    pending: list[np.ndarray] = field(default_factory=list)
    pending_samples: int = 0
    received_samples: int = 0
    container: bytearray = field(default_factory=bytearray)
    container_decoded: int = 0  # samples of the container stream already taken
    container_tried: int = 0  # container bytes at the last decode attempt
    # the socket's reader adds audio on the event loop; a model job takes it when it starts
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, data: bytes) -> None:
        if self.config.format == CONTAINER:
            self.container += data
            if len(self.container) - self.container_tried >= CONTAINER_DECODE_BYTES:
                self._decode_container(final=False)
            return
        width = PCM_WIDTH[self.config.format]
        if len(data) % width:
            raise ProtocolError("bad_frame", f"a binary message of {len(data)} bytes is not a whole number of "
                                             f"{self.config.format} samples ({width} bytes each)")
        if self.config.format == "s16le":
            samples = np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0
        else:
            samples = np.frombuffer(data, dtype="<f4").astype(np.float32)
            if not np.isfinite(samples).all():
                raise ProtocolError("bad_frame", "f32le audio holds NaN or infinite samples")
            if samples.size and float(np.abs(samples).max()) > 64.0:
                raise ProtocolError("bad_frame", "f32le samples far outside [-1, 1]: is this really float audio "
                                                 "(s16le sent as f32le?)")
        self._queue(samples)

    def finish(self) -> None:
        if self.config.format == CONTAINER:
            self._decode_container(final=True)

    def take(self) -> np.ndarray:
        with self.lock:
            out = np.concatenate(self.pending) if self.pending else np.zeros(0, np.float32)
            self.pending, self.pending_samples = [], 0
        return out

    def _queue(self, samples: np.ndarray) -> None:
        if samples.size:
            with self.lock:
                self.pending.append(samples)
                self.pending_samples += samples.size
                self.received_samples += samples.size

    def _decode_container(self, final: bool) -> None:
        self.container_tried = len(self.container)
        if not self.container:
            if final:
                raise ProtocolError("bad_audio", "the stream ended without any audio data")
            return
        try:
            samples = load_audio(bytes(self.container))
        except AudioError as e:
            if final:
                raise ProtocolError("bad_audio", f"the container stream cannot be decoded: {e}") from e
            return  # maybe just incomplete: try again with more data
        if not final:  # the last few ms may change as more data arrives
            samples = samples[: max(0, samples.size - SAMPLE_RATE // 10)]
        self._queue(samples[self.container_decoded :])
        self.container_decoded = max(self.container_decoded, samples.size)


class EventSession(Protocol):
    """A session seen from the socket: audio in, JSON events out."""

    def push(self, samples: np.ndarray) -> tuple[list[dict[str, object]], int]:
        """The events to send for this audio, and the decoding rounds it took."""

    def finish(self) -> tuple[list[dict[str, object]], int]: ...

    def end(self, audio_s: float) -> dict[str, object]:
        """The end-of-stream event."""


class CaptionEvents:
    """Live captions: an ``update`` (committed words, tentative tail) after every push."""

    def __init__(self, session: StreamingSession) -> None:
        self.session = session
        self.committed: list[str] = []
        self.audio_s = 0.0

    def push(self, samples: np.ndarray) -> tuple[list[dict[str, object]], int]:
        self.audio_s += samples.size / SAMPLE_RATE
        return self._events(self.session.push(samples))

    def finish(self) -> tuple[list[dict[str, object]], int]:
        return self._events(self.session.finish())

    def end(self, audio_s: float) -> dict[str, object]:
        return {"type": "end", "text": "".join(self.committed).strip(), "words": len(self.committed),
                "audio_s": audio_s}

    def _events(self, update: StreamUpdate) -> tuple[list[dict[str, object]], int]:
        self.committed += [w.word for w in update.committed]
        event = {"type": "update", "committed": words_json(update.committed), "tail": words_json(update.tail),
                 "audio_s": self.audio_s}
        return [event], len(update.rounds)


class UtteranceEvents:
    """Voice commands: one ``utterance`` event (final text, times, perplexity) per endpointed utterance."""

    def __init__(self, session: UtteranceSession) -> None:
        self.session = session
        self.count = 0

    def push(self, samples: np.ndarray) -> tuple[list[dict[str, object]], int]:
        return self._events(self.session.push(samples))

    def finish(self) -> tuple[list[dict[str, object]], int]:
        return self._events(self.session.finish())

    def end(self, audio_s: float) -> dict[str, object]:
        return {"type": "end", "utterances": self.count, "audio_s": audio_s}

    def _events(self, utterances: list[Utterance]) -> tuple[list[dict[str, object]], int]:
        self.count += len(utterances)
        return [{"type": "utterance", **u.to_dict()} for u in utterances], len(utterances)


class StreamHandler:
    """One WebSocket stream: reads audio, runs the session's rounds on the shared model, sends words."""

    def __init__(self, ws: WebSocket, model: Model, scheduler: ModelScheduler, metrics: Metrics,
                 options: ServerOptions, load: Load, stream_load: StreamLoad) -> None:
        self.ws = ws
        self.model = model
        self.scheduler = scheduler
        self.metrics = metrics
        self.options = options
        self.load = load
        self.stream_load = stream_load
        self.intake: ClientAudio | None = None
        self.arrived = asyncio.Event()  # audio queued, or the stream ended
        self.drained = asyncio.Event()  # the pending audio went to the session
        self.ended = False
        self.gone = False  # the client vanished
        self.error: ProtocolError | None = None

    async def run(self) -> None:
        try:
            config = StreamConfig.parse(await self._receive_text_first())
            session = await self.scheduler.run(lambda: config.open(self.model))
        except ProtocolError as e:
            await self._fail(e)
            return
        except ValueError as e:  # options the engine refuses (an unknown policy, a language...)
            await self._fail(ProtocolError("bad_config", str(e)))
            return
        except WebSocketDisconnect:
            return
        self.intake = ClientAudio(config)
        await self.ws.send_json({"type": "ready", "model": self.model.name, "format": config.format,
                                 "sample_rate": SAMPLE_RATE, "mode": config.mode, **config.settings()})
        reader = asyncio.create_task(self._read())
        try:
            await self._process(session)
        finally:
            reader.cancel()
        if self.gone:
            return
        if self.error is not None:
            await self._close(self.error.close_code, self.error.code)
        else:
            await self._close(CLOSE_NORMAL, "end of stream")

    # --- reading ------------------------------------------------------------------------------
    async def _receive_text_first(self) -> str:
        message = await self._receive()
        if message.get("text") is None:
            raise ProtocolError("bad_config", "the first message must be the JSON config (a text message), "
                                              "e.g. {\"format\": \"s16le\", \"sample_rate\": 16000}")
        return str(message["text"])

    async def _receive(self) -> dict[str, object]:
        try:
            message = await asyncio.wait_for(self.ws.receive(), self.options.idle_timeout_s)
        except asyncio.TimeoutError:
            raise ProtocolError("idle", f"nothing received for {self.options.idle_timeout_s:g} s: the stream is "
                                        "closed (send audio or {\"type\": \"end\"})", CLOSE_POLICY) from None
        if message["type"] == "websocket.disconnect":
            raise WebSocketDisconnect(int(message.get("code", 1000)))  # type: ignore[arg-type]
        size = len(message.get("bytes") or b"") + len((message.get("text") or "").encode())  # type: ignore[arg-type]
        if size > self.options.max_message_bytes:
            raise ProtocolError("message_too_big", f"a message of {size} bytes exceeds the limit of "
                                                   f"{self.options.max_message_bytes}: send audio in smaller chunks",
                                CLOSE_TOO_BIG)
        return message

    async def _read(self) -> None:
        intake = self.intake
        assert intake is not None
        limit = int(self.options.max_pending_s * SAMPLE_RATE)
        try:
            while True:
                while intake.pending_samples >= limit:  # backpressure: let the rounds catch up first
                    self.drained.clear()
                    await self.drained.wait()
                message = await self._receive()
                if message.get("bytes") is not None:
                    intake.add(message["bytes"])  # type: ignore[arg-type]
                    self.load.arrived(self.stream_load, intake.received_samples / SAMPLE_RATE)
                    self.arrived.set()
                    continue
                text = str(message.get("text"))
                if _is_end(text):
                    intake.finish()
                    break
                raise ProtocolError("unexpected_text", "a text message in the middle of the audio: send audio as "
                                                       "binary messages and end with {\"type\": \"end\"}")
        except ProtocolError as e:
            self.error = e
            self.metrics.error(e.code)
        except WebSocketDisconnect:
            self.gone = True
            self.metrics.error("client_gone")
        except asyncio.CancelledError:
            raise
        self.ended = True
        self.arrived.set()

    # --- processing ---------------------------------------------------------------------------
    async def _process(self, session: EventSession) -> None:
        intake = self.intake
        assert intake is not None
        while True:
            await self.arrived.wait()
            self.arrived.clear()
            if self.gone:
                return
            if intake.pending_samples:
                # The job takes the audio when it starts, not when it was queued: a stream whose
                # round waited behind others hears all that arrived meanwhile in one round.
                # voice commands keep the pushes they were tuned with: the audio as queued
                queued = None if isinstance(session, CaptionEvents) else intake.take()
                events = await self._timed(partial(self._push, session, intake, queued))
                self.drained.set()
                if not await self._send_all(events):
                    return
            if self.ended and not intake.pending_samples:
                break
        if self.error is not None:
            await self._send({"type": "error", "code": self.error.code, "message": str(self.error)})
        if await self._send_all(await self._timed(lambda: (*session.finish(), 0.0))):
            await self._send(session.end(intake.received_samples / SAMPLE_RATE))

    @staticmethod
    def _push(session: EventSession, intake: ClientAudio,
              queued: np.ndarray | None) -> tuple[list[dict[str, object]], int, float]:
        """Push the audio ``queued`` with the job, or else all ``intake`` holds when the job runs."""
        samples = intake.take() if queued is None else queued
        events, rounds = session.push(samples) if samples.size else ([], 0)
        return events, rounds, samples.size / SAMPLE_RATE

    async def _timed(self, job: Callable[[], tuple[list[dict[str, object]], int, float]]) -> list[dict[str, object]]:
        """Run a session call (events, rounds, audio seconds it took) on the model's queue; its
        compute time (not its wait) goes to the metrics, and its words' latencies to the load."""

        def timed() -> tuple[list[dict[str, object]], int, float, float]:
            started = time.perf_counter()
            events, rounds, audio_s = job()
            return events, rounds, audio_s, time.perf_counter() - started

        events, rounds, audio_s, seconds = await self.scheduler.run(timed)
        self.metrics.round(seconds, audio_s, rounds)
        self.load.ran(self.stream_load, audio_s, seconds)
        self.load.committed(self.stream_load, [end for event in events for end in _ends(event)])
        return events

    async def _send_all(self, events: list[dict[str, object]]) -> bool:
        for event in events:
            if not await self._send(event):
                return False
        return True

    async def _send(self, event: dict[str, object]) -> bool:
        """Send an event; False when the client is gone or stopped reading for longer than the idle limit."""
        if self.gone:
            return False
        try:
            await asyncio.wait_for(self.ws.send_json(event), self.options.idle_timeout_s)
            return True
        except asyncio.TimeoutError:
            log.warning("a stream client stopped reading: closing it")
            self.metrics.error("slow_reader")
        except (WebSocketDisconnect, RuntimeError, OSError):
            self.metrics.error("client_gone")
        self.gone = True
        return False

    async def _fail(self, error: ProtocolError) -> None:
        self.metrics.error(error.code)
        if await self._send({"type": "error", "code": error.code, "message": str(error)}):
            await self._close(error.close_code, error.code)

    async def _close(self, code: int, reason: str) -> None:
        try:
            await self.ws.close(code, reason[:120])
        except (RuntimeError, OSError):
            pass


def _ends(event: dict[str, object]) -> list[float]:
    """Where the words an event sends end (seconds of the stream's audio)."""
    if event.get("type") == "utterance":
        return [float(event["end"])]  # type: ignore[arg-type]
    committed = event.get("committed") or []
    return [float(w["end"]) for w in committed]  # type: ignore[union-attr, index]


def _is_end(text: str) -> bool:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        return False
    return isinstance(doc, dict) and doc.get("type") == "end"
