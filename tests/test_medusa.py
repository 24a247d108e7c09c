"""Medusa heads: exactness of greedy-exact drafting, typical acceptance, the heads' files, training.

Exactness: at beam width 1 with greedy-exact acceptance the main model keeps only tokens its own
argmax chooses, so the output must be its plain greedy output token for token; the shipped heads
must also save main-model passes.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from stenoflow.api import Model
from stenoflow.decoding.guided import DraftVerifier
from stenoflow.decoding.options import TYPICAL_PUBLISHED, DecodingOptions
from stenoflow.decoding.task import DecodingTask
from stenoflow.model.medusa import MedusaHeads, bundled_medusa_path, load_medusa


def window(model: Model, audio: np.ndarray):  # type: ignore[no-untyped-def]
    mel = model.features(audio, padding=30 * 16000)[:, :3000]
    return model.whisper.decoder.cross_kv(model.encode(mel))


@pytest.mark.parametrize("kind", ["linear", "block"])
@pytest.mark.parametrize("main_name", ["base", "tiny"])
def test_greedy_exact_medusa_equals_greedy_in_fewer_passes(main_name: str, kind: str, request: pytest.FixtureRequest,
                                                           jfk_audio: np.ndarray) -> None:
    main: Model = request.getfixturevalue(main_name)
    options = DecodingOptions(language="en")
    cross = window(main, jfk_audio)
    greedy = DecodingTask(main.context, options).run(cross)
    fast = DecodingTask(main.context, options).run(cross, draft=main.medusa(kind))
    assert fast.tokens == greedy.tokens
    assert fast.avg_logprob == pytest.approx(greedy.avg_logprob, abs=1e-3)
    assert fast.stats["draft_accepted"] > 0 and fast.stats["medusa_drafts"] > 0
    assert fast.stats["forward_passes"] < greedy.stats["forward_passes"]


def test_untrained_heads_change_nothing_but_speed(tiny: Model, jfk_audio: np.ndarray) -> None:
    """Heads that propose nonsense (random weights, a shortlist without most words) are verified
    away: the text stays greedy's."""
    torch.manual_seed(0)
    for kind in ("linear", "block"):
        heads = MedusaHeads.for_decoder(tiny.whisper.decoder, kind, 3, torch.arange(0, 51864, 7))
        for head in heads.heads:
            torch.nn.init.normal_(head.weight, std=0.2)
        heads.eval().requires_grad_(False).bind(tiny.whisper.decoder)
        options = DecodingOptions(language="en")
        cross = window(tiny, jfk_audio)
        assert DecodingTask(tiny.context, options).run(cross, draft=heads).tokens == \
            DecodingTask(tiny.context, options).run(cross).tokens


def test_a_block_keeps_its_cache_in_line_with_the_models(base: Model, jfk_audio: np.ndarray) -> None:
    """After a decoding with rollbacks, the decoder states the heads read equal a teacher-forced pass
    over the final tokens, and so do the block's states built pass by pass."""
    from stenoflow.decoding.inference import Inference

    cross = window(base, jfk_audio)
    result = DecodingTask(base.context, DecodingOptions(language="en")).run(cross, draft=base.medusa("block"))
    path = bundled_medusa_path("base", "block")
    assert path is not None
    heads = load_medusa(path).heads  # unbound: float32, so both ways compute the same numbers
    assert result.stats["verify_passes"] > 0
    tok = base.tokenizer.with_options("en", "transcribe")
    seq = torch.tensor([[*tok.sot_sequence, *result.tokens]])
    full = base.whisper.decoder.hidden(seq, cross, None)
    expected = heads.states(full, base.whisper.decoder, cross.k[-1], cross.v[-1], None)
    # Replay: prompt, then chunks with a rejected tail that is rolled back, as verification does.
    inference = Inference(base.whisper, cross, 1, 448)
    inference.prefill(seq[:, :3], [2])
    from stenoflow.decoding.medusa import MedusaProposer

    proposer = MedusaProposer(heads, base.whisper.decoder, inference, tok.eot)
    n = 3
    states = []
    while n < seq.shape[1]:
        states.append((n - 1, proposer._state()))
        step = min(3, seq.shape[1] - n)
        junk = torch.tensor([[tok.eot] * 2])
        inference.all_logits(torch.cat([seq[:, : n + step], junk], dim=1))
        inference.rollback(n + step)
        n += step
    for position, state in states:
        assert state is not None
        torch.testing.assert_close(state, expected[0, position], atol=2e-3, rtol=1e-3)


