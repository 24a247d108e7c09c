"""The cache of built networks and the one default compute type: a stored build gives what a
fresh build gives, a damaged or stale entry is built again (never loaded), and every entry
point loads the same precision. Every test keeps its cache in a temporary directory."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from stenoflow.api import Model, load_model
from stenoflow.model.build import StoredInt8Linear, pack_ahead, tensors_of
from stenoflow.model.compute import FLOAT16, INT8, INT8_BFLOAT16, cpu_compute, default_compute
from stenoflow.model.cpu_features import native_int8_dot
from stenoflow.model.quant import Int8Linear
from stenoflow.weights import built
from stenoflow.weights.registry import model_source, resolve_model


def _stored(model: Model) -> bool:
    """Whether ``model``'s int8 layers came from a stored build (else they were rounded here)."""
    layers = [m for m in model.whisper.modules() if isinstance(m, Int8Linear)]
    assert layers
    kinds = {isinstance(m, StoredInt8Linear) for m in layers}
    assert len(kinds) == 1
    return kinds.pop()


def _tokens(model: Model, audio: np.ndarray) -> list[list[int]]:
    segments, _ = model.transcribe(audio, beam_size=5)
    return [list(s.tokens) for s in segments]


def _packed_ahead() -> None:
    """Wait for the threads that pack stored layers ahead (see ``pack_ahead``) to finish."""
    for thread in threading.enumerate():
        if thread.name == "stenoflow-pack":
            thread.join()


def _entries(cache: Path) -> list[Path]:
    return sorted((cache / "built").glob("*.safetensors"))


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache root whose joined and converted models the tests share (made once)."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture
def cache(shared_cache: Path) -> Path:
    """``shared_cache`` without built networks or tokenizers: the next load builds."""
    for part in ("built", "tokenizers"):
        shutil.rmtree(shared_cache / part, ignore_errors=True)
    return shared_cache


@pytest.fixture(scope="module")
def tiny_int8_tokens(shared_cache: Path, jfk_audio: np.ndarray) -> list[list[int]]:
    """The tokens of tiny.en in int8 on jfk.wav, rounded here without the cache of built networks."""
    model = Model(resolve_model("tiny.en", cache_dir=shared_cache), "tiny.en", compute=INT8)  # no stored build
    assert not _stored(model)
    return _tokens(model, jfk_audio)


def test_base_int8_from_the_cache_equals_int8_rounded_fresh(cache: Path, jfk_audio: np.ndarray) -> None:
    fresh = load_model("base", compute=INT8, cache_dir=cache)
    cached = load_model("base", compute=INT8, cache_dir=cache)
    assert not _stored(fresh) and _stored(cached)
    fresh_tensors, cached_tensors = tensors_of(fresh.whisper), tensors_of(cached.whisper)
    assert fresh_tensors.keys() == cached_tensors.keys()
    for name, t in fresh_tensors.items():
        assert t.dtype == cached_tensors[name].dtype and torch.equal(t, cached_tensors[name]), name
    tokens = _tokens(fresh, jfk_audio)
    assert _tokens(cached, jfk_audio) == tokens
    segments, _ = cached.transcribe(jfk_audio, beam_size=5)
    assert "ask not what your country can do for you" in " ".join(s.text for s in segments).lower()
    # With 32-bit int8 sums the encoder never multiplies few rows: its layers were never packed for
    # fbgemm (without them, fbgemm computes every product, see stenoflow.model.quant).
    encoder_packed = any(m.packed for m in cached.whisper.encoder.modules() if isinstance(m, StoredInt8Linear))
    assert encoder_packed != native_int8_dot()
    assert cached.whisper.decoder.logits_proj.packed


