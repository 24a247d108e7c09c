"""The Whisper network: an audio encoder and a text decoder (nn.Module only, no decoding logic).

Parameter names follow openai-whisper's checkpoints, so every weight loader maps its format
onto one set of names. Two departures from the reference implementation, both for speed:

* the encoder takes any number of mel frames up to 3000 (positional embedding sliced), so short
  inputs are not padded to 30 s;
* the decoder reads its self-attention keys/values from a preallocated ``SelfAttentionCache``
  and its cross-attention keys/values from a ``CrossKV`` projected once per encoder output.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from stenoflow.model.dims import ModelDims
from stenoflow.model.kv_cache import CrossKV, SelfAttentionCache
from stenoflow.model.quant import FEW_ROWS, SharedInput

Device = torch.device | str | None


def _is_meta(device: Device) -> bool:
    # Initialising weights on the meta device runs its Python kernels, whose first use imports
    # sympy (about a second): meta modules are made without computing anything.
    return device is not None and torch.device(device).type == "meta"


def sinusoids(length: int, channels: int, max_timescale: float = 10000.0) -> Tensor:
    """The encoder's fixed positional table: sin then cos halves, as in the original model."""
    assert channels % 2 == 0
    log_inc = math.log(max_timescale) / (channels // 2 - 1)
    inv = torch.exp(-log_inc * torch.arange(channels // 2, dtype=torch.float32))
    t = torch.arange(length, dtype=torch.float32)[:, None] * inv[None, :]
    return torch.cat([torch.sin(t), torch.cos(t)], dim=1)


class Linear(nn.Linear):
    """nn.Linear with faster CPU paths for the few-row inputs of decoding steps.

    The weights are not in cache in a decoding step, so the product is bound by reading them,
    and MKL reads them fastest in these forms: for 2..16 rows (beams, drafts) W @ x^T, a tall
    matrix times a thin one, about twice as fast as x @ W^T; for one row (a greedy step) x times
    the weights stored transposed (``weight_t``, kept by ``keep_transposed``: in, out), about 1.5x
    as fast. The result is the same product. Quantisation turns these back into plain nn.Linear.
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.weight_t: Tensor | None
        self.register_buffer("weight_t", None, persistent=False)

    def reset_parameters(self) -> None:
        if not self.weight.is_meta:  # a meta layer's weights are assigned, never initialised
            super().reset_parameters()

    def keep_transposed(self) -> None:
        """Store a (in, out) copy of the weights for one-row inputs (call after loading them)."""
        self.weight_t = self.weight.detach().t().contiguous()

    def forward(self, x: Tensor) -> Tensor:
        rows = x.numel() // x.shape[-1]
        if rows == 1 and self.weight_t is not None and x.dtype == self.weight_t.dtype and not (
                self.weight.requires_grad and torch.is_grad_enabled()):
            flat = x.reshape(1, x.shape[-1])
            y = flat @ self.weight_t if self.bias is None else torch.addmm(self.bias[None], flat, self.weight_t)
            return y.reshape(*x.shape[:-1], y.shape[1])
        if rows == 1 or rows > 16 or x.dtype != self.weight.dtype:
            return F.linear(x, self.weight, self.bias)
        flat = x.reshape(rows, x.shape[-1]).t()
        y = self.weight @ flat if self.bias is None else torch.addmm(self.bias[:, None], self.weight, flat)
        return y.t().reshape(*x.shape[:-1], y.shape[0])


class LayerNorm(nn.LayerNorm):
    def forward(self, x: Tensor) -> Tensor:
        return super().forward(x.float()).type(x.dtype)


class MultiHeadAttention(nn.Module):
    def __init__(self, n_state: int, n_head: int, device: Device = None) -> None:
        super().__init__()
        self.n_head = n_head
        self.query = Linear(n_state, n_state, device=device)
        self.key = Linear(n_state, n_state, bias=False, device=device)
        self.value = Linear(n_state, n_state, device=device)
        self.out = Linear(n_state, n_state, device=device)
        # One GEMM for q, k and v instead of three: built by fuse() after the weights are loaded.
        self.qkv: Linear | None = None

    def heads(self, x: Tensor) -> Tensor:
        """(B, T, D) -> (B, H, T, D/H)"""
        b, t, _ = x.shape
        return x.view(b, t, self.n_head, -1).transpose(1, 2)

    def merge(self, x: Tensor) -> Tensor:
        """(B, H, T, D/H) -> (B, T, D)"""
        b, _, t, _ = x.shape
        return x.transpose(1, 2).reshape(b, t, -1)

    def fuse(self) -> None:
        """Stack the q, k, v projections into one layer (the key has no bias: zeros). On the meta
        device (a skeleton, see stenoflow.model.build) the layer is only made."""
        d = self.query.weight.shape[1]
        qkv = Linear(d, 3 * d, device=self.query.weight.device, dtype=self.query.weight.dtype)
        if not self.query.weight.is_meta:
            with torch.no_grad():
                qkv.weight.copy_(torch.cat([self.query.weight, self.key.weight, self.value.weight]))
                qkv.bias.copy_(torch.cat([self.query.bias, torch.zeros_like(self.query.bias), self.value.bias]))
        self.qkv = qkv.requires_grad_(self.query.weight.requires_grad)

    def project_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """q, k, v of ``x`` (..., D), each (..., D): one GEMM when fused."""
        if self.qkv is None:
            return self.query(x), self.key(x), self.value(x)
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return q, k, v

    def project_kv(self, x: SharedInput) -> tuple[Tensor, Tensor]:
        return self.heads(x.through(self.key)), self.heads(x.through(self.value))

    def encoder_forward(self, x: Tensor, tail: tuple[Tensor, Tensor] | None = None,
                        keep: list[tuple[Tensor, Tensor]] | None = None) -> Tensor:
        """Self-attention of the encoder rows ``x`` (B, T, D) over themselves and, given, the keys
        and values ``tail`` (each (B, H, T', D/H)) of positions after them; ``keep`` collects this
        layer's own keys and values."""
        q, k, v = (self.heads(y) for y in self.project_qkv(x))
        if keep is not None:
            keep.append((k, v))
        if tail is not None:
            k, v = torch.cat([k, tail[0]], dim=2), torch.cat([v, tail[1]], dim=2)
        return self.out(self.merge(F.scaled_dot_product_attention(q, k, v)))

    def cached_forward(self, x: Tensor, parts: Sequence[PassPart], layer: int) -> Tensor:
        """Causal self-attention of each part's rows of the packed ``x`` (R, D) over its own cache
        at ``layer`` (no cache: over this call's keys only, as in training). The projections run
        once over all rows; only the attention itself is per part."""
        q, k, v = self.project_qkv(x)
        outs = []
        for p, qp, kp, vp in zip(parts, p_split(q, parts), p_split(k, parts), p_split(v, parts), strict=True):
            qh, kh, vh = (self.heads(y.view(p.batch, p.length, -1)) for y in (qp, kp, vp))
            if p.cache is not None:
                kh, vh = p.cache.write(layer, kh, vh, p.offset)
            if p.row_by_row:  # row i over the keys up to its own position, as a one-row step
                out = torch.cat([F.scaled_dot_product_attention(qh[:, :, i : i + 1], kh[:, :, : p.offset + i + 1],
                                                                vh[:, :, : p.offset + i + 1])
                                 for i in range(p.length)], dim=2)
            else:
                out = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=p.mask)
            outs.append(self.merge(out).reshape(p.rows, -1))
        return self.out(p_cat(outs))

    def cross_forward(self, x: Tensor, parts: Sequence[PassPart], layer: int) -> Tensor:
        """Each part's rows of the packed ``x`` (R, D) attend to its audio's keys/values at
        ``layer`` (1 or B, H, S, D/H). With one audio shared by B beams, the beams are folded into
        the query axis: one attention over (1, H, B*T) queries reads the keys once instead of B
        broadcast copies (cross-attention has no mask, so this is the same computation).

        A part whose cache records this layer's queries (the alignment heads' layers) stores them
        there (B, H, T, D/H): word timing computes the heads' attention from them when it asks."""
        q = self.query(x)
        outs: list[Tensor] = []
        for p, qp in zip(parts, p_split(q, parts), strict=True):
            k, v = p.cross.k[layer], p.cross.v[layer]
            qh = self.heads(qp.view(p.batch, p.length, -1))  # (B, H, T, D/H)
            if k.shape[0] == 1 and p.batch > 1:
                out = F.scaled_dot_product_attention(self.heads(qp.view(1, p.rows, -1)), k, v)
            elif p.row_by_row:
                out = torch.cat([F.scaled_dot_product_attention(qh[:, :, i : i + 1], k, v) for i in range(p.length)],
                                dim=2)
            else:
                out = F.scaled_dot_product_attention(qh, k, v)
            if p.record and p.cache is not None and p.cache.records(layer):
                p.cache.record_queries(layer, qh, p.offset)
            outs.append(self.merge(out).reshape(p.rows, -1))
        return self.out(p_cat(outs))


@dataclass
class PassPart:
    """One caller's share of a (packed) decoder pass: ``batch`` rows of ``length`` new tokens at
    positions ``offset``.. of its own cache, attending to its own audio (``cross``)."""

    batch: int
    length: int
    cross: CrossKV
    cache: SelfAttentionCache | None
    offset: int
    mask: Tensor | None
    record: bool = True  # store the alignment heads' queries in the cache (if it has any)

    @classmethod
    def after(cls, x: Tensor, cross: CrossKV, cache: SelfAttentionCache | None, record: bool = True) -> PassPart:
        """The part of new positions ``x`` (B, T, ...) that continue ``cache`` (None: from position
        0), with the causal mask they need."""
        b, t = x.shape[:2]
        offset = cache.length if cache is not None else 0
        mask = causal_mask(t, offset, x.dtype, x.device) if t > 1 else None
        return cls(b, t, cross, cache, offset, mask, record)

    @property
    def rows(self) -> int:
        return self.batch * self.length

    @property
    def row_by_row(self) -> bool:
        """Whether attention runs one new position at a time: for a few positions of one sequence
        (a pass that verifies a draft), so that each computes, bit for bit, what a one-row step at
        its position computes (the attention kernel's sums over keys and head dimensions depend on
        the number of query rows). The linear layers see all rows at once; in int8 each row's
        product is its own alone too (see ``model.quant``)."""
        return self.cache is not None and self.batch == 1 and 1 < self.length <= FEW_ROWS


def p_split(x: Tensor, parts: Sequence[PassPart]) -> Sequence[Tensor]:
    """The packed rows ``x`` (R, ...) of each part."""
    return (x,) if len(parts) == 1 else x.split([p.rows for p in parts])


def p_cat(xs: Sequence[Tensor]) -> Tensor:
    return xs[0] if len(xs) == 1 else torch.cat(list(xs))


class ResidualAttentionBlock(nn.Module):
    def __init__(self, n_state: int, n_head: int, cross_attention: bool = False, device: Device = None) -> None:
        super().__init__()
        self.attn = MultiHeadAttention(n_state, n_head, device)
        self.attn_ln = LayerNorm(n_state, device=device)
        self.cross_attn = MultiHeadAttention(n_state, n_head, device) if cross_attention else None
        self.cross_attn_ln = LayerNorm(n_state, device=device) if cross_attention else None
        self.mlp = nn.Sequential(Linear(n_state, 4 * n_state, device=device), nn.GELU(),
                                 Linear(4 * n_state, n_state, device=device))
        self.mlp_ln = LayerNorm(n_state, device=device)

    def encoder_forward(self, x: Tensor, tail: tuple[Tensor, Tensor] | None = None,
                        keep: list[tuple[Tensor, Tensor]] | None = None) -> Tensor:
        x = x + self.attn.encoder_forward(self.attn_ln(x), tail, keep)
        return x + self.mlp(self.mlp_ln(x))

    def decoder_forward(self, x: Tensor, parts: Sequence[PassPart], layer: int) -> Tensor:
        """A decoder block on the packed new positions ``x`` (R, D) of ``parts``: causal
        self-attention (earlier keys in each part's cache at ``layer``), cross-attention to each
        part's audio, MLP."""
        assert self.cross_attn is not None and self.cross_attn_ln is not None
        x = x + self.attn.cached_forward(self.attn_ln(x), parts, layer)
        x = x + self.cross_attn.cross_forward(self.cross_attn_ln(x), parts, layer)
        return x + self.mlp(self.mlp_ln(x))


class AudioEncoder(nn.Module):
    def __init__(self, dims: ModelDims, device: Device = None) -> None:
        super().__init__()
        self.dims = dims
        self.conv1 = nn.Conv1d(dims.n_mels, dims.n_audio_state, kernel_size=3, padding=1, device=device)
        self.conv2 = nn.Conv1d(dims.n_audio_state, dims.n_audio_state, kernel_size=3, stride=2, padding=1,
                               device=device)
        if _is_meta(device):
            table = torch.empty(dims.n_audio_ctx, dims.n_audio_state, device=device)
        else:
            table = sinusoids(dims.n_audio_ctx, dims.n_audio_state)
            table = table if device is None else table.to(device)
        self.register_buffer("positional_embedding", table)
        self.blocks = nn.ModuleList(
            ResidualAttentionBlock(dims.n_audio_state, dims.n_audio_head, device=device)
            for _ in range(dims.n_audio_layer)
        )
        self.ln_post = LayerNorm(dims.n_audio_state, device=device)

    def forward(self, mel: Tensor, rows: int | None = None, tail: EncodedTail | None = None,
                keep: list[tuple[Tensor, Tensor]] | None = None, spent: list[float] | None = None,
                head: EncodedTail | None = None, start: int = 0) -> Tensor:
        """mel: (B, n_mels, n_frames) with n_frames <= 2 * n_audio_ctx -> (B, ceil(n_frames/2), D).

        With ``rows`` and ``tail``: only the first ``rows`` positions are computed, attending to
        themselves and to ``tail``'s keys and values for the positions after them, whose outputs
        are ``tail``'s (see :mod:`stenoflow.model.silence`). With ``head`` and ``start`` (> 0), the
        positions before ``start`` are not computed either: their keys, values and outputs are
        ``head``'s (see :mod:`stenoflow.model.reuse`). ``keep`` collects every layer's keys and
        values of the positions computed; ``spent`` the pass's FLOPs (``ModelDims.encoder_flops``)."""
        max_frames = 2 * self.positional_embedding.shape[0]
        if mel.shape[-1] > max_frames:
            raise ValueError(f"encoder input has {mel.shape[-1]} mel frames; at most {max_frames} fit")
        positions = (mel.shape[-1] + 1) // 2
        rows = positions if rows is None or tail is None else min(rows, positions)
        start = min(start, rows - 1) if head is not None and start > 0 else 0
        if spent is not None:
            spent.append(mel.shape[0] * self.dims.encoder_flops(mel.shape[-1], rows - start))
        # conv2 (stride 2, padding 1) reads mel frames 2p - 2 to 2p + 2 for position p: from
        # frame 2 * start - 2 on, its first output (position start - 1) is cut short, the rest exact
        skip = 1 if start else 0
        x = F.gelu(self.conv1(mel[..., max(0, 2 * start - 2) : 2 * rows + 2]))
        x = F.gelu(self.conv2(x)).permute(0, 2, 1)[:, skip : skip + rows - start]
        x = x + self.positional_embedding[start:rows].to(x.dtype)
        lend = tail if rows < positions else None  # the positions after ``rows`` come from it
        for i, block in enumerate(self.blocks):
            others = [*([head.before(i, start)] if start and head is not None else []),
                      *([lend.after(i, rows, positions)] if lend is not None else [])]
            kv = others[0] if len(others) == 1 else (
                (torch.cat([o[0] for o in others], dim=2), torch.cat([o[1] for o in others], dim=2)) if others else None)
            x = block.encoder_forward(x, kv, keep)
        x = self.ln_post(x)
        parts = [*([head.out[:, :start].to(x.dtype)] if start and head is not None else []), x,
                 *([lend.out[:, rows:positions].to(x.dtype)] if lend is not None else [])]
        return torch.cat(parts, dim=1) if len(parts) > 1 else x


@dataclass(frozen=True)
class EncodedTail:
    """An encoder pass kept for the positions it lends to others: each layer's self-attention keys
    and values (B, H, T, D/H) and the output (B, T, D)."""

    kv: tuple[tuple[Tensor, Tensor], ...]
    out: Tensor

    def after(self, layer: int, start: int, end: int) -> tuple[Tensor, Tensor]:
        k, v = self.kv[layer]
        return k[:, :, start:end], v[:, :, start:end]

    def before(self, layer: int, end: int) -> tuple[Tensor, Tensor]:
        return self.after(layer, 0, end)

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for kv in self.kv for t in kv) + self.out.nbytes


@dataclass
class DecoderCall:
    """A decoder pass asked for: new tokens (B, T) after what ``cache`` holds, over ``cross``'s audio."""

    tokens: Tensor
    cross: CrossKV
    cache: SelfAttentionCache | None


class CallBatcher(Protocol):
    """Merges the decoder passes of sessions that share a decoder (see ``model.pass_batch``)."""

    def joined(self) -> bool:
        """Whether the calling thread is one of the sessions whose passes are merged."""
        ...

    def submit(self, call: DecoderCall) -> Tensor:
        """Run ``call`` in the next merged pass and return its output."""
        ...


class TextDecoder(nn.Module):
    def __init__(self, dims: ModelDims, device: Device = None) -> None:
        super().__init__()
        if _is_meta(device):  # given its (meta) table, the embedding initialises nothing
            table = torch.empty(dims.n_vocab, dims.n_text_state, device=device)
            self.token_embedding = nn.Embedding(dims.n_vocab, dims.n_text_state, _weight=table)
        else:
            self.token_embedding = nn.Embedding(dims.n_vocab, dims.n_text_state, device=device)
        self.positional_embedding = nn.Parameter(torch.empty(dims.n_text_ctx, dims.n_text_state, device=device))
        self.blocks = nn.ModuleList(
            ResidualAttentionBlock(dims.n_text_state, dims.n_text_head, cross_attention=True, device=device)
            for _ in range(dims.n_text_layer)
        )
        self.ln = LayerNorm(dims.n_text_state, device=device)
        # Set by int8 quantisation: a quantised copy of the tied output projection.
        self.logits_proj: nn.Module | None = None
        # Set by fuse(): the embedding transposed to (D, V). A row vector times a contiguous
        # (D, V) matrix runs about twice as fast on CPU as F.linear against the (V, D) table,
        # and this product is the largest of a decoding step.
        self.proj_t: Tensor | None = None
        # Set by a server whose sessions share this model: merges their decoder passes.
        self.batcher: CallBatcher | None = None

    def cross_kv(self, audio_features: Tensor) -> CrossKV:
        """Project the encoder output once into every layer's cross-attention keys and values
        (int8 layers round it to int8 once for all of them)."""
        ks, vs = [], []
        shared = SharedInput(audio_features)
        for block in self.blocks:
            assert block.cross_attn is not None
            k, v = block.cross_attn.project_kv(shared)
            ks.append(k.contiguous())
            vs.append(v.contiguous())
        return CrossKV(ks, vs)

    def project(self, x: Tensor) -> Tensor:
        if self.logits_proj is not None:
            return self.logits_proj(x).float()
        rows = x.numel() // x.shape[-1]
        if self.proj_t is not None and rows == 1:
            return (x @ self.proj_t).float()
        if 1 < rows <= 16:  # see Linear: W @ x^T is the fast form for a few rows
            w = self.token_embedding.weight
            return (w @ x.reshape(rows, x.shape[-1]).t()).t().reshape(*x.shape[:-1], w.shape[0]).float()
        return F.linear(x, self.token_embedding.weight).float()

    def forward(
        self,
        tokens: Tensor,
        cross: CrossKV,
        cache: SelfAttentionCache | None,
        last_only: bool = False,
        logits_at: Tensor | None = None,
    ) -> Tensor:
        """tokens (B, T) continue the cached sequence; returns logits (B, T', V). The cache grows by T.

        Logits are projected at every new position (T' = T), at the last only (``last_only``),
        or at the positions ``logits_at`` (indices into the T new ones): the projection onto the
        vocabulary is the largest product of a pass, so a prompt is run without it. A cache with
        alignment heads also records their layers' cross-attention queries at every new position
        (word timing).

        ``cache=None`` runs a whole sequence from position 0 with nothing stored: the path for
        teacher-forced training, where in-place cache writes would break autograd."""
        return self.logits_of(self.hidden(tokens, cross, cache), last_only, logits_at)

    def hidden(self, tokens: Tensor, cross: CrossKV, cache: SelfAttentionCache | None) -> Tensor:
        """The residual stream after the last block (B, T, D), before the final layer norm: what
        the output projection reads, and what Medusa heads read too.

        With a ``batcher`` (a server's sessions sharing this model), a cached pass from one of its
        jobs waits for the passes of the other jobs and runs in one forward with them."""
        call = DecoderCall(tokens, cross, cache)
        if self.batcher is not None and cache is not None and self.batcher.joined():
            return self.batcher.submit(call)
        return self.hidden_many([call])[0]

    def hidden_many(self, calls: Sequence[DecoderCall]) -> list[Tensor]:
        """``hidden`` of several callers' passes in one forward: their rows are packed into one
        matrix for every linear layer (the weights are read once for all), and only attention
        runs per caller, over its own cache and audio. Each caller gets what a pass of its own
        gives (up to the rounding of the float32 products, whose sums depend on the row count; in
        int8 each row of a few is rounded and multiplied on its own, see ``model.quant``)."""
        parts: list[PassPart] = []
        xs: list[Tensor] = []
        for c in calls:
            offset = c.cache.length if c.cache is not None else 0
            x = self.token_embedding(c.tokens) + self.positional_embedding[offset : offset + c.tokens.shape[1]]
            parts.append(PassPart.after(x, c.cross, c.cache))
            xs.append(x.reshape(parts[-1].rows, -1))
        x = p_cat(xs)
        for i, block in enumerate(self.blocks):
            x = block.decoder_forward(x, parts, i)
        for p in parts:
            if p.cache is not None:
                p.cache.length = p.offset + p.length
        return [y.view(p.batch, p.length, -1) for p, y in zip(parts, p_split(x, parts), strict=True)]

    def logits_of(self, x: Tensor, last_only: bool = False, logits_at: Tensor | None = None) -> Tensor:
        """Logits of the residual stream ``x`` (B, T, D): at every position, the last, or ``logits_at``."""
        if last_only:
            x = x[:, -1:]
        elif logits_at is not None:
            x = x.index_select(1, logits_at)
        return self.project(self.ln(x))


def causal_mask(t: int, offset: int, dtype: torch.dtype, device: torch.device) -> Tensor:
    """Additive mask for T new queries at positions offset.. over offset+T keys."""
    q = torch.arange(offset, offset + t, device=device)[:, None]
    k = torch.arange(offset + t, device=device)[None, :]
    return torch.zeros((t, offset + t), dtype=dtype, device=device).masked_fill(k > q, float("-inf"))


class Whisper(nn.Module):
    def __init__(self, dims: ModelDims, device: Device = None) -> None:
        """``device="meta"``: the modules without any weights (nothing allocated or initialised),
        for weights assigned later (see stenoflow.model.build)."""
        super().__init__()
        self.dims = dims
        self.encoder = AudioEncoder(dims, device)
        self.decoder = TextDecoder(dims, device)

    def fuse(self) -> Whisper:
        """Fuse the self-attention q/k/v projections of every block and keep transposed copies of
        the weights a one-row decoding step reads (call after loading weights)."""
        for block in [*self.encoder.blocks, *self.decoder.blocks]:
            block.attn.fuse()
        for block in self.decoder.blocks:
            assert block.cross_attn is not None
            for layer in (block.attn.qkv, block.attn.out, block.cross_attn.query, block.cross_attn.out,
                          block.mlp[0], block.mlp[2]):
                if isinstance(layer, Linear):
                    layer.keep_transposed()
        self.decoder.proj_t = self.decoder.token_embedding.weight.detach().t().contiguous()
        return self

    def new_cache(self, batch: int, max_len: int | None = None,
                  alignment: tuple[tuple[int, int], ...] | None = None) -> SelfAttentionCache:
        """A decoder cache for ``batch`` rows of up to ``max_len`` tokens. ``alignment``: the
        alignment heads as (layer, head), whose cross-attention queries it also records."""
        d = self.dims
        p = self.decoder.positional_embedding
        return SelfAttentionCache(
            d.n_text_layer,
            batch,
            d.n_text_head,
            max_len or d.n_text_ctx,
            d.n_text_state // d.n_text_head,
            dtype=p.dtype,
            device=p.device,
            alignment=alignment,
        )
