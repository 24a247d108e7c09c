"""Benchmark peers: WhisperLiveKit's two streaming policies, driven in-process like our sessions.

``whisperlivekit`` (a bench-only dependency, imported here lazily) bundles

* **LocalAgreement** (the Whisper-Streaming algorithm): ``OnlineASRProcessor`` re-transcribes a
  growing audio buffer with faster-whisper and commits the longest common prefix of two
  successive hypotheses; the buffer is trimmed at a segment end once it exceeds 15 s;
* **SimulStreaming** (AlignAtt policy): ``SimulStreamingOnlineProcessor`` wraps ``AlignAtt``,
  which decodes the buffered audio with an openai-whisper style PyTorch decoder and stops
  before the token whose cross-attention (on the alignment heads) reaches the end of the audio.

Both peers implement :class:`~stenoflow.streaming.events.StreamingSession`, so the harness
feeds them the same chunks, on the same clock, and scores them with the same code as ours.

How pushes map onto the peer's own loop. WhisperLiveKit's server (``AudioProcessor``, without
its VAD) holds incoming PCM until ``min_chunk_size`` seconds have arrived, then inserts all
of it with ``insert_audio_chunk`` and runs ``process_iter()`` once; at end of stream it inserts
whatever is left (however short) and runs ``process_iter()`` once more, then calls
``finish()`` (LocalAgreement: the unconfirmed hypothesis is committed as is, no inference) or,
for SimulStreaming which has no ``finish``, ``start_silence()`` (= ``process_iter(is_last=True)``).
Our ``push()`` does exactly that: it buffers samples and, when at least ``min_chunk_s`` are
pending, inserts them all and runs one round; ``finish()`` replays the end-of-stream sequence.
Differences from the server: no VAD (``--no-vac``), float32 samples go in directly instead of
16-bit PCM, and the round runs synchronously inside ``push()`` (no queue, no thread).

Models are our own files, never a hub download (``HF_HUB_OFFLINE=1`` is set before the import,
and WhisperLiveKit's warm-up, which would fetch jfk.wav from GitHub, is disabled and replaced
by our own on one second of silence). LocalAgreement loads the CTranslate2 directory that
:func:`~stenoflow.weights.registry.resolve_model` resolves. SimulStreaming's decoder needs an
openai-whisper ``.pt`` checkpoint; it is written once from the same weights into
``<cache>/peers/<name>.pt`` (float32), and the alignment heads are passed explicitly because
WhisperLiveKit only knows them for hub model names.
"""

from __future__ import annotations

import base64
import functools
import gzip
import importlib
import importlib.metadata
import logging
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

import numpy as np

from stenoflow.streaming.events import StreamingSession, StreamUpdate, TimedWord
from stenoflow.weights.loaded import LoadedWeights
from stenoflow.weights.openai_pt import save_openai_pt
from stenoflow.weights.registry import default_cache_dir, resolve_model

log = logging.getLogger(__name__)

SAMPLE_RATE = 16000
WLK_VERSION = "0.2.26"  # the version these adapters were written against (internals are used)
INSTALL_HINT = (
    f"pip install 'stenoflow[peers]' && pip install --no-deps whisperlivekit=={WLK_VERSION} "
    "(or run bash scripts/setup.sh)"
)
ENGLISH_ONLY_VOCAB = 51864


def import_whisperlivekit() -> ModuleType:
    """Import whisperlivekit offline, or raise ImportError saying what to install."""
    os.environ["HF_HUB_OFFLINE"] = "1"  # belt and braces: every model below is a local path
    try:
        module = importlib.import_module("whisperlivekit")
    except ModuleNotFoundError as e:
        raise ImportError(
            f"the WhisperLiveKit benchmark peers need the module {e.name!r}, which is not "
            f"installed; install them with: {INSTALL_HINT}"
        ) from e
    installed = importlib.metadata.version("whisperlivekit")
    if installed != WLK_VERSION:
        log.warning(
            "whisperlivekit %s is installed; the peers were written for %s", installed, WLK_VERSION
        )
    return module


# --- options ------------------------------------------------------------------------------


