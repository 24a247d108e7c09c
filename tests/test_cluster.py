"""stenoflow on a real Ray cluster: a head and a worker node started as separate processes
(``ray start``), a batch job that meets a corrupt file and a killed replica, and a stream through
the Serve deployment. Plus the input expansion and resume logic, which need no cluster."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from clients import KEY, committed_text, free_port, get, running_server, stream_file, words
from conftest import JFK_TEXT

from stenoflow.cluster.batch import MANIFEST, ManifestRow, pending_inputs
from stenoflow.cluster.chunks import SAMPLE_RATE, cut_points, join_parts
from stenoflow.cluster.inputs import BatchInput, expand_inputs
from stenoflow.decoding.transcribe import Segment, Word

RAY = str(Path(sys.executable).with_name("ray"))


# --- inputs and resuming (no cluster) -----------------------------------------------------------
def test_inputs_expand_directories_globs_and_manifests_with_unique_keys(tmp_path: Path) -> None:
    for rel in ("a/talk.wav", "a/day2/talk.flac", "a/notes.txt", "b/talk.wav", "c.mp3"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(b"x")
    (tmp_path / "list.txt").write_text(f"# archive\n{tmp_path / 'c.mp3'}\nb/talk.wav\ns3://bucket/x/talk.wav\n")
    got = expand_inputs([str(tmp_path / "a"), str(tmp_path / "*.mp3"), str(tmp_path / "list.txt")])
    assert [(Path(i.source).name if "://" not in i.source else i.source, i.key) for i in got] == [
        ("talk.flac", "day2/talk"), ("talk.wav", "talk"), ("c.mp3", "c"), ("talk.wav", "talk-2"),
        ("s3://bucket/x/talk.wav", "talk-3")]  # notes.txt in a directory is not audio; c.mp3 listed once
    (tmp_path / "bad.jsonl").write_text('{"file": "x"}\n')
    with pytest.raises(ValueError, match="bad.jsonl:1"):
        expand_inputs([str(tmp_path / "bad.jsonl")])
    with pytest.raises(ValueError, match="no such file"):
        expand_inputs([str(tmp_path / "missing")])


def test_a_rerun_does_what_is_not_done(tmp_path: Path) -> None:
    inputs = [BatchInput(f"/data/{k}.wav", k) for k in ("a", "b", "c", "d")]
    rows = [ManifestRow("/data/a.wav", "a", outputs=["a.txt"]), ManifestRow("/data/b.wav", "b", error="corrupt"),
            ManifestRow("/data/c.wav", "c", outputs=["c.txt"])]
    (tmp_path / MANIFEST).write_text("".join(json.dumps(r.__dict__) + "\n" for r in rows) + "{torn line\n")
    (tmp_path / "a.txt").write_text("done")
    # a: done; b: failed, tried again; c: its transcript was deleted; d: never run.
    assert [i.key for i in pending_inputs(inputs, tmp_path)] == ["b", "c", "d"]


def test_long_recordings_are_cut_in_pauses_and_joined_on_their_clock() -> None:
    rng = np.random.default_rng(0)
    speech = rng.normal(0, 0.1, 50 * SAMPLE_RATE).astype(np.float32)
    for pause_s in (8.3, 17.9):  # quiet half seconds inside the first two search windows
        speech[int(pause_s * SAMPLE_RATE) : int((pause_s + 0.6) * SAMPLE_RATE)] *= 0.01
    cuts = cut_points(speech, chunk_s=10.0)
    assert [round(c / SAMPLE_RATE, 1) for c in cuts[:2]] == [8.6, 18.2] and cuts[-1] == len(speech)
    lengths = np.diff([0, *cuts]) / SAMPLE_RATE
    assert all(lengths[:-1] <= 10.0) and all(lengths[:-1] >= 7.5) and lengths[-1] < 15.0
    assert cut_points(speech[: 14 * SAMPLE_RATE], 10.0) == [14 * SAMPLE_RATE]  # < 1.5 parts: whole
    assert cut_points(speech, 0.0) == [len(speech)]

    def seg(start: float, end: float, text: str) -> Segment:
        return Segment(0, 0, start, end, text, [], 0.0, -0.1, 1.0, 0.0, [Word(text, start, end, 0.9)])

    joined = join_parts([(0.0, [seg(0.0, 4.0, " a"), seg(4.0, 8.0, " b")]), (8.6, [seg(0.5, 3.0, " c")])])
    assert [(s.id, s.start, s.end, s.text) for s in joined] == [(0, 0.0, 4.0, " a"), (1, 4.0, 8.0, " b"),
                                                                 (2, 9.1, 11.6, " c")]
    assert joined[2].words == [Word(" c", 9.1, 11.6, 0.9)] and joined[2].seek == 860


# --- a real cluster ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    """A head node and a worker node, one CPU each, as separate ``ray start`` processes."""
    if shutil.which(RAY) is None:
        pytest.fail("the ray CLI is missing: install the cluster extra")
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16),
           "RAY_USAGE_STATS_ENABLED": "0"}
    port = free_port()
    address = f"127.0.0.1:{port}"
    log = tmp_path_factory.mktemp("ray") / "ray.log"
    with log.open("w") as out:
        for args in (["--head", f"--port={port}", "--include-dashboard=false", "--num-cpus=1"],
                     [f"--address={address}", "--num-cpus=1"]):
            done = subprocess.run([RAY, "start", *args, "--disable-usage-stats"], env=env, stdout=out,
                                  stderr=subprocess.STDOUT, timeout=180, check=False)
            assert done.returncode == 0, log.read_text()
    try:
        yield address, env
    finally:
        subprocess.run([RAY, "stop", "--force"], env=env, capture_output=True, timeout=120, check=False)


def replica_pids() -> list[int]:
    """Processes of the batch job's model replicas (Ray names its workers after their actor)."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and b"Transcriber" in (proc / "cmdline").read_bytes():
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


