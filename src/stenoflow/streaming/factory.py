"""Opening a streaming session of the policy its options name."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stenoflow.streaming.live import LiveSession
from stenoflow.streaming.pipeline import Pipeline
from stenoflow.streaming.session import StreamSession

if TYPE_CHECKING:
    from stenoflow.model.protocol import SpeechModel
    from stenoflow.streaming.events import StreamingSession
    from stenoflow.streaming.options import StreamOptions


def open_session(model: SpeechModel, options: StreamOptions) -> StreamingSession:
    """A new session of ``options.policy`` on ``model``."""
    options = options.resolved(model)
    if options.policy == "live":
        pipeline = Pipeline(*options.pipeline) if options.pipeline is not None else None
        return LiveSession(model, options, pipeline)
    return StreamSession(model, options)