@dataclass(frozen=True)
class LocalAgreementOptions:
    compute_type: str = "int8"  # CTranslate2 compute type of the faster-whisper model
    threads: int = 2  # CTranslate2 intra-op threads
    min_chunk_s: float = 1.0  # run a round once this much new audio is pending
    buffer_trimming_s: float = 15.0  # trim the buffer at a segment end beyond this length
    language: str = "en"
    warmup: bool = True  # one transcription of 1 s of silence when the model is loaded
    # Fixed by WhisperLiveKit's FasterWhisperASR: beam_size=5, word_timestamps=True,
    # condition_on_previous_text=True, a 200-character prompt of committed text, no VAD filter,
    # buffer trimming "segment" (the "sentence" mode needs a sentence splitter not installed).

    def __post_init__(self) -> None:
        if self.min_chunk_s <= 0 or self.buffer_trimming_s <= 0 or self.threads < 1:
            raise ValueError(
                f"min_chunk_s and buffer_trimming_s must be positive and threads >= 1, got {self}"
            )


@dataclass(frozen=True)
class SimulStreamingOptions:
    # "torch": WhisperLiveKit's PyTorch Whisper encodes and decodes (float32).
    # "ctranslate2": a faster-whisper encoder (compute_type) feeds the PyTorch decoder, which is
    # what WhisperLiveKit picks by itself on Linux when faster-whisper is installed.
    encoder: Literal["torch", "ctranslate2"] = "torch"
    compute_type: str = "int8"  # of the CTranslate2 encoder only
    threads: int = 2  # of the CTranslate2 encoder only; PyTorch uses torch.get_num_threads()
    min_chunk_s: float = 1.0
    language: str = "en"
    beams: int = 1  # WhisperLiveKit's default (greedy)
    frame_threshold: int = 25  # stop this many 20 ms frames before the end of the audio
    audio_max_len: float = 30.0  # drop the oldest inserted chunks beyond this many seconds
    audio_min_len: float = 0.0
    warmup: bool = True
    # No CIF end-of-word model (those are downloads): WhisperLiveKit then treats every chunk
    # end as a word boundary ("always fire"), its default without --cif-ckpt-path.

    def __post_init__(self) -> None:
        if self.encoder not in ("torch", "ctranslate2"):
            raise ValueError(f"encoder must be 'torch' or 'ctranslate2', got {self.encoder!r}")
        if self.min_chunk_s <= 0 or self.beams < 1 or self.threads < 1:
            raise ValueError(f"min_chunk_s must be positive, beams and threads >= 1, got {self}")


# --- shared backends (loaded once per configuration) -----------------------------------------


def _faster_whisper_model(ct2_dir: Path, compute_type: str, threads: int) -> Any:
    from faster_whisper import WhisperModel

    return WhisperModel(
        str(ct2_dir),
        device="cpu",
        compute_type=compute_type,
        cpu_threads=threads,
        num_workers=1,
        local_files_only=True,
    )


def _ct2_dir_of(weights: LoadedWeights, model_name: str) -> Path:
    if weights.format != "ctranslate2":
        raise ValueError(
            f"{model_name!r} is a {weights.format} model; the faster-whisper based peers need a "
            f"CTranslate2 model directory (a named model or a directory with model.bin)"
        )
    return Path(weights.source)


@functools.cache
def _local_agreement_asr(model_name: str, opts: LocalAgreementOptions) -> tuple[Any, Path]:
    """WhisperLiveKit's FasterWhisperASR on our CTranslate2 directory, set up as its
    ``backend_factory`` sets it up, except for the explicit device, compute type and threads."""
    import_whisperlivekit()
    from whisperlivekit.local_agreement.backends import FasterWhisperASR

    ct2_dir = _ct2_dir_of(resolve_model(model_name), model_name)

    class _LocalFasterWhisperASR(FasterWhisperASR):  # type: ignore[misc]
        # The stock load_model asks for device="auto", compute_type="auto".
        def load_model(
            self, model_size: Any = None, cache_dir: Any = None, model_dir: Any = None
        ) -> Any:
            return _faster_whisper_model(Path(model_dir), opts.compute_type, opts.threads)

    start = time.perf_counter()
    asr = _LocalFasterWhisperASR(lan=opts.language, model_dir=str(ct2_dir))
    asr.confidence_validation = False
    asr.tokenizer = None  # sentence splitter: only for buffer trimming "sentence"
    asr.buffer_trimming = "segment"
    asr.buffer_trimming_sec = opts.buffer_trimming_s
    asr.backend_choice = "faster-whisper"
    if opts.warmup:
        asr.transcribe(np.zeros(SAMPLE_RATE, dtype=np.float32))
    log.info(
        "wlk LocalAgreement backend for %s (%s) ready in %.2f s",
        model_name,
        opts.compute_type,
        time.perf_counter() - start,
    )
    return asr, ct2_dir


