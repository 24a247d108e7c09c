"""Round variants: the hush word and the previous round's guidance inside streaming sessions."""

from __future__ import annotations

import copy
from dataclasses import asdict, replace
from typing import TYPE_CHECKING

import numpy as np
import pytest
import torch

from stenoflow.bench.datasets import JFK_TEXT
from stenoflow.bench.metrics import wer
from stenoflow.decoding.transcribe import TranscribeOptions
from stenoflow.model.compute import INT8, cpu_compute
from stenoflow.streaming.events import TimedWord
from stenoflow.streaming.options import StreamOptions
from stenoflow.streaming.policy import PreviousRound, RoundResult, WhisperRound
from stenoflow.streaming.variants import ABLATION, Variant, parse_variant

if TYPE_CHECKING:
    from stenoflow.api import Model

SR = 16000


def test_variant_names_parse_and_round_trip() -> None:
    assert parse_variant("whisper-s") == Variant("whisper-s")
    assert parse_variant("whisper-s+hush+verify") == Variant("whisper-s", ("hush", "verify"))
    v = parse_variant("live+draft+hush+gate")
    assert (v.hush, v.guide, v.name) == (True, "draft", "live+draft+hush+gate")
    assert all(parse_variant(s.variant).name == s.variant for s in ABLATION)
    for bad in ("whisper-s+fast", "+hush", "whisper-s+prune+verify", "whisper-s+hush+hush"):
        with pytest.raises(ValueError, match="variant"):
            parse_variant(bad)


def test_variants_set_their_stream_options() -> None:
    base = StreamOptions(step=0.5, beam_size=5)
    o = parse_variant("live+hush+draft+gate+alignatt+pipe").apply(base, pipeline=(2, 1))
    assert (o.policy, o.hush, o.guide, o.commit, o.pipeline, o.step) == ("live", True, "draft", "alignatt", (2, 1), 0.5)
    assert o.gate is not None and o.gate > 0
    with pytest.raises(ValueError, match="guide"):
        parse_variant("live+verify").apply(base)  # verify guides whisper-s rounds, not live ones
    with pytest.raises(ValueError, match="gate_close"):
        StreamOptions(gate_close=True)  # nothing opens a beam to close
    with pytest.raises(ValueError, match="gate_close"):
        StreamOptions(policy="whisper-s", gate=1.0, gate_close=True)
    with pytest.raises(ValueError, match="beam_tail"):
        StreamOptions(beam_tail=True)  # no gate: no beam to keep to the tail
    assert StreamOptions(beam_size=5, gate=1.0, beam_tail=True).beam_tail


def test_the_ablation_adds_one_change_at_a_time_and_every_stage_is_valid() -> None:
    previous = None
    for stage in ABLATION:
        options = stage.options()
        assert options.step == stage.step and stage.compute in ("float32", "int8")
        if previous is not None and stage.label.startswith("+"):
            changed = {k for k in asdict(options) if asdict(options)[k] != asdict(previous[1])[k]}
            assert changed or stage.compute != previous[0].compute, stage.label
        previous = (stage, options)
    assert ABLATION[0].variant == "whisper-s" and ABLATION[0].compute == "float32"


def test_the_bench_measures_the_default_beside_the_ablation() -> None:
    from stenoflow.bench.stream_bench import (
        ModelCache,
        StreamBenchOptions,
        default_configs,
        reference_runs,
    )

    configs = default_configs(StreamBenchOptions(models=("tiny.en",), peers=False), ModelCache())
    names = [c.name for c in configs]
    assert names[:3] == ["tiny.en/offline", "tiny.en/offline-transcribe", "tiny.en/offline-default-decoding"]
    assert names[3].endswith("default")
    # Beside offline beam 5 in float32, the whole file as `stenoflow transcribe` decodes it, and as
    # the stream's default decodes.
    assert configs[0].params == {"beam_size": 5, "compute": "float32"}
    assert configs[1].params == {"beam_size": TranscribeOptions().beam_size, "compute": cpu_compute()}
    assert configs[2].params == {"beam_size": StreamOptions().beam_size, "compute": cpu_compute()}
    assert configs[1].mode == configs[2].mode == "offline"
    if cpu_compute() == INT8:
        # The default is the last stage of the ablation before its side lines: measured once, under both names.
        assert names[3].endswith("= default") and len(names) == 3 + len(ABLATION)
    else:  # the encoder in bfloat16: one line more than the (int8) ablation
        assert names[3] == "tiny.en/default" and len(names) == 4 + len(ABLATION)

    # Lost phrases are counted against beam 5 in float32 where it ran, else against the offline
    # command as users run it, else against the default's own decoding.
    runs = {name: [(name, None)] for name in names[:3]}
    assert reference_runs(configs[3], runs) == runs["tiny.en/offline"]  # type: ignore[arg-type]
    del runs["tiny.en/offline"]
    assert reference_runs(configs[3], runs) == runs["tiny.en/offline-transcribe"]  # type: ignore[arg-type]
    del runs["tiny.en/offline-transcribe"]
    assert reference_runs(configs[3], runs) == runs["tiny.en/offline-default-decoding"]  # type: ignore[arg-type]
    assert reference_runs(configs[3], {}) is None
    assert configs[3].params["compute"] == cpu_compute()
    with pytest.raises(ValueError, match="stage"):
        default_configs(StreamBenchOptions(models=("tiny.en",), stages=("+turbo",), peers=False), ModelCache())


