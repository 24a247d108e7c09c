"""``stenoflow serve`` as a real process on a free port, driven by real clients: the ``websockets``
client, the ``openai`` SDK, and the caption page in headless Chromium; and bad input, each a clear
error to that client while the server goes on serving the others."""

from __future__ import annotations

import asyncio
import io
import json
import time
import wave
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from clients import KEY, committed_text, get, pcm16, running_server, stream_file, words
from conftest import JFK_TEXT

pytestmark = pytest.mark.slow

@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("server") / "server.log"
    with running_server(["--model", "tiny.en", "--max-upload-mb", "1", "--max-sessions", "4", "--idle-timeout", "4",
                         "--max-message-kb", "256", "--threads", "2", "--batch", "4"], log) as url:
        yield url


def test_a_websocket_client_streams_a_file_and_gets_every_word_once(server: str, jfk_audio: np.ndarray) -> None:
    events = asyncio.run(stream_file(server, jfk_audio, pause_s=0.01))
    assert events[0]["type"] == "ready" and events[0]["model"] == "tiny.en"
    assert events[-1]["type"] == "end"
    text = committed_text(events)
    assert words(text) == words(str(events[-1]["text"]))
    said = words(JFK_TEXT)
    heard = words(text)
    assert len(heard) <= len(said) + 2  # nothing committed twice
    assert sum(w in heard for w in said) >= len(said) - 2
    times = [w["end"] for e in events if e["type"] == "update" for w in e["committed"]]  # type: ignore[union-attr]
    assert times == sorted(times) and times[-1] <= 11.5


def test_a_client_that_reads_nothing_until_the_end_still_gets_every_word(server: str, jfk_audio: np.ndarray) -> None:
    events = asyncio.run(stream_file(server, jfk_audio, read_while_sending=False))
    assert events[-1]["type"] == "end"
    assert sum(w in words(committed_text(events)) for w in words(JFK_TEXT)) >= len(words(JFK_TEXT)) - 2


def test_concurrent_streams_share_decoder_passes_and_each_gets_its_words(server: str, jfk_audio: np.ndarray) -> None:
    def passes() -> tuple[float, float]:
        text = get(f"{server}/metrics", KEY)[1]
        value = {line.split()[0]: float(line.split()[1]) for line in text.splitlines() if line.startswith("stenoflow_")}
        return value["stenoflow_decoder_passes_total"], value["stenoflow_decoder_pass_calls_total"]

    clips = [jfk_audio, jfk_audio[3 * 16000 :], np.concatenate([jfk_audio[5 * 16000 :], jfk_audio[: 5 * 16000]])]
    passes_before, calls_before = passes()

    async def together() -> list[list[dict[str, object]]]:
        return list(await asyncio.gather(*(stream_file(server, clip, pause_s=0.01) for clip in clips)))

    results = asyncio.run(together())
    passes_after, calls_after = passes()
    for events in results:
        assert events[-1]["type"] == "end"
    heard = [words(committed_text(events)) for events in results]
    assert sum(w in heard[0] for w in words(JFK_TEXT)) >= len(words(JFK_TEXT)) - 2
    assert "fellow" not in heard[1] and {"fellow", "americans"} <= set(heard[2])  # no stream hears another
    # Passes of different streams met in one forward: more passes asked for than forwards run.
    assert calls_after - calls_before > passes_after - passes_before > 0


def test_the_openai_client_transcribes_a_file(server: str, jfk_path: Path) -> None:
    from openai import OpenAI

    client = OpenAI(base_url=f"{server}/v1", api_key=KEY)
    assert "tiny.en" in [m.id for m in client.models.list()]
    with jfk_path.open("rb") as f:
        plain = client.audio.transcriptions.create(model="whisper-1", file=f)
    assert words(plain.text) == words(JFK_TEXT)
    with jfk_path.open("rb") as f:
        verbose = client.audio.transcriptions.create(model="tiny.en", file=f, response_format="verbose_json",
                                                     timestamp_granularities=["word", "segment"], language="en")
    assert verbose.words is not None and [words(w.word)[0] for w in verbose.words if words(w.word)] == words(JFK_TEXT)
    assert verbose.segments and verbose.segments[0].start >= 0 and verbose.duration == pytest.approx(11.0, abs=0.1)
    with jfk_path.open("rb") as f:
        srt = client.audio.transcriptions.create(model="whisper-1", file=f, response_format="srt")
    assert "-->" in str(srt) and "country" in str(srt).lower()
    with jfk_path.open("rb") as f:
        vtt = client.audio.transcriptions.create(model="whisper-1", file=f, response_format="vtt")
    assert str(vtt).startswith("WEBVTT")


