"""English sentences for synthesized evaluation and training audio.

The text comes from prose that Debian ships (the ``fortunes`` data files, with the GNU licence
texts as a fallback), so every machine that ran ``scripts/setup.sh`` derives exactly the same
sentences without any download.

Sentences are cleaned hard: a synthesizer reads digits, acronyms, symbols and abbreviations in
ways a transcript cannot be compared against, so any sentence with them is dropped rather than
repaired. What is left is plain spoken English whose reference text is unambiguous.

Every sentence belongs to exactly one of two pools, "train" or "eval", chosen by a stable hash of
its text. Training data for later models (hush words) is drawn from "train" only, so it can never
share a sentence with the evaluation audio.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

logger = logging.getLogger(__name__)

Pool = Literal["train", "eval"]
POOLS: tuple[Pool, ...] = ("train", "eval")

FORTUNES_DIR = Path("/usr/share/games/fortunes")
LICENSES_DIR = Path("/usr/share/common-licenses")
# Debian's "wamerican" word list: a sentence whose lowercase words are not all in it is slang,
# jargon, mock-German or a typo, which a transcript cannot be fairly scored against.
DICTIONARY = Path("/usr/share/dict/american-english")

# Fortune files that are mostly prose. Left out: the offensive sets (not installed by setup.sh
# anyway), ASCII art, IRC logs, verse, dictionary-style definitions, nonsense (zippy), code
# (perl) and sets whose jokes lean on stereotypes.
FORTUNE_FILES: tuple[str, ...] = (
    "computers",
    "cookie",
    "education",
    "food",
    "fortunes",
    "goedel",
    "humorists",
    "kids",
    "law",
    "literature",
    "love",
    "magic",
    "medicine",
    "miscellaneous",
    "news",
    "paradoxum",
    "people",
    "pets",
    "platitudes",
    "politics",
    "pratchett",
    "riddles",
    "science",
    "sports",
    "startrek",
    "tao",
    "wisdom",
    "work",
)
LICENSE_FILES: tuple[str, ...] = ("GPL-3", "LGPL-3", "Apache-2.0", "GFDL-1.3", "MPL-2.0")

MIN_WORDS = 5
MAX_WORDS = 28
MAX_CHARS = 200
# Share of sentences (out of 10 hash buckets) that go to the training pool.
TRAIN_BUCKETS = 8

# Words ending in a period that do not end a sentence.
_ABBREVIATIONS = frozenset(
    {
        "mr",
        "mrs",
        "ms",
        "dr",
        "st",
        "jr",
        "sr",
        "vs",
        "etc",
        "prof",
        "gen",
        "col",
        "capt",
        "lt",
        "sgt",
        "rev",
        "hon",
        "no",
        "vol",
        "fig",
        "e.g",
        "i.e",
        "cf",
        "mt",
        "ft",
        "inc",
        "co",
        "ltd",
    }
)
_ALLOWED = re.compile(r"^[A-Za-z ,.!?;'\"-]+$")
_SPLIT_CANDIDATE = re.compile(r"[.!?][\"']?\s+(?=[\"']?[A-Z])")
_ATTRIBUTION = re.compile(r"^\s*--")
_VERSE_CAPITAL = re.compile(r"[,;] \"?(?!I\b)[A-Z]")
_WORD = re.compile(r"[A-Za-z]+(?:['-][A-Za-z]+)*")


@dataclass(frozen=True)
class TextPools:
    """The cleaned sentences of both pools, in a fixed order, plus a fingerprint of them.

    The fingerprint goes into the cache keys of synthesized sets so that a different text
    source (another Debian release of ``fortunes``) rebuilds them instead of reusing stale audio.
    """

    train: tuple[str, ...]
    eval: tuple[str, ...]
    source: str

    def get(self, pool: str) -> tuple[str, ...]:
        if pool == "train":
            return self.train
        if pool == "eval":
            return self.eval
        raise ValueError(f"unknown text pool {pool!r}; expected one of {POOLS}")

    def fingerprint(self, pool: str) -> str:
        digest = hashlib.sha1()
        for sentence in self.get(pool):
            digest.update(sentence.encode("utf-8"))
            digest.update(b"\n")
        return digest.hexdigest()


def pool_of(sentence: str) -> Pool:
    """Stable pool assignment: the same sentence lands in the same pool on every machine."""
    bucket = int.from_bytes(hashlib.sha1(sentence.encode("utf-8")).digest()[:8], "big") % 10
    return "train" if bucket < TRAIN_BUCKETS else "eval"


def load_pools(
    fortunes_dir: Path = FORTUNES_DIR,
    licenses_dir: Path = LICENSES_DIR,
    dictionary: Path = DICTIONARY,
) -> TextPools:
    """Read, clean, de-duplicate and split the Debian prose into the two pools.

    Parsing takes a fraction of a second, so callers load once per build instead of caching.
    """
    texts: list[str] = []
    used: list[str] = []
    for name in FORTUNE_FILES:
        path = fortunes_dir / name
        if path.is_file():
            texts.extend(_fortune_entries(path.read_text(encoding="latin-1")))
            used.append(f"fortunes/{name}")
    if not used:
        logger.warning(
            "no fortunes under %s (run scripts/setup.sh); falling back to licence texts",
            fortunes_dir,
        )
        for name in LICENSE_FILES:
            path = licenses_dir / name
            if path.is_file():
                texts.append(path.read_text(encoding="utf-8", errors="replace"))
                used.append(f"common-licenses/{name}")
    if not used:
        raise RuntimeError(
            f"no English prose found under {fortunes_dir} or {licenses_dir}; "
            "run scripts/setup.sh to install the Debian packages"
        )

    known = load_dictionary(dictionary)
    seen: set[str] = set()
    pools: dict[str, list[str]] = {"train": [], "eval": []}
    for text in texts:
        for sentence in split_sentences(text):
            if not is_clean_sentence(sentence):
                continue
            if known is not None and not all_words_known(sentence, known):
                continue
            key = sentence.lower()
            if key in seen:
                continue
            seen.add(key)
            pools[pool_of(sentence)].append(sentence)
    logger.debug(
        "text pools from %d files: %d train, %d eval sentences",
        len(used),
        len(pools["train"]),
        len(pools["eval"]),
    )
    return TextPools(train=tuple(pools["train"]), eval=tuple(pools["eval"]), source=", ".join(used))


def load_dictionary(path: Path = DICTIONARY) -> frozenset[str] | None:
    """The word list, or None (with a warning) when ``scripts/setup.sh`` has not installed it."""
    if not path.is_file():
        logger.warning(
            "no word list at %s (run scripts/setup.sh); sentences are not spell-checked", path
        )
        return None
    return frozenset(path.read_text(encoding="utf-8", errors="replace").split())


def all_words_known(sentence: str, known: frozenset[str]) -> bool:
    """True when every word is in the list; capitalised words inside a sentence count as names."""
    for position, word in enumerate(_WORD.findall(sentence)):
        for part in word.split("-"):
            if part in known or part.lower() in known:
                continue
            stem = part.removesuffix("'s")
            if stem in known or stem.lower() in known:
                continue
            if position > 0 and part[:1].isupper():
                continue
            return False
    return True


def _fortune_entries(raw: str) -> list[str]:
    """Split a fortune file on its ``%`` lines and drop the attribution lines of each entry."""
    entries: list[str] = []
    for block in re.split(r"^%\s*$", raw, flags=re.MULTILINE):
        kept: list[str] = []
        for line in block.splitlines():
            if _ATTRIBUTION.match(line):
                break  # "-- Author, Work": the attribution and anything after it
            kept.append(line.strip())
        text = " ".join(part for part in kept if part)
        if text:
            entries.append(text)
    return entries


def split_sentences(text: str) -> list[str]:
    """Split running text at sentence ends, not at abbreviations or initials."""
    text = re.sub(r"\s+", " ", text).strip()
    sentences: list[str] = []
    start = 0
    for match in _SPLIT_CANDIDATE.finditer(text):
        end = match.end()
        head = text[start : match.start() + 1]
        last = head.split(" ")[-1].rstrip(".!?\"'").lower()
        if text[match.start()] == "." and (last in _ABBREVIATIONS or len(last) == 1):
            continue
        sentences.append(text[start:end].strip())
        start = end
    tail = text[start:].strip()
    if tail:
        sentences.append(tail)
    return sentences


def is_clean_sentence(sentence: str) -> bool:
    """True for a plain English sentence that a synthesizer reads exactly as written."""
    if not sentence.isascii() or len(sentence) > MAX_CHARS:
        return False
    if not _ALLOWED.match(sentence):
        return False  # digits, symbols, URLs, brackets, colons, emails, markup
    if "--" in sentence or ".." in sentence or "''" in sentence:
        return False
    body = sentence.strip("\"'")
    if not body or not body[0].isupper() or body[-1] not in ".!?":
        return False
    if any(ch in ".!?" for ch in body[:-1].rstrip(".!?")):
        return False  # an abbreviation or a sentence end in the middle
    if sentence.count('"') % 2:
        return False
    words = _WORD.findall(sentence)
    if not MIN_WORDS <= len(words) <= MAX_WORDS:
        return False
    for word in words:
        letters = word.replace("'", "").replace("-", "")
        if len(letters) >= 2 and letters.isupper():
            return False  # shouting or an acronym read letter by letter
        if len(letters) == 1 and letters not in ("I", "a", "A"):
            return False  # initials, variables
    if len(_VERSE_CAPITAL.findall(sentence)) >= 2:
        return False  # lines of verse joined into one "sentence"
    # Anything the word pattern did not cover (stray apostrophes or hyphens) is noise.
    leftover = _WORD.sub("", sentence)
    return re.fullmatch(r"[ ,.!?;\"]*", leftover) is not None