def test_the_bench_can_lay_room_noise_over_its_streams() -> None:
    from stenoflow.bench.stream_bench import StreamBenchOptions, with_room_noise

    clean = np.zeros(16000 * 4, dtype=np.float32)
    noisy = with_room_noise(clean, -30.0, "stream-a")
    assert noisy.dtype == np.float32 and noisy.shape == clean.shape
    assert abs(20 * np.log10(np.sqrt(np.mean(noisy.astype(np.float64) ** 2))) + 30.0) < 0.5
    assert np.array_equal(noisy, with_room_noise(clean, -30.0, "stream-a"))  # the same in every run
    assert not np.array_equal(noisy, with_room_noise(clean, -30.0, "stream-b"))
    with pytest.raises(ValueError, match="dBFS"):
        StreamBenchOptions(noise_db=6.0)


def test_stream_options_reject_an_unknown_guide() -> None:
    with pytest.raises(ValueError, match="guide"):
        StreamOptions(guide="sometimes")


def test_reference_keeps_only_the_previous_words_still_in_the_buffer(tiny: Model) -> None:
    words = (TimedWord(" And", 0.0, 0.4), TimedWord(" so,", 0.4, 0.9), TimedWord(" my", 1.0, 1.2),
             TimedWord(" fellow", 1.2, 1.6))
    previous = RoundResult(words)
    policy = WhisperRound(StreamOptions(policy="whisper-s", guide="verify"))
    decode = tiny.tokenizer.decode
    assert decode(list(policy.reference(tiny, PreviousRound(previous, 0.0)) or ())) == " And so, my fellow"
    # The buffer was cut at 0.95 s: the words before it are gone from the reference.
    assert decode(list(policy.reference(tiny, PreviousRound(previous, 0.95)) or ())) == " my fellow"
    assert policy.reference(tiny, PreviousRound(previous, 5.0)) is None
    assert policy.reference(tiny, None) is None
    assert WhisperRound(StreamOptions(policy="whisper-s", guide=None)).reference(tiny, PreviousRound(previous, 0.0)) is None


def stream_words(model: Model, audio: np.ndarray, **options: object) -> tuple[list[TimedWord], list[dict[str, float]]]:
    session = model.stream(StreamOptions(**{"policy": "whisper-s", "hush": False, "guide": None, **options}))  # type: ignore[arg-type]
    step = SR // 2
    committed: list[TimedWord] = []
    rounds: list[dict[str, float]] = []
    for i in range(0, audio.size, step):
        update = session.push(audio[i: i + step])
        committed += update.committed
        rounds += update.rounds
    final = session.finish()
    return committed + list(final.committed), rounds + list(final.rounds)


@pytest.mark.slow
@pytest.mark.parametrize("guide", ["prune", "verify"])
def test_guided_greedy_streaming_equals_plain_greedy_with_fewer_passes(
        tiny: Model, jfk_audio: np.ndarray, guide: str) -> None:
    """At beam 1 the previous round only saves decoder passes: every round's tokens, and so
    every committed word and time, equal plain greedy streaming."""
    plain, plain_rounds = stream_words(tiny, jfk_audio, step=1.0, beam_size=1)
    guided, guided_rounds = stream_words(tiny, jfk_audio, step=1.0, beam_size=1, guide=guide)
    assert guided == plain
    assert sum(r["guided"] for r in guided_rounds) >= len(guided_rounds) - 1  # all but the first round
    if guide == "verify":  # drafts are checked many tokens per pass
        assert sum(r["forward_passes"] for r in guided_rounds) < 0.6 * sum(r["forward_passes"] for r in plain_rounds)


