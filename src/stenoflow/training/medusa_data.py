"""Training and held-out examples for Medusa heads: the frozen model's own states on its own output.

Self-distillation, as for the hush word: each synthesized clip (training text pool; held-out
clips in voices training never hears) is padded to a 30 s window and decoded greedily by the
model, sometimes after a prompt of preceding text, mostly with timestamps (as ``transcribe``
decodes). The example keeps the token sequence and what the heads read: the decoder's residual
stream after its last block at every position (teacher forcing on that sequence reproduces the
states greedy decoding had), and, for Medusa-Block, the last layer's cross-attention keys and
values of the window. The heads then learn to predict the model's own tokens 2..K+1 places on.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from stenoflow.api import Model
from stenoflow.bench.datasets import short_clips
from stenoflow.decoding.options import DecodingOptions
from stenoflow.decoding.task import DecodingTask
from stenoflow.tokenizer import Tokenizer
from stenoflow.training.hush_data import HELDOUT_VOICES, TRAIN_VOICES, last_chars, padded_mel

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MedusaDataOptions:
    train_clips: int = 300
    heldout_clips: int = 40
    timestamp_share: float = 0.7  # decoded with timestamps, as transcribe does by default
    prompt_share: float = 0.4  # decoded after a prompt of the previous clip's text
    keep_cross: bool = True  # keep the last layer's cross K/V (Medusa-Block needs them)
    seed: int = 0


@dataclass(frozen=True)
class StateExample:
    tokens: torch.Tensor  # (T,) long: initial tokens, the model's greedy tokens, end-of-text
    first: int  # index in ``tokens`` of the first decoded token
    hidden: torch.Tensor  # (T - 1, D) float16: the residual stream at the positions fed (tokens[:-1])
    cross_k: torch.Tensor | None  # (H, S, D/H) float16: the last decoder layer's cross-attention keys
    cross_v: torch.Tensor | None

    def to_dict(self) -> dict[str, object]:
        return {"tokens": self.tokens, "first": self.first, "hidden": self.hidden, "cross_k": self.cross_k,
                "cross_v": self.cross_v}


@torch.inference_mode()
def state_example(model: Model, audio: np.ndarray, prompt: str, timestamps: bool, keep_cross: bool) -> StateExample:
    options = DecodingOptions(language="en", without_timestamps=not timestamps, prompt=prompt or None)
    cross = model.whisper.decoder.cross_kv(model.encode(padded_mel(model, audio)))
    task = DecodingTask(model.context, options)
    result = task.run(cross)
    initial = task.initial_tokens(model.tokenizer.with_options("en", "transcribe"))
    seq = torch.tensor([*initial, *result.tokens, model.tokenizer.eot])
    hidden = model.whisper.decoder.hidden(seq[None, :-1], cross, None)
    k = cross.k[-1][0].half().clone() if keep_cross else None
    v = cross.v[-1][0].half().clone() if keep_cross else None
    return StateExample(seq, len(initial), hidden[0].half().clone(), k, v)


def medusa_examples(model: Model, options: MedusaDataOptions,
                    progress: Callable[[int, int], None] | None = None) -> tuple[list[StateExample], list[StateExample]]:
    """(training examples, held-out examples); held-out ones are whole clips with timestamps, no prompt."""
    train_clips = short_clips(options.train_clips, pool="train", min_s=1.0, max_s=25.0, seed=options.seed + 100,
                              voices=TRAIN_VOICES)
    held_clips = short_clips(options.heldout_clips, pool="train", min_s=2.0, max_s=25.0, seed=options.seed + 200,
                             voices=HELDOUT_VOICES)
    rng = np.random.default_rng([options.seed, 13])
    total = len(train_clips) + len(held_clips)
    train: list[StateExample] = []
    for i, clip in enumerate(train_clips):
        prompt = last_chars(train_clips[i - 1].text, 200) if i and rng.random() < options.prompt_share else ""
        timestamps = bool(rng.random() < options.timestamp_share)
        train.append(state_example(model, clip.load_audio(), prompt, timestamps, options.keep_cross))
        if progress:
            progress(i + 1, total)
    held: list[StateExample] = []
    for j, clip in enumerate(held_clips):
        held.append(state_example(model, clip.load_audio(), "", True, options.keep_cross))
        if progress:
            progress(len(train_clips) + j + 1, total)
    return train, held


def shortlist(examples: Sequence[StateExample], tokenizer: Tokenizer, n_vocab: int, frequent: int) -> torch.Tensor:
    """The token ids heads may propose: the ``frequent`` lowest text ids (byte-level BPE numbers its
    merges from the most frequent), every token the examples decode, every timestamp, end-of-text."""
    ids = set(range(min(frequent, tokenizer.eot)))
    for ex in examples:
        ids.update(int(t) for t in ex.tokens[ex.first :])
    ids.update(range(tokenizer.timestamp_begin, n_vocab))
    ids.add(tokenizer.eot)
    return torch.tensor(sorted(i for i in ids if 0 <= i < n_vocab), dtype=torch.long)


def load_or_build_examples(model: Model, options: MedusaDataOptions, path: Path
                           ) -> tuple[list[StateExample], list[StateExample]]:
    """The examples cached at ``path`` if they were built for this model and these options, else
    built (with a progress log) and cached there."""
    key = {"model": model.name, "compute": model.compute, "options": asdict(options)}
    if path.is_file():
        blob = torch.load(path, weights_only=True)
        if blob.get("key") == json.dumps(key, sort_keys=True):
            log.info("reusing %d + %d Medusa examples from %s", len(blob["train"]), len(blob["heldout"]), path)
            return [StateExample(**e) for e in blob["train"]], [StateExample(**e) for e in blob["heldout"]]
    log.info("building %d training and %d held-out examples (synthesized speech, the model's own greedy "
             "transcripts and states)", options.train_clips, options.heldout_clips)
    started = time.monotonic()

    def progress(done: int, total: int) -> None:
        if done % 20 == 0 or done == total:
            log.info("examples: %d/%d (%.0f s)", done, total, time.monotonic() - started)

    train, held = medusa_examples(model, options, progress)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save({"key": json.dumps(key, sort_keys=True), "train": [e.to_dict() for e in train],
                "heldout": [e.to_dict() for e in held]}, tmp)
    tmp.replace(path)
    return train, held
