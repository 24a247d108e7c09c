"""One round of a live stream, in two stages that a pipeline may run on different executors.

A live buffer holds the audio of the words not yet committed and, before them, a few seconds of
committed speech (context for the model). A round hears it like this:

* stage A, ``encode``: log-mel of the buffer padded with silence to a short window (or ⊕ the
  hush word), the encoder, the cross-attention keys/values, and the prompt (the committed text
  before the buffer) through the decoder. None of it depends on what the previous round is
  still deciding.
* stage B, ``decode``: the draft (the committed words still in the buffer, then the previous
  round's unconfirmed words) is verified in one pass; decoding goes on greedily from where the
  model parts with it, and with a confidence gate opens the beam only where the model is unsure
  or disagrees. The decoder records the alignment heads' attention as it goes, which gives the
  words their times (DTW, with no second pass) and each token the audio position it was heard
  at (for the attention-guided commit policy).

The words already committed are heard again, as in Whisper-Streaming (a model that re-reads its
own past words with more audio stays consistent, where one forced to continue a committed
mistake repeats it), but they cost one pass, not one per token.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import accumulate
from typing import TYPE_CHECKING

import numpy as np
import torch

from stenoflow.audio.features import HOP_LENGTH
from stenoflow.audio.io import WINDOW_S
from stenoflow.decoding.options import DecodingOptions, DecodingResult
from stenoflow.decoding.reference import TokenKinds
from stenoflow.decoding.repetition import text_loop
from stenoflow.decoding.speculative import DraftModel, DraftWindow
from stenoflow.decoding.task import DecodingTask, Prefilled, detect_language
from stenoflow.decoding.timing import (
    FRAMES_PER_SECOND,
    attended_positions,
    forced_attention,
    timings_from_attention,
)
from stenoflow.model.kv_cache import CrossKV
from stenoflow.model.reuse import EncoderReuse
from stenoflow.streaming.events import Dropped, TimedWord
from stenoflow.streaming.rules import dropped
from stenoflow.tokenizer import TIME_PRECISION

if TYPE_CHECKING:
    from stenoflow.model.protocol import SpeechModel
    from stenoflow.streaming.options import StreamOptions

log = logging.getLogger(__name__)

SAMPLE_RATE = 16000
MIN_SAMPLE_LEN = 32  # tokens a round may write however short its buffer
TOKENS_PER_S = 12  # ... plus this many per second of it (speech runs at 3-5 tokens a second)
# A round with a draft writes at most this many tokens more than the draft, plus TOKENS_PER_S per
# second of the audio the draft was not heard over. Where the audio ends mid-phrase, Whisper
# writes on past it ("... you have to be careful. You can't just go to the computer."), up
# to the loop rule or the length limit, one pass a token: words past the end, which no round
# commits.
DRAFT_SLACK = 8
CUT_SLACK_S = 0.1  # a word starting this little before a cut is still in the buffer (DTW times)
MIN_COPY_S = 0.1  # a copy of a loop DTW lays over less audio than this was not heard (see heard_copies)
UNHEARD_RUN = 3  # words the alignment heads place at one instant that were not heard (see unheard_run)


@dataclass(frozen=True)
class RoundInput:
    """What the session hands stage A: a buffer snapshot and the committed text before it."""

    samples: np.ndarray  # the buffer, float32 16 kHz
    offset: float  # absolute time of samples[0] (s)
    prompt: tuple[int, ...]  # tokens of the committed words before the buffer
    committed_before: int = 0  # committed words of the stream before the buffer (session bookkeeping)
    # The session's voice activity model found speech in it: the decoder's own no-speech guess
    # (trained on 30 s windows, and unsure of a few seconds of an unfamiliar voice) does not
    # silence it unless sure (``no_speech_skip``).
    speech: bool = False
    # Where stretches of speech start in it (absolute s, the buffer's start left out); None: not known.
    onsets: tuple[float, ...] | None = None
    language: str | None = None  # the stream's language where it detects it (None: not known yet)
    language_from: float | None = None  # absolute time its language is read from (None: its start)

    @property
    def end(self) -> float:
        return self.offset + self.samples.size / SAMPLE_RATE

    @property
    def duration(self) -> float:
        return self.samples.size / SAMPLE_RATE


@dataclass
class Encoded:
    """Stage A's result: the prefilled decoder over the encoded buffer."""

    input: RoundInput
    prefilled: Prefilled
    encoder_frames: int  # mel frames of the window the encoder heard
    stats: dict[str, float] = field(default_factory=dict)
    draft: DraftWindow | None = None  # the draft model's own encoding of the buffer, if it drafts
    final: bool = False  # encoded with ``pad``: a stream's final hearing, which no later round repeats
    language: str | None = None  # what it is decoded in (None: the options' language)
    # Whisper's language probabilities over the speech the round asks about (see RoundInput.language_from)
    language_probs: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class HeardWord:
    """A word of a round: absolute times, its text tokens, and where its tokens were heard."""

    word: TimedWord
    tokens: tuple[int, ...]
    heard_at: float  # absolute time of the latest audio position its tokens attend to most
    span: tuple[int, int] = (0, 0)  # where its tokens lie in the round's decoded tokens
    # the same for its spoken tokens alone, where punctuation after them attends to later audio
    spoken_at: float | None = None  # (None: where heard_at is)


