"""Training and held-out examples for the hush word, synthesized from the training text pool.

The text comes from the "train" pool, which shares no sentence with the evaluation sets, and
the held-out clips use voices the training clips do not, so held-out figures say how the hush
word carries to an unseen speaker.

Training examples look like what the hush word will follow: whole utterances of 1-25 s (files,
voice commands) and, as in streaming rounds, speech cut off at any point (mid-word too) and
decoded with the previous text as a prompt, with or without timestamps. Live rounds also start
inside the speech: a window example begins at a pause between words, runs 2-10 s (the live
buffer's range) to any point, and is decoded after the model's own transcript of the speech
before it, as a live round follows its committed text. Every target is the model's own greedy
transcript of the same input padded to 30 s (self-distillation).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from stenoflow.api import Model
from stenoflow.audio.io import N_SAMPLES
from stenoflow.bench.datasets import short_clips
from stenoflow.decoding.options import DecodingOptions
from stenoflow.decoding.task import DecodingTask
from stenoflow.streaming.buffer import AudioBuffer
from stenoflow.training.hush_train import Example

SR = 16000
TRAIN_VOICES = ("flite:slt", "flite:rms", "flite:awb", "espeak:en-us", "espeak:en-gb", "espeak:en-us+m3",
                "espeak:en+f2", "espeak:en-gb-x-rp")
HELDOUT_VOICES = ("flite:kal16", "espeak:en-gb-scotland", "espeak:en-us+m1", "espeak:en-us+f3")
PROMPT_CHARS = 200  # as a streaming round's prompt


@dataclass(frozen=True)
class HushDataOptions:
    train_clips: int = 300
    heldout_clips: int = 40
    timestamp_share: float = 0.5  # targets decoded with timestamps (streaming rounds use them)
    cut_share: float = 0.4  # clips that also give an example cut off inside the speech
    prompt_share: float = 0.4  # examples decoded after a prompt of preceding text
    window_share: float = 0.0  # clips that also give a live-round window starting inside the speech
    seed: int = 0


def padded_mel(model: Model, audio: np.ndarray) -> torch.Tensor:
    """The log-mel of ``audio`` (at most 30 s) padded with silence to a 30 s window, as a
    distillation target is heard."""
    return model.features(audio, padding=max(0, N_SAMPLES - len(audio)))[:, : N_SAMPLES // 160]


def distilled_example(model: Model, audio: np.ndarray, reference: str, prompt: str, timestamps: bool) -> Example:
    """The model's greedy transcript of ``audio`` padded to 30 s, as a teacher-forcing target."""
    options = DecodingOptions(language="en", without_timestamps=not timestamps, prompt=prompt or None)
    result = model.decode(padded_mel(model, audio), options)
    initial = DecodingTask(model.context, options).initial_tokens(model.tokenizer.with_options("en", "transcribe"))
    return Example(audio, tuple(initial), tuple(result.tokens), reference)


def padded_text(model: Model, audio: np.ndarray) -> str:
    """The model's greedy transcript of ``audio`` padded to 30 s."""
    return model.decode(padded_mel(model, audio), DecodingOptions(language="en", without_timestamps=True)).text.strip()


def window_example(model: Model, audio: np.ndarray, rng: np.random.Generator) -> Example | None:
    """A live round's input: from a pause inside the speech, 2-10 s to any point, after the
    model's own transcript of what came before; None when the clip is too short for one."""
    if len(audio) < 4 * SR:
        return None
    buffer = AudioBuffer(SR)
    buffer.append(audio)
    around = float(rng.uniform(1.0, len(audio) / SR - 2.0))
    start = round(buffer.quietest(around - 0.4, around + 0.4) * SR)
    end = min(len(audio), start + round(float(rng.uniform(2.0, 10.0)) * SR))
    prompt = last_chars(padded_text(model, audio[:start]), PROMPT_CHARS)
    return distilled_example(model, audio[start:end], "", prompt, timestamps=bool(rng.random() < 0.5))


def last_chars(text: str, limit: int) -> str:
    """The end of ``text``, at most ``limit`` characters, starting at a word."""
    words = text.split()
    out: list[str] = []
    while words and len(" ".join([words[-1], *out])) <= limit:
        out.insert(0, words.pop())
    return " ".join(out)


def training_examples(model: Model, audios: Sequence[np.ndarray], texts: Sequence[str],
                      options: HushDataOptions) -> list[Example]:
    rng = np.random.default_rng([options.seed, 11])
    examples = []
    for i, (audio, text) in enumerate(zip(audios, texts)):
        variants = [audio]
        if rng.random() < options.cut_share and len(audio) > 2 * SR:
            variants.append(audio[: int(rng.integers(SR, len(audio)))])
        for piece in variants:
            prompt = last_chars(texts[i - 1], PROMPT_CHARS) if i and rng.random() < options.prompt_share else ""
            timestamps = bool(rng.random() < options.timestamp_share)
            examples.append(distilled_example(model, piece, text if piece is audio else "", prompt, timestamps))
        if rng.random() < options.window_share:
            window = window_example(model, audio, rng)
            if window is not None:
                examples.append(window)
    return examples


def hush_examples(model: Model, options: HushDataOptions) -> tuple[list[Example], list[Example]]:
    """(training examples, held-out examples); held-out ones are whole clips without a prompt."""
    train_clips = short_clips(options.train_clips, pool="train", min_s=1.0, max_s=25.0, seed=options.seed + 100,
                              voices=TRAIN_VOICES)
    held_clips = short_clips(options.heldout_clips, pool="train", min_s=2.0, max_s=25.0, seed=options.seed + 200,
                             voices=HELDOUT_VOICES)
    train = training_examples(model, [c.load_audio() for c in train_clips], [c.text for c in train_clips], options)
    held = [distilled_example(model, c.load_audio(), c.text, "", False) for c in held_clips]
    return train, held
