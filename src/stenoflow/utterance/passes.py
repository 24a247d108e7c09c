"""The decodings of one utterance: pilots while the person speaks, the final pass at the endpoint.

A pilot (seed 001 §4.1) decodes the audio heard so far, greedily, with the previous pilot's
tokens as a draft verified in one pass (incremental execution), so a pilot costs an encoder pass
on a few seconds of audio and a few decoder passes. The final pass decodes the whole utterance
with the beam; with beam collapse it follows the last pilot at one row and opens the beam only
where the model disagrees with it, and with early termination the beam search stops once it is as
long as the pilot predicts and a candidate has ended (n = l_full / l_pilot * n_pilot + C).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from stenoflow.decoding.options import DecodingOptions, DecodingResult
from stenoflow.decoding.reference import TokenKinds
from stenoflow.decoding.task import DecodingTask
from stenoflow.utterance.options import UtteranceOptions

if TYPE_CHECKING:
    from stenoflow.model.protocol import SpeechModel

log = logging.getLogger(__name__)

MIN_SAMPLE_LEN = 10  # tokens a decoding may write however short its audio ...
TOKENS_PER_S = 8  # ... plus this many per second of it (speech runs at 3-5 tokens a second)
REPEAT_NGRAM = 4  # word tokens a hushed decoding may not say twice


@dataclass(frozen=True)
class Hypothesis:
    """What one decoding of an utterance's audio heard."""

    tokens: tuple[int, ...]  # text tokens, no timestamps or end-of-text
    text: str
    samples: int  # how much audio it decoded
    avg_logprob: float  # mean log probability per token (end-of-text included)
    no_speech_prob: float
    forward_passes: int
    compute_s: float
    final: bool  # a final pass (beam, collapse, early termination), not a pilot
    padded: bool = False  # the hushed decoding did not end and this one heard a padded window
    repeat_cut: bool = False  # the hushed decoding said a phrase again and was cut there

    @property
    def perplexity(self) -> float:
        """exp(-mean token log-prob): the model's own doubt about its text (the offramp's signal)."""
        return math.exp(-self.avg_logprob) if math.isfinite(self.avg_logprob) else math.inf


