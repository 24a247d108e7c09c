"""One decoding of one audio window: prompt, filters, a strategy, ranking.

``DecodingTask`` wires the small parts together: ``Inference`` (the cached forward pass), the
``LogitFilter`` list, a ``TokenDecoder`` strategy and the ``MaximumLikelihoodRanker``.
Each step the strategy returns a ``Step`` and the task applies its ``parents`` to the cache,
so strategies reorder rows (beam search) or change their number (beam pruning) without
owning the cache.
"""

from __future__ import annotations

import logging
import math
import zlib
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import Tensor

from stenoflow.decoding.guided import DraftVerifier, ReferenceGuidedDecoder
from stenoflow.decoding.inference import Inference
from stenoflow.decoding.logit_filters import (
    ApplyTimestampRules,
    LogitFilter,
    NoEndBefore,
    SuppressBlank,
    SuppressTokens,
)
from stenoflow.decoding.medusa import MedusaProposer
from stenoflow.decoding.options import (
    SUPPRESS_NON_SPEECH,
    DecodingOptions,
    DecodingResult,
    verify_options,
)
from stenoflow.decoding.reference import DraftMatcher, ReferenceMatcher, TokenKinds
from stenoflow.decoding.repetition import LoopRule, StopLoops
from stenoflow.decoding.speculative import DraftModelProposer, DraftWindow, SpeculativeDraft
from stenoflow.decoding.strategies import (
    BeamSearchDecoder,
    GreedyDecoder,
    MaximumLikelihoodRanker,
    TokenDecoder,
)
from stenoflow.model.context import DecoderContext
from stenoflow.model.kv_cache import CrossKV
from stenoflow.model.medusa import MedusaHeads
from stenoflow.tokenizer import TIME_PRECISION, Tokenizer

log = logging.getLogger(__name__)


def compression_ratio(text: str) -> float:
    """How well the text compresses: repetition loops compress far better than speech."""
    data = text.encode("utf-8")
    return len(data) / len(zlib.compress(data)) if data else 0.0


@torch.inference_mode()
def detect_language(ctx: DecoderContext, cross: CrossKV) -> tuple[str, dict[str, float]]:
    """Language probabilities from the first decoder step after <|startoftranscript|>."""
    tok = ctx.tokenizer
    if not tok.multilingual:
        return "en", {"en": 1.0}
    cache = ctx.model.new_cache(1, 1)
    logits = ctx.model.decoder(torch.tensor([[tok.sot]]), cross, cache)
    ids = torch.tensor(tok.language_token_ids)
    probs = logits[0, -1, ids].float().softmax(dim=-1).tolist()
    by_code = dict(zip(tok.language_codes, probs))
    best = max(by_code, key=by_code.__getitem__)
    return best, by_code


Drafter = DraftWindow | MedusaHeads  # what proposes tokens for a decoding to verify


