"""Medusa heads (seed 003): extra heads that guess the tokens after the next one from the decoder's state.

Head k (1..K) reads the decoder's last state at position t and predicts the token at t + 1 + k,
while the model's own head predicts t + 1. Two kinds, as in the paper:

* ``linear`` (Medusa-Linear): each head is one linear layer with a residual connection on the
  final-layer-normed state, ``h + SiLU(W_k h + b_k)``, followed by the model's own (tied) output
  projection, shared by all heads;
* ``block`` (Medusa-Block): one extra decoder block, shared by all heads, runs on the residual
  stream after the model's last block (with its own self-attention cache), then the model's final
  layer norm and the same linear heads. Its cross-attention reads the keys and values of the
  model's last decoder layer (their projections are shared, not copied), so the block costs no
  projection of the encoder output per window.

The model stays frozen; only the heads (and the block) are trained (``stenoflow train-medusa``).
Heads project onto a shortlist of the vocabulary (``vocab``: the token ids they may propose, the
frequent text tokens, every timestamp and end-of-text): a draft only needs the likely tokens, and
the projection onto 51,865 tokens would cost more than the rest of the heads together. Whatever
the heads propose is verified by the model, so the shortlist bounds speed, never correctness.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from stenoflow.model.kv_cache import CrossKV, SelfAttentionCache
from stenoflow.model.quant import Int8Linear, quantize_linear_layers
from stenoflow.model.whisper import PassPart, ResidualAttentionBlock, TextDecoder

MEDUSA_KINDS = ("linear", "block")
FORMAT = "stenoflow-medusa-1"


@dataclass(frozen=True)
class MedusaShape:
    kind: str  # "linear" or "block"
    heads: int  # K
    n_state: int  # the decoder's width
    n_head: int  # the decoder's attention heads (the block's)
    n_vocab: int  # the model's vocabulary size (the shortlist indexes it)

    def __post_init__(self) -> None:
        if self.kind not in MEDUSA_KINDS:
            raise ValueError(f"Medusa kind must be one of {', '.join(MEDUSA_KINDS)}, got {self.kind!r}")
        if self.heads < 1:
            raise ValueError(f"Medusa needs at least one head, got {self.heads}")


class MedusaHeads(nn.Module):
    def __init__(self, shape: MedusaShape, vocab: Tensor) -> None:
        super().__init__()
        self.shape = shape
        d = shape.n_state
        self.block = ResidualAttentionBlock(d, shape.n_head, cross_attention=True) if shape.kind == "block" else None
        if self.block is not None:  # the cross keys/values are the model's last layer's
            assert self.block.cross_attn is not None
            del self.block.cross_attn.key, self.block.cross_attn.value
        self.heads = nn.ModuleList(nn.Linear(d, d) for _ in range(shape.heads))
        for head in self.heads:  # a new head starts as the identity: it predicts what the model's head does
            nn.init.zeros_(head.weight)
            nn.init.zeros_(head.bias)
        self.register_buffer("vocab", vocab.to(torch.long))
        self._proj: nn.Module | None = None  # the shortlist projection, int8 (built by bind())
        # Heads worth asking: while the held-out chance that a draft gets this far stays >= 5 %
        # (set from the training record on loading; a later head costs as much and is rarely reached).
        self.useful = shape.heads

    # --- building ---------------------------------------------------------------------------
    @classmethod
    def for_decoder(cls, decoder: TextDecoder, kind: str, heads: int, vocab: Tensor) -> MedusaHeads:
        """New heads for ``decoder``; a block starts as a copy of the decoder's last block."""
        emb = decoder.token_embedding.weight
        n_head = decoder.blocks[0].attn.n_head
        medusa = cls(MedusaShape(kind, heads, emb.shape[1], n_head, emb.shape[0]), vocab)
        if medusa.block is not None:
            last = {k: v for k, v in decoder.blocks[-1].state_dict().items()
                    if not k.startswith(("attn.qkv", "cross_attn.key", "cross_attn.value"))}
            medusa.block.load_state_dict(last, strict=True)
        return medusa

    def check(self, decoder: TextDecoder) -> None:
        """Raise ValueError unless these heads fit ``decoder``."""
        emb = decoder.token_embedding.weight
        n_head = decoder.blocks[0].attn.n_head
        want = (emb.shape[1], n_head, emb.shape[0])
        got = (self.shape.n_state, self.shape.n_head, self.shape.n_vocab)
        if want != got:
            raise ValueError(f"Medusa heads for width {got[0]}, {got[1]} attention heads and {got[2]} tokens do not "
                             f"fit this model (width {want[0]}, {want[1]} heads, {want[2]} tokens)")

    def bind(self, decoder: TextDecoder) -> MedusaHeads:
        """Ready the heads to draft for ``decoder`` (inference only; they cannot be trained after):
        every linear layer, and the shortlist projection taken from the decoder's (tied) embedding,
        in int8 with a scale per output (a guess needs the ranking, not the last digit; on 2 cores
        this makes a draft 4x cheaper than in float32)."""
        self.check(decoder)
        quantize_linear_layers(self)
        emb = decoder.token_embedding.weight.detach().float()
        # Set past nn.Module's bookkeeping: a derived cache, not a parameter to save or train.
        object.__setattr__(self, "_proj", Int8Linear(emb.index_select(0, self.vocab), None))
        return self

    # --- computing ---------------------------------------------------------------------------
    def states(self, x: Tensor, decoder: TextDecoder, cross_k: Tensor, cross_v: Tensor,
               cache: SelfAttentionCache | None) -> Tensor:
        """Heads' input (B, T, D) from the residual stream ``x`` after the model's last block: the
        block (if any) over the new positions, then the final layer norm. ``cache`` holds the
        block's keys/values of earlier positions (None: ``x`` starts at position 0, no cache)."""
        if self.block is not None:
            part = PassPart.after(x, CrossKV([cross_k], [cross_v]), cache, record=False)
            x = self.block.decoder_forward(x.reshape(part.rows, -1), [part], 0).view(x.shape)
            if cache is not None:
                cache.length = part.offset + part.length
        return decoder.ln(x)

    def head_states(self, h: Tensor, k: int | None = None) -> Tensor:
        """(k, ..., D): the first k heads' states ``h + SiLU(W_k h + b_k)`` for states h (..., D)."""
        return torch.stack([h + F.silu(head(h)) for head in list(self.heads)[:k]])

    def shortlist_logits(self, h: Tensor, proj: Tensor | None = None, k: int | None = None) -> Tensor:
        """Logits over the shortlist (k, ..., |vocab|) of the first k heads for head inputs h (..., D):
        through ``proj`` (D, |vocab|) when given (training), else the bound int8 projection."""
        states = self.head_states(h, k)
        if proj is not None:
            return states @ proj
        assert self._proj is not None, "bind() the heads to a decoder first"
        return self._proj(states)

    def new_cache(self, max_len: int) -> SelfAttentionCache | None:
        if self.block is None:
            return None
        d, h = self.shape.n_state, self.shape.n_head
        return SelfAttentionCache(1, 1, h, max_len, d // h)

    # --- files ------------------------------------------------------------------------------
    def save(self, path: Path | str, model: str, record: dict[str, object]) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        state = {k: v.to(torch.float16) if v.is_floating_point() else v
                 for k, v in self.state_dict().items()}
        tmp = path.with_suffix(".tmp")
        torch.save({"format": FORMAT, "model": model, "shape": asdict(self.shape), "state": state,
                    "record": json.dumps(record)}, tmp)
        tmp.replace(path)
        return path


@dataclass(frozen=True)
class LoadedMedusa:
    heads: MedusaHeads
    model: str  # the model they were trained for
    source: str
    record: dict[str, object] = field(default_factory=dict)


def load_medusa(path: Path | str) -> LoadedMedusa:
    """Medusa heads from a file ``save`` wrote; a clear ValueError for anything else."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Medusa heads file not found: {path}")
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises several kinds for a file that is not its own
        raise ValueError(f"{path}: not a Medusa heads file: {e}") from e
    if not isinstance(blob, dict) or blob.get("format") != FORMAT:
        raise ValueError(f"{path}: not a Medusa heads file (expected format {FORMAT!r})")
    shape = MedusaShape(**blob["shape"])
    state = blob["state"]
    if "vocab" not in state:
        raise ValueError(f"{path}: Medusa heads file without its vocabulary shortlist")
    heads = MedusaHeads(shape, state["vocab"])
    try:
        heads.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in state.items()}, strict=True)
    except RuntimeError as e:
        raise ValueError(f"{path}: Medusa heads of the wrong shape for {shape}: {e}") from e
    if int(heads.vocab.max()) >= shape.n_vocab or int(heads.vocab.min()) < 0:
        raise ValueError(f"{path}: the shortlist has token ids outside the vocabulary of {shape.n_vocab}")
    record = json.loads(blob.get("record", "{}"))
    heads.useful = useful_heads(record, shape.heads)
    return LoadedMedusa(heads.eval().requires_grad_(False), str(blob.get("model", "")), str(path), record)


def useful_heads(record: dict[str, object], heads: int, reach: float = 0.05) -> int:
    """How many heads a draft should ask: while the held-out chance that a draft is accepted that far
    (the product of the heads' top-1 agreement) stays at least ``reach``; all without a record."""
    held = record.get("heldout")
    if not isinstance(held, dict):
        return heads
    chance, n = 1.0, 0
    for k in range(1, heads + 1):
        chance *= float(held.get(f"head{k}_top1", 1.0))
        if chance < reach:
            break
        n = k
    return max(n, 1)


def bundled_medusa_path(model_name: str, kind: str) -> Path | None:
    """The Medusa heads shipped with stenoflow for a named model and kind, if there are any."""
    ref = resources.files("stenoflow") / "assets" / "medusa" / f"{model_name}.{kind}.pt"
    path = Path(str(ref))
    return path if path.is_file() else None


def find_medusa(model_name: str, kind_or_path: str, model_path: Path | None) -> Path:
    """The heads file for a model: ``kind_or_path`` itself if it is a file, else for a kind
    ("linear"/"block") ``medusa-KIND.pt`` beside the model, else the bundled heads."""
    if kind_or_path not in MEDUSA_KINDS:
        path = Path(kind_or_path)
        if not path.is_file():
            raise FileNotFoundError(f"Medusa heads: {kind_or_path!r} is neither a kind ({', '.join(MEDUSA_KINDS)}) "
                                    "nor a heads file")
        return path
    if model_path is not None:
        beside = (model_path if model_path.is_dir() else model_path.parent) / f"medusa-{kind_or_path}.pt"
        if beside.is_file():
            return beside
    bundled = bundled_medusa_path(model_name, kind_or_path)
    if bundled is None:
        raise FileNotFoundError(f"no Medusa-{kind_or_path} heads for model {model_name!r}: train them with "
                                f"`stenoflow train-medusa --model {model_name} --kind {kind_or_path}` and pass the "
                                f"file, or put medusa-{kind_or_path}.pt beside the model")
    return bundled
