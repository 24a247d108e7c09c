"""Exactness: our PyTorch engine against CTranslate2 (faster-whisper's engine) on the same features,
and batched beam search against a one-hypothesis-at-a-time reference without any cache."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from stenoflow.api import Model
from stenoflow.decoding.options import DecodingOptions
from stenoflow.decoding.task import DecodingTask

ctranslate2 = pytest.importorskip("ctranslate2")

N_SAMPLES = 480000


def ct2_greedy(model: Model, mel: torch.Tensor, prompt: list[int], suppress: list[int]) -> list[int]:
    ct2 = ctranslate2.models.Whisper(str(Path(model.weights_info["source"])), device="cpu",
                                     compute_type="float32", intra_threads=2)
    features = ctranslate2.StorageView.from_array(np.ascontiguousarray(mel[None].numpy()))
    result = ct2.generate(features, [prompt], beam_size=1, suppress_blank=True, suppress_tokens=suppress,
                          max_length=448, max_initial_timestamp_index=50)
    return list(result[0].sequences_ids[0])


@pytest.mark.parametrize("model_name", ["tiny", "base"])
@pytest.mark.parametrize("timestamps", [False, True])
def test_greedy_tokens_equal_ctranslate2(model_name: str, timestamps: bool, request: pytest.FixtureRequest,
                                         jfk_audio: np.ndarray) -> None:
    model: Model = request.getfixturevalue(model_name)
    mel = model.features(jfk_audio, padding=N_SAMPLES)[:, :3000]
    options = DecodingOptions(language="en", without_timestamps=not timestamps)
    task = DecodingTask(model.context, options)
    tok = model.tokenizer.with_options("en" if model.is_multilingual else None, "transcribe")
    prompt = task.initial_tokens(tok)
    ours = model.decode(mel, options).tokens
    theirs = ct2_greedy(model, mel, prompt, task.suppress_ids(tok))
    assert len(ours) > 20
    assert ours == theirs
    text = model.tokenizer.decode(ours)
    assert "ask not what your country can do for you" in text


def reference_beam_search(model: Model, features: torch.Tensor, prompt: list[int], beam_size: int,
                          eot: int, max_tokens: int) -> tuple[list[int], float]:
    """Textbook beam search: each hypothesis scored alone, full recomputation every step, no cache.

    Same rules as the fast path: top beam_size+1 per hypothesis, finished hypotheses set aside until
    beam_size have finished, ranked by sum logprob / length. No logit filters: suppression is
    passed as options to both sides below.
    """
    cross = model.whisper.decoder.cross_kv(features)
    beams: list[tuple[list[int], float]] = [(list(prompt), 0.0)]
    finished: dict[tuple[int, ...], float] = {}
    for _ in range(max_tokens):
        candidates: dict[tuple[int, ...], float] = {}
        for seq, score in beams:
            cache = model.whisper.new_cache(1, len(seq))
            logits = model.whisper.decoder(torch.tensor([seq]), cross, cache, last_only=True)
            lp = F.log_softmax(logits[0, -1].float(), -1)
            top = lp.topk(beam_size + 1)
            for v, i in zip(top.values.tolist(), top.indices.tolist()):
                candidates.setdefault((*seq, i), score + v)
        beams = []
        for seq, score in sorted(candidates.items(), key=lambda kv: -kv[1]):
            if seq[-1] == eot:
                if len(finished) < beam_size:
                    finished.setdefault(seq, score)
            else:
                beams.append((list(seq), score))
                if len(beams) == beam_size:
                    break
        if len(finished) >= beam_size:
            break
    best = max(finished.items(), key=lambda kv: kv[1] / (len(kv[0]) - len(prompt) - 1))
    return list(best[0][len(prompt) : -1]), best[1]


@torch.inference_mode()
def test_batched_beam_equals_unbatched_reference(tiny: Model, jfk_audio: np.ndarray) -> None:
    mel = tiny.features(jfk_audio[: 16000 * 5], padding=N_SAMPLES)[:, :3000]
    features = tiny.encode(mel)
    options = DecodingOptions(language="en", beam_size=4, without_timestamps=True, suppress_blank=False,
                              suppress_tokens=())
    task = DecodingTask(tiny.context, options)
    tok = tiny.tokenizer
    prompt = task.initial_tokens(tok)
    # Nothing suppressed on either side but the special tokens our task always suppresses;
    # the reference cannot emit them either because they never make the top beams on speech.
    result = task.run(features)
    ref_tokens, ref_score = reference_beam_search(tiny, features, prompt, 4, tok.eot, 60)
    assert result.tokens == ref_tokens
    assert result.sum_logprob == pytest.approx(ref_score, abs=1e-3)


def test_every_row_count_takes_a_path_that_computes_the_same_product() -> None:
    from stenoflow.model.whisper import Linear

    torch.manual_seed(0)
    layer = Linear(64, 96)
    inputs = [torch.randn(rows, 64) for rows in (1, 5, 40)]
    layer.keep_transposed()
    assert layer.weight_t is not None and layer.weight_t.is_contiguous() and layer.weight_t.shape == (64, 96)
    for x, want in zip(inputs, [F.linear(x, layer.weight, layer.bias) for x in inputs], strict=True):
        torch.testing.assert_close(layer(x[:, None, :]).squeeze(1), want)  # 1: transposed, 5: W @ x^T, 40: linear
    # Training reads the weights themselves, so gradients reach them.
    layer.weight.requires_grad_(True)
    layer(torch.randn(1, 64)).sum().backward()
    assert layer.weight.grad is not None


@torch.inference_mode()
def test_alignment_attention_recorded_step_by_step_equals_one_teacher_forced_pass(tiny: Model,
                                                                                  jfk_audio: np.ndarray) -> None:
    """A cache records the alignment heads' queries as each pass goes; the attention computed from
    them equals what the heads compute in one pass over the whole sequence."""
    features = tiny.encode(tiny.features(jfk_audio, padding=N_SAMPLES)[:, :3000])
    cross = tiny.whisper.decoder.cross_kv(features)
    result = tiny.decode(features, DecodingOptions(language="en", without_timestamps=True))
    seq = [*tiny.tokenizer.sot_sequence_including_notimestamps, *result.tokens]
    cache = tiny.whisper.new_cache(1, len(seq), tiny.alignment_heads)
    tiny.whisper.decoder(torch.tensor([seq[:4]]), cross, cache)  # a prompt, then one token a pass
    for t in seq[4:]:
        tiny.whisper.decoder(torch.tensor([[t]]), cross, cache, last_only=True)
    # The reference: the queries of one pass over the whole sequence, taken off the layers, and
    # the heads' attention computed from them by the definition.
    queries: dict[int, torch.Tensor] = {}
    blocks = tiny.whisper.decoder.blocks
    hooks = [blocks[layer].cross_attn.query.register_forward_hook(
        lambda _module, _args, out, layer=layer: queries.__setitem__(layer, out))
        for layer in {layer for layer, _ in tiny.alignment_heads}]
    try:
        tiny.whisper.decoder(torch.tensor([seq]), cross, None)
    finally:
        for hook in hooks:
            hook.remove()
    n_head = tiny.whisper.dims.n_text_head
    scores = []
    for layer, head in tiny.alignment_heads:
        q = queries[layer].reshape(len(seq), n_head, -1)[:, head]  # (T, head_dim)
        scores.append(q @ cross.k[layer][0, head].T / math.sqrt(q.shape[-1]))
    whole = torch.stack(scores, dim=1).float().softmax(-1)
    recorded = cache.attention(cross)
    assert recorded is not None and recorded.shape == whole.shape == (len(seq), len(tiny.alignment_heads), 1500)
    torch.testing.assert_close(recorded, whole, atol=1e-5, rtol=1e-4)
    part = cache.attention(cross, 0, 5, len(seq) + 10)  # positions from 5 up to the cache's end
    assert part is not None and torch.equal(part, recorded[5:])


def one_row_and_pass_logits(model: Model, audio: np.ndarray, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Teacher-forced on the model's greedy tokens for ``audio``: the logits of one-row steps, and
    those of passes of ``rows`` positions at a time (as a draft's verification runs), (T, V) each."""
    mel = model.features(audio, padding=N_SAMPLES)[:, :3000]
    with torch.inference_mode():
        cross = model.whisper.decoder.cross_kv(model.encode(mel))
        result = DecodingTask(model.context, DecodingOptions(language="en")).run(cross)
        tok = model.tokenizer.with_options("en" if model.is_multilingual else None, "transcribe")
        seq = torch.tensor([[*tok.sot_sequence, *result.tokens, tok.eot]])
        start = len(tok.sot_sequence)
        decoder = model.whisper.decoder
        steps, passes = model.whisper.new_cache(1), model.whisper.new_cache(1)
        decoder(seq[:, :start], cross, steps)
        decoder(seq[:, :start], cross, passes)
        one = [decoder(seq[:, i : i + 1], cross, steps)[0, -1] for i in range(start, seq.shape[1])]
        many = [decoder(seq[:, i : i + rows], cross, passes)[0] for i in range(start, seq.shape[1], rows)]
    return torch.stack(one), torch.cat(many)