def _alignment_heads_dump(weights: LoadedWeights) -> str:
    """The heads as openai-whisper's base85(gzip(bool mask)) string, WhisperLiveKit's format."""
    dims = weights.dims
    mask = np.zeros((dims.n_text_layer, dims.n_text_head), dtype=bool)
    for layer, head in weights.alignment_heads or ():
        mask[layer, head] = True
    if not mask.any():
        raise ValueError(f"{weights.source}: no alignment heads known for SimulStreaming")
    return base64.b85encode(gzip.compress(mask.tobytes())).decode("ascii")


def _checkpoint_stem(model_name: str, weights: LoadedWeights) -> str:
    """File stem WhisperLiveKit reads the tokenizer kind from: English-only iff it ends in .en."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", model_name.strip("/")).strip("._") or "model"
    english_only = weights.dims.n_vocab == ENGLISH_ONLY_VOCAB
    if english_only and not stem.endswith(".en"):
        stem += ".en"
    elif not english_only and stem.endswith(".en"):
        stem = stem.removesuffix(".en")
    return stem


def openai_checkpoint(
    model_name: str, weights: LoadedWeights, cache_dir: Path | None = None
) -> Path:
    """``<cache>/peers/<stem>.pt`` (float32) written from weights, reused while newer than them."""
    root = Path(cache_dir) if cache_dir else default_cache_dir()
    path = root / "peers" / f"{_checkpoint_stem(model_name, weights)}.pt"
    source = Path(weights.source)
    source_file = source / "model.bin" if (source / "model.bin").is_file() else source
    if path.is_file() and path.stat().st_mtime >= source_file.stat().st_mtime:
        log.debug("reusing %s", path)
        return path
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        save_openai_pt(weights, tmp, dtype="float32")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


@functools.cache
def _simul_streaming_asr(model_name: str, opts: SimulStreamingOptions) -> tuple[Any, Path]:
    """WhisperLiveKit's SimulStreamingASR with our weights as decoder (and maybe encoder)."""
    import_whisperlivekit()
    from whisperlivekit.simul_whisper import SimulStreamingASR, SimulStreamingOnlineProcessor
    from whisperlivekit.whisper import load_model

    class _LocalSimulStreamingASR(SimulStreamingASR):  # type: ignore[misc]
        # The stock load_model also warms up, and its warm-up file loader imports librosa
        # (not installed) even when warm-up is off; ours loads the same way without it.
        def load_model(self) -> Any:
            return load_model(
                name=str(self._resolved_decoder_model_path),
                device="cpu",
                decoder_only=self.fast_encoder,
                custom_alignment_heads=self.custom_alignment_heads,
            )

    start = time.perf_counter()
    weights = resolve_model(model_name)
    checkpoint = openai_checkpoint(model_name, weights)
    ct2_dir = _ct2_dir_of(weights, model_name) if opts.encoder == "ctranslate2" else None
    heads = _alignment_heads_dump(weights)
    del weights
    # Every attribute SimulStreamingASR reads, as TranscriptionEngine passes them.
    asr = _LocalSimulStreamingASR(
        model_size=None,
        model_path=None,
        decoder_model_path=str(checkpoint),
        encoder_model_path=str(ct2_dir) if ct2_dir else None,
        model_cache_dir=None,
        lora_path=None,
        lan=opts.language,
        direct_english_translation=False,
        min_chunk_size=opts.min_chunk_s,
        backend="faster-whisper" if ct2_dir else "whisper",
        disable_fast_encoder=ct2_dir is None,
        custom_alignment_heads=heads,
        frame_threshold=opts.frame_threshold,
        beams=opts.beams,
        decoder_type=None,
        audio_max_len=opts.audio_max_len,
        audio_min_len=opts.audio_min_len,
        cif_ckpt_path=None,
        never_fire=False,
        init_prompt=None,
        static_init_prompt=None,
        max_context_tokens=None,
        warmup_file="",  # "" = no warm-up; None would download jfk.wav from GitHub
    )
    if ct2_dir is not None:
        # SimulStreamingASR opens the encoder with device/compute "auto"; pin them instead.
        asr.fw_encoder = _faster_whisper_model(ct2_dir, opts.compute_type, opts.threads)
    if opts.warmup:
        import torch

        SimulStreamingOnlineProcessor(asr).warmup(torch.zeros(SAMPLE_RATE))
    log.info(
        "wlk SimulStreaming backend for %s (%s encoder) ready in %.2f s",
        model_name,
        opts.encoder,
        time.perf_counter() - start,
    )
    return asr, checkpoint


# --- sessions -----------------------------------------------------------------------------


