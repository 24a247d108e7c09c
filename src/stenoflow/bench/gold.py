"""Gold word times for the evaluation clips, by forced alignment of the known reference text.

Per-word latency needs to know when each word was *spoken*. The synthesized clips know where
every sentence starts and ends but not every word, so the words are placed by our own engine:
the reference tokens (not a transcript) are run through the decoder over the sentence audio,
and dynamic time warping over the alignment heads' cross-attention gives each word its span.
Sentences are packed into windows under 30 s, cut halfway between sentences, and every word
is clamped into its sentence's known extent; the result must be monotonic or it is rejected.

Results are cached as JSON next to the clip (``<stem>.gold-<model>.json``), keyed by the clip's
text, sentence times and audio size, so they are computed once per clip and model.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import numpy as np

from stenoflow.audio.features import N_FRAMES
from stenoflow.audio.io import N_SAMPLES, load_audio
from stenoflow.bench.datasets import Clip
from stenoflow.decoding.timing import find_alignment
from stenoflow.decoding.transcribe import window

if TYPE_CHECKING:
    from stenoflow.api import Model

log = logging.getLogger(__name__)

GOLD_VERSION = 2  # 2: word k starts at the attention row that predicts it (as openai-whisper)
SAMPLE_RATE = 16000
MAX_WINDOW_S = 28.0  # a little under 30 s, so the cut margins fit too
EDGE_S = 0.3  # audio kept before the first and after the last sentence of a window


@dataclass(frozen=True)
class GoldWord:
    word: str
    start: float
    end: float


def gold_words(clip: Clip, model: Model, audio: np.ndarray | None = None, language: str = "en") -> list[GoldWord]:
    """The reference words of ``clip`` (said in ``language``) with their times, from the cache or
    by alignment."""
    cache = clip.audio_path.with_name(f"{clip.audio_path.stem}.gold-{_safe(model.name)}.json")
    key = _key(clip, model.name) + ("" if language == "en" else f":{language}")
    if cache.is_file():
        try:
            data = json.loads(cache.read_text(encoding="utf-8"))
            if data.get("key") == key:
                return [GoldWord(str(w["word"]), float(w["start"]), float(w["end"])) for w in data["words"]]
        except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
            log.info("ignoring unreadable gold cache %s: %s", cache, e)
    samples = audio if audio is not None else load_audio(clip.audio_path)
    words = align_reference(clip, model, samples, language)
    check_monotonic(words)
    tmp = cache.with_name(cache.name + ".part")
    tmp.write_text(json.dumps({"key": key, "model": model.name, "words": [asdict(w) for w in words]}, indent=0),
                   encoding="utf-8")
    os.replace(tmp, cache)
    log.info("gold word times for %s: %d words, aligned with %s", clip.name, len(words), model.name)
    return words


def align_reference(clip: Clip, model: Model, audio: np.ndarray, language: str = "en") -> list[GoldWord]:
    sentences = list(clip.sentences) or [(0.0, len(audio) / SAMPLE_RATE, clip.text)]
    out: list[GoldWord] = []
    for group, (lo, hi) in pack_windows(sentences, len(audio) / SAMPLE_RATE):
        out += _align_window(model, audio, group, lo, hi, language)
    return out


def align_sentences(model: Model, audio: np.ndarray, sentences: Sequence[tuple[float, float, str]],
                    languages: Sequence[str]) -> list[GoldWord]:
    """The words of each sentence with their times, each sentence aligned alone in its own
    language (a stream that changes language)."""
    duration = len(audio) / SAMPLE_RATE
    return [w for (start, end, text), language in zip(sentences, languages, strict=True)
            for w in _align_window(model, audio, [(start, end, text)], max(0.0, start - EDGE_S),
                                   min(duration, end + EDGE_S), language)]


def pack_windows(sentences: Sequence[tuple[float, float, str]], duration: float
                 ) -> list[tuple[list[tuple[float, float, str]], tuple[float, float]]]:
    """Consecutive sentences grouped into windows of at most ``MAX_WINDOW_S`` of audio.

    A window reaches ``EDGE_S`` beyond its outer sentences, but never past the midpoint of the
    gap to a neighbouring sentence, so no window hears a neighbour's words.
    """
    bounds = []
    for i, (start, end, _) in enumerate(sentences):
        lo = max(0.0, start - EDGE_S)
        hi = min(duration, end + EDGE_S)
        if i > 0:
            lo = max(lo, (sentences[i - 1][1] + start) / 2)
        if i + 1 < len(sentences):
            hi = min(hi, (end + sentences[i + 1][0]) / 2)
        if hi - lo > 30.0:
            raise ValueError(f"sentence at {start:.1f}-{end:.1f} s is longer than a 30 s window")
        bounds.append((lo, hi))
    windows: list[tuple[list[tuple[float, float, str]], tuple[float, float]]] = []
    group: list[tuple[float, float, str]] = []
    for sentence, (lo, hi) in zip(sentences, bounds):
        if group and hi - windows[-1][1][0] > MAX_WINDOW_S:
            group = []
        if not group:
            group = [sentence]
            windows.append((group, (lo, hi)))
        else:
            group.append(sentence)
            windows[-1] = (group, (windows[-1][1][0], hi))
    return windows


def _align_window(model: Model, audio: np.ndarray, group: list[tuple[float, float, str]],
                  lo: float, hi: float, language: str = "en") -> list[GoldWord]:
    samples = audio[round(lo * SAMPLE_RATE): round(hi * SAMPLE_RATE)]
    frames = min(samples.size // 160, N_FRAMES)
    features = model.encode(window(model.features(samples, padding=N_SAMPLES), 0, frames))
    tok = model.tokenizer.with_options(language if model.is_multilingual else None, "transcribe")
    per_sentence = [tok.encode(" " + text.strip()) for _, _, text in group]
    tokens = [t for ts in per_sentence for t in ts]
    timings = find_alignment(model.whisper, tok, tokens, features, frames, model.alignment_heads)
    # Hand each sentence its words by token count, and keep them inside the sentence's span.
    out: list[GoldWord] = []
    k = 0
    for (start, end, _), toks in zip(group, per_sentence):
        used = 0
        while k < len(timings) and used < len(toks):
            w = timings[k]
            used += len(w.tokens)
            w_start = min(max(lo + w.start, start), end)
            w_end = min(max(lo + w.end, w_start), end)
            out.append(GoldWord(w.word, round(w_start, 3), round(w_end, 3)))
            k += 1
    return out


def check_monotonic(words: Sequence[GoldWord]) -> None:
    """Raise RuntimeError unless every word has start <= end and starts/ends never go back."""
    for i, w in enumerate(words):
        if not w.start <= w.end:
            raise RuntimeError(f"gold word {i} {w.word!r} ends before it starts ({w.start} > {w.end})")
        if i and (w.start < words[i - 1].start or w.end < words[i - 1].end):
            raise RuntimeError(f"gold words {i - 1}-{i} go back in time: {words[i - 1]} then {w}")


def _key(clip: Clip, model_name: str) -> str:
    payload = {"version": GOLD_VERSION, "model": model_name, "text": clip.text, "sentences": clip.sentences,
               "bytes": clip.audio_path.stat().st_size}
    return hashlib.sha1(json.dumps(payload, sort_keys=True).encode("utf-8")).hexdigest()


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)
