"""Decoder passes of several callers in one forward: each caller gets what its own pass gives."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np
import pytest
import torch

from stenoflow.api import Model
from stenoflow.model.kv_cache import SelfAttentionCache
from stenoflow.model.pass_batch import PassBatcher
from stenoflow.model.whisper import DecoderCall

SOT = (50257, 50362)  # tiny.en: <|startoftranscript|> <|notimestamps|>


def _call(model: Model, audio: np.ndarray, tokens: list[list[int]], max_len: int = 64,
          alignment: bool = False) -> DecoderCall:
    features = model.encode(model.features(audio))
    cross = model.whisper.decoder.cross_kv(features)
    cache = model.whisper.new_cache(len(tokens), max_len, model.alignment_heads if alignment else None)
    return DecoderCall(torch.tensor(tokens), cross, cache)


def _clone(call: DecoderCall) -> DecoderCall:
    cache = call.cache
    assert cache is not None
    twin = SelfAttentionCache.__new__(SelfAttentionCache)
    twin.__dict__.update(cache.__dict__)
    twin.k, twin.v = cache.k.clone(), cache.v.clone()
    twin.queries = None if cache.queries is None else cache.queries.clone()
    return DecoderCall(call.tokens, call.cross, twin)


@torch.inference_mode()
def test_a_merged_pass_gives_each_caller_its_own_pass(tiny: Model, jfk_audio: np.ndarray) -> None:
    decoder = tiny.whisper.decoder
    # Callers that differ in everything a pass depends on: audio, rows (two beams), new tokens,
    # cache length, and whether the cache records alignment attention.
    calls = [
        _call(tiny, jfk_audio[: 4 * 16000], [[*SOT]], alignment=True),
        _call(tiny, jfk_audio[3 * 16000 : 9 * 16000], [[*SOT], [*SOT]]),
        _call(tiny, jfk_audio[5 * 16000 :], [[*SOT, 400, 1110]]),
    ]
    for c in calls:  # a prompt first, so the merged pass starts at different cache lengths
        decoder.hidden(c.tokens, c.cross, c.cache)
    steps = [torch.tensor([[290]]), torch.tensor([[290], [314]]), torch.tensor([[262, 1110]])]
    steps_calls = [DecoderCall(t, c.cross, c.cache) for t, c in zip(steps, calls, strict=True)]
    alone = [_clone(c) for c in steps_calls]
    solo = [decoder.hidden(c.tokens, c.cross, c.cache) for c in alone]
    merged = decoder.hidden_many(steps_calls)
    for a, b, ca, cb in zip(solo, merged, alone, steps_calls, strict=True):
        assert a.shape == b.shape
        torch.testing.assert_close(b, a, atol=1e-4, rtol=1e-4)
        assert torch.equal(decoder.logits_of(a).argmax(-1), decoder.logits_of(b).argmax(-1))
        assert ca.cache is not None and cb.cache is not None
        assert ca.cache.length == cb.cache.length
        n = cb.cache.length
        torch.testing.assert_close(cb.cache.k[:, :, :, :n], ca.cache.k[:, :, :, :n], atol=1e-4, rtol=1e-4)
        if ca.cache.queries is not None:
            a_att, b_att = ca.cache.attention(ca.cross), cb.cache.attention(cb.cross)
            assert a_att is not None and b_att is not None and b_att.abs().sum() > 0
            torch.testing.assert_close(b_att, a_att, atol=1e-4, rtol=1e-4)


def _threads(jobs: list[Callable[[], object]]) -> list[object]:
    results: list[object] = [None] * len(jobs)

    def go(i: int) -> None:
        try:
            results[i] = jobs[i]()
        except Exception as e:  # noqa: BLE001 - the test inspects it
            results[i] = e

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    return results


def test_a_bad_pass_fails_only_its_caller(tiny: Model, jfk_audio: np.ndarray) -> None:
    decoder = tiny.whisper.decoder
    with torch.inference_mode():
        good = _call(tiny, jfk_audio[: 5 * 16000], [[*SOT]])
        bad = _call(tiny, jfk_audio[5 * 16000 :], [[*SOT, 400, 1110]], max_len=2)  # 3 tokens > 2 positions
        expected = decoder.hidden(good.tokens, good.cross, _clone(good).cache)
    batcher = PassBatcher.over(decoder)

    def first() -> torch.Tensor:  # asks once the other job has joined, so the two passes meet
        while batcher.jobs < 2:
            time.sleep(0.01)
        return batcher.submit(good)

    got_good, got_bad = _threads([lambda: batcher.run(first), lambda: batcher.run(lambda: batcher.submit(bad))])
    assert isinstance(got_bad, ValueError) and "overflow" in str(got_bad)
    assert isinstance(got_good, torch.Tensor)
    torch.testing.assert_close(got_good, expected, atol=1e-4, rtol=1e-4)
    assert batcher.stats.by_size == {2: 1}
    assert good.cache is not None and good.cache.length == 2 and bad.cache is not None and bad.cache.length == 0


def _words(model: Model, audio: np.ndarray, run: Callable[[Callable[[], object]], object]) -> list[str]:
    session = model.stream()
    words: list[str] = []
    for start in range(0, len(audio), 8000):
        update = run(lambda s=start: session.push(audio[s : s + 8000]))
        words += [w.word for w in update.committed]  # type: ignore[attr-defined]
    words += [w.word for w in run(session.finish).committed]  # type: ignore[attr-defined]
    return words


@pytest.mark.slow
def test_sessions_batched_together_commit_what_each_commits_alone(tiny: Model, jfk_audio: np.ndarray) -> None:
    audios = [jfk_audio, np.concatenate([jfk_audio[3 * 16000 :], np.zeros(16000, np.float32), jfk_audio[: 3 * 16000]]),
              jfk_audio[2 * 16000 :]]
    alone = [_words(tiny, a, lambda job: job()) for a in audios]
    assert all(alone)
    decoder = tiny.whisper.decoder
    batcher = PassBatcher.over(decoder)
    decoder.batcher = batcher
    try:
        together = _threads([lambda a=a: _words(tiny, a, batcher.run) for a in audios])
    finally:
        decoder.batcher = None
    assert together == alone
    assert batcher.stats.merged > 0 and batcher.stats.calls > batcher.stats.passes
