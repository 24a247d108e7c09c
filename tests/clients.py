"""Real clients of a running server, shared by the server tests: HTTP GET, a WebSocket stream."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

KEY = "test-key-123"
CHUNK = 1600  # 0.1 s


def get(url: str, key: str | None = None) -> tuple[int, str]:
    """(status, body) of a GET, with the bearer key if given."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running_server(args: list[str], log: Path, env: dict[str, str] | None = None, start_s: float = 120,
                   stop_s: float = 30) -> Iterator[str]:
    """``stenoflow serve ARGS`` (with the test key, in ``env`` or this environment) on a free port
    until the block ends; its URL. Its output goes to ``log``; it has ``start_s`` to answer
    ``/health`` and ``stop_s`` to exit."""
    port = free_port()
    env = {**(os.environ if env is None else env), "STENOFLOW_API_KEY": KEY}
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "stenoflow.cli", "serve", "--port", str(port), *args],
                                stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + start_s
        while time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()
            try:
                if get(f"{url}/health")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.3)
        else:
            raise AssertionError(f"server did not come up:\n{log.read_text()}")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=stop_s)


def words(text: str) -> list[str]:
    return ["".join(c for c in w.lower() if c.isalnum()) for w in text.split() if any(c.isalnum() for c in w)]


def pcm16(audio: np.ndarray) -> bytes:
    return (np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes()


async def stream_file(url: str, audio: np.ndarray, config: dict[str, object] | None = None,
                      read_while_sending: bool = True, pause_s: float = 0.0) -> list[dict[str, object]]:
    import websockets

    events: list[dict[str, object]] = []
    ws_url = url.replace("http", "ws") + "/v1/stream"
    async with websockets.connect(ws_url, additional_headers={"Authorization": f"Bearer {KEY}"}) as ws:
        await ws.send(json.dumps(config or {"format": "s16le", "sample_rate": 16000}))
        events.append(json.loads(await ws.recv()))
        data = pcm16(audio)
        for i in range(0, len(data), 2 * CHUNK):
            await ws.send(data[i : i + 2 * CHUNK])
            if pause_s:
                await asyncio.sleep(pause_s)
            if read_while_sending:
                while True:
                    try:
                        events.append(json.loads(await asyncio.wait_for(ws.recv(), 0.001)))
                    except asyncio.TimeoutError:
                        break
        await ws.send(json.dumps({"type": "end"}))
        async for message in ws:
            events.append(json.loads(message))
    return events


def committed_text(events: list[dict[str, object]]) -> str:
    return "".join(str(w["word"]) for e in events if e["type"] == "update" for w in e["committed"])  # type: ignore[union-attr]
