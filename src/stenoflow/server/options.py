"""What a server allows: its address, its key and its limits."""

from __future__ import annotations

import os
from dataclasses import dataclass

API_KEY_ENV = "STENOFLOW_API_KEY"
ADMISSIONS = ("fixed", "auto")
AUTO_MAX_SESSIONS = 64  # --max-sessions auto: streams open at once, at most


@dataclass(frozen=True)
class ServerOptions:
    host: str = "127.0.0.1"
    port: int = 8000
    api_key: str | None = None  # bearer token every request must carry (None: open)
    max_upload_bytes: int = 100 * 1024 * 1024  # REST: largest audio file accepted
    max_sessions: int = AUTO_MAX_SESSIONS  # WebSocket streams open at once (with admission "auto": at most)
    # "auto": a stream is admitted only while the open ones keep target_latency_s and there is room
    # for it (see server.load); "fixed": up to max_sessions, however late their words come
    admission: str = "auto"
    target_latency_s: float = 1.5  # per-word latency (p90) the server keeps streams within
    idle_timeout_s: float = 30.0  # a stream that sends nothing for this long is closed (its text committed)
    max_message_bytes: int = 1024 * 1024  # largest WebSocket message (audio is sent in chunks)
    # Audio a stream may have received and not yet processed; past it the server stops reading the
    # socket until the rounds catch up (backpressure: the client's sends slow down, nothing is dropped).
    max_pending_s: float = 30.0
    # Sessions whose rounds run together, their decoder passes merged into one forward (1: one
    # round at a time, unmerged). 1 by default: with the live default's 15 s window a round is
    # mostly encoder, which merging does not share, and the serve benchmark's p90 latency at four
    # streams was two to three times higher merged (see the sizing table in docs/server.md).
    batch: int = 1

    def __post_init__(self) -> None:
        if not 0 < self.port < 65536:
            raise ValueError(f"port must be in 1..65535, got {self.port}")
        if min(self.max_upload_bytes, self.max_sessions, self.max_message_bytes, self.batch) < 1:
            raise ValueError("max_upload_bytes, max_sessions, max_message_bytes and batch must be >= 1")
        if not (self.idle_timeout_s > 0 and self.max_pending_s > 0 and self.target_latency_s > 0):
            raise ValueError("idle_timeout_s, max_pending_s and target_latency_s must be > 0")
        if self.admission not in ADMISSIONS:
            raise ValueError(f"admission must be one of {', '.join(ADMISSIONS)}, got {self.admission!r}")
        if self.api_key is not None and not self.api_key.strip():
            raise ValueError("an API key must not be blank")

    @staticmethod
    def key_from_env(given: str | None) -> str | None:
        """The key given on the command line, else the environment's, else None."""
        return given or os.environ.get(API_KEY_ENV) or None
