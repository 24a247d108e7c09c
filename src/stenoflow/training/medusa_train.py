"""Training Medusa heads by self-distillation, the model frozen (seed 003, Medusa-Linear and Medusa-Block).

The examples (``training.medusa_data``) hold the frozen decoder's states on the model's own greedy
tokens, so a step costs only the heads: head k at position t learns the token at t + 1 + k with a
cross-entropy over the heads' shortlist, heads weighted ``head_decay`` ** (k - 1) (the later heads
are right less often and matter less: a draft is accepted up to its first miss). Held-out figures
after every ``eval_every`` steps: each head's top-1 agreement with the model's token, and the mean
accepted draft length under greedy-exact verification (consecutive heads right from the first),
the figure speed follows. The best checkpoint by that length is the one kept. Resumable from the
run directory.
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
from torch import Tensor

from stenoflow.api import Model
from stenoflow.model.medusa import MEDUSA_KINDS, MedusaHeads
from stenoflow.training.medusa_data import StateExample
from stenoflow.training.schedule import cosine_lr

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MedusaTrainOptions:
    kind: str = "linear"  # "linear" (Medusa-Linear) or "block" (Medusa-Block)
    heads: int = 4
    steps: int = 600
    examples_per_step: int = 8
    lr: float = 1e-3  # AdamW, decayed along a cosine to lr_final
    lr_final: float = 1e-5
    weight_decay: float = 0.0
    head_decay: float = 0.8  # loss weight of head k: head_decay ** (k - 1)
    shortlist: int = 8192  # the lowest text token ids the heads may propose (plus every decoded token)
    eval_every: int = 100
    seed: int = 0

    def __post_init__(self) -> None:
        if self.kind not in MEDUSA_KINDS:
            raise ValueError(f"kind must be one of {', '.join(MEDUSA_KINDS)}, got {self.kind!r}")
        if min(self.heads, self.steps, self.examples_per_step, self.eval_every, self.shortlist) < 1:
            raise ValueError("heads, steps, examples_per_step, eval_every and shortlist must be >= 1")
        if not 0 < self.lr_final <= self.lr:
            raise ValueError(f"need 0 < lr_final <= lr, got {self.lr_final} and {self.lr}")


@dataclass
class MedusaTrainState:
    step: int = 0
    history: list[dict[str, float]] = field(default_factory=list)
    best_step: int = 0
    best_score: float = -1.0
    runs: list[dict[str, int]] = field(default_factory=list)  # {"start_step", "steps"} per (re)start


class Targets:
    """Token ids -> positions in the heads' shortlist (-1: not in it)."""

    def __init__(self, vocab: Tensor, n_vocab: int) -> None:
        self.index = torch.full((n_vocab,), -1, dtype=torch.long)
        self.index[vocab] = torch.arange(len(vocab))

    def of(self, tokens: Tensor) -> Tensor:
        return self.index[tokens]


def head_logits(medusa: MedusaHeads, model: Model, ex: StateExample, proj: Tensor) -> Tensor:
    """Shortlist logits (K, P, |vocab|) at the positions P that predict the decoded tokens."""
    x = ex.hidden.float()[None]
    k = ex.cross_k.float()[None] if ex.cross_k is not None else None
    v = ex.cross_v.float()[None] if ex.cross_v is not None else None
    if medusa.block is not None and (k is None or v is None):
        raise ValueError("Medusa-Block training needs examples with the last layer's cross K/V")
    states = medusa.states(x, model.whisper.decoder, k, v, None)  # type: ignore[arg-type]
    return medusa.shortlist_logits(states[0, ex.first - 1 :], proj)


def example_loss(medusa: MedusaHeads, model: Model, ex: StateExample, proj: Tensor, targets: Targets,
                 head_decay: float) -> Tensor:
    logits = head_logits(medusa, model, ex, proj)
    decoded = ex.tokens[ex.first :]  # position first - 1 + i predicts decoded[i]; head k predicts decoded[i + k]
    total = logits.new_zeros(())
    weights = 0.0
    for k in range(1, logits.shape[0] + 1):
        n = len(decoded) - k
        if n <= 0:
            break
        wanted = targets.of(decoded[k:])
        keep = wanted >= 0
        if not bool(keep.any()):
            continue
        w = head_decay ** (k - 1)
        total = total + w * F.cross_entropy(logits[k - 1, :n][keep], wanted[keep])
        weights += w
    return total / weights if weights else total


