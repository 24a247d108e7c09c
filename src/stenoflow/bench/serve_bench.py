"""``stenoflow bench serve``: N clients streaming different files in real time against one server.

The server runs as its own process (``stenoflow serve``) on a free port; for each N (1, 2, 4, 6, 8
by default) N WebSocket clients each stream their own synthesized recording at 1x wall clock in
0.1 s chunks and note when every committed word arrives. The recordings alternate between
continuous read prose and conversational talk (short items with pauses of 1 to 3 s, a fifth to
two fifths of it silence). Reported per N: per-word latency (arrival - the word's end in the
forced-aligned reference, as ``bench stream`` measures it) p50/p90/mean and the worst stream's
mean, WER, and the WER of the same streams each served alone; the server's CPU seconds per audio
second per session, its resident memory, the audio it dropped (from ``/metrics``) and whether
every stream kept up (its last word arrived within a few seconds of its end). With
``auto_clients``, that many clients then connect at once to a server admitting streams by its
latency target (``--max-sessions auto``): how many it admitted, and how late their words came.
Results: ``serve.md``, ``serve.json`` (machine, options, rows), ``serve.png``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from stenoflow.bench.clips import Clip
from stenoflow.bench.datasets import streams
from stenoflow.bench.gold import GoldWord, gold_words
from stenoflow.bench.latency import LatencyStats, timed_latencies, word_latencies
from stenoflow.bench.machine import write_results
from stenoflow.bench.metrics import wer
from stenoflow.bench.varied import talk_streams
from stenoflow.server.options import ServerOptions
from stenoflow.streaming.drivers import EmittedWord

log = logging.getLogger(__name__)

CHUNK_S = 0.1
KEPT_UP_S = 5.0  # a stream kept up if its last word arrived within this of the end of its audio
RETRY_EVERY_S = 2.0  # a client the auto server refused tries again this often ...
AUTO_RETRY_S = 30.0  # ... for this long
Served = tuple[list[EmittedWord], float]  # a stream's committed words as they arrived, when its end came


@dataclass(frozen=True)
class ServeBenchOptions:
    model: str = "tiny.en"
    compute: str | None = None  # None: serve's default
    clients: tuple[int, ...] = (1, 2, 4, 6, 8)
    minutes: float = 1.5  # length of each client's recording
    threads: int = 2
    gold_model: str = "base"
    drift_minutes: float = 0.0  # then one stream this long: latency of its first and last 5 minutes, memory
    # Server ``--batch`` values to compare (sessions whose decoder passes merge); the long stream
    # runs with the first.
    batches: tuple[int, ...] = (ServerOptions.batch,)
    alone: bool = True  # serve every stream alone too, for its unloaded WER and latency
    auto_clients: int = 6  # then this many clients at once against --max-sessions auto (0: none)
    target_latency: float = ServerOptions.target_latency_s  # the auto server's --target-latency


def client_streams(n: int, minutes: float) -> list[Clip]:
    """``n`` recordings, read prose and conversational talk in turns."""
    prose, talk = streams((n + 1) // 2, minutes, seed=7), talk_streams(n // 2, minutes)
    return [(prose if i % 2 == 0 else talk)[i // 2] for i in range(n)]


def run_serve_bench(options: ServeBenchOptions, out_dir: Path) -> str:
    from stenoflow.api import load_model

    most = max((*options.clients, options.auto_clients))
    clips = client_streams(most, options.minutes)
    audios = [clip.load_audio() for clip in clips]
    gold_model = load_model(options.gold_model, compute="float32")
    gold = [gold_words(c, gold_model, a) for c, a in zip(clips, audios)]
    drift_clip = streams(1, options.drift_minutes)[0] if options.drift_minutes else None
    drift_gold = gold_words(drift_clip, gold_model) if drift_clip is not None else []
    del gold_model
    rows: list[dict[str, object]] = []
    server_log = out_dir / "server.log"
    alone: list[Served | None] = []
    if options.alone:
        with Server(options, server_log) as server:
            for audio in audios[:most]:
                alone.append(asyncio.run(_client(server.url, audio)))
                log.info("served alone: %d words", len(alone[-1][0]))
    for batch in options.batches:
        for n in options.clients:
            with Server(options, server_log, batch) as server:
                served = asyncio.run(_run_clients(server, audios[:n]))
                rows.append({"batch": batch, **_row(server, clips[:n], audios[:n], gold[:n], served, alone[:n])})
            log.info("%s", rows[-1])
    if options.auto_clients:
        n = options.auto_clients
        with Server(options, server_log, options.batches[0], auto=True) as server:
            served = asyncio.run(_run_clients(server, audios[:n], AUTO_RETRY_S))
            admitted = [i for i, s in enumerate(served) if s is not None]
            row = _row(server, [clips[i] for i in admitted], [audios[i] for i in admitted],
                       [gold[i] for i in admitted], [served[i] for i in admitted],
                       [alone[i] for i in admitted if i < len(alone)])
            rows.append({"batch": f"auto ({n} tried)", **row, "refused": n - len(admitted),
                         "target_misses": server.metric("target_misses_total"),
                         "server_words": server.metric("stream_words_total")})
        log.info("%s", rows[-1])
    drift = None
    if drift_clip is not None:
        with Server(options, server_log, options.batches[0]) as server:
            drift = asyncio.run(_run_drift(server, drift_clip, drift_gold))
        log.info("drift: %s", drift)
    table = format_table(rows) + ("\n\n" + format_drift(drift) if drift is not None else "")
    write_results(out_dir, "serve", "Server benchmark", options, rows + ([{"drift": drift}] if drift else []), table,
                  "Each client streams its own recording at 1x real time in 0.1 s chunks over /v1/stream. Latency: "
                  "when a committed word reached the client minus the word's end in the reference. CPU: server CPU "
                  "seconds per audio second per session. Batch: the server's --batch (sessions whose decoder "
                  "passes run in one forward), or auto: a server at --max-sessions auto (--target-latency "
                  f"{options.target_latency:g} s) that as many clients tried at once (a refused one again every "
                  f"{RETRY_EVERY_S:g} s for {AUTO_RETRY_S:g} s), the figures of those it admitted; sessions per forward: decoder passes asked for / forwards run. Half the clients "
                  "stream read prose, half conversational talk with pauses. WER alone: the same streams each "
                  "served by itself. Kept up: every stream's last word arrived within "
                  f"{KEPT_UP_S:g} s of its end.")
    plot([r for r in rows if isinstance(r["batch"], int)], out_dir / "serve.png")
    return table


class Server:
    """``stenoflow serve`` in a child process on a free port, for the length of a ``with``; its log
    goes to ``log_path`` (appended), or nowhere."""

    def __init__(self, options: ServeBenchOptions, log_path: Path | None = None,
                 batch: int = ServerOptions.batch, auto: bool = False) -> None:
        self.options = options
        self.log_path = log_path
        self.batch = batch
        self.auto = auto  # --max-sessions auto at the options' target latency
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.cpu_used = 0.0  # server CPU seconds the last clients took

    def __enter__(self) -> Server:  # noqa: PYI034
        args = [sys.executable, "-m", "stenoflow.cli", "serve", "--model", self.options.model, "--port",
                str(self.port), "--threads", str(self.options.threads), "--batch", str(self.batch),
                "--max-sessions", "auto" if self.auto else "64", "--target-latency", str(self.options.target_latency)]
        if self.options.compute:
            args += ["--compute", self.options.compute]
        env = {k: v for k, v in os.environ.items() if k != "STENOFLOW_API_KEY"}
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
        # The child keeps its own copy of the log's handle.
        with self.log_path.open("ab") if self.log_path is not None else nullcontext(subprocess.DEVNULL) as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("the server exited while starting")
            try:
                urllib.request.urlopen(f"{self.url}/health", timeout=1).read()
                return self
            except OSError:
                time.sleep(0.3)
        raise RuntimeError("the server did not come up")

    def __exit__(self, *exc: object) -> None:
        assert self.proc is not None
        self.proc.terminate()
        self.proc.wait(timeout=30)

    def cpu_s(self) -> float:
        assert self.proc is not None
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_mb(self) -> float:
        assert self.proc is not None
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def sessions_per_forward(self) -> float:
        """Decoder passes asked for per forward run (NaN when the server does not merge passes)."""
        passes = self.metric("decoder_passes_total")
        return self.metric("decoder_pass_calls_total") / passes if passes else float("nan")

    def metric(self, name: str) -> float:
        text = urllib.request.urlopen(f"{self.url}/metrics", timeout=10).read().decode()
        for line in text.splitlines():
            if line.startswith(f"stenoflow_{name} "):
                return float(line.split()[1])
        return float("nan")


async def _client(url: str, audio: np.ndarray, retry_s: float = 0.0) -> Served | None:
    """Stream ``audio`` in real time; the committed words with their arrival (s after the start) and
    when the end event arrived; None if the server refused the stream (busy), again every
    ``RETRY_EVERY_S`` for ``retry_s``."""
    import websockets

    words: list[EmittedWord] = []
    pcm = (np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes()
    step = int(CHUNK_S * 16000) * 2
    give_up = time.monotonic() + retry_s
    while True:
        ws = await websockets.connect(url.replace("http", "ws") + "/v1/stream", max_size=None)
        try:  # a refusing server sends its error and closes before it reads the config
            await ws.send(json.dumps({"format": "s16le", "sample_rate": 16000}))
            if json.loads(await ws.recv())["type"] == "ready":
                break
        except websockets.ConnectionClosed:
            pass
        await ws.close()
        if time.monotonic() + RETRY_EVERY_S > give_up:
            return None
        await asyncio.sleep(RETRY_EVERY_S)
    async with ws:
        t0 = time.monotonic()

        async def send() -> None:
            for i, at in enumerate(range(0, len(pcm), step)):
                await asyncio.sleep(max(0.0, t0 + i * CHUNK_S - time.monotonic()))
                await ws.send(pcm[at : at + step])
            await ws.send(json.dumps({"type": "end"}))

        sender = asyncio.create_task(send())
        ended = float("nan")
        async for message in ws:
            event = json.loads(message)
            now = time.monotonic() - t0
            if event["type"] == "update":
                words += [EmittedWord(w["word"], w["start"], w["end"], now) for w in event["committed"]]
            elif event["type"] == "end":
                ended = now
        await sender
    return words, ended


async def _run_clients(server: Server, audios: list[np.ndarray], retry_s: float = 0.0) -> list[Served | None]:
    """Every audio streamed by a client of its own, all at once (a refused client tries again for
    ``retry_s``); the server CPU they took is noted on ``server``."""
    cpu0 = server.cpu_s()
    results = await asyncio.gather(*(_client(server.url, a, retry_s) for a in audios))
    server.cpu_used = server.cpu_s() - cpu0
    return list(results)


def _row(server: Server, clips: list[Clip], audios: list[np.ndarray], gold: list[list[GoldWord]],
         served: list[Served | None], alone: list[Served | None]) -> dict[str, object]:
    """The figures of clients that streamed ``clips`` at once (``served``), beside the same
    streams served alone (``alone``, maybe fewer)."""
    latencies: list[float] = []
    means: list[float] = []
    kept_up = True
    hyps, refs = [], []
    for clip, audio, ref, result in zip(clips, audios, gold, served):
        assert result is not None
        words, ended = result
        mine = word_latencies(ref, words)
        latencies += mine
        means.append(LatencyStats.of(mine).mean)
        kept_up &= ended - len(audio) / 16000 <= KEPT_UP_S
        hyps.append("".join(w.word for w in words))
        refs.append(clip.text)
    stats = LatencyStats.of(latencies)
    audio_s = sum(len(a) for a in audios) / 16000
    alone_hyps = ["".join(w.word for w in a[0]) for a in alone if a is not None]
    return {"clients": len(clips), "words": stats.words, "latency_p50": stats.median, "latency_p90": stats.p90,
            "latency_mean": stats.mean, "worst_stream_mean": max(means, default=float("nan")),
            "wer": wer(refs, hyps).wer if refs else float("nan"),
            "alone_wer": wer(refs, alone_hyps).wer if refs and len(alone_hyps) == len(refs) else float("nan"),
            "cpu_per_audio_s_per_session": server.cpu_used / audio_s if audio_s else float("nan"),
            "server_rtf": server.metric("stream_rtf"), "rss_mb": server.rss_mb(),
            "dropped_audio_s": server.metric("dropped_audio_seconds_total"), "kept_up": kept_up,
            "sessions_per_forward": server.sessions_per_forward()}


async def _run_drift(server: Server, clip: Clip, gold: list[GoldWord]) -> dict[str, object]:
    """One long real-time stream, the server's resident memory sampled every 15 s."""
    rss: list[tuple[float, float]] = []
    started = time.monotonic()

    async def sample() -> None:
        while True:
            rss.append((time.monotonic() - started, server.rss_mb()))
            await asyncio.sleep(15.0)

    sampler = asyncio.create_task(sample())
    audio = clip.load_audio()
    served = await _client(server.url, audio)
    if served is None:
        raise RuntimeError("the server refused the long stream")
    words, ended = served
    sampler.cancel()
    timed = timed_latencies(gold, words)
    duration = len(audio) / 16000
    first = LatencyStats.of([lat for end, lat in timed if end <= 300])
    last = LatencyStats.of([lat for end, lat in timed if end >= duration - 300])
    return {"clip": clip.audio_path.name, "minutes": duration / 60, "first5_p50": first.median, "first5_p90": first.p90,
            "last5_p50": last.median, "last5_p90": last.p90, "p90_ratio": last.p90 / first.p90,
            "rss_mb_start": rss[min(1, len(rss) - 1)][1], "rss_mb_end": rss[-1][1], "rss_mb_max": max(r for _, r in rss),
            "rss_samples": rss, "wer": wer([clip.text], ["".join(w.word for w in words)]).wer,
            "end_after_audio_s": ended - duration, "dropped_audio_s": server.metric("dropped_audio_seconds_total")}


