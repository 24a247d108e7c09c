"""``stenoflow bench stream --languages es,fr,it,ru``: live captions of speech in other languages.

On the streams of :mod:`.languages` (real prompts, one stream per language and one that switches
language every two prompts), for one model on the compute-aware realtime clock:

* the live stream with ``language="auto"`` against offline ``transcribe`` (its default: beam 5,
  the language detected per prompt) on the same prompts: WER (and CER, the measure for Russian,
  where a word is long and one wrong ending costs it all) against the prompt lists' text;
* language identification: offline per prompt of 2 s or more, and the language of a stream's
  first committed word;
* per-word latency (emission minus the word's end, from forced alignment of the reference in its
  language);
* on the switching stream, for every switch, how much speech came before the first word
  committed in the new language, and the words committed in a language the speech was not in.

Text is compared language-neutrally: lower case, accents and punctuation left out, and the
numbers zero to ten as digits whether written as words or digits (the prompt lists write both,
"appuyez sur 2" and "presione uno"); the English normaliser of the other benches keeps Latin
letters only.
"""

from __future__ import annotations

import json
import logging
import statistics
import unicodedata
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from stenoflow.audio.io import SAMPLE_RATE, load_audio
from stenoflow.bench.gold import align_sentences
from stenoflow.bench.languages import LANGUAGES, LanguageStream, language_streams
from stenoflow.bench.latency import word_latencies
from stenoflow.bench.machine import machine_record
from stenoflow.bench.metrics import edit_distance
from stenoflow.streaming.drivers import EmittedWord, run_stream

log = logging.getLogger(__name__)

LID_MIN_S = 2.0  # prompts this long or longer count for language identification per prompt
SWITCH_BOUND_S = 3.0  # what the bench calls a switch heard in time


@dataclass(frozen=True)
class LanguageBenchOptions:
    model: str = "base"
    languages: tuple[str, ...] = LANGUAGES
    threads: int = 2
    mode: str = "realtime"
    chunk_s: float = 0.1

    def __post_init__(self) -> None:
        unknown = [lang for lang in self.languages if lang not in LANGUAGES]
        if unknown or not self.languages:
            raise ValueError(f"the language bench has prompts in {', '.join(LANGUAGES)}; got {list(self.languages)}")


@dataclass
class StreamRow:
    stream: str
    languages: str
    audio_s: float
    live_wer: float
    live_cer: float
    offline_wer: float
    offline_cer: float
    first_word_language: str | None
    first_word_right: bool | None  # single-language streams only
    prompt_lid: tuple[int, int]  # right, of prompts of LID_MIN_S or more (offline)
    latency_mean: float
    latency_p90: float
    rtf: float
    switch_delays: list[float | None] = field(default_factory=list)  # speech before the new language, per switch
    wrong_language_words: int = 0
    live_text: str = ""
    offline_text: str = ""


# zero to ten in each language of the bench, as ``neutral`` writes them (no accents)
NUMBER_WORDS = {
    "es": ("cero", "uno", "dos", "tres", "cuatro", "cinco", "seis", "siete", "ocho", "nueve", "diez"),
    "fr": ("zero", "un", "deux", "trois", "quatre", "cinq", "six", "sept", "huit", "neuf", "dix"),
    "it": ("zero", "uno", "due", "tre", "quattro", "cinque", "sei", "sette", "otto", "nove", "dieci"),
    "ru": ("ноль", "один", "два", "три", "четыре", "пять", "шесть", "семь", "восемь", "девять", "десять"),
}
_DIGITS = {word: str(n) for words in NUMBER_WORDS.values() for n, word in enumerate(words)} | {"una": "1", "une": "1"}


def neutral(text: str) -> str:
    """Lower case, accents and punctuation left out, zero to ten as digits, one space between words."""
    decomposed = unicodedata.normalize("NFKD", text.lower())
    kept = "".join(" " if unicodedata.category(c)[0] in "PSZ" else c for c in decomposed
                   if not unicodedata.combining(c))
    return " ".join(_DIGITS.get(w, w) for w in kept.split())


def error_rates(reference: str, hypothesis: str) -> tuple[float, float, int, int]:
    """(WER, CER, reference words, reference characters) of ``hypothesis``, compared neutrally."""
    ref, hyp = neutral(reference), neutral(hypothesis)
    words = ref.split()
    chars = list(ref.replace(" ", ""))
    wer = edit_distance(words, hyp.split()) / max(1, len(words))
    cer = edit_distance(chars, list(hyp.replace(" ", ""))) / max(1, len(chars))
    return wer, cer, len(words), len(chars)


def run_language_bench(options: LanguageBenchOptions, out_dir: Path) -> str:
    """Run the bench; write ``languages.md`` and ``languages.json`` to ``out_dir``; return the table."""
    from stenoflow.api import load_model

    model = load_model(options.model, threads=options.threads)
    if not model.is_multilingual:
        raise ValueError(f"{options.model} is an English-only model: the language bench needs a multilingual one")
    rows = [_stream_row(model, s, options) for s in language_streams(options.languages)]
    out_dir.mkdir(parents=True, exist_ok=True)
    table = render(rows, options)
    machine = machine_record()
    (out_dir / "languages.md").write_text(f"{table}\nMachine: {machine}.\n", encoding="utf-8")
    (out_dir / "languages.json").write_text(json.dumps(
        {"machine": machine, "options": asdict(options), "streams": [asdict(r) for r in rows]},
        indent=1, ensure_ascii=False), encoding="utf-8")
    return table


