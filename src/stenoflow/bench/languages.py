"""Real speech in Spanish, French, Italian and Russian, for the live language bench.

Debian's ``asterisk-core-sounds-<lang>-wav`` packages hold the telephone prompts of the Asterisk
PBX, recorded by one professional speaker per language (Mexican Spanish, Canadian French,
Italian, Russian; 8 kHz), and ``asterisk-core-sounds-<lang>`` the list of what each prompt says
(``core-sounds-<lang>.txt``: ``name: text``). ``language_streams`` joins the prompts of four
words or more into one stream per language, and one stream that switches language every
``SWITCH_EVERY`` prompts, laid out as the real-speech set lays its streams (trimmed, levelled,
0.8 s apart; see :mod:`.real_speech`), cached under ``<data>/languages/``.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

from stenoflow.bench.clips import Clip, data_dir
from stenoflow.bench.real_recordings import Recording
from stenoflow.bench.real_speech import MARKER, Source, fetch, joined_stream, prepared

log = logging.getLogger(__name__)

# language: the speaker's folder in the package (locale, sex, name)
SPEAKERS = {"es": "es_MX_f_Allison", "fr": "fr_CA_f_June", "it": "it_IT_m_Carlo", "ru": "ru_RU_f_IvrvoiceRU"}
LANGUAGES = tuple(SPEAKERS)
MIN_WORDS = 4  # prompts of fewer words (a digit, "activated") say little about a language
STREAM_S = 90.0  # speech per language stream
SWITCH_EVERY = 2  # prompts in one language before the switching stream changes language
SWITCH_PROMPTS = 24
SUBDIR = "languages"


def sources(language: str) -> dict[str, Source]:
    """The two packages of ``language``: the recordings and the list of what they say."""
    speaker = SPEAKERS[language]
    return {
        f"asterisk-{language}": Source(f"asterisk-{language}", f"asterisk-core-sounds-{language}-wav",
                                       (f"usr/share/asterisk/sounds/{speaker}",),
                                       f"Asterisk core prompts, {speaker}"),
        f"asterisk-{language}-text": Source(
            f"asterisk-{language}-text", f"asterisk-core-sounds-{language}",
            (f"usr/share/doc/asterisk-core-sounds-{language}/core-sounds-{language}.txt.gz",),
            f"what the Asterisk core prompts in {language} say"),
    }


@dataclass(frozen=True)
class LanguageStream:
    clip: Clip
    languages: tuple[str, ...]  # the language of each of its sentences


def languages_dir() -> Path:
    return data_dir() / SUBDIR


def prompts(language: str, root: Path | None = None) -> list[Recording]:
    """The prompts of ``language`` with four words or more, in the order the list gives them,
    each with its text (downloaded and unpacked on first use)."""
    base = root or languages_dir()
    catalog = sources(language)
    if not all((base / name / MARKER).is_file() for name in catalog):
        fetch(base, catalog=catalog)
    speaker = SPEAKERS[language]
    listing = base / f"asterisk-{language}-text" / f"core-sounds-{language}.txt"
    folder = base / f"asterisk-{language}" / speaker
    out = []
    for line in listing.read_text(encoding="utf-8-sig").splitlines():
        name, sep, text = line.partition(":")
        text = _clean(text)
        if line.startswith(";") or not sep or len(text.split()) < MIN_WORDS:
            continue
        path = folder / f"{name.strip()}.wav"
        if path.is_file():
            out.append(Recording(f"asterisk-{language}", speaker, "read", text, path))
    if not out:
        raise ValueError(f"no prompts of {MIN_WORDS} words or more found in {listing}")
    return out


_MARKS = re.compile(r"\[[^\]]*\]|\([^)]*\)")


def _clean(text: str) -> str:
    """The spoken text of a list entry: bracketed notes (``[tono simple]``) left out."""
    return " ".join(_MARKS.sub(" ", text).split())


def language_streams(languages: tuple[str, ...] = LANGUAGES, root: Path | None = None) -> list[LanguageStream]:
    """One stream per language (``STREAM_S`` of its prompts) and, given more than one language,
    one that switches language every ``SWITCH_EVERY`` prompts (from the prompts after those)."""
    base = root or languages_dir()
    by_language = {lang: [(r, prepared(r)) for r in prompts(lang, base)] for lang in languages}
    out: list[LanguageStream] = []
    used: dict[str, int] = {}
    for lang, recs in by_language.items():
        pieces, total = [], 0.0
        for rec, audio in recs:
            if total >= STREAM_S:
                break
            pieces.append((rec.voice, rec.label, rec.text, audio))
            total += audio.size / 16000
        used[lang] = len(pieces)
        out.append(LanguageStream(joined_stream(f"lang-{lang}", pieces, base / "streams"), (lang,) * len(pieces)))
    if len(languages) > 1:
        pieces, tags = [], []
        cursor = dict(used)
        for k in range(SWITCH_PROMPTS):
            lang = languages[(k // SWITCH_EVERY) % len(languages)]
            rec, audio = by_language[lang][cursor[lang] % len(by_language[lang])]
            cursor[lang] += 1
            pieces.append((rec.voice, rec.label, rec.text, audio))
            tags.append(lang)
        out.append(LanguageStream(joined_stream("lang-switch", pieces, base / "streams"), tuple(tags)))
    return out