@pytest.mark.slow
def test_a_batch_job_survives_a_corrupt_file_and_a_killed_replica(cluster: tuple[str, dict[str, str]],
                                                                    tmp_path: Path) -> None:
    from stenoflow.bench.datasets import short_clips

    address, env = cluster
    archive = tmp_path / "archive"
    (archive / "day2").mkdir(parents=True)
    clips = short_clips(8, min_s=6.0, max_s=14.0, seed=3)
    for i, clip in enumerate(clips):
        shutil.copy(clip.audio_path, archive / ("day2" if i % 2 else ".") / f"item{i}.wav")
    (archive / "corrupt.wav").write_bytes(b"RIFF" + os.urandom(3000))
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "stenoflow.cli", "transcribe-batch", str(archive), "-o", str(out), "--model",
           "tiny.en", "--ray-address", address, "--actors", "2", "--no-progress", "--chunk-minutes", "0.1"]
    job = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # Once the first transcript is in, kill one replica's process in the middle of the job.
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and job.poll() is None:
        lines = (out / MANIFEST).read_text().splitlines() if (out / MANIFEST).exists() else []
        if any('"error": null' in line for line in lines) and replica_pids():
            break
        time.sleep(0.05)
    assert job.poll() is None, job.communicate()[0]
    rows_before_kill = len(lines)
    victim = replica_pids()[0]
    os.kill(victim, signal.SIGKILL)
    output = job.communicate(timeout=600)[0]
    assert job.returncode == 1, output  # one file failed, and the exit status says so
    assert rows_before_kill < 9
    rows = [json.loads(line) for line in (out / MANIFEST).read_text().splitlines()]
    assert sorted(Path(r["path"]).name for r in rows) == sorted([*(f"item{i}.wav" for i in range(8)), "corrupt.wav"])
    bad = [r for r in rows if r["error"]]
    assert [Path(r["path"]).name for r in bad] == ["corrupt.wav"] and "cannot be decoded" in bad[0]["error"]
    for i, clip in enumerate(clips):
        key = f"day2/item{i}" if i % 2 else f"item{i}"
        row = next(r for r in rows if r["key"] == key)
        said, heard = words(clip.text), words((out / f"{key}.txt").read_text())
        assert sum(w in heard for w in said) >= 0.6 * len(said), (said, heard)
        assert row["text"].strip() and row["outputs"] == [f"{key}.txt", f"{key}.json"]
        # Files over 9 s were cut into 6 s parts; their segments join on the file's clock.
        segments = json.loads((out / f"{key}.json").read_text())["segments"]
        assert [s["id"] for s in segments] == list(range(len(segments)))
        assert all(a["start"] <= b["start"] for a, b in itertools.pairwise(segments))
        assert segments[-1]["end"] <= row["duration"] + 0.5 and abs(row["duration"] - clip.duration) < 0.05
    # A rerun transcribes only what is not done: the corrupt file, which fails again.
    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert again.returncode == 1 and "8 done before" in again.stderr, again.stderr
    assert len((out / MANIFEST).read_text().splitlines()) == 9


@pytest.mark.slow
def test_a_stream_through_the_serve_deployment(cluster: tuple[str, dict[str, str]], jfk_audio: np.ndarray,
                                               tmp_path: Path) -> None:
    address, env = cluster
    with running_server(["--model", "tiny.en", "--ray-address", address, "--replicas", "1", "--max-replicas", "2",
                         "--host", "127.0.0.1"], tmp_path / "serve.log", env, start_s=300, stop_s=60) as url:
        assert get(f"{url}/v1/models")[0] == 401  # the replicas run the server's own routes, auth included
        assert json.loads(get(f"{url}/v1/models", KEY)[1])["data"][0]["id"] == "tiny.en"
        events = asyncio.run(stream_file(url, jfk_audio, pause_s=0.01))
        assert events[0]["type"] == "ready" and events[-1]["type"] == "end"
        said, heard = words(JFK_TEXT), words(committed_text(events))
        assert len(heard) <= len(said) + 2 and sum(w in heard for w in said) >= len(said) - 2