def _as_samples(samples: np.ndarray) -> np.ndarray:
    x = np.asarray(samples, dtype=np.float32)
    if x.ndim != 1:
        raise ValueError(f"expected 1-D float32 16 kHz mono samples, got shape {x.shape}")
    return x


def _timed_words(tokens: Sequence[Any]) -> tuple[TimedWord, ...]:
    """WhisperLiveKit ASRTokens (absolute stream seconds) as our TimedWords."""
    words = []
    for t in tokens:
        p = t.probability
        words.append(
            TimedWord(
                str(t.text),
                float(t.start),
                float(t.end),
                float(p) if p is not None else float("nan"),
            )
        )
    return tuple(words)


class _WlkSession:
    """Chunk gating shared by both peers: a round runs once min_chunk_s of audio is pending."""

    def __init__(self, min_chunk_s: float) -> None:
        self._min_chunk = round(min_chunk_s * SAMPLE_RATE)
        self._pending: list[np.ndarray] = []
        self._pending_n = 0
        self._received = 0  # samples pushed so far
        self._finished = False

    @property
    def stream_s(self) -> float:
        return self._received / SAMPLE_RATE

    def push(self, samples: np.ndarray) -> StreamUpdate:
        if self._finished:
            raise RuntimeError("push() after finish(): start a new session for a new stream")
        x = _as_samples(samples)
        if x.size:
            self._pending.append(x)
            self._pending_n += x.size
            self._received += x.size
        if self._pending_n < self._min_chunk:
            return StreamUpdate(tail=self._tail())
        committed, info = self._round(self._take_pending(), last=False)
        return StreamUpdate(committed=committed, tail=self._tail(), rounds=(info,))

    def finish(self) -> StreamUpdate:
        if self._finished:
            return StreamUpdate()
        self._finished = True
        committed: tuple[TimedWord, ...] = ()
        rounds: list[dict[str, float]] = []
        if self._pending_n:  # the server flushes the short tail as one more chunk
            committed, info = self._round(self._take_pending(), last=False)
            rounds.append(info)
        more, info = self._final_round()
        rounds.append(info)
        return StreamUpdate(committed=committed + more, tail=(), rounds=tuple(rounds))

    def _take_pending(self) -> np.ndarray:
        audio = np.concatenate(self._pending) if len(self._pending) > 1 else self._pending[0]
        self._pending, self._pending_n = [], 0
        return audio

    def _round(
        self, audio: np.ndarray, last: bool
    ) -> tuple[tuple[TimedWord, ...], dict[str, float]]:
        raise NotImplementedError

    def _final_round(self) -> tuple[tuple[TimedWord, ...], dict[str, float]]:
        raise NotImplementedError

    def _tail(self) -> tuple[TimedWord, ...]:
        raise NotImplementedError


class WhisperLiveKitLocalAgreement(_WlkSession):
    """Whisper-Streaming's LocalAgreement-2 (WhisperLiveKit ``OnlineASRProcessor``) on
    faster-whisper, beam 5, buffer trimming at segment ends beyond 15 s."""

    def __init__(self, model_name: str, options: LocalAgreementOptions | None = None) -> None:
        self.options = options or LocalAgreementOptions()
        super().__init__(self.options.min_chunk_s)
        import_whisperlivekit()
        from whisperlivekit.local_agreement.online_asr import OnlineASRProcessor

        asr, ct2_dir = _local_agreement_asr(model_name, self.options)
        self._proc = OnlineASRProcessor(asr)
        self.info: dict[str, object] = {
            "peer": "whisperlivekit",
            "version": importlib.metadata.version("whisperlivekit"),
            "policy": "localagreement",
            "model": model_name,
            "model_dir": str(ct2_dir),
            "beam_size": 5,
            **asdict(self.options),
        }

    def _round(
        self, audio: np.ndarray, last: bool
    ) -> tuple[tuple[TimedWord, ...], dict[str, float]]:
        start = time.perf_counter()
        self._proc.insert_audio_chunk(audio, self.stream_s)
        buffer_s = len(self._proc.audio_buffer) / SAMPLE_RATE
        tokens, _ = self._proc.process_iter()
        return _timed_words(tokens), {
            "stream_s": self.stream_s,
            "buffer_s": buffer_s,
            "committed": float(len(tokens)),
            "last": float(last),
            "wall_s": time.perf_counter() - start,
        }

    def _final_round(self) -> tuple[tuple[TimedWord, ...], dict[str, float]]:
        start = time.perf_counter()
        tokens, _ = self._proc.finish()  # no inference: the last hypothesis is committed as is
        return _timed_words(tokens), {
            "stream_s": self.stream_s,
            "buffer_s": 0.0,
            "committed": float(len(tokens)),
            "last": 1.0,
            "wall_s": time.perf_counter() - start,
        }

    def _tail(self) -> tuple[TimedWord, ...]:
        return _timed_words(self._proc.transcript_buffer.buffer)