def test_typical_acceptance_keeps_likely_drafts_and_refuses_unlikely_ones() -> None:
    verifier = DraftVerifier(None, [], TYPICAL_PUBLISHED)  # type: ignore[arg-type]
    confident = torch.log(torch.tensor([[0.05, 0.9, 0.05]]))
    assert verifier.choose(confident, 1) == 1  # the argmax anyway
    assert verifier.choose(confident, 0) == 1  # 0.05 < min(0.09, 0.3 exp(-H))
    split = torch.log(torch.tensor([[0.5, 0.4, 0.1]]))
    assert verifier.choose(split, 1) == 1  # not the argmax, but likely enough: kept
    exact = DraftVerifier(None, [], None)  # type: ignore[arg-type]
    assert exact.choose(split, 1) == 0  # greedy-exact keeps only the argmax


def test_typical_acceptance_is_faster_and_close_to_greedy(base: Model, jfk_audio: np.ndarray) -> None:
    cross = window(base, jfk_audio)
    greedy = DecodingTask(base.context, DecodingOptions(language="en")).run(cross)
    typical = DecodingTask(base.context, DecodingOptions(language="en", typical=TYPICAL_PUBLISHED)).run(
        cross, draft=base.medusa("linear"))
    exact = DecodingTask(base.context, DecodingOptions(language="en")).run(cross, draft=base.medusa("linear"))
    assert typical.stats["forward_passes"] <= exact.stats["forward_passes"]
    assert typical.text.lower().split()[:6] == greedy.text.lower().split()[:6]
    with pytest.raises(ValueError, match="typical acceptance needs drafted tokens"):
        DecodingTask(base.context, DecodingOptions(language="en", typical=TYPICAL_PUBLISHED)).run(cross)
    with pytest.raises(ValueError, match="epsilon"):
        DecodingTask(base.context, DecodingOptions(language="en", typical=(0.0, 0.3)))


@pytest.mark.parametrize("name", ["tiny.en", "base"])
@pytest.mark.parametrize("kind", ["linear", "block"])
def test_shipped_heads_come_with_their_training_record(name: str, kind: str) -> None:
    path = bundled_medusa_path(name, kind)
    assert path is not None, f"no shipped Medusa-{kind} heads for {name}"
    loaded = load_medusa(path)
    assert loaded.model == name and loaded.heads.shape.kind == kind
    record = loaded.record
    history = record["history"]
    assert isinstance(history, list) and len(history) >= 2
    assert all(f"head{k + 1}_top1" in history[-1] for k in range(loaded.heads.shape.heads))
    heldout = record["heldout"]
    assert isinstance(heldout, dict)
    assert heldout["accepted_per_pass"] > record["untrained_heldout"]["accepted_per_pass"]  # type: ignore[index]


def test_heads_of_the_wrong_shape_or_file_are_a_clear_error(tiny: Model, base: Model, tmp_path: Path) -> None:
    heads = tiny.medusa("linear")
    with pytest.raises(ValueError, match="do not fit this model"):
        heads.check(base.whisper.decoder)
    foreign = tmp_path / "tiny-heads.pt"
    MedusaHeads.for_decoder(tiny.whisper.decoder, "linear", 2, torch.arange(100)).save(foreign, "tiny.en", {})
    with pytest.raises(ValueError, match="do not fit this model"):
        base.medusa(str(foreign))
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint at all")
    with pytest.raises(ValueError, match="not a Medusa heads file"):
        load_medusa(junk)
    other = tmp_path / "other.pt"
    torch.save({"weights": torch.zeros(3)}, other)
    with pytest.raises(ValueError, match="not a Medusa heads file"):
        load_medusa(other)
    broken = tmp_path / "broken.pt"
    blob = torch.load(foreign, weights_only=True)
    blob["state"]["heads.0.weight"] = torch.zeros(5, 5, dtype=torch.float16)
    torch.save(blob, broken)
    with pytest.raises(ValueError, match="wrong shape"):
        load_medusa(broken)
    with pytest.raises(FileNotFoundError, match="neither a kind"):
        tiny.medusa("no-such-heads.pt")


