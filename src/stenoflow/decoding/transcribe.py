"""Long-form transcription: 30 s windows, seek by timestamps, temperature fallback.

The window loop follows openai-whisper's published algorithm: decode a window, cut it into
segments at pairs of timestamp tokens, move ``seek`` to the last complete segment, and condition
the next window on the text so far. It is a generator, so segments arrive as they are decoded.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np
import torch

from stenoflow.decoding.options import (
    SUPPRESS_NON_SPEECH,
    DecodingOptions,
    DecodingResult,
    refuse_english_only,
)
from stenoflow.decoding.repetition import text_loop_start
from stenoflow.decoding.speculative import DraftModel, DraftWindow, Lookahead
from stenoflow.decoding.task import DecodingTask, Drafter, detect_language
from stenoflow.decoding.timing import find_alignment
from stenoflow.model.medusa import MedusaHeads
from stenoflow.model.quant import FEW_ROWS
from stenoflow.tokenizer import TIME_PRECISION

if TYPE_CHECKING:
    from stenoflow.model.kv_cache import CrossKV
    from stenoflow.model.protocol import SpeechModel

log = logging.getLogger(__name__)

SAMPLE_RATE = 16000
HOP_LENGTH = 160
N_FRAMES = 3000  # mel frames in a 30 s window
INPUT_STRIDE = 2  # mel frames per encoder position (and per timestamp step of 20 ms)


@dataclass(frozen=True)
class TranscribeOptions:
    language: str | None = None  # None: detect from the first 30 s
    task: str = "transcribe"
    beam_size: int | None = 5  # None or 1: greedy
    best_of: int = 5  # samples per fallback temperature > 0
    patience: float | None = None
    length_penalty: float | None = None
    temperature: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)  # tried in order on failure
    compression_ratio_threshold: float | None = 2.4  # above: a repetition loop, retry hotter
    log_prob_threshold: float | None = -1.0  # below: an unlikely transcript, retry hotter
    no_speech_threshold: float | None = 0.6  # above (and unlikely text): the window is silence
    condition_on_previous_text: bool = True
    prompt_reset_on_temperature: float = 0.5  # a hot fallback result is not used as context
    initial_prompt: str | None = None
    prefix: str | None = None
    suppress_tokens: str | tuple[int, ...] = SUPPRESS_NON_SPEECH
    suppress_blank: bool = True
    without_timestamps: bool = False
    max_initial_timestamp: float = 1.0
    word_timestamps: bool = False
    # Encode a window shorter than 30 s (a short file, or the last window) as speech ⊕ hush word
    # instead of padding it to 30 s: fewer encoder frames, and the model still stops.
    hush: bool = False
    # With a draft model (``transcribe(..., draft=...)``): tokens it proposes at a time, and whether
    # that number adapts to how many are accepted (see decoding.speculative.Lookahead).
    lookahead: int = 4
    adaptive_lookahead: bool = False
    # With a draft model and beam_size > 1: one row while the main model agrees with the draft and
    # its best token leads the second by this much (nats); the beam opens elsewhere.
    draft_gate: float = 1.0
    # With drafted tokens: typical acceptance's (epsilon, alpha) (seed 003 eq. 3; TYPICAL_PUBLISHED
    # are the paper's), which keeps likely drafted tokens the model would not have chosen itself:
    # faster, not greedy's text. None: greedy-exact.
    typical: tuple[float, float] | None = None
    # The precision the model runs in (float32, int8, ...): set to the model's by ``transcribe``,
    # so ``TranscriptionInfo.options`` says what ran; given, it must be the model's.
    compute: str | None = None

    def decoding(self, temperature: float) -> DecodingOptions:
        greedy_or_beam = temperature == 0
        return DecodingOptions(
            task=self.task,
            language=self.language,
            temperature=temperature,
            best_of=None if greedy_or_beam else self.best_of,
            beam_size=self.beam_size if greedy_or_beam and (self.beam_size or 1) > 1 else None,
            patience=self.patience if greedy_or_beam and (self.beam_size or 1) > 1 else None,
            length_penalty=self.length_penalty,
            prefix=self.prefix,
            suppress_tokens=self.suppress_tokens,
            suppress_blank=self.suppress_blank,
            without_timestamps=self.without_timestamps,
            max_initial_timestamp=self.max_initial_timestamp,
        )


@dataclass
class Word:
    word: str
    start: float
    end: float
    probability: float


@dataclass
class Segment:
    id: int
    seek: int
    start: float
    end: float
    text: str
    tokens: list[int]
    temperature: float
    avg_logprob: float
    compression_ratio: float
    no_speech_prob: float
    words: list[Word] | None = None

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass
class TranscriptionInfo:
    language: str
    language_probability: float
    duration: float  # seconds of audio
    options: TranscribeOptions
    all_language_probs: dict[str, float] | None = None
    model: dict[str, object] = field(default_factory=dict)  # name, format, compute, dims
    draft: dict[str, object] | None = None  # the draft model, as ``model``, when decoding speculatively
    # Counters summed over the windows decoded so far, filled as the segments are produced: encoder
    # and decoder seconds (encode_s, decode_s; a draft model's encoder counts as encoding), tokens
    # decoded, decoder forward passes, draft tokens offered and accepted.
    stats: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Drafting:
    """A draft model for one transcription: its own log-mel of the audio, windows on demand."""

    model: SpeechModel
    pair: DraftModel
    mel: torch.Tensor  # (n_mels of the draft, frames)

    def window(self, audio: np.ndarray, seek: int, size: int, hush: bool) -> DraftWindow:
        """The draft model's cross K/V of mel frames [seek, seek + size), encoded as the main
        model encodes them (speech and the draft's own hush word, or a padded 30 s window)."""
        features, _ = window_features(self.model, audio, self.mel, seek, size, hush)
        return DraftWindow(self.pair, self.model.whisper.decoder.cross_kv(features))


def decode_with_fallback(model: SpeechModel, cross: object, options: TranscribeOptions,
                         prompt: list[int] | None, language: str | None,
                         speech_s: float | None = None, draft: Drafter | None = None) -> DecodingResult:
    """Decode at each temperature in turn until the result is neither a loop nor unlikely.

    ``speech_s``: the window holds only this much speech (then the hush word, not 30 s of
    padding), so no timestamp may follow it, a row ends at a repetition loop and the loop is cut
    from the result, as in a streaming round: without the padding's silence the decoder has no
    place to stop after the speech but end-of-text, and a row that misses it repeats itself.
    """
    result: DecodingResult | None = None
    for t in options.temperature:
        decoding = replace(options.decoding(t), prompt=prompt or None, language=language)
        if speech_s is not None:
            decoding = replace(decoding, max_timestamp=max(speech_s, 0.04), stop_loops=True)
        drafted = draft if t == 0 else None  # a draft model speeds up deterministic decoding only
        if drafted is not None and (options.beam_size or 1) > 1:
            decoding = replace(decoding, beam_gate=options.draft_gate)
        if drafted is not None:
            decoding = replace(decoding, typical=options.typical)
        result = DecodingTask(model.context, decoding).run(cross, draft=drafted)  # type: ignore[arg-type]
        too_repetitive = (options.compression_ratio_threshold is not None
                          and result.compression_ratio > options.compression_ratio_threshold)
        too_unlikely = options.log_prob_threshold is not None and result.avg_logprob < options.log_prob_threshold
        silent = (options.no_speech_threshold is not None and result.no_speech_prob > options.no_speech_threshold
                  and too_unlikely)
        if silent or not (too_repetitive or too_unlikely):
            break
        log.debug("fallback from temperature %.1f (compression %.2f, avg logprob %.2f)",
                  t, result.compression_ratio, result.avg_logprob)
    assert result is not None, "at least one temperature"
    loop = text_loop_start(result.tokens, model.tokenizer.eot) if speech_s is not None else None
    if loop is not None:  # the row that looped ended there: keep the text it heard before
        log.debug("window loops from token %d: kept the text before it", loop)
        result = replace(result, tokens=result.tokens[:loop])
    return result


def split_segments(tokens: list[int], timestamp_begin: int, time_offset: float, segment_frames: int
                   ) -> tuple[list[tuple[float, float, list[int]]], int]:
    """Cut one window's tokens at consecutive timestamp pairs.

    Returns (start, end, tokens) per segment and how many mel frames to advance ``seek``: to the
    last closed segment, or the whole window when the output ends on a single timestamp.
    """
    is_ts = [t >= timestamp_begin for t in tokens]
    single_ending = len(tokens) >= 2 and is_ts[-2:] == [False, True]
    cuts = [i + 1 for i in range(len(tokens) - 1) if is_ts[i] and is_ts[i + 1]]
    out: list[tuple[float, float, list[int]]] = []
    if cuts:
        if single_ending:
            cuts.append(len(tokens))
        last = 0
        for cut in cuts:
            piece = tokens[last:cut]
            start = time_offset + (piece[0] - timestamp_begin) * TIME_PRECISION
            end = time_offset + (piece[-1] - timestamp_begin) * TIME_PRECISION
            out.append((start, end, piece))
            last = cut
        advance = segment_frames if single_ending else (tokens[last - 1] - timestamp_begin) * INPUT_STRIDE
        return out, advance
    duration = segment_frames * HOP_LENGTH / SAMPLE_RATE
    stamps = [t for t in tokens if t >= timestamp_begin]
    if stamps and stamps[-1] != timestamp_begin:
        duration = (stamps[-1] - timestamp_begin) * TIME_PRECISION
    return [(time_offset, time_offset + duration, tokens)], segment_frames


def transcribe(model: SpeechModel, audio: np.ndarray, options: TranscribeOptions,
               progress: Callable[[float, float], None] | None = None, draft: SpeechModel | MedusaHeads | None = None
               ) -> tuple[Iterator[Segment], TranscriptionInfo]:
    """Segments of ``audio`` (16 kHz mono float32), lazily, and the info that describes the run.

    ``draft``: a smaller model (any vocabulary) or Medusa heads bound to this model that propose
    tokens for it to verify (speculative decoding); at beam size 1 without typical acceptance the
    text is the same as without them.
    """
    tok = model.tokenizer
    refuse_english_only(model, options.task, options.language)
    if options.compute not in (None, model.compute):
        raise ValueError(f"compute={options.compute!r} asked of a model loaded in {model.compute}: "
                         "load it in that precision (load_model(..., compute=...))")
    options = replace(options, compute=model.compute)
    if options.hush and model.hush is None:
        raise ValueError(f"no hush word for model {model.name!r}: train one with `stenoflow train-hush` "
                         "or put hush.npz beside the model")
    mel = model.features(audio, padding=N_FRAMES * HOP_LENGTH)
    content_frames = mel.shape[-1] - N_FRAMES
    duration = len(audio) / SAMPLE_RATE
    language, probs, first = options.language, None, None
    if not tok.multilingual:
        language = "en"
    elif language is None:
        # The language is read from the first window's own encoder pass, which its decoding then
        # uses: one pass of the encoder, not one to detect and another to decode.
        first = _encode_window(model, audio, mel, 0, min(N_FRAMES, max(content_frames, 1)), options)
        language, probs = detect_language(model.context, first.cross)
    info = TranscriptionInfo(language=language, language_probability=(probs or {}).get(language, 1.0),
                             duration=duration, options=options, all_language_probs=probs,
                             model=model.describe(), draft=_describe(draft))
    inexact = None if draft is None else speculation_inexact(model.compute, options, isinstance(draft, MedusaHeads))
    if inexact is not None:
        log.warning("speculative decoding may not give greedy's text token for token here: %s", inexact)
    drafting: Drafting | MedusaHeads | None = draft if isinstance(draft, MedusaHeads) else None
    if draft is not None and not isinstance(draft, MedusaHeads):
        lookahead = Lookahead(initial=options.lookahead, maximum=max(options.lookahead, Lookahead.maximum),
                              adaptive=options.adaptive_lookahead)
        draft_mel = mel if draft.dims.n_mels == model.dims.n_mels else \
            draft.features(audio, padding=N_FRAMES * HOP_LENGTH)
        drafting = Drafting(draft, DraftModel.pair(draft.context, tok, lookahead), draft_mel)
    return _windows(model, audio, mel, content_frames, options, language, progress, info, drafting, first), info


def speculation_inexact(compute: str, options: TranscribeOptions, medusa: bool) -> str | None:
    """Why greedy decoding with drafted tokens in ``compute`` may part from plain greedy decoding
    (None: it cannot). Beam search and typical acceptance with a draft are not meant to be exact.

    In int8 a verification pass over up to ``FEW_ROWS`` positions computes each position's
    logits bit for bit as a one-row step does (``model.quant``); longer passes, and float
    products, whose sums run in an order that depends on the number of rows, agree only up to
    rounding, which can flip a near-tie between the two best tokens."""
    if (options.beam_size or 1) > 1 or options.typical is not None:
        return None
    if not compute.startswith("int8"):
        return (f"in {compute} a verification pass rounds its products differently from a one-token step "
                "(near-ties can flip); int8 is exact")
    longest = max(options.lookahead, Lookahead.maximum) if options.adaptive_lookahead else options.lookahead
    if not medusa and longest + 1 > FEW_ROWS:
        return (f"a lookahead of up to {longest} tokens verifies more than {FEW_ROWS} positions in a pass, "
                f"which int8 rounds differently from one-token steps; at most {FEW_ROWS - 1} is exact")
    return None


def _describe(draft: SpeechModel | MedusaHeads | None) -> dict[str, object] | None:
    if isinstance(draft, MedusaHeads):
        return {"medusa": draft.shape.kind, "heads": draft.shape.heads, "shortlist": len(draft.vocab)}
    return draft.describe() if draft is not None else None


def window(mel: torch.Tensor, seek: int, size: int) -> torch.Tensor:
    """Mel frames [seek, seek+size) zero-padded to a full 30 s window, as the model was trained."""
    piece = mel[:, seek : seek + size]
    if piece.shape[-1] < N_FRAMES:
        piece = torch.nn.functional.pad(piece, (0, N_FRAMES - piece.shape[-1]))
    return piece


SILENCE_PEAK = 10 ** (-70 / 20)  # a window whose samples all stay below -70 dBFS holds no speech


def _digital_silence(samples: np.ndarray) -> bool:
    return samples.size == 0 or float(np.abs(samples).max()) < SILENCE_PEAK


@dataclass(frozen=True)
class EncodedWindow:
    """A window's encoder pass: its output, the decoder's cross-attention keys and values over it,
    the seconds of speech before the hush word (None: no hush word), and the seconds it took."""

    seek: int
    size: int
    features: torch.Tensor
    cross: CrossKV
    speech_s: float | None
    seconds: float


def _encode_window(model: SpeechModel, audio: np.ndarray, mel: torch.Tensor, seek: int, size: int,
                   options: TranscribeOptions) -> EncodedWindow:
    """The encoder pass over mel frames [seek, seek+size) (see :func:`window_features`)."""
    started = time.perf_counter()
    features, speech_s = window_features(model, audio, mel, seek, size, options.hush)
    cross = model.whisper.decoder.cross_kv(features)
    return EncodedWindow(seek, size, features, cross, speech_s, time.perf_counter() - started)


def window_features(model: SpeechModel, audio: np.ndarray, mel: torch.Tensor, seek: int, size: int,
                    hush: bool) -> tuple[torch.Tensor, float | None]:
    """The encoder output of mel frames [seek, seek+size) and the seconds of speech before the
    hush word: a window shorter than 30 s hears the model's hush word after its speech where
    ``hush`` (and the model has one; None seconds where not), else silence."""
    if hush and size < N_FRAMES and model.hush is not None:
        speech = audio[seek * HOP_LENGTH : (seek + size) * HOP_LENGTH]
        return model.encode(model.features(model.hush.append(speech))), speech.size / SAMPLE_RATE
    return model.encode(window(mel, seek, size)), None


def _windows(model: SpeechModel, audio: np.ndarray, mel: torch.Tensor, content_frames: int, options: TranscribeOptions,
             language: str, progress: Callable[[float, float], None] | None, info: TranscriptionInfo,
             drafting: Drafting | MedusaHeads | None, first: EncodedWindow | None = None) -> Iterator[Segment]:
    tok = model.tokenizer.with_options(language if model.tokenizer.multilingual else None, options.task)
    tb = tok.timestamp_begin
    all_tokens: list[int] = []
    prompt_reset = 0
    if options.initial_prompt:
        all_tokens.extend(tok.encode(" " + options.initial_prompt.strip()))
    seek = 0
    last_end = 0.0
    next_id = 0
    total = content_frames * HOP_LENGTH / SAMPLE_RATE
    while seek < content_frames:
        time_offset = seek * HOP_LENGTH / SAMPLE_RATE
        size = min(N_FRAMES, content_frames - seek)
        if _digital_silence(audio[seek * HOP_LENGTH : (seek + size) * HOP_LENGTH]):
            # Whisper "hears" words in pure silence ("You", "Thank you."), often with a
            # log-probability that passes the no-speech rule: a silent window is not decoded.
            seek += size
            if progress:
                progress(min(seek * HOP_LENGTH / SAMPLE_RATE, total), total)
            continue
        known = first is not None and (first.seek, first.size) == (seek, size)
        encoded = first if known else _encode_window(model, audio, mel, seek, size, options)
        features, cross, speech_s = encoded.features, encoded.cross, encoded.speech_s
        prompt = all_tokens[prompt_reset:] if options.condition_on_previous_text else None
        draft = drafting.window(audio, seek, size, options.hush) if isinstance(drafting, Drafting) else drafting
        started = time.perf_counter()
        result = decode_with_fallback(model, cross, options, prompt, language, speech_s, draft)
        _count(info.stats, result.stats, encode_s=encoded.seconds, decode_s=time.perf_counter() - started,
               tokens=len(result.tokens) + 1)
        if (options.no_speech_threshold is not None and result.no_speech_prob > options.no_speech_threshold
                and (options.log_prob_threshold is None or result.avg_logprob < options.log_prob_threshold)):
            seek += size
            if progress:
                progress(min(seek * HOP_LENGTH / SAMPLE_RATE, total), total)
            continue
        pieces, advance = split_segments(result.tokens, tb, time_offset, size)
        segments: list[Segment] = []
        for start, end, toks in pieces:
            text_tokens = [t for t in toks if t < tok.eot]
            text = tok.decode(text_tokens)
            start = max(start, last_end)
            end = min(max(end, start), time_offset + size * HOP_LENGTH / SAMPLE_RATE)
            if not text.strip() or end <= start:
                continue
            segments.append(Segment(next_id, seek, round(start, 3), round(end, 3), text, toks, result.temperature,
                                    result.avg_logprob, result.compression_ratio, result.no_speech_prob))
            next_id += 1
            last_end = end
        if options.word_timestamps and segments:
            last_end = _add_word_timings(model, tok, segments, features, size, time_offset, segments[0].start)
        for s in segments:  # with their timestamp tokens, as the model saw such prompts in training
            all_tokens.extend(s.tokens)
        if not options.condition_on_previous_text or result.temperature > options.prompt_reset_on_temperature:
            prompt_reset = len(all_tokens)
        seek += max(advance, 1)
        if progress:
            progress(min(seek * HOP_LENGTH / SAMPLE_RATE, total), total)
        yield from segments


def _count(stats: dict[str, float], *counters: dict[str, float], **more: float) -> None:
    """Add a window's counters to the run's (encoder and decoder seconds, passes, drafts...)."""
    for counter in (*counters, more):
        for key, value in counter.items():
            stats[key] = stats.get(key, 0.0) + value


def _add_word_timings(model: SpeechModel, tok: object, segments: list[Segment], features: torch.Tensor,
                      num_frames: int, time_offset: float, not_before: float) -> float:
    """Align all text of the window at once, hand each segment its words, and let the words set
    the segment bounds (they are finer than the 20 ms timestamp tokens). Returns the last word end."""
    text_tokens = [[t for t in s.tokens if t < model.tokenizer.eot] for s in segments]
    flat = [t for ts in text_tokens for t in ts]
    timings = find_alignment(model.whisper, tok, flat, features, num_frames, model.alignment_heads)  # type: ignore[arg-type]
    window_end = time_offset + num_frames * HOP_LENGTH / SAMPLE_RATE
    last = not_before
    k = 0
    for seg, toks in zip(segments, text_tokens):
        words: list[Word] = []
        used = 0
        while k < len(timings) and used < len(toks):
            w = timings[k]
            used += len(w.tokens)
            start = min(max(time_offset + w.start, last), window_end)
            end = min(max(time_offset + w.end, start), window_end)
            words.append(Word(w.word, round(start, 3), round(end, 3), round(w.probability, 4)))
            last = end
            k += 1
        seg.words = words
        if words:
            seg.start, seg.end = words[0].start, max(words[-1].end, words[0].start)
    return last
