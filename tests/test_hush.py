"""The hush word: file validation, a real training signal, and the shipped words at work."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from stenoflow.api import Model
from stenoflow.audio.hush import HUSH_SAMPLES, HushWord, bundled_hush_path, find_hush
from stenoflow.decoding.options import DecodingOptions
from stenoflow.decoding.repetition import text_loop_start


def test_wrong_length_dtype_or_rate_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="8000 samples"):
        HushWord(np.zeros(4000, np.float32), "tiny.en")
    with pytest.raises(ValueError, match="float32"):
        HushWord(np.zeros(HUSH_SAMPLES, np.int16), "tiny.en")  # type: ignore[arg-type]
    path = tmp_path / "h.npz"
    np.savez(path, samples=np.zeros(HUSH_SAMPLES, np.float32), sample_rate=np.int64(8000), model=np.str_("tiny.en"))
    with pytest.raises(ValueError, match="8000 Hz"):
        HushWord.load(path)
    (tmp_path / "junk.npz").write_bytes(b"not a zip file")
    with pytest.raises(ValueError, match="not a hush word"):
        HushWord.load(tmp_path / "junk.npz")
    good = HushWord(np.linspace(-0.1, 0.1, HUSH_SAMPLES, dtype=np.float32), "tiny.en", {"steps": 3})
    again = HushWord.load(good.save(tmp_path / "ok.npz"))
    assert np.array_equal(again.samples, good.samples) and again.record == {"steps": 3}


def test_the_hush_word_for_the_models_precision_is_preferred(tmp_path: Path) -> None:
    """A hush word is optimised through the model as it runs: ``hush.int8.npz`` beside a model
    serves it in int8, and ``hush.npz`` every other precision (and int8 when it is alone)."""
    def level(hush: HushWord | None) -> float:
        assert hush is not None
        return float(hush.samples[0])

    HushWord(np.full(HUSH_SAMPLES, 0.01, np.float32), "mine").save(tmp_path / "hush.npz")
    assert level(find_hush("mine", tmp_path, "int8")) == pytest.approx(0.01)
    HushWord(np.full(HUSH_SAMPLES, 0.02, np.float32), "mine").save(tmp_path / "hush.int8.npz")
    assert level(find_hush("mine", tmp_path, "int8")) == pytest.approx(0.02)
    assert level(find_hush("mine", tmp_path / "model.bin", "float32")) == pytest.approx(0.01)  # a model file
    (tmp_path / "other").mkdir()
    assert find_hush("mine", tmp_path / "other", "int8") is None


@pytest.mark.slow
def test_a_few_training_steps_lower_the_loss(tiny: Model, jfk_audio: np.ndarray) -> None:
    from stenoflow.training.hush_data import distilled_example
    from stenoflow.training.hush_train import example_loss

    examples = [distilled_example(tiny, jfk_audio[: 16000 * 4], "", "", timestamps=False),
                # cut mid-word, after a prompt, with timestamps: a streaming round's input
                distilled_example(tiny, jfk_audio[16000 * 4: int(16000 * 8.3)], "", "And so my fellow Americans",
                                  timestamps=True)]
    assert examples[1].initial[0] == tiny.tokenizer.sot_prev and examples[1].target[0] >= tiny.tokenizer.timestamp_begin
    rng = np.random.default_rng(0)
    # Start as training does, from faint noise: at exact zeros the log-mel floor passes no gradient.
    hush = torch.nn.Parameter(torch.from_numpy(rng.uniform(-0.01, 0.01, HUSH_SAMPLES).astype(np.float32)))
    opt = torch.optim.Adam([hush], lr=1e-3)

    def total() -> torch.Tensor:
        return sum(example_loss(tiny, hush, ex, 1.0, 0.0, 2.0, rng, 1.0) for ex in examples)  # type: ignore[return-value]

    with torch.enable_grad():
        before = float(total().detach())
        for _ in range(8):
            opt.zero_grad()
            total().backward()
            assert hush.grad is not None and torch.isfinite(hush.grad).all() and hush.grad.abs().sum() > 0
            opt.step()
            with torch.no_grad():
                hush.clamp_(-0.1, 0.1)
        after = float(total().detach())
    assert after < before * 0.9, (before, after)


@pytest.mark.slow
def test_a_window_example_is_a_live_round_from_a_pause_after_the_text_before_it(tiny: Model,
                                                                                 jfk_audio: np.ndarray) -> None:
    from stenoflow.training.hush_data import padded_text, window_example

    assert window_example(tiny, jfk_audio[: 16000 * 3], np.random.default_rng(0)) is None  # too short
    tok = tiny.tokenizer
    for seed in (1, 2):
        ex = window_example(tiny, jfk_audio, np.random.default_rng(seed))
        assert ex is not None
        starts = [int(i) for i in np.flatnonzero(jfk_audio == ex.audio[0])
                  if np.array_equal(jfk_audio[i: i + ex.audio.size], ex.audio)]
        assert len(starts) == 1 and starts[0] + ex.audio.size <= jfk_audio.size
        start = starts[0]
        # 2-10 s, or shorter where the clip ends first
        assert ex.audio.size <= 10 * 16000 and (ex.audio.size >= 2 * 16000 or start + ex.audio.size == jfk_audio.size)
        assert 16000 * 0.6 <= start <= jfk_audio.size - 16000 * 1.6
        local = float(np.sqrt(np.mean(jfk_audio[start - 160: start + 160] ** 2)))
        assert local < 0.2 * float(np.sqrt(np.mean(jfk_audio ** 2)))  # between words, not inside one
        assert ex.initial[0] == tok.sot_prev
        prompt = tok.decode([t for t in ex.initial[1: ex.initial.index(tok.sot)]]).strip()
        assert prompt and padded_text(tiny, jfk_audio[:start]).endswith(prompt)


@pytest.mark.slow
def test_training_resumes_where_it_stopped(tiny: Model, jfk_audio: np.ndarray, tmp_path: Path) -> None:
    from stenoflow.training.hush_data import distilled_example
    from stenoflow.training.hush_train import HushTrainOptions, train_hush

    train = [distilled_example(tiny, jfk_audio[: 16000 * 3], "", "", timestamps=False)]
    heldout = [distilled_example(tiny, jfk_audio[16000 * 8:], "ask what you can do for your country", "", False)]
    options = HushTrainOptions(steps=2, clips_per_step=1, eval_every=1, keep_best=2)
    first = train_hush(tiny, train, heldout, options, tmp_path)
    state = json.loads((tmp_path / "state.json").read_text())
    assert state["step"] == 2 and len(state["hush"]) == HUSH_SAMPLES and first.record["runs"] == state["runs"]
    second = train_hush(tiny, train, heldout, HushTrainOptions(steps=3, clips_per_step=1, eval_every=1), tmp_path)
    record = second.record
    assert [h["step"] for h in record["history"]] == [1, 2, 3]  # steps 1-2 were not run again
    assert record["runs"] == [{"start_step": 0, "steps": 2}, {"start_step": 2, "steps": 3}]
    assert np.abs(second.samples).max() <= options.amplitude


@pytest.mark.slow
@pytest.mark.parametrize("model_name", ["tiny", "base"])
def test_shipped_hush_word_ends_jfk(model_name: str, request: pytest.FixtureRequest, jfk_audio: np.ndarray) -> None:
    model: Model = request.getfixturevalue(model_name)
    assert bundled_hush_path(model.name) is not None, f"no hush word shipped for {model.name}"
    assert model.hush is not None and model.hush.record.get("steps")
    mel = model.features(model.hush.append(jfk_audio))
    assert mel.shape[-1] < 1200  # under 12 s of encoder input instead of 30 s
    result = model.decode(mel, DecodingOptions(language="en", without_timestamps=True, sample_len=80))
    text = re.sub(r"[^a-z ]", "", result.text.lower())
    assert "ask not what your country can do for you" in text
    assert "ask what you can do for your country" in text
    assert len(result.tokens) < 40  # it stopped: no runaway


@pytest.mark.slow
def test_bench_hush_compares_every_scheme(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from stenoflow.cli import main

    assert main(["bench", "hush", "--models", "tiny.en", "--clips", "1", "--compute", "int8",
                 "--out", str(tmp_path)]) == 0
    table = capsys.readouterr().out
    assert table.strip() == (tmp_path / "hush.md").read_text().strip()
    record = json.loads((tmp_path / "hush.json").read_text())
    assert record["options"]["compute"] == "int8"
    rows = {r["scheme"]: r for r in record["rows"]}
    assert set(rows) == {"pad 30 s", "no padding", "1 s zeros", "5 s zeros", "1 s noise", "5 s noise", "hush word"}
    gflops = {k: r["encoder_gflops_per_clip"] for k, r in rows.items()}
    assert gflops["no padding"] < gflops["hush word"] < gflops["1 s zeros"] < gflops["5 s zeros"] < gflops["pad 30 s"]
    assert all(len(r["per_clip"]) == 2 for r in rows.values())  # one synthesized clip and jfk.wav
    assert record["hush_words"]["tiny.en"]["steps"] > 0
    assert "| tiny.en | pad 30 s |" in table and "+0.00" in table
    assert (tmp_path / "hush.png").stat().st_size > 0


@pytest.mark.parametrize("seconds", [2.0, 4.5, 7.0, None])
def test_transcribe_with_hush_stays_inside_the_speech_and_never_loops(tiny: Model, jfk_audio: np.ndarray,
                                                                     seconds: float | None) -> None:
    """Offline ``--hush``: no timestamp after the speech, and no repetition loop in the text."""
    audio = jfk_audio if seconds is None else jfk_audio[: int(seconds * 16000)]
    segments, _ = tiny.transcribe(audio, hush=True, beam_size=5)
    segments = list(segments)
    assert segments, "the speech was transcribed"
    duration = audio.size / 16000
    for s in segments:
        assert 0 <= s.start <= s.end <= duration + 1e-6
    tokens = [t for s in segments for t in s.tokens]
    assert text_loop_start(tokens, tiny.tokenizer.eot) is None
    if seconds is None:
        text = re.sub(r"[^a-z ]", "", "".join(s.text for s in segments).lower())
        assert "ask not what your country can do for you" in text
