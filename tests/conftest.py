"""Shared fixtures: the bundled models and real speech, loaded once per test session."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest

if TYPE_CHECKING:
    from stenoflow.api import Model


@pytest.fixture(scope="session")
def tiny() -> Model:
    from stenoflow.api import load_model

    return load_model("tiny.en", compute="float32")


@pytest.fixture(scope="session")
def base() -> Model:
    from stenoflow.api import load_model

    return load_model("base", compute="float32")


def _as_commands_load(name: str) -> Model:
    """``name`` in the precision a model command (``stenoflow stream``) loads on this CPU."""
    from stenoflow.api import load_model
    from stenoflow.model.compute import cpu_compute

    return load_model(name, compute=cpu_compute())


@pytest.fixture(scope="session")
def base_default() -> Model:
    return _as_commands_load("base")


@pytest.fixture(scope="session")
def tiny_default() -> Model:
    return _as_commands_load("tiny.en")


@pytest.fixture(scope="session")
def jfk_path() -> Path:
    from stenoflow.bench.datasets import jfk

    return jfk().audio_path


@pytest.fixture(scope="session")
def jfk_audio(jfk_path: Path) -> np.ndarray:
    from stenoflow.audio.io import load_audio

    return load_audio(jfk_path)


JFK_TEXT = "And so my fellow Americans, ask not what your country can do for you, ask what you can do for your country."