def _stream_row(model: object, stream: LanguageStream, options: LanguageBenchOptions) -> StreamRow:
    from stenoflow.api import Model

    assert isinstance(model, Model)
    clip = stream.clip
    audio = load_audio(clip.audio_path)
    offline, right, counted = [], 0, 0
    for (start, end, _), language in zip(clip.sentences, stream.languages, strict=True):
        piece = audio[round(start * SAMPLE_RATE) : round(end * SAMPLE_RATE)]
        segments, info = model.transcribe(piece)
        offline.append("".join(s.text for s in segments))
        if end - start >= LID_MIN_S:
            counted += 1
            right += info.language == language
    log.info("%s: live, language auto (%s clock)", clip.name, options.mode)
    run = run_stream(lambda: model.stream(language="auto"), audio, options.mode, options.chunk_s)
    live_wer, live_cer, _, _ = error_rates(clip.text, run.text)
    offline_text = " ".join(offline)
    offline_wer, offline_cer, _, _ = error_rates(clip.text, offline_text)
    gold = align_sentences(model, audio, clip.sentences, stream.languages)
    latencies = word_latencies(gold, run.words, neutral)
    first = run.words[0].language if run.words else None
    single = len(set(stream.languages)) == 1
    delays, wrong = switches(clip.sentences, stream.languages, run.words)
    row = StreamRow(
        clip.name, ",".join(dict.fromkeys(stream.languages)), clip.duration, live_wer, live_cer, offline_wer,
        offline_cer, first, (first == stream.languages[0]) if single else None, (right, counted),
        statistics.fmean(latencies) if latencies else float("nan"),
        float(np.percentile(latencies, 90)) if latencies else float("nan"), run.rtf, delays, wrong,
        run.text, offline_text)
    log.info("%s: live WER %.1f%% CER %.1f%%, offline WER %.1f%% CER %.1f%%, latency %.2f s", clip.name,
             100 * live_wer, 100 * live_cer, 100 * offline_wer, 100 * offline_cer, row.latency_mean)
    return row


def switches(sentences: Sequence[tuple[float, float, str]], languages: Sequence[str],
             words: Sequence[EmittedWord]) -> tuple[list[float | None], int]:
    """For each sentence whose language differs from the one before: seconds of its speech (and
    the speech after it) before the first committed word in its language started (None: no such
    word before the next switch); and the committed words in the speech of one language that
    carry another."""
    delays: list[float | None] = []
    wrong = 0
    spans = list(zip(sentences, languages, strict=True))
    for k, ((start, end, _), language) in enumerate(spans):
        inside = [w for w in words if start - 0.2 <= w.start <= end + 0.2]
        wrong += sum(w.language is not None and w.language != language for w in inside)
        if k == 0 or languages[k - 1] == language:
            continue
        until = next((s for (s, _, _), lang in spans[k:] if lang != language), float("inf"))
        first = next((w for w in words if start - 0.2 <= w.start < until and w.language == language), None)
        delays.append(None if first is None else _speech_between(spans, start, max(start, first.start)))
    return delays, wrong


def _speech_between(spans: Sequence[tuple[tuple[float, float, str], str]], lo: float, hi: float) -> float:
    return sum(max(0.0, min(end, hi) - max(start, lo)) for (start, end, _), _ in spans)


def render(rows: Sequence[StreamRow], options: LanguageBenchOptions) -> str:
    title = (f"# Live captions in other languages ({options.model}, language auto, {options.mode} clock, "
             f"{options.threads} threads)")
    header = ("| stream | audio s | live WER % | offline WER % | live CER % | offline CER % | language of the first "
              "word | LID per prompt (offline) | latency mean / p90 s | RTF | switches heard within "
              f"{SWITCH_BOUND_S:g} s | words in the wrong language |")
    lines = [title, "", header, "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        heard = [d for d in r.switch_delays if d is not None and d <= SWITCH_BOUND_S]
        switched = f"{len(heard)}/{len(r.switch_delays)}" if r.switch_delays else "–"
        lines.append(
            f"| {r.stream} | {r.audio_s:.0f} | {100 * r.live_wer:.1f} | {100 * r.offline_wer:.1f} | "
            f"{100 * r.live_cer:.1f} | {100 * r.offline_cer:.1f} | {r.first_word_language or '–'}"
            f"{'' if r.first_word_right is None else (' (right)' if r.first_word_right else ' (wrong)')} | "
            f"{r.prompt_lid[0]}/{r.prompt_lid[1]} | {r.latency_mean:.2f} / {r.latency_p90:.2f} | {r.rtf:.2f} | "
            f"{switched} | {r.wrong_language_words} |")
    return "\n".join(lines) + "\n"
