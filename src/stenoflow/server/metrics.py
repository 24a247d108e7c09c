"""Server counters and gauges, rendered in the Prometheus text format."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stenoflow.model.pass_batch import PassStats


@dataclass
class Metrics:
    sessions_active: int = 0
    sessions_total: int = 0
    rounds_total: int = 0
    round_seconds_total: float = 0.0  # compute in streaming calls (waiting in the queue not counted)
    stream_audio_seconds_total: float = 0.0  # audio the rounds processed
    dropped_audio_seconds_total: float = 0.0  # stays 0: the server applies backpressure, never drops
    transcriptions_total: int = 0
    transcription_audio_seconds_total: float = 0.0
    transcription_seconds_total: float = 0.0
    queue_depth: int = 0  # model jobs waiting for the model or running on it
    errors: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def round(self, seconds: float, audio_s: float, rounds: int) -> None:
        with self.lock:
            self.rounds_total += rounds
            self.round_seconds_total += seconds
            self.stream_audio_seconds_total += audio_s

    def error(self, code: str) -> None:
        with self.lock:
            self.errors[code] += 1

    def render(self, passes: PassStats | None = None) -> str:
        """The Prometheus text; ``passes``: the merged decoder passes of a batching scheduler."""
        with self.lock:
            rtf = self.round_seconds_total / self.stream_audio_seconds_total if self.stream_audio_seconds_total else 0.0
            lines = [
                prometheus_metric("sessions_active", "gauge", "WebSocket streams open now", self.sessions_active),
                prometheus_metric("sessions_total", "counter", "WebSocket streams opened", self.sessions_total),
                prometheus_metric("rounds_total", "counter", "streaming rounds run", self.rounds_total),
                prometheus_metric("round_seconds_total", "counter", "compute seconds in streaming calls",
                        self.round_seconds_total),
                prometheus_metric("stream_audio_seconds_total", "counter", "audio seconds streamed through rounds",
                        self.stream_audio_seconds_total),
                prometheus_metric("stream_rtf", "gauge", "streaming compute seconds per audio second", rtf),
                prometheus_metric("dropped_audio_seconds_total", "counter", "audio dropped (never: backpressure instead)",
                        self.dropped_audio_seconds_total),
                prometheus_metric("transcriptions_total", "counter", "files transcribed over REST", self.transcriptions_total),
                prometheus_metric("transcription_audio_seconds_total", "counter", "audio seconds transcribed over REST",
                        self.transcription_audio_seconds_total),
                prometheus_metric("transcription_seconds_total", "counter", "compute seconds in REST transcription",
                        self.transcription_seconds_total),
                prometheus_metric("queue_depth", "gauge", "model jobs waiting or running", self.queue_depth),
                *([] if passes is None else [
                    prometheus_metric("decoder_passes_total", "counter", "decoder forwards run for sessions' jobs", passes.passes),
                    prometheus_metric("decoder_pass_calls_total", "counter",
                            "decoder passes asked for (over decoder_passes_total: sessions per forward)", passes.calls),
                ]),
                "# HELP stenoflow_errors_total client errors by kind\n# TYPE stenoflow_errors_total counter",
                *(f'stenoflow_errors_total{{code="{code}"}} {n}' for code, n in sorted(self.errors.items())),
            ]
        return "\n".join(lines) + "\n"


def prometheus_metric(name: str, kind: str, help_text: str, value: float) -> str:
    return f"# HELP stenoflow_{name} {help_text}\n# TYPE stenoflow_{name} {kind}\nstenoflow_{name} {value:g}"


def prometheus_labelled(name: str, kind: str, help_text: str, label: str, values: dict[str, float]) -> str:
    """One metric with a value per ``label`` value (none: only its help and type)."""
    head = f"# HELP stenoflow_{name} {help_text}\n# TYPE stenoflow_{name} {kind}"
    return "\n".join([head, *(f'stenoflow_{name}{{{label}="{k}"}} {v:g}' for k, v in values.items())])