@pytest.mark.parametrize("rows", [2, 5, 13])
def test_int8_verification_pass_computes_the_one_row_steps_logits_bit_for_bit(base_default: Model, rows: int,
                                                                                jfk_audio: np.ndarray) -> None:
    """Speculative decoding's exactness in the default precision: a pass over K+1 drafted positions
    gives at each position the logits a greedy step there gives, to the last bit (int8 rows rounded
    each by its own scale; attention a position at a time)."""
    one, many = one_row_and_pass_logits(base_default, jfk_audio, rows)
    assert one.shape == many.shape and one.shape[0] > 20
    assert torch.equal(one, many)


def test_int8_verification_is_exact_with_7_bit_kernels_too(jfk_audio: np.ndarray) -> None:
    """The kernels of a CPU without 32-bit int8 sums (7-bit inputs, fbgemm at every row count), run
    here whatever this CPU has: the same bit-for-bit equality."""
    from stenoflow.api import load_model
    from stenoflow.model.quant import Int8Linear

    model = load_model("tiny.en", compute="int8")
    layers = [m for m in model.whisper.modules() if isinstance(m, Int8Linear)]
    assert layers
    for layer in layers:
        layer.int8_dot = False
    one, many = one_row_and_pass_logits(model, jfk_audio[: 16000 * 6], 5)
    assert one.shape[0] > 5
    assert torch.equal(one, many)


@pytest.mark.parametrize("rows", [5, 13])
def test_float32_verification_pass_agrees_with_one_row_steps_up_to_rounding(base: Model, rows: int,
                                                                             jfk_audio: np.ndarray) -> None:
    """In float32 the products' sums depend on the row count (hence transcribe's warning): a pass
    gives the steps' logits only up to rounding, the same best token wherever it leads clearly."""
    one, many = one_row_and_pass_logits(base, jfk_audio, rows)
    torch.testing.assert_close(many, one, atol=2e-3, rtol=1e-4)
    assert torch.equal(one.argmax(-1), many.argmax(-1))