class UtteranceDecoder:
    """Pilot and final decodings of utterance audio on one model."""

    def __init__(self, model: SpeechModel, options: UtteranceOptions) -> None:
        if options.hush and model.hush is None:
            raise ValueError(f"no hush word for model {model.name!r}: train one with `stenoflow train-hush` "
                             "or turn hush off")
        self.model = model
        self.options = options
        self.kinds = TokenKinds(model.tokenizer)  # word tokens by their lower-cased text

    def pilot(self, audio: np.ndarray, previous: Hypothesis | None) -> Hypothesis:
        """Greedy decoding of the audio so far, drafted by the previous pilot."""
        return self._decode(audio, self._options(audio, previous, beam_size=1), final=False)

    def final(self, audio: np.ndarray, pilot: Hypothesis | None) -> Hypothesis:
        """The whole utterance with the beam, shortened by the last pilot as the options say."""
        o = self.options
        guide = pilot if o.collapse else None
        budget = None
        if o.early_termination and pilot is not None and pilot.samples > 0 and o.beam_size > 1:
            budget = max(1, round(audio.size / pilot.samples * len(pilot.tokens)) + o.budget_slack)
        return self._decode(audio, self._options(audio, guide, o.beam_size, budget), final=True)

    def _options(self, audio: np.ndarray, draft: Hypothesis | None, beam_size: int,
                 budget: int | None = None) -> DecodingOptions:
        limit = MIN_SAMPLE_LEN + round(TOKENS_PER_S * audio.size / 16000)
        return DecodingOptions(
            language=self.options.language,
            beam_size=beam_size if beam_size > 1 else None,
            without_timestamps=True,
            stop_loops=True,
            sample_len=limit if budget is None else min(limit, 2 * budget),
            reference=draft.tokens if draft is not None else None,
            reference_mode="draft" if draft is not None else None,
            length_budget=budget,
            beam_gate=self.options.collapse_gate if draft is not None and beam_size > 1 else None,
        )

    def _decode(self, audio: np.ndarray, options: DecodingOptions, final: bool) -> Hypothesis:
        """Decode ``audio`` ⊕ the hush word. The hush word does not stop every input: a decoding that
        then says a phrase again is cut where the repeat begins (the text before it is what was said),
        and one that reaches the token limit without a repeat is decoded again on the padded window."""
        t0 = time.perf_counter()
        result = self._run(audio, options, self.options.hush)
        passes = int(result.stats.get("forward_passes", 0))
        tokens, text = self._heard(result)
        cut = self._repeat_start(tokens) if self.options.hush else None
        padded = self.options.hush and cut is None and not result.ended
        if cut is not None:
            tokens = tokens[:cut]
            text = self.model.tokenizer.decode(list(tokens)).strip()
        elif padded:
            result = self._run(audio, replace(options, reference=None, reference_mode=None, length_budget=None),
                               hush=False)
            passes += int(result.stats.get("forward_passes", 0))
            tokens, text = self._heard(result)
        hyp = Hypothesis(tokens, text, audio.size, result.avg_logprob, result.no_speech_prob, passes,
                         time.perf_counter() - t0, final, padded, cut is not None)
        log.debug("%s %.2f s: %d passes, %.0f ms%s%s, draft %d/%d: %r", "final" if final else "pilot",
                  audio.size / 16000, passes, 1000 * hyp.compute_s, " (padded)" if padded else "",
                  " (repeat cut)" if cut is not None else "", int(result.stats.get("draft_accepted", 0)),
                  len(options.reference or ()), text)
        return hyp

    def _repeat_start(self, tokens: tuple[int, ...]) -> int | None:
        """Index in ``tokens`` where a hushed decoding starts saying again what it said (see
        ``repeat_start``), or None."""
        kinds = self.kinds
        where = [i for i, t in enumerate(tokens) if not kinds.skippable(t)]
        k = repeat_start([kinds.key(tokens[i]) for i in where])
        return None if k is None else where[k]

    def _run(self, audio: np.ndarray, options: DecodingOptions, hush: bool) -> DecodingResult:
        model = self.model
        return DecodingTask(model.context, options).run(model.encode(model.encoder_input(audio, hush)))

    def _heard(self, result: DecodingResult) -> tuple[tuple[int, ...], str]:
        """The text tokens and text; none where the model says nothing was said."""
        o = self.options
        silent = result.no_speech_prob > o.no_speech_threshold and result.avg_logprob < o.log_prob_threshold
        if silent:
            return (), ""
        eot = self.model.tokenizer.eot
        tokens = tuple(t for t in result.tokens if t < eot)
        return tokens, result.text.strip()


def repeat_start(words: list[str]) -> int | None:
    """Where a word sequence starts saying again what it said: a run of ``REPEAT_NGRAM`` words seen
    before, a short phrase three times in a row, or a short phrase said twice at the very end. A
    voice command does not do that; a decoder that ran past the speech does. The index of the first
    word of the repeat (the words before it are kept), or None."""
    first: dict[tuple[str, ...], int] = {}
    for k in range(len(words)):
        for unit in (2, 3):  # a short phrase three times in a row ("ask not ask not ask not")
            if k + 3 * unit <= len(words) and words[k : k + unit] * 3 == words[k : k + 3 * unit]:
                return k + unit
        gram = tuple(words[k : k + REPEAT_NGRAM])
        if len(gram) == REPEAT_NGRAM and first.setdefault(gram, k) + REPEAT_NGRAM <= k:
            return k
    for unit in (2, 3):  # or a short phrase said again at the very end ("ask not ask not")
        if len(words) >= 2 * unit and words[-2 * unit : -unit] == words[-unit:]:
            return len(words) - unit
    return None