class DecodingTask:
    def __init__(self, ctx: DecoderContext, options: DecodingOptions) -> None:
        verify_options(options, ctx.tokenizer.multilingual)
        self.ctx = ctx
        self.options = options
        self.n_ctx = ctx.model.dims.n_text_ctx
        self.sample_len = options.sample_len or self.n_ctx // 2
        self.n_group = options.beam_size or options.best_of or 1

    # --- set-up ---------------------------------------------------------------------------
    def prefix_tokens(self, tok: Tokenizer) -> list[int]:
        """The forced start of the transcript, as token ids (the end of a long one)."""
        o = self.options
        if not o.prefix:
            return []
        prefix = tok.encode(" " + o.prefix.strip()) if isinstance(o.prefix, str) else list(o.prefix)
        room = self.n_ctx // 2 - len(tok.sot_sequence) - int(o.without_timestamps)
        if len(prefix) > room and prefix[0] >= tok.timestamp_begin:
            return [prefix[0], *prefix[len(prefix) - room + 1 :]]  # keep the opening timestamp
        return prefix[-room:]

    def initial_tokens(self, tok: Tokenizer) -> list[int]:
        o = self.options
        tokens = list(tok.sot_sequence)
        if o.without_timestamps:
            tokens.append(tok.no_timestamps)
        tokens += self.prefix_tokens(tok)
        if o.prompt:
            prompt = tok.encode(" " + o.prompt.strip()) if isinstance(o.prompt, str) else list(o.prompt)
            tokens = [tok.sot_prev, *prompt[-(self.n_ctx // 2 - 1) :], *tokens]
        return tokens

    def suppress_ids(self, tok: Tokenizer) -> list[int]:
        spec = self.options.suppress_tokens
        ids: list[int] = []
        if isinstance(spec, str):
            for part in (p.strip() for p in spec.split(",") if p.strip()):
                ids.extend(self.ctx.non_speech_tokens if part == SUPPRESS_NON_SPEECH else [int(part)])
        elif spec:
            ids.extend(i for i in spec if i >= 0)
            if any(i < 0 for i in spec):
                ids.extend(self.ctx.non_speech_tokens)
        ids += [tok.transcribe, tok.translate, tok.sot, tok.sot_prev, tok.sot_lm, tok.no_speech]
        return ids

    def logit_filters(self, tok: Tokenizer, sample_begin: int) -> list[LogitFilter]:
        o = self.options
        filters: list[LogitFilter] = []
        if o.suppress_blank:
            filters.append(SuppressBlank([*tok.encode(" "), tok.eot], sample_begin))
        filters.append(SuppressTokens(self.suppress_ids(tok)))
        if not o.without_timestamps:
            max_initial = None
            if o.max_initial_timestamp is not None:
                max_initial = round(o.max_initial_timestamp / TIME_PRECISION)
            last = None if o.max_timestamp is None else math.ceil(o.max_timestamp / TIME_PRECISION - 1e-6)
            # A prefix that opens with a timestamp is a segment in progress: the timestamp rules
            # read it as already sampled, so decoding continues its text instead of opening a
            # new segment at once.
            prefix = self.prefix_tokens(tok)
            rules_begin = sample_begin - len(prefix) if prefix and prefix[0] >= tok.timestamp_begin else sample_begin
            filters.append(ApplyTimestampRules(tok.eot, tok.no_timestamps, tok.timestamp_begin,
                                               rules_begin, max_initial, last))
        if o.stop_loops:
            filters.append(StopLoops(LoopRule(), tok.eot, sample_begin, o.loops_from))  # it may leave only end-of-text
        if o.min_tokens:
            filters.append(NoEndBefore(tok.eot, sample_begin + o.min_tokens))
        return filters

    def strategy(self, tok: Tokenizer, sample_begin: int) -> TokenDecoder:
        o = self.options
        if o.beam_size is not None and o.beam_size > 1 and o.temperature == 0:
            stop = None if o.length_budget is None else sample_begin + o.length_budget
            return BeamSearchDecoder(o.beam_size, tok.eot, o.patience, stop, sample_begin)
        return GreedyDecoder(o.temperature, tok.eot)

    def guided_strategy(self, tok: Tokenizer, inference: Inference, filters: list[LogitFilter],
                        max_length: int, sample_begin: int, draft: Drafter | None = None) -> ReferenceGuidedDecoder:
        """The plain strategy behind a reference, a draft model, Medusa heads or a confidence gate:
        one row while it holds."""
        o = self.options
        matcher: ReferenceMatcher | DraftMatcher | SpeculativeDraft
        if o.reference_mode == "draft" or o.reference is None:
            matcher = DraftMatcher(o.reference or (), tok.timestamp_begin)  # the exact continuation
        else:
            kinds = TokenKinds(tok)
            matcher = ReferenceMatcher(o.reference, kinds.skippable, kinds.key)
        if draft is not None:  # the draft model or the heads write the draft past the fixed one (if any)
            first = matcher if isinstance(matcher, DraftMatcher) and o.reference else None
            proposer = MedusaProposer(draft, self.ctx.model.decoder, inference, tok.eot) \
                if isinstance(draft, MedusaHeads) else self.draft_proposer(draft, tok.language or "en")
            matcher = SpeculativeDraft(proposer, tok.eot, (o.beam_size or 1) > 1, first)
        verify = o.reference_mode in ("verify", "draft") or draft is not None
        verifier = DraftVerifier(inference, filters, o.typical) if verify else None
        return ReferenceGuidedDecoder(matcher, self.strategy(tok, sample_begin), o.beam_size or 1, tok.eot,
                                      verifier, max_length, o.beam_gate, o.beam_close,
                                      o.reference_hold)

    def draft_proposer(self, window: DraftWindow, language: str) -> DraftModelProposer:
        """A draft model's proposer for this decoding: the same prompt and prefix (in the draft's
        vocabulary), its own initial tokens and logit rules, greedy and unguided."""
        o = self.options
        ctx = window.model.context
        bridge = window.model.to_draft
        multilingual = ctx.tokenizer.multilingual
        prompt = o.prompt if isinstance(o.prompt, str) or o.prompt is None else bridge.convert(o.prompt)
        prefix = o.prefix if isinstance(o.prefix, str) or o.prefix is None else bridge.convert(o.prefix)
        task = DecodingTask(ctx, replace(o, language=language if multilingual else None, prompt=prompt,
                                         prefix=prefix, beam_size=None, best_of=None, patience=None,
                                         reference=None, reference_mode=None, beam_gate=None,
                                         record_alignment=False))
        tok = ctx.tokenizer.with_options(language if multilingual else None, o.task)
        initial = task.initial_tokens(tok)
        return DraftModelProposer(window, initial, task.logit_filters(tok, len(initial)), tok.eot)

    def single_row(self, draft: Drafter | None = None) -> bool:
        """Whether decoding starts at one row: under a reference, a draft (model or heads) or a confidence gate."""
        o = self.options
        return (o.reference_mode is not None or draft is not None
                or (o.beam_gate is not None and (o.beam_size or 1) > 1))

    def tokenizer(self, cross: CrossKV) -> tuple[Tokenizer, str, dict[str, float] | None]:
        """The tokenizer for this decoding's language and task (detecting the language if unset)."""
        ctx, o = self.ctx, self.options
        tok = ctx.tokenizer.with_options(o.language, o.task)
        language_probs = None
        if o.language is None and tok.multilingual:
            language, language_probs = detect_language(ctx, cross)
            tok = tok.with_options(language, o.task)
        return tok, (tok.language if tok.multilingual else "en"), language_probs

    @torch.inference_mode()
    def prefill(self, cross: CrossKV) -> Prefilled:
        """Run this decoding's prompt (the initial tokens) through the decoder: the part of a
        decoding that does not depend on the tokens a previous one is still deciding."""
        if self.options.language is None and self.ctx.tokenizer.multilingual:
            raise ValueError("a prefilled decoding needs its language: set DecodingOptions.language")
        tok, _, _ = self.tokenizer(cross)
        initial = self.initial_tokens(tok)
        inference = Inference(self.ctx.model, cross, 1, self.n_ctx, self._alignment_heads())
        logits = inference.prefill(torch.tensor([initial]), [initial.index(tok.sot), len(initial) - 1])
        return Prefilled(inference, tuple(initial), logits)

    def _alignment_heads(self) -> tuple[tuple[int, int], ...] | None:
        return self.ctx.alignment_heads if self.options.record_alignment and self.ctx.alignment_heads else None

    # --- the loop ---------------------------------------------------------------------------
    @torch.inference_mode()
    def run(self, audio_features: Tensor | CrossKV, prefilled: Prefilled | None = None,
            draft: Drafter | None = None) -> DecodingResult:
        """Decode one window from its encoder output (1, S, D) or its precomputed cross K/V.

        ``prefilled``: the cache already holds the first initial tokens of this decoding (from
        ``prefill`` of a task whose initial tokens are a prefix of these, on the same audio);
        the rest of them are fed in one pass. Decoding then starts at one row.
        ``draft``: a draft model on the same window (``DraftWindow``) or Medusa heads bound to this
        model (``MedusaHeads``) propose tokens for the main model to verify (speculative decoding,
        see ``decoding.speculative`` and ``decoding.medusa``); at temperature 0 only.
        """
        ctx, o = self.ctx, self.options
        if prefilled is not None:
            cross = prefilled.inference.cross
        else:
            cross = audio_features if isinstance(audio_features, CrossKV) else ctx.model.decoder.cross_kv(audio_features)
        tok, language, language_probs = self.tokenizer(cross)

        initial = self.initial_tokens(tok)
        sample_begin = len(initial)
        sot_index = initial.index(tok.sot)
        width = self.n_group if o.temperature > 0 or (o.beam_size or 1) > 1 else 1
        if draft is not None and o.temperature > 0:
            raise ValueError("a draft model speeds up greedy or beam search decoding (temperature 0)")
        if o.typical is not None and draft is None and o.reference_mode not in ("verify", "draft"):
            raise ValueError("typical acceptance needs drafted tokens: a draft model, Medusa heads or a draft reference")
        n = 1 if self.single_row(draft) else width
        if prefilled is None:
            inference = Inference(ctx.model, cross, n, min(self.n_ctx, sample_begin + self.sample_len + 1),
                                  self._alignment_heads())
            prompt_logits = inference.prefill(torch.tensor([initial]), [sot_index, sample_begin - 1])
            logits = prompt_logits[:, 1]
        else:
            inference, prompt_logits = prefilled.inference, prefilled.logits
            done = len(prefilled.tokens)
            if tuple(initial[:done]) != prefilled.tokens or sot_index >= done:
                raise ValueError("the prefilled tokens do not start this decoding's initial tokens")
            rest = initial[done:]
            logits = inference.extend(torch.tensor([rest])) if rest else prompt_logits[:, 1]
            if n > 1:  # every beam starts from the one prefilled row
                inference.rearrange(torch.zeros(n, dtype=torch.long))
        no_speech_prob = float(prompt_logits[0, 0].float().softmax(-1)[tok.no_speech])
        filters = self.logit_filters(tok, sample_begin)
        max_length = min(sample_begin + self.sample_len, inference.cache.max_len)
        guided: ReferenceGuidedDecoder | None = None
        if self.single_row(draft):
            guided = self.guided_strategy(tok, inference, filters, max_length, sample_begin, draft)
        decoder: TokenDecoder = guided if guided is not None else self.strategy(tok, sample_begin)

        logits = logits.expand(n, -1).clone()
        tokens = torch.tensor([initial]).repeat(n, 1)
        sum_logprobs = torch.zeros(n)
        first = True
        ended = False
        token_logprobs: dict[int, float] = {}  # at one row: position -> log probability
        # A step may append several tokens (verified drafts): the limit is on the length.
        while tokens.shape[1] < max_length:
            if not first:
                logits = inference.logits(tokens)
            first = False
            for f in filters:
                f.apply(logits, tokens)
            step = decoder.update(tokens, logits, sum_logprobs)
            if step.parents is not None:
                inference.rearrange(step.parents)
            if step.logprobs is not None and step.tokens.shape[0] == 1:
                start = step.tokens.shape[1] - len(step.logprobs)
                token_logprobs.update(zip(range(start, step.tokens.shape[1]), step.logprobs))
            tokens, sum_logprobs = step.tokens, step.sum_logprobs
            if step.done:
                ended = True
                break
            if tokens.shape[1] > min(self.n_ctx, inference.cache.max_len):
                break

        candidates, scores = decoder.finalize(tokens, sum_logprobs)
        seqs = [self._strip(t.tolist(), sample_begin, tok.eot) for t in candidates[0]]
        best = MaximumLikelihoodRanker(o.length_penalty).rank([len(s) for s in seqs], scores[0])
        out = seqs[best]
        text = tok.decode(out)
        alignment = None
        single = tokens.shape[0] == 1 and tokens[0, sample_begin:].tolist()[: len(out)] == out
        if not single and o.record_alignment and guided is not None:
            single = self._settle(inference, guided, tokens, out, sample_begin, token_logprobs)
        positions = range(sample_begin, sample_begin + len(out))
        logprobs = [token_logprobs[p] for p in positions] if single and all(p in token_logprobs for p in positions) \
            else None
        if o.record_alignment and single:
            # row p is the query at position p, which predicts token p + 1
            text_start = sot_index + len(tok.sot_sequence) + int(o.without_timestamps)  # the prefix
            alignment = inference.attention(0, text_start - 1, sample_begin + len(out))
        return DecodingResult(
            tokens=out,
            text=text,
            language=language,
            language_probs=language_probs,
            avg_logprob=scores[0][best] / (len(out) + 1),
            sum_logprob=scores[0][best],
            no_speech_prob=no_speech_prob,
            temperature=o.temperature,
            compression_ratio=compression_ratio(text),
            stats=self._stats(inference, decoder, width),
            fallbacks=list(guided.fallbacks) if guided is not None else [],
            alignment=alignment,
            ended=ended,
            token_logprobs=logprobs,
        )

    @staticmethod
    def _settle(inference: Inference, guided: ReferenceGuidedDecoder, tokens: Tensor, out: list[int],
                sample_begin: int, token_logprobs: dict[int, float]) -> bool:
        """After a beam the gate opened and that was still open at the end: the cache back at one
        row, holding the chosen tokens, with their log probabilities (into ``token_logprobs``) and
        attention as decoding them at one row gives, from one pass over the tokens since the beam
        opened (or since the first one whose log probability the opening pass left unreported).
        False (nothing done) where that cannot be: no verifier, or a choice that is not rooted
        where the beam opened."""
        opened, verifier = guided.opened_at, guided.verifier
        if opened is None or verifier is None or opened <= sample_begin or sample_begin + len(out) < opened:
            return False
        prefix = tokens[0, :opened].tolist()
        if prefix[sample_begin:] != out[: opened - sample_begin]:
            return False
        start = next((p for p in range(sample_begin, opened) if p not in token_logprobs), opened)
        seq = torch.tensor([prefix + out[opened - sample_begin :]], dtype=tokens.dtype, device=tokens.device)
        inference.rearrange(torch.zeros(1, dtype=torch.long, device=tokens.device))
        inference.rollback(start - 1)  # every row holds the prefix; the token before start is fed again
        logprobs = F.log_softmax(verifier.positions(seq).float(), dim=-1)  # row i predicts start + i
        chosen = seq[0, start:]
        token_logprobs.update(zip(range(start, seq.shape[1]),
                                  logprobs[torch.arange(chosen.numel()), chosen].tolist()))
        return True

    @staticmethod
    def _stats(inference: Inference, decoder: TokenDecoder, width: int) -> dict[str, float]:
        """Forward passes, and the rows of each decoder pass after the prompt against the full width."""
        rows = inference.pass_rows
        stats = {
            "forward_passes": float(inference.forward_passes),
            "beam_size": float(width),
            "beam_width_avg": sum(rows) / len(rows) if rows else float(width),
            "reduced_beam_share": sum(r < width for r in rows) / len(rows) if rows else 0.0,
        }
        stats.update(decoder.stats())
        return stats

    @staticmethod
    def _strip(seq: list[int], sample_begin: int, eot: int) -> list[int]:
        seq = seq[sample_begin:]
        return seq[: seq.index(eot)] if eot in seq else seq


@dataclass(frozen=True)
class Prefilled:
    """A decoding whose first initial tokens already went through the decoder (one row)."""

    inference: Inference  # its cache holds ``tokens``
    tokens: tuple[int, ...]
    logits: Tensor  # (1, 2, V) at the start-of-transcript position and at the last token
