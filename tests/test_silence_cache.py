"""The encoder on speech padded with silence, with the silence's positions from a kept pass."""

from __future__ import annotations

import copy

import numpy as np
import torch

from stenoflow.api import Model
from stenoflow.bench.latency import encoder_gflops_per_audio_s
from stenoflow.bench.metrics import wer
from stenoflow.bench.normalize import normalize_text
from stenoflow.decoding.options import DecodingOptions
from stenoflow.model.silence import EXACT_AFTER, SilenceCache
from stenoflow.model.whisper import EncodedTail

SR = 16000


def window(model: Model, samples: np.ndarray) -> torch.Tensor:
    return model.encoder_input(samples, hush=False, window_s=15.0)[None]


@torch.inference_mode()
def test_rows_attending_to_a_kept_pass_of_the_same_window_equal_the_full_pass(tiny: Model,
                                                                             jfk_audio: np.ndarray) -> None:
    """The partial pass itself changes nothing: lent the keys and values of the same window's own
    full pass, the first rows (convolutions cut short, positions, attention over both) come out
    as the full pass computes them, whatever the cut."""
    encoder = tiny.whisper.encoder
    mel = window(tiny, jfk_audio[: 4 * SR])
    keep: list[tuple[torch.Tensor, torch.Tensor]] = []
    full = encoder(mel, keep=keep)
    assert len(keep) == len(encoder.blocks) and full.shape[1] == mel.shape[-1] // 2
    own = EncodedTail(tuple(keep), full)
    for rows in (1, 200, 373):
        part = encoder(mel, rows, own)
        assert part.shape == full.shape
        torch.testing.assert_close(part, full, atol=2e-4, rtol=1e-4)


@torch.inference_mode()
def test_one_pass_over_silence_serves_every_window_with_that_floor(tiny: Model, jfk_audio: np.ndarray) -> None:
    cache = SilenceCache(tiny.whisper.encoder)
    first, second = jfk_audio[: 3 * SR], jfk_audio[4 * SR : 7 * SR]
    a = window(tiny, first)
    # the second clip at the first one's loudness: the floor (in log-mel units, a quarter of a
    # bel) moves by half the gain's bels
    floor = float(a[0, :, -1].max())
    second = second * 10 ** (2 * (floor - float(window(tiny, second)[0, :, -1].max())))
    b = window(tiny, second)
    assert abs(float(b[0, :, -1].max()) - floor) < 1e-3
    out_a, out_b = cache.encode(a, 3 * SR), cache.encode(b, 3 * SR)
    assert cache.passes == 1
    rows = 3 * SR // 320 + EXACT_AFTER
    silence = cache.tail(a).out
    assert torch.equal(out_a[:, rows:], silence[:, rows:]) and torch.equal(out_b[:, rows:], silence[:, rows:])
    assert not torch.equal(out_a[:, :rows], out_b[:, :rows])  # the speech is each window's own
    quieter = window(tiny, jfk_audio[: 3 * SR] * 0.05)  # 26 dB quieter: another floor, another pass
    cache.encode(quieter, 3 * SR)
    assert cache.passes == 2
    # speech to within half a second of the end of Whisper's 30 s window: nothing to borrow
    long = np.resize(jfk_audio, int(29.6 * SR))
    torch.testing.assert_close(cache.encode(window(tiny, long), long.size), tiny.whisper.encoder(window(tiny, long)))
    assert cache.passes == 2


@torch.inference_mode()
def test_kept_passes_stay_within_their_memory_budget(tiny: Model, jfk_audio: np.ndarray) -> None:
    """Passes are dropped, least recently used first, past the budget, but never below
    ``min_kept``: a model whose one pass fills the budget still keeps a stream's few floors."""
    gains = (1.0, 0.05, 0.002, 1.0)  # three floors, the first again
    for min_kept, passes, kept in ((1, 4, 1), (2, 4, 2), (3, 3, 3)):
        cache = SilenceCache(tiny.whisper.encoder, budget_bytes=1, min_kept=min_kept)
        for gain in gains:
            cache.encode(window(tiny, jfk_audio[: 3 * SR] * gain), 3 * SR)
        assert (cache.passes, len(cache._tails)) == (passes, kept)
    roomy = SilenceCache(tiny.whisper.encoder, min_kept=1)  # tiny's passes: a few MB each
    for gain in gains:
        roomy.encode(window(tiny, jfk_audio[: 3 * SR] * gain), 3 * SR)
    assert (roomy.passes, len(roomy._tails)) == (3, 3)


def test_the_window_heard_through_the_cache_reads_as_the_full_pass(tiny: Model, jfk_audio: np.ndarray) -> None:
    """What the decoder reads from a window whose silence came from the cache: jfk's first
    sentence, as from the full pass."""
    clip = jfk_audio[: int(7.5 * SR)]
    mel = tiny.encoder_input(clip, hush=False, window_s=15.0)
    options = DecodingOptions(language="en", without_timestamps=True)
    full = tiny.decode(tiny.encode(mel), options).text
    cached = tiny.decode(tiny.encode(mel, clip.size), options).text
    assert normalize_text(cached) == normalize_text(full)
    assert "fellow americans" in normalize_text(cached)


