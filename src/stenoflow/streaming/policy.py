"""Round policies: how one processing round turns the audio buffer into timed words.

The session owns the buffer, the prompt and the commit rule; a policy only runs the model on a
buffer snapshot. Whisper-S (``WhisperRound``) pads to 30 s and decodes with beam search. Its two
options change how the model hears and decodes the buffer without forking the round:

* ``hush``: the encoder hears speech ⊕ hush word (0.5 s) instead of speech padded to 30 s;
* ``guide``: the previous round's words for this buffer guide beam search, either matched one
  token at a time ("prune", the paper's beam pruning) or verified in one decoder pass
  ("verify"). See :mod:`stenoflow.decoding.reference`.

Further policies are added to ``POLICIES`` and chosen by name.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Protocol

import numpy as np
import torch
from torch import Tensor

from stenoflow.audio.features import HOP_LENGTH, N_FRAMES
from stenoflow.audio.io import N_SAMPLES
from stenoflow.decoding.options import DecodingOptions
from stenoflow.decoding.repetition import text_loop_start
from stenoflow.decoding.task import DecodingTask
from stenoflow.decoding.timing import find_alignment
from stenoflow.decoding.transcribe import split_segments, window
from stenoflow.streaming.events import TimedWord

if TYPE_CHECKING:
    from stenoflow.model.protocol import SpeechModel
    from stenoflow.streaming.options import StreamOptions

log = logging.getLogger(__name__)

SAMPLE_RATE = 16000
# A previous word starting this little before the cut still counts as in the buffer: cuts snap
# to quiet points, and word starts from DTW are good to a frame or two.
REFERENCE_SLACK_S = 0.1


@dataclass(frozen=True)
class RoundResult:
    """What one round heard. Times are relative to the start of the buffer it ran on."""

    words: tuple[TimedWord, ...] = ()
    segment_ends: tuple[float, ...] = ()  # ends of the closed segments (safe trimming points)
    tokens: tuple[int, ...] = ()  # decoded tokens, timestamps included (for guided decoding)
    stats: Mapping[str, float] = field(default_factory=dict)
    # Trailing words DTW squeezed against the buffer end: left for the next round to place, and
    # committed as they are only when the stream ends (see ``repair_word_times``).
    held: tuple[TimedWord, ...] = ()


@dataclass(frozen=True)
class PreviousRound:
    """The session's last round, for policies that reuse it (e.g. beam pruning)."""

    result: RoundResult
    shift: float  # seconds the buffer start moved since: previous time - shift = time now


class RoundPolicy(Protocol):
    name: str

    def run(self, model: SpeechModel, samples: np.ndarray, prompt: str,
            previous: PreviousRound | None) -> RoundResult:
        """Transcribe ``samples`` (the whole buffer, <= 30 s) into words with relative times."""