class WhisperLiveKitSimulStreaming(_WlkSession):
    """SimulStreaming's AlignAtt policy (WhisperLiveKit ``SimulStreamingOnlineProcessor``)."""

    def __init__(self, model_name: str, options: SimulStreamingOptions | None = None) -> None:
        self.options = options or SimulStreamingOptions()
        super().__init__(self.options.min_chunk_s)
        import_whisperlivekit()
        from whisperlivekit.simul_whisper import SimulStreamingOnlineProcessor

        asr, checkpoint = _simul_streaming_asr(model_name, self.options)
        self._proc = SimulStreamingOnlineProcessor(asr)  # its own AlignAtt decoder state
        import torch

        self.info: dict[str, object] = {
            "peer": "whisperlivekit",
            "version": importlib.metadata.version("whisperlivekit"),
            "policy": "simulstreaming",
            "model": model_name,
            "checkpoint": str(checkpoint),
            "torch_threads": torch.get_num_threads(),
            **asdict(self.options),
        }

    def _round(
        self, audio: np.ndarray, last: bool
    ) -> tuple[tuple[TimedWord, ...], dict[str, float]]:
        start = time.perf_counter()
        self._proc.insert_audio_chunk(audio, self.stream_s)
        buffer_s = float(self._proc.model.segments_len())
        tokens, _ = self._proc.process_iter(is_last=last)
        return _timed_words(tokens), {
            "stream_s": self.stream_s,
            "buffer_s": buffer_s,
            "committed": float(len(tokens)),
            "last": float(last),
            "wall_s": time.perf_counter() - start,
        }

    def _final_round(self) -> tuple[tuple[TimedWord, ...], dict[str, float]]:
        start = time.perf_counter()
        buffer_s = float(self._proc.model.segments_len())
        tokens, _ = self._proc.start_silence()  # = process_iter(is_last=True), as the server does
        return _timed_words(tokens), {
            "stream_s": self.stream_s,
            "buffer_s": buffer_s,
            "committed": float(len(tokens)),
            "last": 1.0,
            "wall_s": time.perf_counter() - start,
        }

    def _tail(self) -> tuple[TimedWord, ...]:
        # AlignAtt emits every word it decodes as final (with no CIF model each chunk end is a
        # word boundary); the processor's buffer only holds words while the language is "auto".
        return _timed_words(self._proc.buffer)


def peer_factories(
    model_names: Sequence[str],
    *,
    threads: int = 2,
    compute_type: str = "int8",
    min_chunk_s: float = 1.0,
    simul_ct2_encoder: bool = False,
) -> dict[str, Callable[[], StreamingSession]]:
    """Named peer configurations, each a factory of fresh sessions (backends load once).

    ``<model>/wlk-localagreement/<compute>``: LocalAgreement on faster-whisper.
    ``<model>/wlk-simulstreaming``: AlignAtt with WhisperLiveKit's PyTorch Whisper (float32).
    ``<model>/wlk-simulstreaming/ct2-<compute>-encoder`` (if ``simul_ct2_encoder``): AlignAtt
    with a faster-whisper encoder, WhisperLiveKit's own choice when faster-whisper is present.
    """
    import_whisperlivekit()  # fail here, with the install hint, rather than in the harness
    factories: dict[str, Callable[[], StreamingSession]] = {}
    for name in model_names:
        la = LocalAgreementOptions(
            compute_type=compute_type, threads=threads, min_chunk_s=min_chunk_s
        )
        ss = SimulStreamingOptions(min_chunk_s=min_chunk_s)
        factories[f"{name}/wlk-localagreement/{compute_type}"] = functools.partial(
            WhisperLiveKitLocalAgreement, name, la
        )
        factories[f"{name}/wlk-simulstreaming"] = functools.partial(
            WhisperLiveKitSimulStreaming, name, ss
        )
        if simul_ct2_encoder:
            ss_ct2 = SimulStreamingOptions(
                encoder="ctranslate2",
                compute_type=compute_type,
                threads=threads,
                min_chunk_s=min_chunk_s,
            )
            factories[f"{name}/wlk-simulstreaming/ct2-{compute_type}-encoder"] = functools.partial(
                WhisperLiveKitSimulStreaming, name, ss_ct2
            )
    return factories