def test_live_rounds_use_the_cache_by_default_and_the_final_hearing_the_full_pass(tiny: Model,
                                                                                 jfk_audio: np.ndarray) -> None:
    from stenoflow.streaming.drivers import run_stream

    model = copy.copy(tiny)  # same weights, a cache of its own (other tests fill the shared one)
    model.silence = SilenceCache(tiny.whisper.encoder)
    run = run_stream(lambda: model.stream(), jfk_audio, "unaware", chunk_s=0.5)
    assert model.silence.passes > 0
    assert "fellow americans" in normalize_text(run.text) and normalize_text(run.text).endswith("your country")
    fresh = copy.copy(tiny)
    fresh.silence = SilenceCache(tiny.whisper.encoder)
    full = run_stream(lambda: fresh.stream(silence_cache=False), jfk_audio, "unaware", chunk_s=0.5)
    assert fresh.silence.passes == 0
    # every round that heard audio counts its encoder work, the passes over silence included
    heard = [r for r in (*run.rounds, *full.rounds) if not r.get("skipped") and not r.get("final")]
    assert heard and all(r["encoder_gflop"] > 0 for r in heard)
    cached, whole = (encoder_gflops_per_audio_s(x.rounds, x.audio_s) for x in (run, full))
    window_gflop = tiny.dims.encoder_flops(1500) / 1e9  # a 15 s window's full pass
    assert model.silence.passes * window_gflop / run.audio_s < cached < whole


def test_a_pass_over_some_rows_costs_their_share_of_the_full_pass(tiny: Model) -> None:
    dims = tiny.dims
    full = dims.encoder_flops(3000)
    assert dims.encoder_flops(3000, 1500) == full == dims.encoder_flops(3000, None)
    assert 0.15 * full < dims.encoder_flops(3000, 300) < 0.25 * full  # a fifth of the rows
    assert dims.encoder_flops(1000) < dims.encoder_flops(3000, 500) < full  # they attend to all 1500


@torch.inference_mode()
def test_cross_keys_and_values_of_the_kept_silence_equal_projecting_the_whole_window(
        tiny: Model, tiny_default: Model, jfk_audio: np.ndarray) -> None:
    """A round projects only its speech's positions into the decoder's cross-attention keys and
    values and takes the silence's from the kept pass: what projecting the whole cached window
    gives, in float32 and in the default compute (int8 rounds each row on its own), bit for bit."""
    for model in (tiny, copy.copy(tiny_default)):
        model.silence = SilenceCache(model.whisper.encoder)
        for seconds in (3.0, 7.5, 3.0):  # the third reads the second's kept projection of the first's window
            clip = jfk_audio[: int(seconds * SR)]
            mel = model.encoder_input(clip, hush=False, window_s=15.0)
            whole = model.whisper.decoder.cross_kv(model.encode(mel, clip.size))
            parts = model.encode_cross(mel, clip.size)
            assert parts.n_audio == whole.n_audio
            for a, b in zip([*parts.k, *parts.v], [*whole.k, *whole.v]):
                assert torch.equal(a, b)
        assert model.silence.passes == 1 and len(model.silence._cross) == 1


@torch.inference_mode()
def test_positions_lent_by_an_earlier_pass_of_the_same_window_equal_the_full_pass(tiny: Model,
                                                                                 jfk_audio: np.ndarray) -> None:
    """Lent the keys, values and outputs of the same window's own full pass for its first positions,
    the encoder computes the rest as the full pass does, whatever the cut: the convolutions read
    the right frames, the positions their own embeddings."""
    encoder = tiny.whisper.encoder
    mel = window(tiny, jfk_audio[: 6 * SR])
    keep: list[tuple[torch.Tensor, torch.Tensor]] = []
    full = encoder(mel, keep=keep)
    own = EncodedTail(tuple(keep), full)
    for start, rows in ((1, 350), (120, 350), (300, 301)):
        part = encoder(mel, rows, own, head=own, start=start)
        assert part.shape == full.shape
        torch.testing.assert_close(part, full, atol=2e-4, rtol=1e-4)


@torch.inference_mode()
def test_a_stream_reuses_its_last_pass_only_while_the_buffer_keeps_its_start(tiny: Model,
                                                                           jfk_audio: np.ndarray) -> None:
    """Rounds over a growing buffer compute only the audio near its end. Whisper's encoder attends
    over the whole window, so the positions taken from earlier passes drift from the full pass (as
    a round's own positions move from one round to the next); the words read from them hardly do
    (a word cut at the buffer's end may change: "ask" / "asked"). A buffer cut to a new start is
    computed anew."""
    from stenoflow.decoding.task import DecodingTask
    from stenoflow.model.reuse import EncoderReuse

    model = copy.copy(tiny)
    model.silence = SilenceCache(model.whisper.encoder)
    reuse = EncoderReuse(2.0)
    options = DecodingOptions(language="en", without_timestamps=True)
    fulls, reads = [], []
    for seconds in np.arange(4.0, 8.0, 0.35):
        clip = jfk_audio[: int(seconds * SR)]
        mel = model.encoder_input(clip, hush=False, window_s=15.0)
        cross = model.encode_cross(mel, clip.size, reuse=reuse, offset=0.0)
        whole = model.encode_cross(mel, clip.size)
        drift = max(float((a - b).norm() / b.norm()) for a, b in zip([*cross.k, *cross.v], [*whole.k, *whole.v]))
        assert drift < 0.3
        reads.append(DecodingTask(model.context, options).run(cross).text)
        fulls.append(DecodingTask(model.context, options).run(whole).text)
    assert wer(fulls, reads).wer < 0.05
    assert reuse.reused_rows > reuse.computed_rows / 3  # rounds after the first took a good part kept
    computed = reuse.computed_rows
    clip = jfk_audio[SR : 6 * SR]  # the buffer cut: a new start, every position computed
    mel = model.encoder_input(clip, hush=False, window_s=15.0)
    model.encode_cross(mel, clip.size, reuse=reuse, offset=1.0)
    assert reuse.kept is not None and reuse.computed_rows - computed == reuse.kept.rows