class WhisperRound:
    """Whisper-S: the buffer padded to 30 s, beam search with timestamps, DTW word times.

    Padding to the 30 s the model was trained on is what keeps Whisper from hallucinating on
    short input, at the price of encoding mostly silence. With ``hush`` the encoder hears the
    buffer ⊕ the model's hush word instead; with ``guide`` the previous round's words guide
    the beam (a single row while the hypothesis follows them).
    """

    name = "whisper-s"

    def __init__(self, options: StreamOptions) -> None:
        self.beam_size = options.beam_size
        self.language = None if options.detects_language else options.language
        self.task = options.task
        self.no_speech_threshold = options.no_speech_threshold
        self.log_prob_threshold = options.log_prob_threshold
        self.no_speech_skip = options.no_speech_skip
        self.hush = options.hush
        self.guide = options.guide
        self.gate = options.gate

    def decoding_options(self, prompt: str, reference: tuple[int, ...] | None = None,
                         duration: float | None = None) -> DecodingOptions:
        """Beam search with timestamps, none after the buffer's end ``duration`` (s), and rows
        ended at a repetition loop: a decoder that writes past the audio it heard repeats what it
        wrote before (see :mod:`stenoflow.decoding.repetition`)."""
        guided = reference is not None and self.guide is not None
        return DecodingOptions(language=self.language, task=self.task,
                               beam_size=self.beam_size if self.beam_size > 1 else None,
                               prompt=prompt or None, without_timestamps=False, max_timestamp=duration, stop_loops=True,
                               reference=reference if guided else None, reference_mode=self.guide if guided else None,
                               beam_gate=self.gate)

    def encoder_input(self, model: SpeechModel, samples: np.ndarray) -> Tensor:
        """Log-mel of what the encoder hears: speech ⊕ hush word, or speech padded to 30 s.

        A buffer too long for the hush word to fit in 30 s is padded (it is nearly 30 s anyway).
        """
        if self.hush:
            if model.hush is None:
                raise ValueError(f"no hush word for model {model.name!r}: train one with `stenoflow train-hush` "
                                 "or stream without hush")
            if samples.size + model.hush.samples.size <= N_SAMPLES:
                return model.features(model.hush.append(samples))
        return window(model.features(samples, padding=N_SAMPLES), 0, samples.size // HOP_LENGTH)

    def reference(self, model: SpeechModel, previous: PreviousRound | None) -> tuple[int, ...] | None:
        """The previous round's words still in the buffer, as tokens (None: nothing to follow)."""
        if self.guide is None or previous is None:
            return None
        kept = [w.word for w in previous.result.words if w.start >= previous.shift - REFERENCE_SLACK_S]
        if not kept:
            return None
        return tuple(model.tokenizer.encode("".join(kept)))

    @torch.inference_mode()
    def run(self, model: SpeechModel, samples: np.ndarray, prompt: str,
            previous: PreviousRound | None) -> RoundResult:
        if samples.size > N_SAMPLES:
            raise ValueError(f"a round takes at most 30 s of audio, got {samples.size / SAMPLE_RATE:.2f} s")
        t0 = time.perf_counter()
        frames = samples.size // HOP_LENGTH
        duration = samples.size / SAMPLE_RATE
        mel = self.encoder_input(model, samples)
        spent: list[float] = []
        features = model.encode(mel, spent=spent)
        t1 = time.perf_counter()
        reference = self.reference(model, previous)
        options = self.decoding_options(prompt, reference, max(duration, 0.04))
        cross = model.whisper.decoder.cross_kv(features)
        result = DecodingTask(model.context, options).run(cross)
        passes = result.stats.get("forward_passes", 0.0)
        loop = text_loop_start(result.tokens, model.tokenizer.eot)
        retried = loop is not None and options.prompt is not None
        if retried:
            # The prompt is the likeliest cause: a buffer cut mid-sentence makes the decoder repeat
            # the prompt's last words instead of hearing the audio. Whisper drops the prompt when it
            # decodes a window again; so does this round, once.
            log.debug("round output loops from token %d: decoding again without the prompt", loop)
            result = DecodingTask(model.context, replace(options, prompt=None)).run(cross)
            passes += result.stats.get("forward_passes", 0.0)
            loop = text_loop_start(result.tokens, model.tokenizer.eot)
        t2 = time.perf_counter()
        stats: dict[str, float] = {
            "audio_s": duration,
            "encoder_mel_frames": float(mel.shape[-1]),
            "encoder_gflop": sum(spent) / 1e9,
            "encoder_ms": 1000 * (t1 - t0),
            "decoder_ms": 1000 * (t2 - t1),
            "forward_passes": float(passes),
            "loop_retry": float(retried),
            "beam_size": float(result.stats.get("beam_size", 1.0)),
            "beam_width_avg": float(result.stats.get("beam_width_avg", 1.0)),
            "reduced_beam_share": float(result.stats.get("reduced_beam_share", 0.0)),
            "guided": float(options.reference is not None),
            "fallbacks": float(len(result.fallbacks)),
            "no_speech_prob": result.no_speech_prob,
            "avg_logprob": result.avg_logprob,
            "alignment_ms": 0.0,
        }
        if self._silent(result.no_speech_prob, result.avg_logprob):
            log.debug("round heard no speech (p=%.2f, logprob %.2f)", result.no_speech_prob, result.avg_logprob)
            return RoundResult(tokens=tuple(result.tokens), stats=stats)
        tok = model.tokenizer
        tokens = list(result.tokens)
        stats["loop_cut"] = float(loop is not None)
        if loop is not None:
            log.debug("round output loops from token %d of %d: kept the text before it", loop, len(tokens))
            tokens = tokens[:loop]
        text_tokens = [t for t in tokens if t < tok.eot]
        aligner = tok.with_options(result.language if tok.multilingual else None, "transcribe")
        # Over the hush word too: the last word may end where the speech does, and DTW needs room
        # after it (the padded input has it); times are capped at the buffer's end below.
        timings = find_alignment(model.whisper, aligner, text_tokens, features, min(mel.shape[-1], N_FRAMES),
                                 model.alignment_heads)
        stats["alignment_ms"] = 1000 * (time.perf_counter() - t2)
        words = [TimedWord(w.word, min(w.start, duration), min(w.end, duration), w.probability) for w in timings]
        pieces, _ = split_segments(tokens, tok.timestamp_begin, 0.0, frames)
        ends = closed_segment_ends(pieces, [len(w.tokens) for w in timings], words, tok.timestamp_begin)
        words, held = repair_word_times([w for w in words if w.word.strip()], duration)
        return RoundResult(tuple(words), tuple(min(e, duration) for e in ends), tuple(tokens), stats, tuple(held))

    def _silent(self, no_speech_prob: float, avg_logprob: float) -> bool:
        """Whisper's rule (likely no speech and unlikely text), or Whisper-Streaming's (very
        likely no speech): on silence, small models write a confident "you" that the first
        rule alone lets through, and two rounds would agree on it."""
        return ((no_speech_prob > self.no_speech_threshold and avg_logprob < self.log_prob_threshold)
                or no_speech_prob > self.no_speech_skip)


def repair_word_times(words: list[TimedWord], duration: float, collapse_s: float = 0.06,
                      edge_s: float = 0.3) -> tuple[list[TimedWord], list[TimedWord]]:
    """Undo DTW's two failure marks, which would otherwise commit end times seconds too late.

    When decoding stops before the speech does, the alignment must still reach the end of the
    buffer: it stretches one word over the unspoken rest and squeezes the words after it into a
    few frames at the very end. Those squeezed trailing words are held back (returned second:
    the next round, with more audio, places them properly), and every word is capped at twice
    the median word duration (at most 1.4 s), as openai-whisper does at sentence ends.
    """
    out = list(words)
    held: list[TimedWord] = []
    while out and out[-1].end - out[-1].start <= collapse_s and out[-1].start >= duration - edge_s:
        held.insert(0, out.pop())
    spoken = [w.end - w.start for w in out if w.end > w.start]
    if not spoken:
        return out, held
    longest = 2 * min(0.7, float(np.median(spoken)))
    return [TimedWord(w.word, w.start, w.start + longest, w.probability) if w.end - w.start > longest else w
            for w in out], held


def closed_segment_ends(pieces: list[tuple[float, float, list[int]]], word_token_counts: list[int],
                        words: list[TimedWord], timestamp_begin: int) -> list[float]:
    """Where each closed segment (one ending on a timestamp token) ends: safe trimming points.

    The closing timestamp can fall before the last word's aligned end (tiny models often close
    early), so the end is the later of the two; trimming there never cuts into a word.
    """
    ends: list[float] = []
    k, used = 0, 0
    for _, end, toks in pieces:
        n_text = sum(1 for t in toks if t < timestamp_begin)
        last_word_end = end
        while k < len(words) and used + word_token_counts[k] <= n_text:
            used += word_token_counts[k]
            last_word_end = max(last_word_end, words[k].end)
            k += 1
        used -= n_text
        if toks and toks[-1] >= timestamp_begin and n_text:
            ends.append(max(end, last_word_end))
    return ends


POLICIES: Mapping[str, Callable[[StreamOptions], RoundPolicy]] = MappingProxyType({
    WhisperRound.name: WhisperRound,
})


def resolve_policy(options: StreamOptions) -> RoundPolicy:
    try:
        factory = POLICIES[options.policy]
    except KeyError:
        raise ValueError(f"unknown streaming policy {options.policy!r}; known: {', '.join(POLICIES)}") from None
    return factory(options)
