"""OpenAI-compatible file transcription and translation: ``POST /v1/audio/transcriptions`` and
``POST /v1/audio/translations`` (into English), and their response formats."""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from dataclasses import dataclass

from stenoflow.api import Model
from stenoflow.audio.io import load_audio
from stenoflow.decoding.transcribe import Segment, TranscriptionInfo
from stenoflow.output import write_srt, write_vtt
from stenoflow.server.metrics import Metrics
from stenoflow.server.scheduler import ModelScheduler

RESPONSE_FORMATS = ("json", "text", "srt", "vtt", "verbose_json")
GRANULARITIES = ("word", "segment")
MODEL_ALIASES = ("whisper-1",)  # what OpenAI clients send by default: served by this server's model


class RequestError(ValueError):
    """A request the server refuses: ``status`` (400, 401, 413...) and which ``param`` was wrong."""

    def __init__(self, message: str, status: int = 400, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.param = param
        self.code = code

    def body(self) -> dict[str, object]:
        return {"error": {"message": str(self), "type": "invalid_request_error", "param": self.param,
                          "code": self.code}}


@dataclass(frozen=True)
class TranscriptionRequest:
    model: str
    language: str | None = None
    prompt: str | None = None
    temperature: float = 0.0
    response_format: str = "json"
    granularities: tuple[str, ...] = ("segment",)
    task: str = "transcribe"  # "translate": the route of translations, into English

    def check(self, served: str) -> None:
        if self.model not in (served, *MODEL_ALIASES):
            raise RequestError(f"model {self.model!r} is not served here; this server serves {served!r} "
                               f"(also as {', '.join(MODEL_ALIASES)})", param="model", code="model_not_found")
        if self.response_format not in RESPONSE_FORMATS:
            raise RequestError(f"response_format must be one of {', '.join(RESPONSE_FORMATS)}, got "
                               f"{self.response_format!r}", param="response_format")
        if not 0 <= self.temperature <= 1:
            raise RequestError(f"temperature must be in [0, 1], got {self.temperature}", param="temperature")
        bad = [g for g in self.granularities if g not in GRANULARITIES]
        if bad:
            raise RequestError(f"timestamp_granularities must be word and/or segment, got {bad}",
                               param="timestamp_granularities")
        if "word" in self.granularities and self.response_format != "verbose_json":
            raise RequestError("word timestamps need response_format verbose_json", param="timestamp_granularities")


async def transcribe_upload(model: Model, scheduler: ModelScheduler, metrics: Metrics, data: bytes,
                            request: TranscriptionRequest) -> tuple[str, str]:
    """(body, media type) of the transcription of an uploaded file. The work runs on the model's
    queue one window at a time, so streams keep their turns during a long file."""
    started = time.perf_counter()
    try:
        audio = load_audio(data)
    except ValueError as e:
        raise RequestError(f"the uploaded file is not audio the server can decode: {e}", param="file") from e
    temperature = (request.temperature,) if request.temperature > 0 else (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
    try:
        segments_iter, info = await scheduler.run(lambda: model.transcribe(
            audio, language=request.language, task=request.task, initial_prompt=request.prompt,
            temperature=temperature, word_timestamps="word" in request.granularities))
    except ValueError as e:
        raise RequestError(str(e)) from e
    segments: list[Segment] = []
    while (segment := await scheduler.run(lambda: _next(segments_iter))) is not None:
        segments.append(segment)
    with metrics.lock:
        metrics.transcriptions_total += 1
        metrics.transcription_audio_seconds_total += info.duration
        metrics.transcription_seconds_total += time.perf_counter() - started
    return render(segments, info, request)


def _next(segments: Iterator[Segment]) -> Segment | None:
    return next(segments, None)


def render(segments: list[Segment], info: TranscriptionInfo, request: TranscriptionRequest) -> tuple[str, str]:
    import json

    text = "".join(s.text for s in segments).strip()
    fmt = request.response_format
    if fmt == "text":
        return text + "\n", "text/plain; charset=utf-8"
    if fmt in ("srt", "vtt"):
        out = io.StringIO()
        (write_srt if fmt == "srt" else write_vtt)(segments, info, out)
        return out.getvalue(), "text/plain; charset=utf-8"
    if fmt == "json":
        return json.dumps({"text": text}, ensure_ascii=False), "application/json"
    doc: dict[str, object] = {
        "task": info.options.task, "language": info.language, "duration": round(info.duration, 3), "text": text,
        "segments": [{"id": s.id, "seek": s.seek, "start": s.start, "end": s.end, "text": s.text, "tokens": s.tokens,
                      "temperature": s.temperature, "avg_logprob": s.avg_logprob,
                      "compression_ratio": s.compression_ratio, "no_speech_prob": s.no_speech_prob}
                     for s in segments],
    }
    if "word" in request.granularities:
        doc["words"] = [{"word": w.word.strip(), "start": w.start, "end": w.end}
                        for s in segments for w in (s.words or [])]
    return json.dumps(doc, ensure_ascii=False), "application/json"
