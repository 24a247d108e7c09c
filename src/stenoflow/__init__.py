"""stenoflow: fast, low-latency Whisper speech recognition on ordinary CPUs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["__version__", "load_model"]

if TYPE_CHECKING:
    from stenoflow.api import load_model


def __getattr__(name: str) -> Any:
    # Importing the package stays cheap (no torch) until the API is used.
    if name == "load_model":
        from stenoflow.api import load_model

        return load_model
    raise AttributeError(name)
