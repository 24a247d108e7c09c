"""Where a stream holds speech (Silero VAD), and the recorded stream it is checked on."""

from __future__ import annotations

import numpy as np
import torch

from stenoflow.audio.vad import SileroVad
from stenoflow.bench import mixing
from stenoflow.bench.recorded import recorded_stream
from stenoflow.streaming.speech import CHUNK_S, SpeechTrack

SR = 16000


def test_loading_the_voice_activity_model_leaves_torch_threads_alone() -> None:
    """The silero_vad package sets torch to one thread when imported; a stream's encoder would
    then run on one core for the rest of the process."""
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        SileroVad()
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)


def test_speech_seconds_follow_the_speech_and_not_silence_or_hiss(jfk_audio: np.ndarray) -> None:
    rng = np.random.default_rng(0)
    hiss = (3e-3 * rng.standard_normal(2 * SR)).astype(np.float32)
    track = SpeechTrack()
    for piece in np.array_split(np.concatenate([hiss, jfk_audio, np.zeros(SR, np.float32)]), 37):
        track.feed(piece)  # pieces of any size, as rounds take them
    end = 2 + jfk_audio.size / SR
    assert track.fed_s == end + 1
    assert track.seconds(0, 2) < 0.2
    assert track.seconds(2, end) > 0.6 * (end - 2)
    assert track.seconds(end + 0.3, end + 1) == 0.0
    track.forget(4.0)
    assert track.seconds(0, 4.0 - CHUNK_S) == 0.0
    assert track.seconds(4.0, end) > 0


def test_the_recorded_stream_is_its_recordings_in_order_with_their_transcripts() -> None:
    clip = recorded_stream()
    assert [voice.split(":")[0] for voice in clip.sentence_voices] == ["librivox"] * 5 + ["human"] + ["cards"] * 5 + \
        ["command"]
    assert clip.sentences[-1][2] == "go forward ten meters"
    assert clip.sentences[-2][2] == "eight of spades four of clubs seven of hearts"
    assert clip.text.startswith("and mister john dashwood")
    audio = clip.load_audio()
    assert abs(audio.size - clip.duration * SR) <= 2
    for (start, end, _), (next_start, _, _) in zip(clip.sentences, clip.sentences[1:], strict=False):
        assert abs(next_start - end - 0.8) < 1e-3  # 0.8 s of silence between recordings
        assert not audio[round(end * SR) + 1 : round(next_start * SR) - 1].any()


def test_a_quiet_stream_is_raised_before_the_voice_activity_model_hears_it(jfk_audio: np.ndarray) -> None:
    """At -63 dBFS Silero VAD alone finds half a second of speech in jfk's 7; a quiet microphone
    is not silence. Raised, the speech is found, in pieces of any size, and room noise is not."""
    rng = np.random.default_rng(0)
    quiet = (0.005 * jfk_audio).astype(np.float32)
    whole = SpeechTrack()
    whole.feed(quiet)
    pieces = SpeechTrack()
    for piece in np.array_split(quiet, 53):
        pieces.feed(piece)
    duration = jfk_audio.size / SR
    assert whole.seconds(0, duration) > 0.6 * 7.4
    assert pieces.seconds(0, duration) == whole.seconds(0, duration)
    for level in (1e-3, 3e-2):  # -60 and -30 dBFS
        noise = SpeechTrack()
        noise.feed((level * mixing.noise(10 * SR, rng)).astype(np.float32))
        assert noise.seconds(0, 10) == 0.0
    loud = SpeechTrack()
    loud.feed(jfk_audio)
    assert loud.seconds(0, duration) > 0.6 * 7.4