@torch.no_grad()
def evaluate(medusa: MedusaHeads, model: Model, examples: Sequence[StateExample], proj: Tensor,
             targets: Targets) -> dict[str, float]:
    """Per head: top-1 agreement with the model's own token; and the mean accepted draft length
    (consecutive heads right from the first) per position, under greedy-exact verification."""
    k_heads = medusa.shape.heads
    right = np.zeros(k_heads)
    seen = np.zeros(k_heads)
    accepted, positions = 0.0, 0
    for ex in examples:
        logits = head_logits(medusa, model, ex, proj)
        decoded = ex.tokens[ex.first :]
        guess = medusa.vocab[logits.argmax(dim=-1)]  # (K, P) token ids
        n_pos = len(decoded)
        chain = torch.ones(n_pos, dtype=torch.bool)
        run = torch.zeros(n_pos)
        for k in range(1, k_heads + 1):
            n = n_pos - k
            if n <= 0:
                break
            ok = guess[k - 1, :n] == decoded[k:]
            right[k - 1] += float(ok.sum())
            seen[k - 1] += n
            chain[:n] &= ok
            chain[n:] = False
            run += chain.float()
        accepted += float(run.sum())
        positions += n_pos
    out = {f"head{k + 1}_top1": float(right[k] / seen[k]) if seen[k] else 0.0 for k in range(k_heads)}
    out["accepted_per_pass"] = accepted / max(positions, 1)
    return out


ProgressFn = Callable[[dict[str, float]], None]


def train_medusa(model: Model, train: Sequence[StateExample], heldout: Sequence[StateExample], vocab: Tensor,
                 options: MedusaTrainOptions, run_dir: Path, progress: ProgressFn | None = None
                 ) -> tuple[MedusaHeads, dict[str, object]]:
    """Train (or resume, from ``run_dir``) and return the best heads by held-out accepted length,
    with their training record."""
    if not train or not heldout:
        raise ValueError("Medusa training needs training and held-out examples")
    run_dir.mkdir(parents=True, exist_ok=True)
    state_path, ckpt_path, best_path = run_dir / "state.json", run_dir / "last.pt", run_dir / "best.pt"
    decoder = model.whisper.decoder
    medusa = MedusaHeads.for_decoder(decoder, options.kind, options.heads, vocab)
    opt = torch.optim.AdamW([p for p in medusa.parameters() if p.requires_grad], lr=options.lr,
                            weight_decay=options.weight_decay)
    state = MedusaTrainState()
    if state_path.is_file() and ckpt_path.is_file():
        state = MedusaTrainState(**json.loads(state_path.read_text()))
        ckpt = torch.load(ckpt_path, weights_only=True)
        medusa.load_state_dict(ckpt["heads"])
        opt.load_state_dict(ckpt["optimizer"])
        log.info("resuming Medusa training at step %d", state.step)
    state.runs.append({"start_step": state.step, "steps": options.steps})
    model.whisper.requires_grad_(False)
    emb = decoder.token_embedding.weight.detach().float()
    proj = emb.index_select(0, medusa.vocab).t().contiguous()
    targets = Targets(medusa.vocab, emb.shape[0])
    rng = np.random.default_rng([options.seed, state.step])
    if not state.history:
        untrained = evaluate(medusa, model, heldout, proj, targets)
        state.history.append({"step": 0, "loss": float("nan"), **untrained, "elapsed_s": 0.0})
        log.info("untrained heads: held-out accepted %.3f per pass", untrained["accepted_per_pass"])
    t0 = time.monotonic()
    medusa.train()
    while state.step < options.steps:
        for group in opt.param_groups:
            group["lr"] = cosine_lr(state.step, options.steps, options.lr, options.lr_final)
        opt.zero_grad()
        total = 0.0
        with torch.enable_grad():
            for i in rng.integers(len(train), size=options.examples_per_step):
                loss = example_loss(medusa, model, train[int(i)], proj, targets, options.head_decay)
                (loss / options.examples_per_step).backward()
                total += float(loss.detach()) / options.examples_per_step
        opt.step()
        state.step += 1
        if progress:
            progress({"step": state.step, "loss": total})
        if state.step % options.eval_every == 0 or state.step == options.steps:
            medusa.eval()
            metrics = evaluate(medusa, model, heldout, proj, targets)
            medusa.train()
            row = {"step": state.step, "loss": total, **metrics, "elapsed_s": time.monotonic() - t0}
            state.history.append(row)
            if metrics["accepted_per_pass"] > state.best_score:
                state.best_score, state.best_step = metrics["accepted_per_pass"], state.step
                torch.save(medusa.state_dict(), best_path)
            log.info("step %d loss %.3f held-out: %s", state.step, total,
                     ", ".join(f"{k} {v:.3f}" for k, v in metrics.items()))
            if progress:
                progress(row)
            torch.save({"heads": medusa.state_dict(), "optimizer": opt.state_dict()}, ckpt_path)
            state_path.write_text(json.dumps(asdict(state)))
    medusa.load_state_dict(torch.load(best_path, weights_only=True))
    medusa.eval().requires_grad_(False)
    best = next(h for h in state.history if h["step"] == state.best_step)
    record: dict[str, object] = {
        "options": asdict(options), "steps": state.step, "history": state.history, "best_step": state.best_step,
        "heldout": best, "untrained_heldout": state.history[0], "runs": state.runs,
        "shortlist_size": len(medusa.vocab), "train_examples": len(train), "heldout_examples": len(heldout),
        "train_tokens": sum(len(e.tokens) - e.first for e in train),
    }
    return medusa, record
