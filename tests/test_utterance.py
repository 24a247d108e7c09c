"""Voice commands: endpointing logic, repeat cutting, early termination, and whole sessions on real
speech (jfk.wav and synthesized commands) with the bundled tiny.en."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from stenoflow.decoding.strategies import BeamSearchDecoder
from stenoflow.utterance.endpoint import Endpointer, EndpointOptions, Kind
from stenoflow.utterance.passes import repeat_start

CHUNK = 512
RATE = 16000


def marks(probs: list[float], options: EndpointOptions | None = None) -> list[tuple[Kind, int, int]]:
    ep = Endpointer(options or EndpointOptions(), CHUNK)
    out = []
    for i, p in enumerate(probs):
        m = ep.update(i * CHUNK, p)
        if m is not None:
            out.append((m.kind, m.start, m.end))
    m = ep.flush(len(probs) * CHUNK)
    if m is not None:
        out.append((m.kind, m.start, m.end))
    return out


def chunks(seconds: float) -> int:
    return round(seconds * RATE / CHUNK)


def test_an_utterance_ends_once_the_hang_time_has_passed_in_silence() -> None:
    probs = [0.0] * 10 + [0.9] * chunks(1.0) + [0.0] * chunks(1.0)
    got = marks(probs, EndpointOptions(hang_s=0.5))
    assert [k for k, _, _ in got] == [Kind.START, Kind.PAUSE, Kind.END]
    _, start, end = got[-1]
    assert start == 10 * CHUNK and end == (10 + chunks(1.0)) * CHUNK


def test_a_pause_shorter_than_the_hang_keeps_one_utterance() -> None:
    probs = [0.9] * chunks(1.0) + [0.0] * chunks(0.3) + [0.9] * chunks(1.0) + [0.0] * chunks(1.0)
    got = marks(probs, EndpointOptions(hang_s=0.5))
    assert [k for k, _, _ in got] == [Kind.START, Kind.PAUSE, Kind.RESUME, Kind.PAUSE, Kind.END]
    assert got[-1][1] == 0


def test_clicks_are_dropped_long_speech_is_cut_and_the_stream_end_closes_an_utterance() -> None:
    assert [k for k, _, _ in marks([0.9] * 2 + [0.0] * chunks(1.0))][-1] is Kind.DROP
    long = marks([0.9] * chunks(6.0), EndpointOptions(max_utterance_s=2.0))
    ends = [m for m in long if m[0] is Kind.END]
    assert len(ends) >= 2 and all(e - s <= 2.0 * RATE + CHUNK for _, s, e in ends)
    assert marks([0.9] * chunks(1.0))[-1][0] is Kind.END  # no silence after it: flush ends it


def test_endpoint_options_refuse_nonsense() -> None:
    with pytest.raises(ValueError, match="threshold"):
        EndpointOptions(threshold=1.5)
    with pytest.raises(ValueError, match="hang"):
        EndpointOptions(hang_s=0.1, post_s=0.2)


def test_repeats_are_cut_where_they_begin_and_speech_is_not() -> None:
    assert repeat_start(["and", "so", "my", "fellow", "americans", "and", "so", "my", "fellow", "americans"]) == 5
    assert repeat_start(["ask", "not", "ask", "not", "ask", "not"]) == 2
    assert repeat_start(["what", "your", "country", "can", "do", "for", "you", "what", "your", "country", "can"]) == 7  # a 4-gram again
    assert repeat_start(["ask", "not", "ask", "not"]) == 2  # said twice at the very end
    for speech in ("no no no", "go forward ten meters", "the code is four four two one",
                   "king of hearts queen of hearts", "set a timer for twelve minutes"):
        assert repeat_start(speech.split()) is None, speech


def test_early_termination_stops_the_beam_once_a_long_enough_candidate_ended() -> None:
    eot, vocab = 9, 10

    def run(stop: int | None) -> int:
        dec = BeamSearchDecoder(2, eot, patience=5.0, stop_length=stop, sample_begin=1)
        tokens, scores = torch.zeros(2, 1, dtype=torch.long), torch.zeros(2)
        for step in range(20):
            logits = torch.full((2, vocab), -5.0)
            logits[:, 1 + step % 3] = 0.0  # two ways to go on ...
            logits[:, 4 + step % 3] = 0.0
            logits[:, eot] = 3.0  # ... but every row would rather end: candidates finish at every step
            out = dec.update(tokens, logits, scores)
            tokens, scores = out.tokens, out.sum_logprobs
            if out.done:
                return step + 1
        return 20

    assert run(None) == 6  # the plain rule: round(2 * 5.0) candidates must have finished
    assert run(6) == 5  # rows reach the budget (6 tokens with the prompt) with a long enough candidate ended
    assert run(30) == 6  # a budget past the plain rule's end changes nothing


# --- whole sessions on real speech ------------------------------------------------------------------



@pytest.fixture(scope="module")
def commands():
    from stenoflow.bench.commands import command_stream

    return command_stream("test-commands", count=4, seed=3)


@pytest.mark.slow
def test_collapse_and_early_termination_give_the_full_decodes_text(tiny, jfk_audio, commands) -> None:
    from stenoflow.utterance.options import UtteranceOptions
    from stenoflow.utterance.passes import UtteranceDecoder

    shortcut = UtteranceDecoder(tiny, UtteranceOptions())
    full = UtteranceDecoder(tiny, UtteranceOptions(collapse=False, early_termination=False))
    audio = commands.load_audio()
    pieces = [jfk_audio[: round(2.6 * RATE)], jfk_audio[round(7.6 * RATE) :]]
    pieces += [audio[max(0, round((s - 0.3) * RATE)) : round((e + 0.2) * RATE)] for s, e, _ in commands.sentences]
    for piece in pieces:
        pilot = shortcut.pilot(piece[: round(0.7 * piece.size)], None)
        fast, reference = shortcut.final(piece, pilot), full.final(piece, None)
        assert fast.text == reference.text
        assert fast.forward_passes <= reference.forward_passes


@pytest.mark.slow
def test_every_command_is_heard_once_in_a_realtime_session(tiny, commands) -> None:
    from stenoflow.bench.metrics import wer
    from stenoflow.bench.utterance_bench import match
    from stenoflow.utterance.driver import run_utterances

    run = run_utterances(tiny.listen(), commands.load_audio(), "realtime")
    assert len(run.heard) == len(commands.sentences)  # one utterance per command: none split, none lost
    refs, hyps = match(commands, run.heard)
    assert len(refs) == len(commands.sentences)  # no utterance outside the commands
    assert wer(refs, hyps).wer < 0.35
    for h, (s, e, _) in zip(run.heard, commands.sentences):
        u = h.utterance
        assert u.pilots >= 1 and abs(u.start - s) < 0.4 and abs(u.end - e) < 0.4
        assert h.after_endpoint >= 0 and u.endpoint >= u.end


@pytest.mark.slow
def test_an_utterance_the_stream_ends_in_is_still_transcribed(tiny, jfk_audio) -> None:
    session = tiny.listen()
    heard = session.push(np.concatenate([np.zeros(RATE // 2, np.float32), jfk_audio[: round(2.4 * RATE)]]))
    assert heard == []  # still speaking
    heard = session.finish()
    assert len(heard) == 1 and "fellow americans" in heard[0].text.lower()
    with pytest.raises(RuntimeError, match="finished"):
        session.push(np.zeros(100, np.float32))


@pytest.mark.slow
def test_silence_and_noise_give_no_utterance(tiny) -> None:
    rng = np.random.default_rng(0)
    quiet = np.zeros(5 * RATE, np.float32)
    noise = (0.05 * rng.standard_normal(5 * RATE)).astype(np.float32)
    hum = (0.1 * np.sin(2 * np.pi * 50 * np.arange(5 * RATE) / RATE)).astype(np.float32)
    for audio in (quiet, noise, hum):
        assert tiny.utterances(audio) == []


def test_offramp_signal_tells_a_useful_perplexity_from_one_both_models_share() -> None:
    from stenoflow.bench.utterance_bench import offramp_signal

    ppl = [1.1, 1.2, 1.5, 1.9, 2.4, float("inf")]
    useful = offramp_signal(ppl, local_err=[0, 0, 1, 2, 3, 4], remote_err=[0, 0, 0, 0, 1, 0])
    assert useful["gain"] > 0.8 and useful["commands_remote_better"] == 4 and useful["commands_remote_worse"] == 0
    shared = offramp_signal(ppl, local_err=[0, 0, 1, 2, 3, 4], remote_err=[0, 0, 1, 2, 3, 4])
    assert shared["local_errors"] == shared["remote_errors"] > 0.8
    assert np.isnan(shared["gain"])  # no command where offloading changes anything
