"""Speech in other languages, end to end on the multilingual base model: a live stream that detects
its language and follows a switch, live and whole-file translation into English (the Python API,
and the server's WebSocket and OpenAI ``/v1/audio/translations`` route through the real clients),
and English-only models refusing both with a clear error."""

from __future__ import annotations

import asyncio
import io
import shutil
from collections.abc import Iterator

import numpy as np
import pytest
from clients import KEY, running_server, stream_file, words

from stenoflow.api import Model

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("espeak-ng") is None or shutil.which("flite") is None,
                                                    reason="espeak-ng and flite are not installed; run "
                                                           "`bash scripts/setup.sh`")]

PAUSE = np.zeros(int(0.8 * 16000), np.float32)
SPANISH = ("Buenos días a todos.", "Hoy vamos a hablar del tiempo en la ciudad.",
           "Mañana va a llover por la tarde.")
ENGLISH = ("Now let us talk about the weather in English.", "Tomorrow it will rain in the afternoon.")


def said(lines: tuple[str, ...], voice: str) -> np.ndarray:
    from stenoflow.bench.clips import speech
    from stenoflow.bench.tts import Voice

    return np.concatenate([piece for line in lines for piece in (speech(line, Voice.parse(voice), 1.0, -20.0), PAUSE)])


def assert_english(text: str) -> None:
    """``text`` is the Spanish lines said in English: "Good morning (day) to all. Today we are
    going to talk about the time (weather) in the city..."."""
    heard = set(words(text))
    assert {"today", "going", "talk"} <= heard and not {"buenos", "hoy", "hablar"} & heard, text


@pytest.fixture(scope="module")
def spanish() -> np.ndarray:
    return said(SPANISH, "espeak:es")


@pytest.fixture(scope="module")
def english() -> np.ndarray:
    return said(ENGLISH, "flite:slt")


def test_a_live_stream_detects_its_language_and_follows_a_switch(base_default: Model, spanish: np.ndarray,
                                                                 english: np.ndarray) -> None:
    from stenoflow.streaming.drivers import run_stream

    switch_at = spanish.size / 16000
    run = run_stream(lambda: base_default.stream(language="auto"), np.concatenate([spanish, english]), "unaware")
    before = [w for w in run.words if w.end < switch_at]
    after = [w for w in run.words if w.start > switch_at + 0.3]
    assert before and after, run.text
    assert all(w.language == "es" for w in before), [(w.word, w.language) for w in before]
    assert {"días", "tiempo", "ciudad"} <= set(words("".join(w.word for w in before))), run.text
    # every word from the third second of English speech on was heard in English
    assert all(w.language == "en" for w in after if w.start > switch_at + 3.0), [(w.word, w.language) for w in after]
    assert {"weather", "tomorrow", "rain", "afternoon"} <= set(words("".join(w.word for w in after))), run.text
    assert '"language": "es"' in run.words[0].to_json()


def test_a_live_stream_translates_spanish_into_english(base_default: Model, spanish: np.ndarray) -> None:
    from stenoflow.streaming.drivers import run_stream

    run = run_stream(lambda: base_default.stream(language="es", task="translate"), spanish, "unaware")
    assert_english(run.text)


def test_english_only_models_refuse_detection_and_translation(tiny: Model, spanish: np.ndarray) -> None:
    for options in ({"language": "auto"}, {"language": "es"}, {"task": "translate"}):
        with pytest.raises(ValueError, match="English-only"):
            tiny.stream(**options)
    with pytest.raises(ValueError, match="English-only|cannot translate"):
        segments, _ = tiny.transcribe(spanish, task="translate")
        list(segments)


@pytest.fixture(scope="module")
def base_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("base-server") / "server.log"
    with running_server(["--model", "base", "--threads", "2"], log) as url:
        yield url


def wav_bytes(audio: np.ndarray) -> bytes:
    import soundfile as sf

    out = io.BytesIO()
    sf.write(out, audio, 16000, format="WAV", subtype="PCM_16")
    return out.getvalue()


def test_the_openai_client_translates_a_file(base_server: str, spanish: np.ndarray) -> None:
    from openai import OpenAI

    client = OpenAI(base_url=f"{base_server}/v1", api_key=KEY)
    text = client.audio.translations.create(model="whisper-1", file=("es.wav", wav_bytes(spanish))).text
    assert_english(text)
    verbose = client.audio.translations.create(model="base", file=("es.wav", wav_bytes(spanish)),
                                               response_format="verbose_json")
    assert verbose.task == "translate" and verbose.language == "es", verbose  # type: ignore[attr-defined]


def test_a_websocket_stream_detects_the_language_and_says_it_per_word(base_server: str, spanish: np.ndarray) -> None:
    events = asyncio.run(stream_file(base_server, spanish, {"format": "s16le", "sample_rate": 16000,
                                                             "language": "auto"}))
    committed = [w for e in events if e["type"] == "update" for w in e["committed"]]  # type: ignore[union-attr]
    assert committed and all(w["language"] == "es" for w in committed), committed
    assert {"buenos", "tiempo"} <= set(words("".join(str(w["word"]) for w in committed))), committed