@dataclass(frozen=True)
class Heard:
    """Stage B's result: the words of the buffer, in order."""

    words: tuple[HeardWord, ...]
    end: float  # absolute end of the audio the round heard
    ended: bool  # the decoder chose end-of-text after the last word (no loop, no length limit)
    silent: bool  # the round judged the buffer silent
    stats: Mapping[str, float] = field(default_factory=dict)
    offset: float = 0.0  # absolute start of the audio the round heard
    tokens: tuple[int, ...] = ()  # what it decoded: text and timestamp tokens (loops cut)
    said_repeats: bool = False  # the text ends at copies of a phrase each said over audio of its own
    dropped: tuple[Dropped, ...] = ()  # words it wrote and set aside (see stenoflow.streaming.rules)

    def draft(self, start: float, timestamp_begin: int, until: float) -> tuple[tuple[int, ...], int]:
        """This round's tokens from its first word at or after absolute time ``start``, as the
        draft of a round whose buffer starts there (timestamps moved to the new start), and how
        many of them come before its first word that ends after absolute time ``until`` (the words
        a round whose audio allows commits up to ``until`` may commit)."""
        first = next((w for w in self.words if w.word.start >= start - CUT_SLACK_S), None)
        if first is None:
            return (), 0
        begin = first.span[0]
        if begin > 0 and self.tokens[begin - 1] >= timestamp_begin:
            begin -= 1  # the segment's opening timestamp
        shift = round((start - self.offset) / TIME_PRECISION)
        out = [t if t < timestamp_begin else max(timestamp_begin, t - shift) for t in self.tokens[begin:]]
        opened = 0 if out and out[0] >= timestamp_begin else 1  # a timestamp put before the tokens
        late = next((w.span[0] for w in self.words if w.span[0] >= begin and w.word.end > until), len(self.tokens))
        return tuple(out if not opened else [timestamp_begin, *out]), late - begin + opened


