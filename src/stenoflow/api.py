"""The Python API: ``load_model`` and the ``Model`` it returns.

A ``Model`` owns the network, its tokenizer and what its weight file said (alignment heads,
non-speech tokens). It is read-only after loading, so one model can serve many transcriptions
and streaming sessions at once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import fields, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor

from stenoflow.audio.features import HOP_LENGTH, log_mel_spectrogram
from stenoflow.audio.hush import HushWord, find_hush
from stenoflow.audio.io import N_SAMPLES, SAMPLE_RATE, WINDOW_S, load_audio, validate_samples
from stenoflow.decoding.options import DecodingOptions, DecodingResult
from stenoflow.decoding.task import DecodingTask, detect_language
from stenoflow.decoding.transcribe import (
    Segment,
    TranscribeOptions,
    TranscriptionInfo,
    transcribe,
    window,
)
from stenoflow.model.build import build_whisper, to_device
from stenoflow.model.compute import resolve_compute
from stenoflow.model.context import DecoderContext
from stenoflow.model.kv_cache import CrossKV
from stenoflow.model.medusa import MedusaHeads, find_medusa, load_medusa
from stenoflow.model.reuse import EncoderReuse
from stenoflow.model.silence import SilenceCache
from stenoflow.model.whisper import Whisper
from stenoflow.weights.built import load_built, load_tokenizer
from stenoflow.weights.loaded import LoadedWeights
from stenoflow.weights.registry import bundled_tokenizer_file, default_alignment_heads

if TYPE_CHECKING:
    from stenoflow.streaming.events import StreamingSession
    from stenoflow.streaming.options import StreamOptions
    from stenoflow.utterance.offload import OffloadOptions
    from stenoflow.utterance.options import UtteranceOptions
    from stenoflow.utterance.session import Utterance, UtteranceSession

log = logging.getLogger(__name__)

# Least silence after the samples in a window shorter than Whisper's: the model hears where the
# speech ends from the silence after it (as in its own 30 s windows), so a long input in a short
# window is extended rather than left with little or none.
MIN_SILENCE_S = 5.0
MIN_SILENCE_SAMPLES = round(MIN_SILENCE_S * SAMPLE_RATE)


class Model:
    def __init__(self, weights: LoadedWeights, name: str, device: str = "cpu", compute: str | None = None,
                 whisper: Whisper | None = None, cache_dir: Path | None = None) -> None:
        """``whisper``: the network already built in ``compute`` on the CPU (a stored build), else
        it is built from ``weights``. ``compute``: default :func:`default_compute` of ``device``.
        ``cache_dir``: the cache root that keeps the repaired tokenizer (default: the user's)."""
        compute = resolve_compute(device, compute)
        self.name = name
        self.device = torch.device(device)
        self.compute = compute
        self.dims = weights.dims
        self.weights_info = {"source": weights.source, "format": weights.format}
        # The stored build this network was mapped from (stenoflow.weights.built), or None: built here.
        self.built_from: str | None = str(weights.extra["built_cache"]) if "built_cache" in weights.extra else None
        if whisper is None:
            whisper = build_whisper(weights.dims, weights.state_dict, compute)
        self.whisper = to_device(whisper, self.device)
        tokenizer_file = weights.tokenizer_file or bundled_tokenizer_file(weights.dims.n_vocab)
        self.tokenizer = load_tokenizer(tokenizer_file, weights.dims.is_multilingual, cache_dir)
        non_speech = weights.suppress_ids or self.tokenizer.non_speech_tokens
        self.alignment_heads = weights.alignment_heads or default_alignment_heads(weights.dims)
        self.context = DecoderContext(self.whisper, self.tokenizer, tuple(non_speech), tuple(self.alignment_heads))
        self.hush: HushWord | None = find_hush(name, Path(weights.source), compute)
        self.silence = SilenceCache(self.whisper.encoder)  # encoder passes over padding, for live rounds
        self._medusa: dict[str, MedusaHeads] = {}  # loaded heads by kind or path
        self._drafts: dict[str, Model] = {}  # loaded draft models by name or path

    @property
    def is_multilingual(self) -> bool:
        return self.dims.is_multilingual

    def describe(self) -> dict[str, object]:
        return {"name": self.name, **self.weights_info, "compute": self.compute, "device": str(self.device),
                "dims": self.dims.to_dict()}

    # --- building blocks ------------------------------------------------------------------
    def features(self, audio: np.ndarray | Tensor, padding: int = 0) -> Tensor:
        """Log-mel (n_mels, frames) of 16 kHz mono samples, with ``padding`` zero samples appended."""
        return log_mel_spectrogram(audio, n_mels=self.dims.n_mels, padding=padding, device=self.device)

    def encoder_input(self, samples: np.ndarray, hush: bool = True, window_s: float = WINDOW_S) -> Tensor:
        """The log-mel the encoder hears for a short input: ``samples`` ⊕ the hush word (asked for,
        the model has one and it fits in 30 s), else the samples padded with silence to a window of
        ``window_s`` seconds (30: Whisper's own window; a shorter one is extended to leave at least
        MIN_SILENCE_S of silence after the samples)."""
        if hush and self.hush is not None and samples.size + self.hush.samples.size <= N_SAMPLES:
            return self.features(self.hush.append(samples))
        if window_s < WINDOW_S:
            total = min(N_SAMPLES, max(round(window_s * SAMPLE_RATE), samples.size + MIN_SILENCE_SAMPLES))
            if samples.size < total:
                return self.features(samples, padding=total - samples.size)
        return window(self.features(samples, padding=N_SAMPLES), 0, samples.size // HOP_LENGTH)

    @torch.inference_mode()
    def encode(self, mel: Tensor, speech_samples: int | None = None, spent: list[float] | None = None) -> Tensor:
        """Encoder output (1, frames/2, D) of a log-mel window (n_mels, frames <= 3000). With
        ``speech_samples``: the window is that many samples of audio padded with silence, and the
        silence's positions come from a pass over silence alone (:mod:`stenoflow.model.silence`).
        ``spent`` collects the FLOPs of each encoder pass run."""
        if mel.dim() == 2:
            mel = mel[None]
        encoder = self.whisper.encoder
        mel = mel.to(self.device, encoder.conv1.weight.dtype)
        if speech_samples is None:
            features = encoder(mel, spent=spent)
        else:
            features = self.silence.encode(mel, speech_samples, spent)
        return features.to(self.whisper.decoder.positional_embedding.dtype)

    @torch.inference_mode()
    def encode_cross(self, mel: Tensor, speech_samples: int | None = None, spent: list[float] | None = None,
                     reuse: EncoderReuse | None = None, offset: float = 0.0) -> CrossKV:
        """The decoder's cross-attention keys and values over ``encode``'s output; with
        ``speech_samples``, those of the silence come from the silence cache's kept pass, and with
        ``reuse`` those of the audio a stream's last round heard (its buffer starting at absolute
        ``offset``) from that round's pass (:mod:`stenoflow.model.reuse`)."""
        if speech_samples is None:
            return self.whisper.decoder.cross_kv(self.encode(mel, spent=spent))
        if mel.dim() == 2:
            mel = mel[None]
        mel = mel.to(self.device, self.whisper.encoder.conv1.weight.dtype)
        return self.silence.encode_cross(mel, speech_samples, self.whisper.decoder,
                                         self.whisper.decoder.positional_embedding.dtype, spent, reuse, offset)

    def decode(self, features_or_mel: Tensor, options: DecodingOptions | None = None) -> DecodingResult:
        """Decode one window from its encoder output (1, S, D) or its log-mel (n_mels, frames)."""
        features = features_or_mel
        if features.dim() == 2 or features.shape[-2] == self.dims.n_mels:
            features = self.encode(features)
        return DecodingTask(self.context, options or DecodingOptions()).run(features)

    def detect_language_mel(self, mel: Tensor) -> tuple[str, dict[str, float]]:
        return detect_language(self.context, self.whisper.decoder.cross_kv(self.encode(mel)))

    def detect_language(self, audio: str | Path | np.ndarray) -> tuple[str, dict[str, float]]:
        """Most likely language code of the first 30 s and the probability of every language."""
        samples = _samples(audio)[: 30 * 16000]
        return self.detect_language_mel(self.features(samples, padding=30 * 16000 - len(samples)))

    # --- front doors ----------------------------------------------------------------------
    def transcribe(self, audio: str | Path | np.ndarray, *,
                   progress: Callable[[float, float], None] | None = None,
                   draft: Model | str | None = None,
                   medusa: str | MedusaHeads | None = None,
                   **options: object) -> tuple[Iterator[Segment], TranscriptionInfo]:
        """Long-form transcription: a lazy iterator of segments and the run's info.

        Options are the fields of ``TranscribeOptions`` (beam_size, language, word_timestamps, ...).
        ``draft``: a smaller model (or its name, loaded int8 on the CPU) that proposes tokens for
        this one to verify; with beam_size=1 the text equals greedy decoding without it.
        ``medusa``: Medusa heads ("linear", "block": this model's shipped heads, or a heads file)
        propose the tokens instead; likewise exact at beam_size=1 unless ``typical`` is set.
        """
        if draft is not None and medusa is not None:
            raise ValueError("give a draft model or Medusa heads, not both")
        known = {f.name for f in fields(TranscribeOptions)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise TypeError(f"unknown transcribe option(s) {unknown}; known: {sorted(known)}")
        if isinstance(options.get("temperature"), (int, float)):
            options["temperature"] = (float(options["temperature"]),)  # type: ignore[arg-type]
        opts = TranscribeOptions(**options)  # type: ignore[arg-type]
        if isinstance(draft, str):
            draft = self.draft_model(draft)
        heads = self.medusa(medusa) if isinstance(medusa, str) else medusa
        return transcribe(self, _samples(audio), opts, progress, draft if draft is not None else heads)

    def medusa(self, kind_or_path: str = "linear") -> MedusaHeads:
        """Medusa heads for this model, ready to draft: a kind ("linear" or "block": a heads file
        beside the model, else the shipped one) or a heads file. Loaded once per kind."""
        if kind_or_path not in self._medusa:
            path = find_medusa(self.name, kind_or_path, Path(str(self.weights_info["source"])))
            loaded = load_medusa(path)
            if loaded.model and loaded.model != self.name:
                log.warning("Medusa heads %s were trained for %s, not %s", path, loaded.model, self.name)
            self._medusa[kind_or_path] = loaded.heads.bind(self.whisper.decoder)
            log.info("Medusa-%s heads for %s: %s", loaded.heads.shape.kind, self.name, path)
        return self._medusa[kind_or_path]

    def draft_model(self, name_or_path: str) -> Model:
        """A draft model for this one: int8 on the CPU (its speed is all that counts: every token
        it proposes is verified), as this model on other devices. Loaded once per name."""
        if name_or_path not in self._drafts:
            compute = "int8" if self.device.type == "cpu" else self.compute
            self._drafts[name_or_path] = load_model(name_or_path, device=str(self.device), compute=compute)
        return self._drafts[name_or_path]

    def stream(self, options: StreamOptions | None = None, **overrides: object) -> StreamingSession:
        """A new streaming session on this model: ``push(samples)`` as audio arrives, then ``finish()``.

        ``overrides`` replace fields of ``options`` (step, policy, beam_size, ...). Sessions share
        the model read-only, so any number may run at once.
        """
        from stenoflow.streaming.factory import open_session
        from stenoflow.streaming.options import StreamOptions

        opts = replace(options or StreamOptions(), **overrides)  # type: ignore[arg-type]
        return open_session(self, opts)

    def listen(self, options: UtteranceOptions | None = None, offload: OffloadOptions | None = None,
               **overrides: object) -> UtteranceSession:
        """A new voice-command session: ``push(samples)`` returns the utterances that ended, each
        with its final text; ``finish()`` ends the one in progress. ``offload``: a remote server
        that takes the utterances this model is unsure of (see ``stenoflow.utterance.offload``)."""
        from stenoflow.utterance.offload import RemoteTranscriber
        from stenoflow.utterance.options import UtteranceOptions
        from stenoflow.utterance.session import UtteranceSession

        opts = replace(options or UtteranceOptions(), **overrides)  # type: ignore[arg-type]
        if offload is None:
            return UtteranceSession(self, opts)
        return UtteranceSession(self, opts, RemoteTranscriber(offload, opts.language), offload.perplexity)

    def utterances(self, audio: str | Path | np.ndarray, options: UtteranceOptions | None = None,
                   offload: OffloadOptions | None = None, **overrides: object) -> list[Utterance]:
        """The utterances of a recording (endpointed by voice activity), each with its text."""
        from stenoflow.utterance.driver import run_utterances

        run = run_utterances(self.listen(options, offload, **overrides), _samples(audio), "unaware", chunk_s=0.1)
        return [heard.utterance for heard in run.heard]


def _samples(audio: str | Path | np.ndarray) -> np.ndarray:
    if isinstance(audio, (str, Path)):
        return load_audio(audio)
    return validate_samples(audio)


def load_model(name_or_path: str, device: str = "cpu", compute: str | None = None,
               threads: int | None = None, cache_dir: Path | None = None) -> Model:
    """Load ``tiny.en``, ``base`` or a local model file/directory of a supported format.

    ``compute``: float32, int8, int8_bfloat16 (CPU) or float16 (CUDA); by default int8 on the CPU
    (int8_bfloat16 where it has bfloat16 matrix units) and float16 on CUDA
    (:func:`stenoflow.model.compute.default_compute`). The network built in it is cached under
    ``cache_dir`` (default $STENOFLOW_CACHE or ~/.cache/stenoflow), so later loads only map it."""
    compute = resolve_compute(device, compute)
    if threads is not None:
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        torch.set_num_threads(threads)
    start = time.perf_counter()
    weights, whisper = load_built(name_or_path, compute, cache_dir=cache_dir)
    model = Model(weights, name_or_path, device=device, compute=compute, whisper=whisper, cache_dir=cache_dir)
    log.info("%s ready in %s on %s in %.2f s", name_or_path, compute, device, time.perf_counter() - start)
    return model