def test_rest_refuses_bad_requests_with_clear_errors(server: str, jfk_path: Path) -> None:
    import openai
    from openai import OpenAI

    with jfk_path.open("rb") as f, pytest.raises(openai.AuthenticationError, match="API key"):
        OpenAI(base_url=f"{server}/v1", api_key="wrong").audio.transcriptions.create(model="whisper-1", file=f)
    client = OpenAI(base_url=f"{server}/v1", api_key=KEY, max_retries=0)
    big = io.BytesIO()
    with wave.open(big, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(b"\0\0" * 16000 * 40)  # 40 s: 1.28 MB, over the 1 MB limit
    with pytest.raises(openai.APIStatusError, match="limit") as e:
        client.audio.transcriptions.create(model="whisper-1", file=("big.wav", big.getvalue()))
    assert e.value.status_code == 413
    with pytest.raises(openai.BadRequestError, match="not audio"):
        client.audio.transcriptions.create(model="whisper-1", file=("junk.wav", b"RIFF garbage, not a wave file"))
    with jfk_path.open("rb") as f, pytest.raises(openai.BadRequestError, match="not served here"):
        client.audio.transcriptions.create(model="large-v3", file=f)
    with jfk_path.open("rb") as f, pytest.raises(openai.BadRequestError, match="English-only model: it cannot translate"):
        client.audio.translations.create(model="whisper-1", file=f)


async def bad_stream(url: str, config: object, payload: list[bytes | str], key: str | None = KEY
                     ) -> list[dict[str, object]]:
    import websockets

    events: list[dict[str, object]] = []
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        async with websockets.connect(url.replace("http", "ws") + "/v1/stream", additional_headers=headers,
                                      max_size=None) as ws:
            try:
                await ws.send(config if isinstance(config, (str, bytes)) else json.dumps(config))
                for item in payload:
                    await ws.send(item)
            except websockets.ConnectionClosed:
                pass  # the server closed first: what it said before is still to be read
            while True:
                try:
                    events.append(json.loads(await ws.recv()))
                except websockets.ConnectionClosed:
                    break
    except websockets.ConnectionClosed:
        pass
    return events


def test_bad_stream_input_is_a_clear_error_while_a_good_stream_goes_on(server: str, jfk_audio: np.ndarray) -> None:
    pcm = pcm16(jfk_audio[: 3 * 16000])

    async def scenario() -> tuple[list[dict[str, object]], list[list[dict[str, object]]]]:
        good = asyncio.create_task(stream_file(server, jfk_audio, pause_s=0.01))
        bad = [
            await bad_stream(server, {"format": "s16le", "sample_rate": 44100}, []),
            await bad_stream(server, {"format": "s16le"}, [pcm[:3201]]),
            await bad_stream(server, {"format": "f32le"}, [np.full(1600, np.nan, "<f4").tobytes()]),
            await bad_stream(server, {"format": "s16le"}, [pcm, "hello", pcm]),
            await bad_stream(server, {"format": "s16le"}, [b"\0" * (300 * 1024)]),
            await bad_stream(server, "not json", []),
            await bad_stream(server, {"format": "s16le"}, [], key=None),
            await bad_stream(server, {"format": "s16le"}, [pcm]),  # then silence: the idle limit
        ]
        return await good, bad

    good, bad = asyncio.run(scenario())
    assert sum(w in words(committed_text(good)) for w in words(JFK_TEXT)) >= len(words(JFK_TEXT)) - 2
    codes = [next((e["code"] for e in events if e["type"] == "error"), None) for events in bad]
    assert codes == ["bad_sample_rate", "bad_frame", "bad_frame", "unexpected_text", "message_too_big", "bad_config",
                     "unauthorized", "idle"]
    messages = [next(str(e["message"]) for e in events if e["type"] == "error") for events in bad]
    assert "16000" in messages[0] and "3201 bytes" in messages[1] and "NaN" in messages[2]
    assert "binary" in messages[3] and "limit" in messages[4]
    # The audio before a mid-stream error is still transcribed and its words sent, then "end".
    mid = bad[3]
    assert mid[-1]["type"] == "end" and "fellow" in words(committed_text(mid))
    idle = bad[7]
    assert idle[-1]["type"] == "end" and "americans" in words(committed_text(idle))


def test_a_stream_chooses_how_rounds_hear_their_buffer_and_bad_choices_are_named(server: str,
                                                                                 jfk_audio: np.ndarray) -> None:
    """``window`` and ``hush`` in the config reach the stream's session; a bad value, or either in
    an utterance stream, is refused with a message that names the field, and so are a language
    to detect and translation on an English-only model."""
    async def scenario() -> tuple[list[dict[str, object]], list[list[dict[str, object]]]]:
        hushed = await stream_file(server, jfk_audio, {"format": "s16le", "hush": True, "window": 30})
        bad = [await bad_stream(server, config, []) for config in (
            {"format": "s16le", "window": 0.5}, {"format": "s16le", "window": True},
            {"format": "s16le", "hush": "yes"}, {"mode": "utterances", "hush": True},
            {"format": "s16le", "language": "auto"}, {"format": "s16le", "task": "translate"})]
        return hushed, bad

    hushed, bad = asyncio.run(scenario())
    assert hushed[0]["type"] == "ready" and (hushed[0]["hush"], hushed[0]["window"]) == (True, 30.0)
    assert sum(w in words(committed_text(hushed)) for w in words(JFK_TEXT)) >= len(words(JFK_TEXT)) - 2
    errors = [next(e for e in events if e["type"] == "error") for events in bad]
    assert [e["code"] for e in errors] == ["bad_config"] * 6
    assert ["window" in str(errors[0]["message"]), "window" in str(errors[1]["message"]),
            "hush" in str(errors[2]["message"]), "caption settings" in str(errors[3]["message"])] == [True] * 4
    # the server's model is English-only: no detection, no translation
    assert all("English-only" in str(e["message"]) for e in errors[4:]), errors[4:]


def test_a_vanished_client_and_a_session_limit_leave_the_server_serving(server: str, jfk_audio: np.ndarray) -> None:
    import websockets

    async def scenario() -> list[dict[str, object]]:
        url = server.replace("http", "ws") + "/v1/stream"
        gone = await websockets.connect(url, additional_headers={"Authorization": f"Bearer {KEY}"})
        await gone.send(json.dumps({"format": "s16le"}))
        await gone.send(pcm16(jfk_audio[:32000]))
        gone.transport.abort()  # no close handshake: the client just vanishes
        deadline = time.monotonic() + 60  # the server notices, ends that stream and frees its place
        while json.loads(get(f"{server}/health")[1])["sessions"] and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert json.loads(get(f"{server}/health")[1])["sessions"] == 0
        held = []
        for _ in range(4):
            ws = await websockets.connect(url, additional_headers={"Authorization": f"Bearer {KEY}"})
            await ws.send(json.dumps({"format": "s16le"}))
            assert json.loads(await ws.recv())["type"] == "ready"
            held.append(ws)
        refused = await bad_stream(server, {"format": "s16le"}, [])
        for ws in held:
            await ws.close()
        await asyncio.sleep(0.5)
        return refused

    refused = asyncio.run(scenario())
    assert refused and refused[0]["code"] == "busy"
    assert json.loads(get(f"{server}/health")[1])["status"] == "ok"
    events = asyncio.run(stream_file(server, jfk_audio[: 5 * 16000]))
    assert events[-1]["type"] == "end" and words(committed_text(events))
    status, metrics = get(f"{server}/metrics", KEY)
    assert status == 200
    assert "stenoflow_dropped_audio_seconds_total 0" in metrics
    assert 'stenoflow_errors_total{code="busy"}' in metrics and "stenoflow_rounds_total" in metrics
    assert get(f"{server}/metrics")[0] == 401


def test_the_caption_page_shows_the_words_in_headless_chromium(server: str, jfk_path: Path) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--use-fake-ui-for-media-stream",
                "--use-fake-device-for-media-stream", f"--use-file-for-fake-audio-capture={jfk_path}",
                "--autoplay-policy=no-user-gesture-required"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        driver.get(server + "/")
        driver.find_element(By.ID, "key").send_keys(KEY)
        driver.find_element(By.ID, "start").click()
        WebDriverWait(driver, 90, poll_frequency=0.5).until(
            lambda d: "country" in d.find_element(By.ID, "committed").text.lower())
        committed = driver.find_element(By.ID, "committed").text
        assert "latency:" in driver.find_element(By.ID, "latency").text
        assert driver.find_element(By.ID, "committed").value_of_css_property("color") in ("rgba(0, 0, 0, 1)",
                                                                                         "rgb(0, 0, 0)")
        assert driver.find_element(By.ID, "tail").value_of_css_property("color") != \
            driver.find_element(By.ID, "committed").value_of_css_property("color")
        driver.find_element(By.ID, "stop").click()
        WebDriverWait(driver, 30).until(lambda d: d.find_element(By.ID, "status").text in ("stopped", "closed"))
        heard = words(committed)
        assert sum(w in heard for w in set(words(JFK_TEXT))) >= 8  # the fake microphone's speech, not one word
    finally:
        driver.quit()


def test_the_utterance_mode_sends_one_final_text_per_utterance(server: str, jfk_audio: np.ndarray) -> None:
    events = asyncio.run(stream_file(server, jfk_audio, {"format": "s16le", "mode": "utterances"}, pause_s=0.01))
    assert events[0]["type"] == "ready" and events[0]["mode"] == "utterances"
    utterances = [e for e in events if e["type"] == "utterance"]
    assert events[-1]["type"] == "end" and events[-1]["utterances"] == len(utterances) >= 2
    heard = words(" ".join(str(u["text"]) for u in utterances))
    assert sum(w in heard for w in words(JFK_TEXT)) >= len(words(JFK_TEXT)) - 4
    assert len(heard) <= len(words(JFK_TEXT)) + 2  # no utterance twice
    starts = [float(u["start"]) for u in utterances]  # type: ignore[arg-type]
    assert starts == sorted(starts) and all(float(u["end"]) > float(u["start"]) for u in utterances)  # type: ignore[arg-type]
    bad = asyncio.run(bad_stream(server, {"mode": "commands"}, []))
    assert bad[0]["type"] == "error" and "mode" in str(bad[0]["message"])


def test_a_local_session_offloads_unsure_utterances_to_the_server(server: str, tiny, jfk_audio: np.ndarray) -> None:
    from stenoflow.utterance.offload import OffloadOptions

    # A threshold of 1 offloads every utterance: the text comes from the server process.
    heard = tiny.utterances(jfk_audio, offload=OffloadOptions(server, perplexity=1.0, api_key=KEY))
    assert heard and all(u.offloaded for u in heard)
    assert sum(w in words(" ".join(u.text for u in heard)) for w in words(JFK_TEXT)) >= len(words(JFK_TEXT)) - 4
    # A server that refuses (wrong key) costs nothing: the local text stands.
    kept = tiny.utterances(jfk_audio, offload=OffloadOptions(server, perplexity=1.0, api_key="wrong"))
    assert kept and not any(u.offloaded for u in kept)
    assert [u.text for u in kept] == [u.local_text for u in kept]


def test_admission_by_latency_refuses_a_stream_it_cannot_measure_yet_and_the_admitted_one_keeps_every_word(
        tmp_path: Path, jfk_audio: np.ndarray) -> None:
    """``--max-sessions auto``: a second stream that comes while the first one's cost is still
    unknown is refused with ``busy`` and the reason; the first keeps every word, and the server's
    own measure of its words' latency is in /metrics."""
    async def scenario(url: str) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
        first = asyncio.create_task(stream_file(url, jfk_audio, pause_s=0.1))  # about real time
        await asyncio.sleep(1.0)
        refused = await bad_stream(url, {"format": "s16le"}, [])
        return await first, refused

    with running_server(["--model", "tiny.en", "--threads", "2", "--max-sessions", "auto",
                         "--target-latency", "3"], tmp_path / "server.log") as url:
        events, refused = asyncio.run(scenario(url))
        status, metrics = get(f"{url}/metrics", KEY)
    assert refused and refused[0]["code"] == "busy" and "measuring" in str(refused[0]["message"])
    said, heard = words(JFK_TEXT), words(committed_text(events))
    assert len(heard) <= len(said) + 2 and sum(w in heard for w in said) >= len(said) - 2
    assert status == 200 and 'stenoflow_admission_refused_total{reason="measuring"} 1' in metrics
    counted = next(line for line in metrics.splitlines() if line.startswith("stenoflow_stream_words_total "))
    assert int(counted.split()[1]) == len(heard)
    assert "stenoflow_target_latency_seconds 3" in metrics