class LiveRound:
    """The model side of a live round; holds no stream state, so stages may run anywhere."""

    def __init__(self, model: SpeechModel, options: StreamOptions) -> None:
        self.model = model
        self.options = options
        if options.hush and model.hush is None:
            raise ValueError(f"no hush word for model {model.name!r}: train one with `stenoflow train-hush` "
                             "or stream without hush")
        self.heads = model.medusa(options.medusa) if options.medusa else None
        self.draft_model = model.draft_model(options.speculative) if options.speculative else None
        self.pair = DraftModel.pair(self.draft_model.context, model.tokenizer) if self.draft_model else None
        self.kinds = TokenKinds(model.tokenizer)  # which tokens are punctuation (decoded once each)
        # the stream's last encoder pass, reused for the audio it heard (stage A only, in round order)
        self.reuse = EncoderReuse(options.encoder_reuse_s) if options.encoder_reuse_s else None

    # --- stage A ------------------------------------------------------------------------------
    @torch.inference_mode()
    def encode(self, inp: RoundInput, pad: bool = False) -> Encoded:
        """Encoder and prompt prefill for ``inp``; ``pad``: Whisper's 30 s window, not the hush
        word or a shorter window."""
        t0 = time.perf_counter()
        hush = bool(self.options.hush) and not pad
        window_s = WINDOW_S if pad else self.options.window_s
        mel = self.model.encoder_input(inp.samples, hush, window_s)
        cached = self.options.silence_cache and not hush and not pad  # the final hearing: the full pass
        spent: list[float] = []  # FLOPs of every encoder pass, the draft model's included
        cross = self.model.encode_cross(mel, inp.samples.size if cached else None, spent,
                                        self.reuse if cached else None, inp.offset)
        draft = None
        if self.draft_model is not None and self.pair is not None:  # the draft hears the buffer its own way
            d = self.draft_model
            heard = d.encoder_input(inp.samples, hush, window_s)
            draft = DraftWindow(self.pair, d.whisper.decoder.cross_kv(d.encode(heard, spent=spent)))
        t1 = time.perf_counter()
        probs: Mapping[str, float] = {}
        language = None
        if self.options.detects_language:
            first = round(max(0.0, (inp.language_from or inp.offset) - inp.offset) * FRAMES_PER_SECOND)
            probs = detect_language(self.model.context, cross.span(first, cross.n_audio))[1]
            language = inp.language or max(probs, key=probs.__getitem__)
        prefilled = DecodingTask(self.model.context, self._decoding(inp, language=language)).prefill(cross)
        t2 = time.perf_counter()
        stats = {"encoder_ms": 1000 * (t1 - t0), "prefill_ms": 1000 * (t2 - t1),
                 "prompt_tokens": float(len(inp.prompt)), "encoder_gflop": sum(spent) / 1e9}
        return Encoded(inp, prefilled, int(mel.shape[-1]), stats, draft, final=pad, language=language,
                       language_probs=probs)

    # --- stage B ------------------------------------------------------------------------------
    @torch.inference_mode()
    def decode(self, encoded: Encoded, draft: tuple[int, ...], hold: int = 0, min_tokens: int = 0,
               new_s: float | None = None) -> Heard:
        """Decode the encoded buffer with ``draft`` (text tokens expected from its start), holding
        its first ``hold`` tokens (see ``DecodingOptions.reference_hold``), with no end-of-text
        among the first ``min_tokens``. ``new_s``: seconds of audio at the buffer's end that the
        draft was not heard over, which bound how far the round writes past the draft (see
        ``DRAFT_SLACK``; None: only the buffer's length does). An encoded buffer may be decoded
        again (see ``continues``)."""
        inp = encoded.input
        options = replace(self._decoding(inp, draft, hold, new_s, encoded.language), min_tokens=min_tokens)
        result, heard, decoder_s, alignment_s = self._pass(encoded, options)
        passes = result.stats.get("forward_passes", 0.0)
        if heard.said_repeats and self.continues(encoded):
            # The loop rule ended the text at repeats that were said: the round goes on past them,
            # its text so far the draft, with loops judged only after it.
            text = sum(t < self.model.tokenizer.eot for t in result.tokens)
            options = replace(self._decoding(inp, tuple(result.tokens), language=encoded.language),
                              min_tokens=min_tokens, loops_from=text)
            result, heard, more_decoder_s, more_alignment_s = self._pass(encoded, options)
            passes += result.stats.get("forward_passes", 0.0)
            decoder_s, alignment_s = decoder_s + more_decoder_s, alignment_s + more_alignment_s
            log.debug("round decoded on past repeats that were said: %r", "".join(w.word.word for w in heard.words))
        stats = {**encoded.stats, "decoder_ms": 1000 * decoder_s, "alignment_ms": 1000 * alignment_s,
                 "encoder_mel_frames": float(encoded.encoder_frames), "audio_s": inp.duration,
                 "forward_passes": passes,
                 "beam_size": float(self.options.beam_size),
                 "beam_width_avg": result.stats.get("beam_width_avg", 1.0),
                 "reduced_beam_share": result.stats.get("reduced_beam_share", 0.0),
                 "draft_tokens": float(len(draft)), "draft_accepted": result.stats.get("draft_accepted", 0.0),
                 "gate_opened": result.stats.get("fallback_unsure", 0.0),
                 "no_speech_prob": result.no_speech_prob, "avg_logprob": result.avg_logprob,
                 "tokens": float(len(result.tokens))}
        return replace(heard, stats=stats)

    @torch.inference_mode()
    def settle(self, encoded: Encoded, beam_size: int) -> Heard:
        """Decode the encoded buffer once more with beam search of ``beam_size`` rows, with no draft,
        draft model or heads (their proposals would steer the beam): the last decoding of
        ``encoded`` (its cache then holds the beam's rows)."""
        options = replace(self._decoding(encoded.input, language=encoded.language), beam_size=beam_size)
        _, heard, decoder_s, alignment_s = self._pass(encoded, options, drafted=False)
        return replace(heard, stats={"settle_decoder_ms": 1000 * decoder_s, "settle_alignment_ms": 1000 * alignment_s})

    def _pass(self, encoded: Encoded, options: DecodingOptions,
              drafted: bool = True) -> tuple[DecodingResult, Heard, float, float]:
        """One decoding of ``encoded`` from its prefilled prompt (``drafted``: with the round's draft
        model or Medusa heads, if any): the result, what it heard, and the seconds spent decoding
        and aligning."""
        t0 = time.perf_counter()
        encoded.prefilled.inference.rollback(len(encoded.prefilled.tokens))
        cross = encoded.prefilled.inference.cross
        result = DecodingTask(self.model.context, options).run(cross, encoded.prefilled,
                                                               draft=(encoded.draft or self.heads) if drafted else None)
        t1 = time.perf_counter()
        heard = self._heard(result, encoded.input, cross, encoded.final, encoded.language)
        return result, heard, t1 - t0, time.perf_counter() - t1

    def continues(self, encoded: Encoded) -> bool:
        """Whether ``encoded`` may be decoded again after a decoding: one row, no draft model
        or heads whose own state a decoding moved on."""
        return (encoded.draft is None and self.heads is None and self.options.beam_size == 1
                and encoded.prefilled.inference.cache.batch == 1)

    def _decoding(self, inp: RoundInput, draft: tuple[int, ...] = (), hold: int = 0,
                  new_s: float | None = None, language: str | None = None) -> DecodingOptions:
        o = self.options
        sample_len = MIN_SAMPLE_LEN + round(TOKENS_PER_S * inp.duration)
        if draft and new_s is not None:
            sample_len = min(sample_len, len(draft) + DRAFT_SLACK + round(TOKENS_PER_S * max(new_s, 0.0)))
        return DecodingOptions(
            language=language or o.language,
            task=o.task,
            beam_size=o.beam_size if o.beam_size > 1 else None,
            prompt=list(inp.prompt) or None,
            max_timestamp=max(inp.duration, 0.04),  # nothing after the buffer's end
            stop_loops=True,
            sample_len=sample_len,
            reference=draft or None,
            reference_mode="draft" if draft else None,
            beam_gate=o.gate,
            beam_close=o.gate_close,
            reference_hold=hold if draft else 0,
            record_alignment=True,
        )

    def _heard(self, result: DecodingResult, inp: RoundInput, cross: CrossKV, final: bool,
               language: str | None) -> Heard:
        o = self.options
        end = inp.end
        unsure = result.no_speech_prob > o.no_speech_threshold and result.avg_logprob < o.log_prob_threshold
        silent = (unsure and not inp.speech) or result.no_speech_prob > o.no_speech_skip
        seq = list(result.tokens)
        eot = self.model.tokenizer.eot
        loop = text_loop(seq, eot)
        if silent or not any(t < eot for t in seq):
            return Heard((), end, result.ended and loop is None, silent, offset=inp.offset)
        # Row i of the recorded attention predicts seq[i] (the last row end-of-text); word timing
        # reads the rows that predict text, not timestamps.
        rows = [i for i, t in enumerate(seq) if t < eot] + [len(seq)]
        tokens = [seq[i] for i in rows[:-1]]
        if result.alignment is not None and result.alignment.shape[0] > len(seq):
            alignment = result.alignment[rows]
        else:
            alignment = self._teacher_forced_alignment(cross, tokens, language)
        alignment = alignment.permute(1, 0, 2)  # (heads, rows, positions)
        timings = timings_from_attention(alignment, self.model.tokenizer, tokens, inp.samples.size // HOP_LENGTH)
        heard_at = attended_positions(alignment)
        logprobs = result.token_logprobs
        token_probs = [float(np.exp(logprobs[i])) for i in rows[:-1]] if logprobs is not None else None
        words: list[HeardWord] = []
        index = 0
        for w in timings:
            first, index = index, index + len(w.tokens)
            at = max(heard_at[first:index]) / FRAMES_PER_SECOND
            spoken = self._spoken_at(tokens[first:index], heard_at[first:index]) / FRAMES_PER_SECOND
            p = float(np.mean(token_probs[first:index])) if token_probs is not None else float("nan")
            words.append(HeardWord(TimedWord(w.word, inp.offset + min(w.start, inp.duration),
                                             inp.offset + min(w.end, inp.duration), p, language),
                                   tuple(tokens[first:index]), inp.offset + at, (rows[first], rows[index - 1] + 1),
                                   inp.offset + spoken if spoken < at else None))
        said_last = False  # the text ends at repeats that were said (the loop rule may have ended it)
        drops: list[Dropped] = []
        while loop is not None:
            k, said = counted_copies(words, tokens, rows.index(loop[0]), loop[1], inp.onsets)
            if said:
                # Every copy lies over audio of its own ("words words words words"): they were said.
                # The text after them is heard too; where the loop rule ended the text at them, the
                # round is decoded on past them (see ``decode``).
                said_last = k == len(words)
                after = sum(len(w.tokens) for w in words[:k])  # text tokens up to the copies' end
                later = text_loop(tokens[after:], eot) if k < len(words) else None
                loop = None if later is None else (rows[after + later[0]], later[1])
                continue
            log.debug("round output loops from %r: kept %r", "".join(w.word.word for w in words[k:]),
                      "".join(w.word.word for w in words[:k]))
            if k < len(words):
                drops.append(dropped("loop", [w.word for w in words[k:]], final))
            seq = seq[: words[k].span[0]] if k < len(words) else seq
            words = words[:k]
            break
        # Like a loop, words that were not heard end what the round heard, unless no later round
        # hears this audio again.
        found = None if final else unheard_run(words, lambda at: at < end - o.margin_s)
        run = None if found is None else found[0]
        if run is not None:
            log.debug("round output has %r at one instant: kept the words before it",
                      "".join(w.word.word for w in words[run:]))
            drops.append(dropped("instant-run", [w.word for w in words[run:]], final))
            seq = seq[: words[run].span[0]]
            words = words[:run]
        ended = result.ended and loop is None and run is None and not said_last
        return Heard(tuple(words), end, ended, False, offset=inp.offset, tokens=tuple(seq),
                     said_repeats=said_last and run is None, dropped=tuple(drops))

    def _spoken_at(self, tokens: Sequence[int], positions: Sequence[int]) -> int:
        """The latest position a word's spoken tokens attend to most (a word of punctuation
        alone: its own). A sentence's closing punctuation may attend to the silence after it,
        and the more of it a round hears, the further (see :func:`stenoflow.streaming.word_rules.where_spoken`)."""
        spoken = [at for t, at in zip(tokens, positions, strict=True) if not self.kinds.skippable(t)]
        return max(spoken or positions)

    def _teacher_forced_alignment(self, cross: CrossKV, tokens: list[int], language: str | None) -> torch.Tensor:
        """Attention rows for ``tokens`` from one more pass (after a beam search, whose rows were
        not kept): (len(tokens) + 1, heads, positions)."""
        model = self.model
        tok = model.tokenizer.with_options(language or self.options.language if model.is_multilingual else None,
                                           self.options.task)
        return forced_attention(model.whisper, cross, [*tok.sot_sequence, tok.no_timestamps], tokens,
                                model.alignment_heads)[0]


def heard_copies(words: Sequence[HeardWord], tokens: Sequence[int], start: int, unit: int) -> int:
    """How many of ``words`` (written with the text ``tokens``) to keep where the text loops:
    its second copy starts at ``tokens[start]``, each copy ``unit`` tokens long. The decoder
    loops where it has lost its place, and writes the copies at an instant: those are dropped,
    with all after them. But a word said again and again alone ("Again. ... Again. ... Again.")
    is written as a loop too, and there DTW gives each copy audio of its own: such copies are
    kept (the session holds back one whose audio holds no speech: see
    :func:`stenoflow.streaming.word_rules.silent_copy_at`). A copy with a word DTW lays over no audio
    at all was not heard, however long the copy: "2, 0, 9" said once was written three times,
    the second copy's "2" over the end of the "9" said, its ", 0, 9" at one instant. The copy
    before the loop always is kept."""
    return counted_copies(words, tokens, start, unit)[0]


def counted_copies(words: Sequence[HeardWord], tokens: Sequence[int], start: int, unit: int,
                   onsets: Sequence[float] | None = None) -> tuple[int, bool]:
    """:func:`heard_copies`, and whether every copy was said: each lies over audio of its own,
    and the text after them (if any) is no further copy. Such a run is speech ("words words
    words words. Um, and that should be all."), not a loop, however many copies it holds.

    Where the copies were not all said, the decoder was looping, and a copy is kept only where
    speech starts inside it (``onsets``: absolute times where stretches of speech start; None:
    not known). DTW ends a word said alone early and lays the next copy over the rest of the
    same saying: "Umbrella." heard at the end of a buffer was written four times, the second
    copy over the word's last third, the others at an instant, and committed twice."""
    ranges = list(accumulate((len(w.tokens) for w in words), initial=0))
    # A loop's copies may start mid-word (". Enter" for "Enter. Enter."): counted from the next
    # word start instead, they are the same copies; text no word start divides is cut as it lies.
    aligned = next((r for r in ranges if r >= start), None) if ranges[-1] == len(tokens) else None
    if aligned is None or aligned >= start + unit:
        return next((i for i, r in enumerate(ranges) if r > start), len(ranges)) - 1, False
    k, said = _copies(words, tokens, ranges, aligned, unit, None)
    if said or onsets is None:
        return k, said
    return _copies(words, tokens, ranges, aligned, unit, onsets)


def _copies(words: Sequence[HeardWord], tokens: Sequence[int], ranges: Sequence[int], start: int, unit: int,
            onsets: Sequence[float] | None) -> tuple[int, bool]:
    """How many words up to the last copy from ``tokens[start]`` on that lies over audio of its
    own (and, given ``onsets``, has speech start inside it), and whether no copy follows."""
    k = ranges.index(start)
    while start + unit in ranges and tokens[start : start + unit] == tokens[start - unit : start]:
        last = ranges.index(start + unit) - 1
        copy = words[k : last + 1]
        lo, hi = copy[0].word.start, copy[-1].word.end
        if hi - lo < MIN_COPY_S or any(w.word.end <= w.word.start for w in copy):
            return k, False
        if onsets is not None and not any(lo <= t < hi for t in onsets):
            return k, False
        k, start = last + 1, start + unit
    return k, tokens[start : start + unit] != tokens[start - unit : start]


def unheard_run(words: Sequence[HeardWord], unheard: Callable[[float], bool]) -> tuple[int, int] | None:
    """Where (start and stop index) the first run of ``UNHEARD_RUN`` or more words lies that the
    alignment heads place at one instant for which ``unheard`` holds, or None. Nobody says three
    words in no time: the decoder wrote them while its attention stood still, most often a copy
    of what it had just heard ("It costs $17.67. It costs $17.67.", the second at one instant,
    0.9 s before the end of the audio), and their times then say they are new speech. The loop
    rule misses such copies (two or three of a short phrase). A round leaves runs at the end of
    its audio alone: words squeezed against it are the usual output for speech heard in part,
    and no round commits words there; the final hearing leaves runs over speech alone (see
    :meth:`stenoflow.streaming.live.LiveSession._spoken`)."""
    i = 0
    while i < len(words):
        instant = words[i].word.start
        j = i
        while j < len(words) and words[j].word.start == words[j].word.end == instant:
            j += 1
        if j - i >= UNHEARD_RUN and unheard(instant):
            return i, j
        i = max(j, i + 1)
    return None