def test_a_stored_build_packs_the_layers_the_few_row_kernel_reads_ahead(cache: Path, jfk_audio: np.ndarray) -> None:
    """Loaded from the cache, the decoder's int8 layers are packed for fbgemm's few-row kernel on
    two threads of their own, the encoder's are not (they are packed on first use, where the CPU has
    no 32-bit int8 sums); the model transcribes as one packed on first use."""
    load_model("tiny.en", compute=INT8, cache_dir=cache)  # builds and stores
    cached = load_model("tiny.en", compute=INT8, cache_dir=cache)
    _packed_ahead()
    whisper = cached.whisper
    assert all(m.packed for m in whisper.decoder.modules() if isinstance(m, StoredInt8Linear))
    assert not any(m.packed for m in whisper.encoder.modules() if isinstance(m, StoredInt8Linear))
    assert pack_ahead(whisper) == []  # nothing left to pack
    fresh = load_model("tiny.en", compute=INT8, cache_dir=cache)
    _packed_ahead()
    for m in fresh.whisper.modules():
        if isinstance(m, StoredInt8Linear):
            m._packing = None  # packed on first use instead
    assert _tokens(cached, jfk_audio) == _tokens(fresh, jfk_audio)


def test_a_process_that_ends_while_layers_are_packed_ahead_exits_cleanly(cache: Path) -> None:
    """A process that loads a stored build and ends at once (a script whose transcription is
    never read) waits for the packing thread: stopped inside fbgemm, it aborted the process."""
    load_model("tiny.en", compute=INT8, cache_dir=cache)  # builds and stores
    code = ("import sys; from stenoflow.api import load_model; "
            "load_model('tiny.en', compute='int8', cache_dir=sys.argv[1])")
    done = subprocess.run([sys.executable, "-c", code, str(cache)], check=False, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and "terminate" not in done.stderr, done.stderr[-2000:]


@pytest.mark.parametrize("compute", ["float32", INT8_BFLOAT16])
def test_other_computes_are_stored_as_built(cache: Path, compute: str, jfk_audio: np.ndarray) -> None:
    fresh = load_model("tiny.en", compute=compute, cache_dir=cache)
    cached = load_model("tiny.en", compute=compute, cache_dir=cache)
    assert cached.built_from is not None and fresh.built_from is None
    stored = tensors_of(cached.whisper)
    assert stored.keys() == tensors_of(fresh.whisper).keys()
    for name, t in tensors_of(fresh.whisper).items():
        assert t.dtype == stored[name].dtype and torch.equal(t, stored[name]), name
    clip = jfk_audio[: 16000 * 4]
    assert cached.decode(cached.encoder_input(clip)).tokens == fresh.decode(fresh.encoder_input(clip)).tokens


def _garble(path: Path) -> None:
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(255 - b for b in data[middle : middle + 64])
    path.write_bytes(bytes(data))


def _truncate(path: Path) -> None:
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size - 4096)


def _old_record(path: Path) -> None:
    record = path.with_suffix(".json")
    meta = json.loads(record.read_text(encoding="utf-8"))
    record.write_text(json.dumps({**meta, "version": meta["version"] - 1}), encoding="utf-8")


@pytest.mark.parametrize("damage", [_garble, _truncate, _old_record])
def test_a_damaged_entry_is_built_again_not_loaded(cache: Path, damage: object, jfk_audio: np.ndarray,
                                                   tiny_int8_tokens: list[list[int]],
                                                   caplog: pytest.LogCaptureFixture) -> None:
    load_model("tiny.en", compute=INT8, cache_dir=cache)
    (entry,) = _entries(cache)
    damage(entry)  # type: ignore[operator]
    with caplog.at_level(logging.WARNING, logger="stenoflow.weights.built"):
        again = load_model("tiny.en", compute=INT8, cache_dir=cache)
    assert not _stored(again) and "building it again" in caplog.text
    assert _entries(cache) == [entry]  # rewritten whole: the next load maps it
    mapped = load_model("tiny.en", compute=INT8, cache_dir=cache)
    assert _stored(mapped)
    assert _tokens(again, jfk_audio) == _tokens(mapped, jfk_audio) == tiny_int8_tokens


