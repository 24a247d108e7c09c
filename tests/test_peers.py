"""The WhisperLiveKit benchmark peers, driven in-process over jfk.wav in 0.5 s chunks."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from stenoflow.streaming.events import StreamingSession, TimedWord

pytestmark = pytest.mark.slow

try:
    from stenoflow.bench import peers

    peers.import_whisperlivekit()
except ImportError as e:
    pytest.skip(
        f"WhisperLiveKit peers unavailable (bench-only dependency): {e}", allow_module_level=True
    )

CHUNK = 8000  # 0.5 s at 16 kHz
PHRASE = "ask not what your country can do for you"


def _run(session: StreamingSession, audio: np.ndarray) -> list[TimedWord]:
    words: list[TimedWord] = []
    for i in range(0, len(audio), CHUNK):
        update = session.push(audio[i : i + CHUNK])
        assert all(r["wall_s"] >= 0 for r in update.rounds)
        words.extend(update.committed)
    final = session.finish()
    assert final.tail == ()
    words.extend(final.committed)
    return words


def _tiny_peers() -> dict[str, tuple[Callable[[], StreamingSession], float]]:
    """Config name -> (factory, how far a word time may step back).

    LocalAgreement's times come from faster-whisper's word alignment and never step back.
    AlignAtt's are the most-attended frame of each token, which can step back a little;
    WhisperLiveKit's own guard only drops a word that steps back more than 0.75 s.
    """
    from whisperlivekit.simul_whisper import SimulStreamingOnlineProcessor

    rewind = float(SimulStreamingOnlineProcessor._INTRA_BATCH_REWIND_SECONDS)
    return {
        "tiny.en/wlk-localagreement/int8": (
            lambda: peers.WhisperLiveKitLocalAgreement("tiny.en"),
            0.0,
        ),
        "tiny.en/wlk-simulstreaming": (
            lambda: peers.WhisperLiveKitSimulStreaming("tiny.en"),
            rewind,
        ),
        "tiny.en/wlk-simulstreaming/ct2-int8-encoder": (
            lambda: peers.WhisperLiveKitSimulStreaming(
                "tiny.en", peers.SimulStreamingOptions(encoder="ctranslate2")
            ),
            rewind,
        ),
    }


@pytest.mark.parametrize("config", list(_tiny_peers()))
def test_peer_commits_jfk(config: str, jfk_audio: np.ndarray, jfk_path: Path) -> None:
    from stenoflow.bench.normalize import normalize_text

    factory, tolerance = _tiny_peers()[config]
    words = _run(factory(), jfk_audio)
    text = normalize_text("".join(w.word for w in words))
    assert PHRASE in text, f"{config} ({jfk_path.name}): {text!r}"

    duration = len(jfk_audio) / 16000
    assert duration <= 11.1
    for w in words:
        assert 0.0 <= w.start <= w.end <= 11.1, (config, w)
    for prev, cur in itertools.pairwise(words):
        assert cur.start >= prev.start - tolerance, (config, prev, cur)
        assert cur.end >= prev.end - tolerance, (config, prev, cur)


def test_factories_share_backends_and_keep_sessions_apart(jfk_audio: np.ndarray) -> None:
    factories = peers.peer_factories(["tiny.en"])
    assert set(factories) == {"tiny.en/wlk-localagreement/int8", "tiny.en/wlk-simulstreaming"}
    make = factories["tiny.en/wlk-localagreement/int8"]
    a, b = make(), make()
    assert isinstance(a, peers.WhisperLiveKitLocalAgreement)
    assert a._proc is not b._proc and a._proc.asr is b._proc.asr
    # A half-second push is below the 1 s minimum chunk: no round runs, nothing is decoded.
    assert a.push(jfk_audio[:CHUNK]).rounds == ()
    assert len(b.push(jfk_audio[: 2 * CHUNK]).rounds) == 1
    with pytest.raises(ValueError, match="1-D"):
        a.push(np.zeros((2, 10), dtype=np.float32))
    a.finish()
    with pytest.raises(RuntimeError, match="finish"):
        a.push(jfk_audio[:CHUNK])
