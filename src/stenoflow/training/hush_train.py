"""Training a hush word: 8,000 audio samples optimised through the frozen model.

The only trainable parameters are the raw samples of the hush word. Each step appends them to
speech clips, computes the log-mel (differentiable), runs the frozen encoder and decoder with
teacher forcing, and takes the cross-entropy of the target transcript ending in end-of-text.
Targets are the model's own transcript of the clip with standard 30 s padding
(self-distillation, see :mod:`stenoflow.training.hush_data`), so any speech serves and the
hush word learns to make the short input behave like the padded one.

Checkpoints are scored on held-out clips (voices the training never hears) by greedy WER
against the reference text and by runaways, next to the same clips' WER with 30 s padding; the
best few are averaged at the end, as the paper does. Checkpoints far apart in training can sit in
different basins, where their average is worse than either: the average is kept only when it
scores at least as well on the held-out clips as the best single checkpoint.
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
from stenoflow.audio.io import N_SAMPLES
from stenoflow.decoding.options import DecodingOptions
from stenoflow.training.schedule import cosine_lr

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HushTrainOptions:
    steps: int = 2000
    clips_per_step: int = 4  # gradient accumulation over clips of different lengths
    lr: float = 1e-3  # Adam, decayed along a cosine to lr_final
    lr_final: float = 1e-4
    # Bound on |sample|: at most -20 dBFS peak, at or under the level of normally recorded speech
    # (ours is levelled to -20 dBFS RMS, peaks near 0.3-0.9). The hush word then cannot set the
    # log-mel's global maximum, which would shift the floor every speech frame is clamped to.
    amplitude: float = 0.1
    eot_weight: float = 2.0  # weight of the end-of-text target: stopping is what is taught
    # Weight of -log(1 - p(end-of-text)) at every earlier position: the hush word must make the
    # model stop at the end of the speech, not at the first sentence end before it.
    early_eot_weight: float = 1.0
    gain_db: tuple[float, float] = (-20.0, 6.0)  # random loudness of the speech per example
    noise_prob: float = 0.3  # chance of white noise under the speech (30-50 dB below it)
    eval_every: int = 200
    keep_best: int = 3  # checkpoints averaged at the end
    seed: int = 0

    def __post_init__(self) -> None:
        if self.steps < 1 or self.clips_per_step < 1 or self.eval_every < 1 or self.keep_best < 1:
            raise ValueError("steps, clips_per_step, eval_every and keep_best must be >= 1")
        if not 0 < self.amplitude <= 1:
            raise ValueError(f"amplitude must be in (0, 1], got {self.amplitude}")
        if not 0 < self.lr_final <= self.lr:
            raise ValueError(f"need 0 < lr_final <= lr, got {self.lr_final} and {self.lr}")


@dataclass(frozen=True)
class Example:
    audio: np.ndarray  # float32 16 kHz speech (maybe cut mid-word, as a streaming buffer is)
    initial: tuple[int, ...]  # decoder prompt: [<|startofprev|> text] <|sot|> ... as decoding builds it
    target: tuple[int, ...]  # text (and timestamp) tokens after it, without end-of-text
    reference: str  # what was said (held-out WER); "" where unknown


@dataclass
class TrainState:
    step: int = 0
    hush: list[float] = field(default_factory=list)
    history: list[dict[str, float]] = field(default_factory=list)
    best: list[dict[str, object]] = field(default_factory=list)  # {"score", "step", "hush"}
    padded: dict[str, float] = field(default_factory=dict)  # held-out figures with 30 s padding
    runs: list[dict[str, int]] = field(default_factory=list)  # {"start_step", "steps"} per (re)start


def example_loss(model: Model, hush: torch.Tensor, ex: Example, gain: float, noise: float,
                 eot_weight: float, rng: np.random.Generator, early_eot_weight: float = 0.0) -> torch.Tensor:
    """Weighted cross-entropy of ``ex.target`` + end-of-text given (gain x speech + noise) ⊕ hush,
    plus ``early_eot_weight`` times the mean of -log(1 - p(end-of-text)) before the end."""
    speech = torch.from_numpy(ex.audio) * gain
    if noise > 0:
        speech = speech + noise * torch.from_numpy(rng.standard_normal(len(ex.audio)).astype(np.float32))
    mel = log_mel_spectrogram(torch.cat([speech, hush]), n_mels=model.dims.n_mels)
    features = model.whisper.encoder(mel[None])
    seq = [*ex.initial, *ex.target, model.tokenizer.eot]
    cross = model.whisper.decoder.cross_kv(features)
    logits = model.whisper.decoder(torch.tensor([seq[:-1]]), cross, None)
    first = len(ex.initial)
    targets = torch.tensor(seq[first:])
    weights = torch.ones(len(targets))
    weights[-1] = eot_weight
    logprobs = F.log_softmax(logits[0, first - 1:].float(), dim=-1)
    ce = -logprobs.gather(1, targets[:, None])[:, 0]
    loss = (ce * weights).sum() / weights.sum()
    if early_eot_weight > 0 and len(targets) > 1:
        early = logprobs[:-1, model.tokenizer.eot].exp().clamp(max=1 - 1e-6)
        loss = loss + early_eot_weight * -torch.log1p(-early).mean()
    return loss


def decode_greedy(model: Model, samples: np.ndarray, limit: int) -> tuple[str, int]:
    """Greedy text of ``samples`` (at most 30 s) without timestamps, and its token count."""
    mel = model.features(samples)[:, : N_SAMPLES // 160]
    result = model.decode(mel, DecodingOptions(language="en", without_timestamps=True, sample_len=limit))
    return result.text, len(result.tokens)


def evaluate(model: Model, hush: np.ndarray | None, examples: Sequence[Example]) -> dict[str, float]:
    """Greedy WER against the references and the share of runaways, with speech ⊕ ``hush``
    (or speech padded to 30 s when ``hush`` is None).

    A runaway (no end-of-text before twice the padded transcript's length, plus some) is counted
    on tokens: the English normaliser deletes symbol runs such as ``// //``, hiding them from WER.
    """
    from stenoflow.bench.metrics import wer

    hyps, refs, runaways = [], [], 0
    for ex in examples:
        limit = 2 * sum(1 for t in ex.target if t < model.tokenizer.eot) + 10
        if hush is None:
            samples = np.concatenate([ex.audio, np.zeros(max(0, N_SAMPLES - len(ex.audio)), np.float32)])
        else:
            samples = np.concatenate([ex.audio, hush])
        text, n = decode_greedy(model, samples, limit)
        runaways += int(n >= limit)
        hyps.append(text)
        refs.append(ex.reference)
    return {"wer": wer(refs, hyps).wer, "runaways": runaways / max(1, len(examples))}


ProgressFn = Callable[[dict[str, float]], None]


def train_hush(model: Model, train: Sequence[Example], heldout: Sequence[Example], options: HushTrainOptions,
               run_dir: Path, progress: ProgressFn | None = None, init: np.ndarray | None = None) -> HushWord:
    """Train (or resume, from ``run_dir/state.json``) and return the averaged best hush word.

    A new run starts from ``init`` when given (e.g. a hush word trained in another precision),
    else from faint noise.

    ``progress`` gets ``{"step", "loss"}`` after every step and the held-out figures after
    every evaluation.
    """
    if not train or not heldout:
        raise ValueError("hush training needs training and held-out examples")
    run_dir.mkdir(parents=True, exist_ok=True)
    state_path = run_dir / "state.json"
    opt_path = run_dir / "optimizer.pt"
    state = TrainState()
    if state_path.is_file():
        state = TrainState(**json.loads(state_path.read_text()))
        log.info("resuming hush training at step %d", state.step)
    state.runs.append({"start_step": state.step, "steps": options.steps})
    rng = np.random.default_rng([options.seed, state.step])
    if state.hush:
        init = np.asarray(state.hush, np.float32)
    elif init is None:
        init = rng.uniform(-1, 1, HUSH_SAMPLES).astype(np.float32) * options.amplitude * 0.1
    hush = torch.nn.Parameter(torch.from_numpy(np.clip(init, -options.amplitude, options.amplitude)))
    opt = torch.optim.Adam([hush], lr=cosine_lr(state.step, options.steps, options.lr, options.lr_final))
    if state.step and opt_path.is_file():
        opt.load_state_dict(torch.load(opt_path, weights_only=True))
    model.whisper.requires_grad_(False)
    if not state.padded:
        state.padded = evaluate(model, None, heldout)
        log.info("held-out with 30 s padding: WER %.3f, runaways %.2f", state.padded["wer"], state.padded["runaways"])
    t0 = time.monotonic()
    while state.step < options.steps:
        for group in opt.param_groups:
            group["lr"] = cosine_lr(state.step, options.steps, options.lr, options.lr_final)
        opt.zero_grad()
        total = 0.0
        for _ in range(options.clips_per_step):
            ex = train[int(rng.integers(len(train)))]
            gain = float(10 ** (rng.uniform(*options.gain_db) / 20))
            noise = 0.0
            if rng.random() < options.noise_prob:
                noise = gain * float(np.sqrt(np.mean(ex.audio ** 2))) * float(10 ** (-rng.uniform(30, 50) / 20))
            with torch.enable_grad():
                loss = example_loss(model, hush, ex, gain, noise, options.eot_weight, rng,
                                    options.early_eot_weight) / options.clips_per_step
                loss.backward()
            total += float(loss.detach())
        opt.step()
        with torch.no_grad():
            hush.clamp_(-options.amplitude, options.amplitude)
        state.step += 1
        if progress:
            progress({"step": state.step, "loss": total})
        if state.step % options.eval_every == 0 or state.step == options.steps:
            _checkpoint(model, hush.detach().numpy().copy(), heldout, options, state, total, time.monotonic() - t0,
                        progress)
            state_path.write_text(json.dumps(asdict(state)))
            torch.save(opt.state_dict(), opt_path)
    averaged = np.mean([np.asarray(b["hush"], np.float32) for b in state.best], axis=0).astype(np.float32)
    averaged_metrics = evaluate(model, averaged, heldout)
    best = state.best[0]
    best_metrics = next(h for h in state.history if h["step"] == best["step"])
    if _score(averaged_metrics) <= float(best["score"]):  # type: ignore[arg-type]
        samples, final, chosen = averaged, averaged_metrics, f"average of steps {[b['step'] for b in state.best]}"
    else:
        samples = np.asarray(best["hush"], np.float32)
        final = {"wer": best_metrics["wer"], "runaways": best_metrics["runaways"]}
        chosen = f"step {best['step']} (the average scored worse)"
    record = {"options": asdict(options), "steps": state.step, "history": state.history,
              "best_steps": [b["step"] for b in state.best], "averaged_heldout": averaged_metrics, "runs": state.runs,
              "chosen": chosen, "heldout": final,
              "padded_heldout": state.padded, "train_examples": len(train), "heldout_examples": len(heldout)}
    log.info("hush word: %s, held-out WER %.3f (padded %.3f), runaways %.2f", chosen, final["wer"],
             state.padded["wer"], final["runaways"])
    return HushWord(samples, model.name, record)


def _score(metrics: dict[str, float]) -> float:
    """Lower is better; a runaway weighs as much as 10 points of WER."""
    return metrics["runaways"] * 10 + metrics["wer"]


def _checkpoint(model: Model, samples: np.ndarray, heldout: Sequence[Example], options: HushTrainOptions,
                state: TrainState, loss: float, elapsed: float, progress: ProgressFn | None) -> None:
    """Score the current hush word on the held-out clips and keep it if it is among the best."""
    metrics = evaluate(model, samples, heldout)
    row = {"step": state.step, "loss": loss, **metrics, "elapsed_s": elapsed}
    state.history.append(row)
    state.best.append({"score": _score(metrics), "step": state.step,
                       "hush": samples.tolist()})
    state.best = sorted(state.best, key=lambda b: float(b["score"]))[: options.keep_best]  # type: ignore[arg-type]
    state.hush = samples.tolist()
    log.info("step %d loss %.3f held-out WER %.3f (padded %.3f) runaways %.2f", state.step, loss,
             metrics["wer"], state.padded["wer"], metrics["runaways"])
    if progress:
        progress(row)
