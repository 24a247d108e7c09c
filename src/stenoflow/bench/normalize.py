"""English text normalisation for word error rate.

A WER should count recognition errors, not style: "Twenty-five" against "25", "won't" against
"will not", "colour" against "color" or a stray "um" are the same words spoken. Reference and
hypothesis therefore both go through :func:`normalize_text` before they are aligned. The rules
follow the spirit of the normaliser published with Whisper (so numbers are comparable with
other reports) but are deliberately smaller and written from scratch:

* lowercase, accents stripped, typographic quotes and dashes made plain;
* text in brackets, parentheses and braces removed (sound tags such as "[music]");
* contractions expanded (won't -> will not, can't -> can not, n't -> not, 're -> are, ...);
* spelled-out numbers turned into digits ("one hundred and five" -> "105", "nineteen eighty
  four" -> "1984"), thousands separators dropped, "$5" -> "5 dollars", "$5.07" -> "5 dollars and 7 cents",
  "5%" -> "5 percent";
* punctuation and symbols removed, apostrophes dropped, whitespace collapsed;
* fillers (uh, um, hmm, ...) removed, a few British spellings and titles made uniform.

Only one direction for numbers is used (words -> digits), and it is applied to both sides.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType

FILLERS = frozenset(
    {"uh", "uhh", "um", "umm", "uhm", "erm", "hmm", "hmmm", "hm", "mm", "mmm", "mhm"}
)

SPELLINGS = MappingProxyType(
    {
        "colour": "color",
        "colours": "colors",
        "coloured": "colored",
        "favour": "favor",
        "favourite": "favorite",
        "favourites": "favorites",
        "honour": "honor",
        "honours": "honors",
        "honoured": "honored",
        "honouring": "honoring",
        "favoured": "favored",
        "colouring": "coloring",
        "behaviours": "behaviors",
        "harbour": "harbor",
        "rumour": "rumor",
        "rumours": "rumors",
        "savour": "savor",
        "vapour": "vapor",
        "vigour": "vigor",
        "humour": "humor",
        "labour": "labor",
        "neighbour": "neighbor",
        "neighbours": "neighbors",
        "behaviour": "behavior",
        "centre": "center",
        "centres": "centers",
        "theatre": "theater",
        "metre": "meter",
        "metres": "meters",
        "litre": "liter",
        "realise": "realize",
        "realised": "realized",
        "realising": "realizing",
        "organise": "organize",
        "organised": "organized",
        "organisation": "organization",
        "recognise": "recognize",
        "recognised": "recognized",
        "apologise": "apologize",
        "apologised": "apologized",
        "apologising": "apologizing",
        "analyse": "analyze",
        "analysed": "analyzed",
        "travelled": "traveled",
        "travelling": "traveling",
        "traveller": "traveler",
        "cancelled": "canceled",
        "grey": "gray",
        "programme": "program",
        "defence": "defense",
        "offence": "offense",
        "licence": "license",
        "catalogue": "catalog",
        "jewellery": "jewelry",
        "tyre": "tire",
        "plough": "plow",
        "ok": "okay",
        "alright": "all right",
        # titles, once their periods are gone
        "mr": "mister",
        "mrs": "missus",
        "ms": "miss",
        "dr": "doctor",
        "prof": "professor",
    }
)

_ONES = MappingProxyType(
    {
        "one": 1,
        "two": 2,
        "three": 3,
        "four": 4,
        "five": 5,
        "six": 6,
        "seven": 7,
        "eight": 8,
        "nine": 9,
    }
)
_TEENS = MappingProxyType(
    {
        "ten": 10,
        "eleven": 11,
        "twelve": 12,
        "thirteen": 13,
        "fourteen": 14,
        "fifteen": 15,
        "sixteen": 16,
        "seventeen": 17,
        "eighteen": 18,
        "nineteen": 19,
    }
)
_TENS = MappingProxyType(
    {
        "twenty": 20,
        "thirty": 30,
        "forty": 40,
        "fifty": 50,
        "sixty": 60,
        "seventy": 70,
        "eighty": 80,
        "ninety": 90,
    }
)
_SCALES = MappingProxyType({"thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000})
_NUMBER_WORDS = frozenset({"zero", "hundred", *_ONES, *_TEENS, *_TENS, *_SCALES})

_CONTRACTIONS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), replacement)
    for pattern, replacement in (
        (r"\bwon't\b", "will not"),
        (r"\bcan't\b", "can not"),
        (r"\bshan't\b", "shall not"),
        (r"\bcannot\b", "can not"),
        (r"n't\b", " not"),
        (r"'re\b", " are"),
        (r"'ll\b", " will"),
        (r"'ve\b", " have"),
        (r"\bi'm\b", "i am"),
    )
)
_BRACKETED = re.compile(r"\[[^\]]*\]|\([^)]*\)|\{[^}]*\}|<[^>]*>")
_TYPOGRAPHY = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u02bc": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u2013": " ",
        "\u2014": " ",
        "\u2212": "-",
        "\u00a0": " ",
    }
)
_ACRONYM = re.compile(r"(?<![a-z0-9])((?:[a-z]\.){2,})")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
# An amount with cents is said in two units ("$17.67": "seventeen dollars and sixty-seven cents");
# other amounts in one ("$5": "5 dollars", "$3.5": "3.5 dollars").
_CURRENCY_UNITS = (("$", "dollars", "cents"), ("\u00a3", "pounds", "pence"), ("\u20ac", "euros", "cents"))


def _say_amount(unit: str, sub: str) -> Callable[[re.Match[str]], str]:
    def say(m: re.Match[str]) -> str:
        whole, cents, decimals = m.group(1), m.group(2), m.group(3) or ""
        return f"{whole} {unit} and {int(cents)} {sub}" if cents else f"{whole}{decimals} {unit}"

    return say


_CURRENCY = tuple(
    (re.compile(re.escape(symbol) + r"\s*(\d+)(?:\.(\d\d)(?!\d)|(\.\d+))?"), _say_amount(unit, sub))
    for symbol, unit, sub in _CURRENCY_UNITS
)
_PERCENT = re.compile(r"(\d)\s*%")
_DECIMAL_POINT = re.compile(r"(?<=\d)\.(?=\d)")
_DECIMAL_MARK = "\x00"
# Punctuation ends a number ("a hundred, three million" is two numbers): it is kept as this
# marker word until numbers are parsed, then dropped.
_BREAK = "\x01"
_PUNCTUATION = re.compile(r"[,.;:!?]")
_NOT_WORD = re.compile(r"[^a-z0-9\x00\x01 ]+")


@dataclass(frozen=True)
class NormalizeOptions:
    """Which of the optional rules run; the defaults are what the benchmarks report."""

    remove_fillers: bool = True
    numbers_to_digits: bool = True
    standardize_spellings: bool = True


DEFAULT_OPTIONS = NormalizeOptions()


def normalize_text(text: str, options: NormalizeOptions = DEFAULT_OPTIONS) -> str:
    """Normalise one text to lowercase words separated by single spaces."""
    text = text.translate(_TYPOGRAPHY)
    text = "".join(
        ch for ch in unicodedata.normalize("NFKD", text) if not unicodedata.combining(ch)
    )
    text = text.lower()
    text = _BRACKETED.sub(" ", text)
    text = _ACRONYM.sub(lambda m: m.group(1).replace(".", "") + " ", text)
    for pattern, replacement in _CONTRACTIONS:
        text = pattern.sub(replacement, text)
    text = text.replace("'", "")
    text = text.replace("&", " and ")
    text = _THOUSANDS.sub("", text)
    for pattern, say in _CURRENCY:
        text = pattern.sub(say, text)
    text = _PERCENT.sub(r"\1 percent", text)
    text = _DECIMAL_POINT.sub(_DECIMAL_MARK, text)
    text = _PUNCTUATION.sub(f" {_BREAK} ", text)
    text = _NOT_WORD.sub(" ", text)

    words = text.split()
    if options.remove_fillers:
        words = [w for w in words if w not in FILLERS]
    if options.standardize_spellings:
        words = " ".join(SPELLINGS.get(w, w) for w in words).split()
    if options.numbers_to_digits:
        words = words_to_digits(words)
    return " ".join(w for w in words if w != _BREAK).replace(_DECIMAL_MARK, ".")


def normalize_words(text: str, options: NormalizeOptions = DEFAULT_OPTIONS) -> list[str]:
    return normalize_text(text, options).split()


def words_to_digits(words: list[str]) -> list[str]:
    """Replace every run of spelled-out number words with its value in digits.

    A run ends where the next word could not continue a well-formed number, so "one two three"
    stays three numbers (1 2 3) and "twenty twenty" stays two; "nineteen eighty four" is read
    as a year.
    """
    out: list[str] = []
    i = 0
    while i < len(words):
        if words[i] in _NUMBER_WORDS:
            value, i = _parse_number(words, i)
            out.append(str(value))
        else:
            out.append(words[i])
            i += 1
    return out


def _parse_number(words: list[str], start: int) -> tuple[int, int]:
    """Read one number starting at ``words[start]``; return its value and the next index."""
    first = words[start]
    if first == "zero":
        return 0, start + 1
    total = 0
    current = 0
    last = ""  # kind of the previous word: ones, teens, tens, year, hundred, scale
    smallest_scale = 10**12
    i = start
    while i < len(words):
        word = words[i]
        if word in _ONES:
            if last not in ("", "tens", "year", "hundred", "scale") or (
                last in ("tens", "year") and current % 10
            ):
                break
            current += _ONES[word]
            last = "ones"
        elif word in _TEENS or word in _TENS:
            value = _TEENS.get(word) or _TENS[word]
            if last == "teens" and word in _TENS and total == 0 and 10 <= current <= 19:
                current = current * 100 + value  # a year: "nineteen eighty" -> 1980
                last = "year"
            elif last in ("", "hundred", "scale"):
                current += value
                last = "teens" if word in _TEENS else "tens"
            else:
                break
        elif word == "hundred":
            if last == "":
                current = 100
            elif last in ("ones", "teens", "tens") and 0 < current < 100:
                current *= 100
            else:
                break
            last = "hundred"
        elif word in _SCALES:
            scale = _SCALES[word]
            if scale >= smallest_scale or last == "scale":
                break
            total += (current or 1) * scale
            current = 0
            smallest_scale = scale
            last = "scale"
        elif (
            word == "and"
            and last in ("hundred", "scale")
            and i + 1 < len(words)
            and (words[i + 1] in _ONES or words[i + 1] in _TEENS or words[i + 1] in _TENS)
        ):
            pass  # "one hundred and five"
        else:
            break
        i += 1
    return total + current, i
