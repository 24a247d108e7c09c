"""Whisper's tokenizer: byte-level BPE text tokens, then special tokens, then timestamp tokens.

The text part comes from a Hugging Face ``tokenizer.json``. Special tokens are looked up by
name, and the language tokens are read off the vocabulary (every token between
``<|startoftranscript|>`` and ``<|translate|>``), so English-only, multilingual and
large-v3 vocabularies all work without a hard-coded table of ids. Timestamp tokens follow
``<|notimestamps|>`` at 0.02 s per step and need not be in the file.
"""

from __future__ import annotations

import json
import logging
import string
import unicodedata
from functools import cached_property
from pathlib import Path

from tokenizers import Tokenizer as HFTokenizer

log = logging.getLogger(__name__)
TIME_PRECISION = 0.02  # seconds per timestamp token
# Languages written without spaces between words: word timing splits them per character run.
NO_SPACE_LANGUAGES = frozenset({"zh", "ja", "th", "lo", "my", "yue"})


class Tokenizer:
    def __init__(self, hf: HFTokenizer, *, multilingual: bool, language: str | None = None,
                 task: str = "transcribe", path: Path | None = None) -> None:
        self.path = path
        self.hf = hf
        self.multilingual = multilingual
        self.eot = self._special("<|endoftext|>")
        self.sot = self._special("<|startoftranscript|>")
        self.translate = self._special("<|translate|>")
        self.transcribe = self._special("<|transcribe|>")
        self.sot_lm = self._special("<|startoflm|>")
        self.sot_prev = self._special("<|startofprev|>")
        no_speech = self.hf.token_to_id("<|nospeech|>")
        self.no_speech = no_speech if no_speech is not None else self._special("<|nocaptions|>")
        self.no_timestamps = self._special("<|notimestamps|>")
        self.timestamp_begin = self.no_timestamps + 1
        codes = [self.hf.id_to_token(i) for i in range(self.sot + 1, self.translate)]
        self.language_codes: tuple[str, ...] = tuple(c[2:-2] for c in codes if c) if multilingual else ()
        self.language = language
        self.task = task
        if task not in ("transcribe", "translate"):
            raise ValueError(f"task must be 'transcribe' or 'translate', got {task!r}")
        if language is not None and multilingual and language not in self.language_codes:
            raise ValueError(f"unknown language {language!r}; expected one of {', '.join(self.language_codes)}")

    def _special(self, token: str) -> int:
        i = self.hf.token_to_id(token)
        if i is None:
            raise ValueError(f"{self.path}: tokenizer has no special token {token}")
        return i

    @classmethod
    def from_file(cls, tokenizer_file: Path | str, *, multilingual: bool, language: str | None = None,
                  task: str = "transcribe") -> Tokenizer:
        path = Path(tokenizer_file)
        return cls.from_json(repaired_json(path), multilingual=multilingual, language=language, task=task,
                             path=path)

    @classmethod
    def from_json(cls, text: str, *, multilingual: bool, language: str | None = None, task: str = "transcribe",
                  path: Path | None = None) -> Tokenizer:
        """A tokenizer of a ``tokenizer.json``'s text as ``repaired_json`` gives it (``path``: the file's)."""
        return cls(HFTokenizer.from_str(text), multilingual=multilingual, language=language, task=task, path=path)

    def with_options(self, language: str | None, task: str) -> Tokenizer:
        """A tokenizer for another language/task sharing the same vocabulary."""
        return Tokenizer(self.hf, multilingual=self.multilingual, language=language, task=task, path=self.path)

    # --- ids <-> text -------------------------------------------------------------------
    def encode(self, text: str) -> list[int]:
        return self.hf.encode(text, add_special_tokens=False).ids

    def decode(self, tokens: list[int]) -> str:
        return self.hf.decode([t for t in tokens if t < self.eot])

    def decode_with_timestamps(self, tokens: list[int]) -> str:
        """Text with timestamp tokens rendered as <|1.08|>."""
        out: list[str] = []
        run: list[int] = []
        for t in tokens:
            if t >= self.timestamp_begin:
                out.append(self.hf.decode(run))
                run = []
                out.append(f"<|{(t - self.timestamp_begin) * TIME_PRECISION:.2f}|>")
            elif t < self.eot:
                run.append(t)
        out.append(self.hf.decode(run))
        return "".join(out)

    def language_token(self, code: str) -> int:
        i = self.hf.token_to_id(f"<|{code}|>")
        if i is None or not (self.sot < i < self.translate):
            raise ValueError(f"unknown language {code!r}")
        return i

    @property
    def language_token_ids(self) -> list[int]:
        return [self.sot + 1 + i for i in range(len(self.language_codes))]

    @cached_property
    def sot_sequence(self) -> tuple[int, ...]:
        seq = [self.sot]
        if self.multilingual:
            if self.language is not None:
                seq.append(self.language_token(self.language))
            seq.append(self.translate if self.task == "translate" else self.transcribe)
        return tuple(seq)

    @cached_property
    def sot_sequence_including_notimestamps(self) -> tuple[int, ...]:
        return (*self.sot_sequence, self.no_timestamps)

    # --- suppression sets ---------------------------------------------------------------
    @cached_property
    def non_speech_tokens(self) -> tuple[int, ...]:
        """Tokens of symbols that are not spoken (the ``-1`` suppression set).

        Speaker tags and annotations such as ♪, [ ( « are written in training captions but never
        spoken; suppressing them keeps a transcript to what was said. A token is kept when a
        leading space is part of it, since " -" and " '" occur in ordinary text.
        """
        symbols = list('"#()*+/:;<=>@[\\]^_`{|}~「」『』')
        symbols += ["<<", ">>", "<<<", ">>>", "--", "---", "-(", "-[", "('", '("', "((", "))", "(((", ")))", "[[", "]]", "{{", "}}", "♪♪", "♪♪♪"]
        miscellaneous = set("♩♪♫♬♭♮♯")
        result = {self.encode(" -")[0], self.encode(" '")[0]}
        for symbol in symbols + sorted(miscellaneous):
            for tokens in (self.encode(symbol), self.encode(" " + symbol)):
                if len(tokens) == 1 or symbol in miscellaneous:
                    result.add(tokens[0])
        return tuple(sorted(result))

    # --- words --------------------------------------------------------------------------
    def split_to_word_tokens(self, tokens: list[int]) -> tuple[list[str], list[list[int]]]:
        if self.language in NO_SPACE_LANGUAGES:
            return self._split_unicode(tokens)
        return self._split_spaces(tokens)

    def _split_unicode(self, tokens: list[int]) -> tuple[list[str], list[list[int]]]:
        """Split at points where the accumulated tokens decode to whole characters."""
        words: list[str] = []
        groups: list[list[int]] = []
        current: list[int] = []
        for t in tokens:
            current.append(t)
            text = self.hf.decode(current)
            if "\ufffd" not in text:
                words.append(text)
                groups.append(current)
                current = []
        return words, groups

    def _split_spaces(self, tokens: list[int]) -> tuple[list[str], list[list[int]]]:
        subwords, subword_tokens = self._split_unicode(tokens)
        words: list[str] = []
        groups: list[list[int]] = []
        for text, toks in zip(subwords, subword_tokens):
            special = toks[0] >= self.eot
            with_space = text.startswith(" ")
            punctuation = text.strip() in string.punctuation or (
                len(text.strip()) == 1 and unicodedata.category(text.strip())[0] == "P"
            )
            if special or with_space or punctuation or not words:
                words.append(text)
                groups.append(list(toks))
            else:
                words[-1] += text
                groups[-1].extend(toks)
        return words, groups


