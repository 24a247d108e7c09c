"""Training a hush word: 8,000 audio samples optimised through the frozen model.

The only trainable parameters are the raw samples of the hush word. Each step appends them to
a speech clip, computes the log-mel (differentiable), runs the frozen encoder and decoder with
teacher forcing, and takes the cross-entropy of the target transcript ending in end-of-text.
Targets are the model's own transcript of the clip with standard 30 s padding
(self-distillation), so any speech serves. The end-of-text token is weighted up: stopping at
the hush word is the behaviour being taught.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from stenoflow.api import Model
from stenoflow.audio.features import log_mel_spectrogram
from stenoflow.audio.hush import HUSH_SAMPLES, HushWord
from stenoflow.decoding.options import DecodingOptions

log = logging.getLogger(__name__)

N_SAMPLES = 480000


@dataclass(frozen=True)
class HushTrainOptions:
    steps: int = 1500
    clips_per_step: int = 4  # gradient accumulation over clips of different lengths
    lr: float = 1e-3
    # Bound on |sample|. Our speech is levelled to peaks near 0.3-0.9; a hush word well below
    # that cannot set the log-mel's global maximum, so the speech features stay what the
    # model expects, and it stays quiet to a listener.
    amplitude: float = 0.1
    eot_weight: float = 4.0  # weight of the end-of-text target in the loss
    timestamp_share: float = 0.5  # share of targets decoded with timestamps
    gain_range: tuple[float, float] = (0.5, 1.5)  # random loudness of the speech per step
    noise_prob: float = 0.3  # chance of extra white noise under the speech per step
    eval_every: int = 100
    keep_best: int = 3  # checkpoints averaged at the end
    seed: int = 0


@dataclass
class Example:
    audio: np.ndarray
    target: list[int]  # text (and timestamp) tokens, without the prompt and end-of-text
    timestamps: bool
    reference: str


@dataclass
class TrainState:
    step: int = 0
    hush: list[float] = field(default_factory=list)
    history: list[dict[str, float]] = field(default_factory=list)
    best: list[dict[str, object]] = field(default_factory=list)  # {"score", "step", "hush"}


def self_distilled_targets(model: Model, audios: Sequence[np.ndarray], references: Sequence[str],
                           timestamp_share: float, seed: int) -> list[Example]:
    """The model's own greedy transcripts with standard 30 s padding: the behaviour to keep."""
    rng = np.random.default_rng(seed)
    examples = []
    for audio, ref in zip(audios, references):
        timestamps = bool(rng.random() < timestamp_share)
        mel = model.features(audio, padding=N_SAMPLES)[:, :3000]
        result = model.decode(mel, DecodingOptions(language="en", without_timestamps=not timestamps))
        examples.append(Example(audio, result.tokens, timestamps, ref))
    return examples


def prompt_tokens(model: Model, timestamps: bool) -> list[int]:
    tok = model.tokenizer.with_options("en" if model.is_multilingual else None, "transcribe")
    return list(tok.sot_sequence) if timestamps else list(tok.sot_sequence_including_notimestamps)


def example_loss(model: Model, hush: torch.Tensor, ex: Example, gain: float, noise: float,
                 eot_weight: float, rng: np.random.Generator) -> torch.Tensor:
    speech = torch.from_numpy(ex.audio) * gain
    if noise > 0:
        speech = speech + noise * torch.from_numpy(rng.standard_normal(len(ex.audio)).astype(np.float32))
    mel = log_mel_spectrogram(torch.cat([speech, hush]), n_mels=model.dims.n_mels)
    features = model.whisper.encoder(mel[None])
    prompt = prompt_tokens(model, ex.timestamps)
    eot = model.tokenizer.eot
    seq = prompt + ex.target + [eot]
    tokens = torch.tensor([seq[:-1]])
    cross = model.whisper.decoder.cross_kv(features)
    logits, _ = model.whisper.decoder(tokens, cross, None)
    targets = torch.tensor(seq[len(prompt):])
    logits = logits[0, len(prompt) - 1 :]
    weights = torch.ones(len(targets))
    weights[-1] = eot_weight
    return (F.cross_entropy(logits, targets, reduction="none") * weights).sum() / weights.sum()