@pytest.mark.slow
def test_guided_beam_streaming_narrows_the_beam(tiny: Model, jfk_audio: np.ndarray) -> None:
    words, rounds = stream_words(tiny, jfk_audio, step=1.0, beam_size=5, guide="prune")
    assert wer(JFK_TEXT, "".join(w.word for w in words)).wer <= 0.15
    later = rounds[2:]
    assert np.mean([r["beam_width_avg"] for r in later]) < 4.0
    assert np.mean([r["reduced_beam_share"] > 0 for r in later]) > 0.5


@pytest.mark.slow
def test_hush_streaming_encodes_the_buffer_not_30_s(tiny: Model, jfk_audio: np.ndarray) -> None:
    words, rounds = stream_words(tiny, jfk_audio, step=1.0, hush=True)
    assert wer(JFK_TEXT, "".join(w.word for w in words)).wer <= 0.15
    assert words[-1].word.strip().lower().startswith("country")  # the last word is not lost at finish
    for r in rounds:  # buffer + 0.5 s of hush word, never the 30 s window
        assert r["encoder_mel_frames"] == pytest.approx(100 * (r["audio_s"] + 0.5), abs=1)
    assert max(r["encoder_mel_frames"] for r in rounds) < 1200


def test_live_rounds_hear_the_buffer_in_a_short_window_of_silence(tiny: Model, jfk_audio: np.ndarray) -> None:
    """By default a live round pads its buffer with silence to a 15 s window, with at least 5 s of
    silence after the speech (a longer buffer gets a longer window, up to Whisper's 30 s); the
    hush word is the whisper-s default and an option for live rounds."""
    live, whisper_s = StreamOptions().resolved(tiny), StreamOptions(policy="whisper-s").resolved(tiny)
    assert (live.hush, live.window_s, whisper_s.hush) == (False, 15.0, True)
    frames = {s: tiny.encoder_input(np.resize(jfk_audio, s * SR), False, 15.0).shape[-1] for s in (3, 12, 28)}
    assert frames == {3: 1500, 12: 1700, 28: 3000}
    short = tiny.encoder_input(jfk_audio[: 3 * SR], False, 15.0)
    silence = short[:, 3 * 100 + 2:]  # what follows the speech is Whisper's silence floor, as in a padded window
    assert torch.equal(silence, torch.full_like(silence, float(short.min())))
    assert tiny.encoder_input(jfk_audio[: 3 * SR], True, 15.0).shape[-1] == 350  # speech ⊕ the 0.5 s hush word
    with pytest.raises(ValueError, match="window_s"):
        StreamOptions(window_s=31.0)


def test_hush_streaming_needs_a_hush_word(tiny: Model) -> None:
    bare = copy.copy(tiny)  # same weights, no hush word
    bare.hush = None
    with pytest.raises(ValueError, match="no hush word"):
        bare.stream(StreamOptions(hush=True))


def test_bench_lines_run_what_stream_would_with_those_options() -> None:
    from stenoflow.bench.stream_bench import ModelCache, StreamBenchOptions, default_configs
    from stenoflow.cli import bench_lines

    lines = bench_lines(["gated=--beam-size 5 --gate 1 --gate-close", "f32=--compute float32 --step 0.5"],
                        ["tiny.en"])
    gated, f32 = lines
    assert (gated.options.beam_size, gated.options.gate, gated.options.gate_close) == (5, 1.0, True)
    assert gated.compute == cpu_compute() and f32.compute == "float32" and f32.options.step == 0.5
    # Whatever the line leaves out is the default's (its executors: a stored thread split, if any).
    assert replace(gated.options, beam_size=1, gate=None, gate_close=False, pipeline=None) == StreamOptions()
    configs = default_configs(StreamBenchOptions(models=("tiny.en",), stages=(), peers=False, lines=lines),
                              ModelCache())
    names = [c.name for c in configs]
    assert names == ["tiny.en/offline", "tiny.en/offline-transcribe", "tiny.en/offline-default-decoding",
                     "tiny.en/default", "tiny.en/gated: --beam-size 5 --gate 1 --gate-close",
                     "tiny.en/f32: --compute float32 --step 0.5"]
    assert configs[5].params["compute"] == "float32" and configs[4].params["gate"] == 1.0
    for spec, message in (("gated", "NAME=OPTIONS"), ("default=--step 1", "new name"),
                          ("offline-default-decoding=--step 1", "new name"),
                          ("offline-transcribe=--step 1", "new name"),
                          ("x=--step soon", "invalid float"), ("x=--bogus", "unrecognized"),
                          ("x=--model base", "not a stream option"), ("x=a.wav", "not a stream option"),
                          ("x=--language 'en", "closing quotation")):
        with pytest.raises(ValueError, match=message):
            bench_lines([spec], ["tiny.en"])
    with pytest.raises(ValueError, match="new name"):
        bench_lines(["a=--step 1", "a=--step 2"], ["tiny.en"])