def format_drift(d: dict[str, object]) -> str:
    return (f"Long stream {d['clip']} ({float(d['minutes']):.1f} min, one client, real time): latency p50/p90 "  # type: ignore[arg-type]
            f"first 5 min {d['first5_p50']:.2f}/{d['first5_p90']:.2f} s, last 5 min {d['last5_p50']:.2f}/"
            f"{d['last5_p90']:.2f} s (p90 ratio {d['p90_ratio']:.2f}); server RSS {d['rss_mb_start']:.0f} MB after "
            f"15 s, {d['rss_mb_end']:.0f} MB at the end, {d['rss_mb_max']:.0f} MB at most; WER "
            f"{100 * float(d['wer']):.2f} %; dropped audio {d['dropped_audio_s']:g} s.")  # type: ignore[arg-type]


def format_table(rows: list[dict[str, object]]) -> str:
    head = ["batch", "clients", "words", "latency p50 s", "latency p90 s", "latency mean s", "worst stream mean s",
            "WER %", "WER alone %", "CPU s / audio s / session", "server RTF (model time / audio)",
            "sessions per forward", "server RSS MB", "dropped audio s", "kept up"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        clients = f"{r['clients']} ({r['refused']} refused)" if "refused" in r else str(r["clients"])
        lines.append("| " + " | ".join([
            str(r["batch"]), clients, str(r["words"]), f"{r['latency_p50']:.2f}", f"{r['latency_p90']:.2f}",
            f"{r['latency_mean']:.2f}", f"{r['worst_stream_mean']:.2f}",
            f"{100 * float(r['wer']):.2f}", f"{100 * float(r['alone_wer']):.2f}",  # type: ignore[arg-type]
            f"{r['cpu_per_audio_s_per_session']:.3f}",  # type: ignore[arg-type]
            f"{r['server_rtf']:.3f}", f"{float(r['sessions_per_forward']):.2f}",  # type: ignore[arg-type]
            f"{r['rss_mb']:.0f}", f"{r['dropped_audio_s']:g}",
            "yes" if r["kept_up"] else "no"]) + " |")
    return "\n".join(lines)


def plot(rows: list[dict[str, object]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.set_xscale("log", base=2)
    for batch in dict.fromkeys(r["batch"] for r in rows):
        mine = [r for r in rows if r["batch"] == batch]
        n = [int(r["clients"]) for r in mine]  # type: ignore[call-overload]
        ax.plot(n, [float(r["latency_p50"]) for r in mine], "o-", label=f"p50, batch {batch}")  # type: ignore[arg-type]
        ax.plot(n, [float(r["latency_p90"]) for r in mine], "s--", label=f"p90, batch {batch}")  # type: ignore[arg-type]
        ax.set_xticks(n, [str(k) for k in n])
    ax.set_xlabel("concurrent real-time streams")
    ax.set_ylabel("per-word latency (s)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