def evaluate(model: Model, hush: np.ndarray, examples: Sequence[Example]) -> dict[str, float]:
    """Greedy decoding of speech ⊕ hush without timestamps: WER and runaway share."""
    from stenoflow.bench.metrics import wer

    hyps, refs, runaways = [], [], 0
    for ex in examples:
        mel = model.features(np.concatenate([ex.audio, hush]))
        limit = 2 * len(ex.target) + 10
        result = model.decode(mel, DecodingOptions(language="en", without_timestamps=True, sample_len=limit))
        text_tokens = [t for t in ex.target if t < model.tokenizer.eot]
        if len(result.tokens) >= limit or len(result.tokens) > 2 * len(text_tokens) + 4:
            runaways += 1
        hyps.append(result.text)
        refs.append(ex.reference)
    w = wer(refs, hyps).wer
    return {"wer": w, "runaways": runaways / max(1, len(examples))}


def train_hush(model: Model, train: Sequence[Example], heldout: Sequence[Example], options: HushTrainOptions,
               run_dir: Path, progress: Callable[[dict[str, float]], None] | None = None) -> HushWord:
    """Train (or resume, from ``run_dir/state.json``) and return the averaged best hush word."""
    run_dir.mkdir(parents=True, exist_ok=True)
    state_path = run_dir / "state.json"
    rng = np.random.default_rng(options.seed)
    state = TrainState()
    if state_path.is_file():
        state = TrainState(**json.loads(state_path.read_text()))
        log.info("resuming hush training at step %d", state.step)
    init = np.asarray(state.hush, np.float32) if state.hush else (
        rng.uniform(-1, 1, HUSH_SAMPLES).astype(np.float32) * options.amplitude * 0.1)
    hush = torch.nn.Parameter(torch.from_numpy(init.copy()))
    opt = torch.optim.Adam([hush], lr=options.lr)
    opt_path = run_dir / "optimizer.pt"
    if state.step and opt_path.is_file():
        opt.load_state_dict(torch.load(opt_path, weights_only=True))
    model.whisper.requires_grad_(False)
    t0 = time.monotonic()
    while state.step < options.steps:
        opt.zero_grad()
        total = 0.0
        for _ in range(options.clips_per_step):
            ex = train[int(rng.integers(len(train)))]
            gain = float(rng.uniform(*options.gain_range))
            noise = float(10 ** rng.uniform(-3.5, -2.0)) if rng.random() < options.noise_prob else 0.0
            with torch.enable_grad():
                loss = example_loss(model, hush, ex, gain, noise, options.eot_weight, rng) / options.clips_per_step
                loss.backward()
            total += float(loss.detach())
        opt.step()
        with torch.no_grad():
            hush.clamp_(-options.amplitude, options.amplitude)
        state.step += 1
        if state.step % options.eval_every == 0 or state.step == options.steps:
            samples = hush.detach().numpy().copy()
            metrics = evaluate(model, samples, heldout)
            row = {"step": state.step, "loss": total, **metrics, "elapsed_s": time.monotonic() - t0}
            state.history.append(row)
            score = metrics["runaways"] * 10 + metrics["wer"]
            state.best.append({"score": score, "step": state.step, "hush": samples.tolist()})
            state.best = sorted(state.best, key=lambda b: float(b["score"]))[: options.keep_best]  # type: ignore[arg-type]
            state.hush = samples.tolist()
            state_path.write_text(json.dumps(asdict(state)))
            torch.save(opt.state_dict(), opt_path)
            log.info("step %d loss %.3f held-out WER %.3f runaways %.2f", state.step, total,
                     metrics["wer"], metrics["runaways"])
            if progress:
                progress(row)
    averaged = np.mean([np.asarray(b["hush"], np.float32) for b in state.best], axis=0).astype(np.float32)
    final = evaluate(model, averaged, heldout)
    record = {"options": asdict(options), "steps": state.step, "history": state.history,
              "best_steps": [b["step"] for b in state.best], "averaged_heldout": final,
              "train_clips": len(train), "heldout_clips": len(heldout)}
    log.info("averaged hush word: held-out WER %.3f, runaways %.2f", final["wer"], final["runaways"])
    return HushWord(averaged, model.name, record)