def test_a_changed_source_or_version_builds_a_new_entry_that_replaces_the_old(
        cache: Path, tmp_path: Path, jfk_audio: np.ndarray, tiny_int8_tokens: list[list[int]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    _, source = model_source("tiny.en", cache)
    model_dir = shutil.copytree(source, tmp_path / "tiny-copy")
    load_model(str(model_dir), compute=INT8, cache_dir=cache)
    assert _stored(load_model(str(model_dir), compute=INT8, cache_dir=cache))
    load_model(str(model_dir), compute="float32", cache_dir=cache)  # another compute: another entry, kept
    first = set(_entries(cache))
    assert len(first) == 2
    stamp = (model_dir / "model.bin").stat().st_mtime_ns + 10**9
    os.utime(model_dir / "model.bin", ns=(stamp, stamp))
    changed = load_model(str(model_dir), compute=INT8, cache_dir=cache)
    assert not _stored(changed)
    # The new int8 entry replaced the old one on disk; the float32 one stays.
    second = set(_entries(cache))
    assert len(second) == 2 and len(second & first) == 1
    assert _tokens(changed, jfk_audio) == tiny_int8_tokens
    monkeypatch.setattr(built, "BUILT_VERSION", built.BUILT_VERSION + 1)
    assert not _stored(load_model(str(model_dir), compute=INT8, cache_dir=cache))
    assert len(_entries(cache)) == 2 and len(set(_entries(cache)) & second) == 1
    assert _stored(load_model(str(model_dir), compute=INT8, cache_dir=cache))


def test_a_damaged_tokenizer_entry_is_repaired_again(cache: Path) -> None:
    first = load_model("base", compute=INT8, cache_dir=cache)
    (entry,) = (cache / "tokenizers").glob("*.json")
    text = entry.read_text(encoding="utf-8")
    entry.write_text(text.replace('"merges"', '"merges" ', 1), encoding="utf-8")  # valid JSON, wrong CRC
    again = load_model("base", compute=INT8, cache_dir=cache)
    assert [p.read_text(encoding="utf-8") for p in (cache / "tokenizers").glob("*.json")] == [text]
    phrase = " ask not what your country can do for you"
    assert again.tokenizer.encode(phrase) == first.tokenizer.encode(phrase)
    assert len(again.tokenizer.encode(" the")) == 1  # the repaired merge: " the" is one token


def test_every_entry_point_loads_the_same_default(cache: Path, tmp_path: Path, jfk_audio: np.ndarray) -> None:
    from stenoflow.bench.batch_bench import BatchBenchOptions
    from stenoflow.bench.utterance_bench import UtteranceBenchOptions
    from stenoflow.cli import build_parser, parse_command
    from stenoflow.cluster.batch import BatchOptions
    from stenoflow.cluster.serving import ServeOptions

    cpu = default_compute("cpu")
    assert cpu == cpu_compute() in (INT8, INT8_BFLOAT16) and default_compute("cuda:0") == FLOAT16
    parser = build_parser()
    audio = str(tmp_path / "a.wav")
    for argv in (["transcribe", audio], ["stream", audio], ["listen", audio], ["serve"],
                 ["transcribe-batch", audio], ["bench", "batch"], ["bench", "utterance"], ["profile-threads"]):
        assert parse_command(parser, argv).compute == cpu, argv
        if argv[0] in ("transcribe", "stream", "listen", "serve"):
            assert parse_command(parser, [*argv, "--device", "cuda"]).compute == FLOAT16, argv
    assert parse_command(parser, ["bench", "serve"]).compute is None  # the server it starts resolves it
    assert ServeOptions().compute == BatchOptions().compute == cpu
    assert BatchBenchOptions().compute == UtteranceBenchOptions().compute == cpu
    model = load_model("tiny.en", cache_dir=cache)
    assert model.compute == cpu
    _, info = model.transcribe(jfk_audio[: 16000 * 3])
    assert info.options.compute == info.model["compute"] == cpu
    with pytest.raises(ValueError, match="loaded in"):
        model.transcribe(jfk_audio, compute="float32")
    with pytest.raises(ValueError, match="CPU only"):
        load_model("tiny.en", device="cuda", compute=INT8, cache_dir=cache)