def repaired_json(path: Path) -> str:
    """The text of the ``tokenizer.json`` at ``path`` with its missing merges restored
    (``restore_missing_merges``)."""
    if not path.is_file():
        raise FileNotFoundError(f"tokenizer file not found: {path} (expected a tokenizer.json)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not a tokenizer.json ({e})") from None
    restored = restore_missing_merges(data)
    if restored:
        log.info("%s: restored %d BPE merge(s) missing from the file: %s", path, len(restored), ", ".join(restored))
    return json.dumps(data)


def restore_missing_merges(data: dict) -> list[str]:
    """Put back the BPE merges a converted ``tokenizer.json`` lost; returns the tokens they make.

    In a byte-level BPE vocabulary every token after the 256 single bytes is made by one merge,
    and merges are ranked in the order of the ids they make. Some converted multilingual
    Whisper files lack the very first merge (``Ġ t``, one line dropped with a header that
    file never had): " the", " to" and every other word starting with "t" after a space are
    then encoded as a lone space and the rest, which Whisper never writes itself. Prompts,
    prefixes and references encoded that way read as garbled text to the decoder.

    A token that no merge makes gets the merge of its two parts (both earlier tokens), at the
    rank of its id. Files without the problem are left alone.
    """
    model = data.get("model") or {}
    merges = model.get("merges")
    vocab: dict[str, int] | None = model.get("vocab")
    if model.get("type") != "BPE" or not merges or not vocab:
        return []
    as_lists = isinstance(merges[0], list)
    pairs = [tuple(m) if as_lists else tuple(m.split(" ", 1)) for m in merges]
    made = {a + b for a, b in pairs}
    special = {t["content"] for t in data.get("added_tokens", [])}
    restored: list[str] = []
    for token, i in sorted(vocab.items(), key=lambda item: item[1]):
        if i < 256 or len(token) < 2 or token in made or token in special:
            continue
        split = next(((token[:k], token[k:]) for k in range(1, len(token))
                      if vocab.get(token[:k], i) < i and vocab.get(token[k:], i) < i), None)
        if split is None:
            continue
        rank = min(i - 256, len(pairs))
        pairs.insert(rank, split)
        made.add(token)
        restored.append(token)
    if restored:
        model["merges"] = [list(p) for p in pairs] if as_lists else [" ".join(p) for p in pairs]
    return restored