def test_transcribe_with_medusa_equals_greedy_end_to_end(tiny: Model, jfk_path: Path) -> None:
    plain, _ = tiny.transcribe(jfk_path, beam_size=1, temperature=0.0)
    fast, info = tiny.transcribe(jfk_path, beam_size=1, temperature=0.0, medusa="block")
    assert [s.tokens for s in fast] == [s.tokens for s in plain]
    assert info.draft is not None and info.draft["medusa"] == "block"
    assert info.stats["draft_accepted"] > 0
    with pytest.raises(ValueError, match="not both"):
        tiny.transcribe(jfk_path, draft="tiny.en", medusa="linear")


@pytest.mark.slow
def test_training_reports_held_out_acceptance_and_resumes(tiny: Model, tmp_path: Path) -> None:
    from stenoflow.training.medusa_data import MedusaDataOptions, load_or_build_examples, shortlist
    from stenoflow.training.medusa_train import MedusaTrainOptions, train_medusa

    data = MedusaDataOptions(train_clips=6, heldout_clips=3, seed=5)
    train, held = load_or_build_examples(tiny, data, tmp_path / "examples.pt")
    assert len(train) == 6 and len(held) == 3
    assert all(e.hidden.shape[0] == len(e.tokens) - 1 and e.cross_k is not None for e in train)
    vocab = shortlist(train, tiny.tokenizer, tiny.dims.n_vocab, 512)
    assert all(int(t) in set(vocab.tolist()) for e in train for t in e.tokens[e.first :])
    rows: list[dict[str, float]] = []
    first = MedusaTrainOptions(kind="block", heads=2, steps=4, examples_per_step=2, eval_every=2, lr=3e-4)
    _, record = train_medusa(tiny, train, held, vocab, first, tmp_path / "run", rows.append)
    assert [h["step"] for h in record["history"]] == [0, 2, 4]  # type: ignore[union-attr]
    assert {"head1_top1", "head2_top1", "accepted_per_pass"} <= set(rows[-1])
    longer = MedusaTrainOptions(kind="block", heads=2, steps=6, examples_per_step=2, eval_every=2, lr=3e-4)
    heads, record = train_medusa(tiny, train, held, vocab, longer, tmp_path / "run")
    assert [h["step"] for h in record["history"]] == [0, 2, 4, 6]  # type: ignore[union-attr]
    assert record["runs"] == [{"start_step": 0, "steps": 4}, {"start_step": 4, "steps": 6}]
    out = heads.save(tmp_path / "heads.pt", "tiny.en", record)
    again = load_medusa(out)
    assert again.record["steps"] == 6 and json.dumps(again.record)
    # Reused examples: the cache answers for the same options.
    train2, _ = load_or_build_examples(tiny, data, tmp_path / "examples.pt")
    assert torch.equal(train2[0].tokens, train[0].tokens)


@pytest.mark.parametrize("kind", ["linear", "block"])
def test_int8_medusa_greedy_equals_greedy(kind: str, base_default: Model, jfk_audio: np.ndarray) -> None:
    """The shipped heads drafting for base in the precision the commands load it (int8 decoder):
    greedy's tokens on jfk.wav."""
    plain, _ = base_default.transcribe(jfk_audio, beam_size=1, temperature=0.0, language="en")
    fast, info = base_default.transcribe(jfk_audio, medusa=kind, beam_size=1, temperature=0.0, language="en")
    assert [s.tokens for s in fast] == [s.tokens for s in plain]
    assert info.stats["draft_accepted"] > 0
