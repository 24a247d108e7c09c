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

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from stenoflow.model.dims import ModelDims
from stenoflow.model.kv_cache import CrossKV, SelfAttentionCache


def sinusoids(length: int, channels: int, max_timescale: float = 10000.0) -> Tensor:
    """The encoder's fixed positional table: sin then cos halves, as in the original model."""
    assert channels % 2 == 0
    log_inc = math.log(max_timescale) / (channels // 2 - 1)
    inv = torch.exp(-log_inc * torch.arange(channels // 2, dtype=torch.float32))
    t = torch.arange(length, dtype=torch.float32)[:, None] * inv[None, :]
    return torch.cat([torch.sin(t), torch.cos(t)], dim=1)


class Linear(nn.Linear):
    """nn.Linear with a faster CPU path for the few-row inputs of beam decoding.

    For 2..16 rows, MKL computes W @ x^T (a tall matrix times a thin one) about twice as fast
    as x @ W^T when the weights are not in cache, which is the case in every decoding step.
    The result is the same product. Quantisation turns these back into plain nn.Linear.
    """

    def forward(self, x: Tensor) -> Tensor:
        rows = x.numel() // x.shape[-1]
        if rows == 1 or rows > 16 or x.dtype != self.weight.dtype:
            return F.linear(x, self.weight, self.bias)
        flat = x.reshape(rows, x.shape[-1]).t()
        y = self.weight @ flat if self.bias is None else torch.addmm(self.bias[:, None], self.weight, flat)
        return y.t().reshape(*x.shape[:-1], y.shape[0])


class LayerNorm(nn.LayerNorm):
    def forward(self, x: Tensor) -> Tensor:
        return super().forward(x.float()).type(x.dtype)


class MultiHeadAttention(nn.Module):
    def __init__(self, n_state: int, n_head: int) -> None:
        super().__init__()
        self.n_head = n_head
        self.query = Linear(n_state, n_state)
        self.key = Linear(n_state, n_state, bias=False)
        self.value = Linear(n_state, n_state)
        self.out = Linear(n_state, n_state)
        # One GEMM for q, k and v instead of three: built by fuse() after the weights are loaded.
        self.qkv: nn.Linear | None = None

    def heads(self, x: Tensor) -> Tensor:
        """(B, T, D) -> (B, H, T, D/H)"""
        b, t, _ = x.shape
        return x.view(b, t, self.n_head, -1).transpose(1, 2)

    def merge(self, x: Tensor) -> Tensor:
        """(B, H, T, D/H) -> (B, T, D)"""
        b, _, t, _ = x.shape
        return x.transpose(1, 2).reshape(b, t, -1)

    def fuse(self) -> None:
        """Stack the q, k, v projections into one layer (the key has no bias: zeros)."""
        d = self.query.weight.shape[1]
        qkv = Linear(d, 3 * d).to(self.query.weight.device, self.query.weight.dtype)
        with torch.no_grad():
            qkv.weight.copy_(torch.cat([self.query.weight, self.key.weight, self.value.weight]))
            qkv.bias.copy_(torch.cat([self.query.bias, torch.zeros_like(self.query.bias), self.value.bias]))
        self.qkv = qkv.requires_grad_(self.query.weight.requires_grad)

    def project_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        if self.qkv is None:
            return self.heads(self.query(x)), self.heads(self.key(x)), self.heads(self.value(x))
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return self.heads(q), self.heads(k), self.heads(v)

    def project_kv(self, x: Tensor) -> tuple[Tensor, Tensor]:
        return self.heads(self.key(x)), self.heads(self.value(x))

    def encoder_forward(self, x: Tensor) -> Tensor:
        q, k, v = self.project_qkv(x)
        return self.out(self.merge(F.scaled_dot_product_attention(q, k, v)))

    def cached_forward(
        self, x: Tensor, cache: SelfAttentionCache | None, layer: int, mask: Tensor | None
    ) -> Tensor:
        """Causal self-attention; without a cache (training) the keys are only this call's."""
        q, k, v = self.project_qkv(x)
        if cache is not None:
            k, v = cache.write(layer, k, v, cache.length)
        return self.out(self.merge(F.scaled_dot_product_attention(q, k, v, attn_mask=mask)))

    def cross_forward(self, x: Tensor, k: Tensor, v: Tensor,
                      heads: Sequence[int] = ()) -> tuple[Tensor, Tensor | None]:
        """x (B, T, D) attends to one audio's k, v (1, H, S, D/H), or to one per row (B, H, S, D/H).

        With one audio shared by B beams, the beams are folded into the query axis: one
        attention over (1, H, B*T) queries reads the keys once instead of B broadcast copies.
        Cross-attention has no mask, so this is the same computation.

        ``heads``: also return those heads' attention weights (B, len(heads), T, S), which
        word alignment reads (a small product next to the attention itself).
        """
        b, t, d = x.shape
        q = self.query(x)
        if k.shape[0] == 1 and b > 1:
            out = self.merge(F.scaled_dot_product_attention(self.heads(q.reshape(1, b * t, d)), k, v)).reshape(b, t, d)
        else:
            out = self.merge(F.scaled_dot_product_attention(self.heads(q), k, v))
        weights = None
        if heads:
            index = torch.tensor(heads, device=x.device)
            qh = self.heads(q).index_select(1, index)  # (B, h, T, D/H)
            kh = k.index_select(1, index)  # (1 or B, h, S, D/H)
            weights = ((qh @ kh.transpose(-1, -2)) / math.sqrt(qh.shape[-1])).float().softmax(dim=-1)
        return self.out(out), weights

    def cross_forward_qk(self, x: Tensor, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Cross-attention that also returns the pre-softmax scores (B, H, T, S) for alignment."""
        q = self.heads(self.query(x))
        qk = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        w = qk.float().softmax(dim=-1).to(q.dtype)
        return self.out(self.merge(w @ v)), qk


class ResidualAttentionBlock(nn.Module):
    def __init__(self, n_state: int, n_head: int, cross_attention: bool = False) -> None:
        super().__init__()
        self.attn = MultiHeadAttention(n_state, n_head)
        self.attn_ln = LayerNorm(n_state)
        self.cross_attn = MultiHeadAttention(n_state, n_head) if cross_attention else None
        self.cross_attn_ln = LayerNorm(n_state) if cross_attention else None
        self.mlp = nn.Sequential(Linear(n_state, 4 * n_state), nn.GELU(), Linear(4 * n_state, n_state))
        self.mlp_ln = LayerNorm(n_state)

    def encoder_forward(self, x: Tensor) -> Tensor:
        x = x + self.attn.encoder_forward(self.attn_ln(x))
        return x + self.mlp(self.mlp_ln(x))

    def decoder_forward(self, x: Tensor, cross_k: Tensor, cross_v: Tensor, cache: SelfAttentionCache | None,
                        layer: int, mask: Tensor | None, heads: Sequence[int] = (),
                        return_qk: bool = False) -> tuple[Tensor, Tensor | None]:
        """A decoder block on new positions x (B, T, D): causal self-attention (earlier keys in
        ``cache`` at ``layer``; None: x starts at position 0), cross-attention to ``cross_k/v``, MLP.
        Also returns the cross-attention scores (``return_qk``) or the weights of ``heads``."""
        assert self.cross_attn is not None and self.cross_attn_ln is not None
        x = x + self.attn.cached_forward(self.attn_ln(x), cache, layer, mask)
        h = self.cross_attn_ln(x)
        out, extra = self.cross_attn.cross_forward_qk(h, cross_k, cross_v) if return_qk \
            else self.cross_attn.cross_forward(h, cross_k, cross_v, heads)
        x = x + out
        return x + self.mlp(self.mlp_ln(x)), extra


class AudioEncoder(nn.Module):
    def __init__(self, dims: ModelDims) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(dims.n_mels, dims.n_audio_state, kernel_size=3, padding=1)
        self.conv2 = nn.Conv1d(dims.n_audio_state, dims.n_audio_state, kernel_size=3, stride=2, padding=1)
        self.register_buffer("positional_embedding", sinusoids(dims.n_audio_ctx, dims.n_audio_state))
        self.blocks = nn.ModuleList(
            ResidualAttentionBlock(dims.n_audio_state, dims.n_audio_head) for _ in range(dims.n_audio_layer)
        )
        self.ln_post = LayerNorm(dims.n_audio_state)

    def forward(self, mel: Tensor) -> Tensor:
        """mel: (B, n_mels, n_frames) with n_frames <= 2 * n_audio_ctx -> (B, ceil(n_frames/2), D)"""
        max_frames = 2 * self.positional_embedding.shape[0]
        if mel.shape[-1] > max_frames:
            raise ValueError(f"encoder input has {mel.shape[-1]} mel frames; at most {max_frames} fit")
        x = F.gelu(self.conv1(mel))
        x = F.gelu(self.conv2(x)).permute(0, 2, 1)
        x = x + self.positional_embedding[: x.shape[1]].to(x.dtype)
        for block in self.blocks:
            x = block.encoder_forward(x)
        return self.ln_post(x)


class TextDecoder(nn.Module):
    def __init__(self, dims: ModelDims) -> None:
        super().__init__()
        self.token_embedding = nn.Embedding(dims.n_vocab, dims.n_text_state)
        self.positional_embedding = nn.Parameter(torch.empty(dims.n_text_ctx, dims.n_text_state))
        self.blocks = nn.ModuleList(
            ResidualAttentionBlock(dims.n_text_state, dims.n_text_head, cross_attention=True)
            for _ in range(dims.n_text_layer)
        )
        self.ln = LayerNorm(dims.n_text_state)
        # Set by int8 quantisation: a quantised copy of the tied output projection.
        self.logits_proj: nn.Module | None = None
        # Set by fuse(): the embedding transposed to (D, V). A row vector times a contiguous
        # (D, V) matrix runs about twice as fast on CPU as F.linear against the (V, D) table,
        # and this product is the largest of a decoding step.
        self.proj_t: Tensor | None = None

    def cross_kv(self, audio_features: Tensor) -> CrossKV:
        """Project the encoder output once into every layer's cross-attention keys and values."""
        ks, vs = [], []
        for block in self.blocks:
            assert block.cross_attn is not None
            k, v = block.cross_attn.project_kv(audio_features)
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
        return_cross_qk: bool = False,
        logits_at: Tensor | None = None,
    ) -> tuple[Tensor, list[Tensor] | None]:
        """tokens (B, T) continue the cached sequence; returns logits (B, T', V) and, when asked,
        each layer's cross-attention scores (B, H, T, S). The cache grows by T.

        Logits are projected at every new position (T' = T), at the last only (``last_only``),
        or at the positions ``logits_at`` (indices into the T new ones): the projection onto the
        vocabulary is the largest product of a pass, so a prompt is run without it. A cache with
        alignment heads also records their attention at every new position (word timing).

        ``cache=None`` runs a whole sequence from position 0 with nothing stored: the path for
        teacher-forced training, where in-place cache writes would break autograd."""
        x, qks = self.hidden(tokens, cross, cache, return_cross_qk)
        return self.logits_of(x, last_only, logits_at), qks

    def hidden(self, tokens: Tensor, cross: CrossKV, cache: SelfAttentionCache | None,
               return_cross_qk: bool = False) -> tuple[Tensor, list[Tensor] | None]:
        """The residual stream after the last block (B, T, D), before the final layer norm: what
        the output projection reads, and what Medusa heads read too."""
        offset = cache.length if cache is not None else 0
        t = tokens.shape[1]
        x = self.token_embedding(tokens) + self.positional_embedding[offset : offset + t]
        mask = causal_mask(t, offset, x.dtype, x.device) if t > 1 else None
        if return_cross_qk:
            cross = cross.expand(tokens.shape[0])
        qks: list[Tensor] | None = [] if return_cross_qk else None
        for i, block in enumerate(self.blocks):
            heads = cache.heads_of_layer(i) if cache is not None and qks is None else ()
            x, extra = block.decoder_forward(x, cross.k[i], cross.v[i], cache, i, mask, heads, qks is not None)
            if qks is not None:
                assert extra is not None
                qks.append(extra)
            elif extra is not None:
                assert cache is not None
                cache.record_attention(i, extra, offset)
        if cache is not None:
            cache.length = offset + t
        return x, qks

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
    def __init__(self, dims: ModelDims) -> None:
        super().__init__()
        self.dims = dims
        self.encoder = AudioEncoder(dims)
        self.decoder = TextDecoder(dims)

    def fuse(self) -> Whisper:
        """Fuse the self-attention q/k/v projections of every block (call after loading weights)."""
        for block in [*self.encoder.blocks, *self.decoder.blocks]:
            block.attn.fuse()
        self.decoder.proj_t = self.decoder.token_embedding.weight.detach().t().contiguous()
        return self

    def new_cache(self, batch: int, max_len: int | None = None,
                  alignment: tuple[tuple[tuple[int, int], ...], int] | None = None) -> SelfAttentionCache:
        """A decoder cache for ``batch`` rows of up to ``max_len`` tokens. ``alignment`` =
        (alignment heads as (layer, head), audio positions): also record those heads' attention."""
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
