"""Token ids of one Whisper vocabulary as token ids of another, through their bytes.

A draft model with another tokenizer (``tiny.en``'s English GPT-2 vocabulary drafting for the
multilingual ``base``) proposes ids the main model does not know, and must read the ids the main
model accepted. Both vocabularies are byte-level BPE over the same byte alphabet, so a token is a
byte string and a run of text tokens is a byte string too (seed 004, Alg. 2, mapped by runs
rather than one token at a time):

* a run of text tokens is re-encoded by the other tokenizer from its text, so words the two
  vocabularies split differently (numbers, rare words, punctuation) come out as the other
  tokenizer would write them; a run ending inside a UTF-8 character keeps its decodable part as
  text and maps the rest byte for byte through the other BPE;
* end-of-text maps to end-of-text, a timestamp to the timestamp of the same time, and any other
  special token to the token of the same name (``<|en|>``), or to nothing where the other
  vocabulary has no such token (``<|translate|>`` in an English-only one).

Only acceptance depends on how good the map is: the main model verifies every mapped token.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

from stenoflow.tokenizer import Tokenizer


@cache
def _byte_decoder() -> dict[str, int]:
    """GPT-2's printable stand-in characters of the 256 bytes, back to the bytes."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars = list(printable)
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars)}


@cache
def _byte_encoder() -> dict[int, str]:
    """The 256 bytes to GPT-2's printable stand-in characters."""
    return {b: c for c, b in _byte_decoder().items()}


def token_bytes(tokenizer: Tokenizer, token: int) -> bytes:
    """The bytes a text token stands for."""
    piece = tokenizer.hf.id_to_token(token)
    if piece is None:
        raise ValueError(f"token {token} is not in the vocabulary of {tokenizer.path}")
    decoder = _byte_decoder()
    return bytes(decoder[c] for c in piece)


class TokenBridge:
    """Maps token sequences of ``source``'s vocabulary to ``target``'s (one direction)."""

    def __init__(self, source: Tokenizer, target: Tokenizer, identity: bool | None = None) -> None:
        self.source = source
        self.target = target
        # Comparing two vocabularies serialises both (megabytes): ``reverse`` reuses the answer.
        self.identity = source.hf.to_str() == target.hf.to_str() if identity is None else identity
        self._bytes: dict[int, bytes] = {}
        self._special: dict[int, int | None] = {}

    def reverse(self) -> TokenBridge:
        """The bridge the other way (target ids to source ids)."""
        return TokenBridge(self.target, self.source, self.identity)

    def convert(self, tokens: Sequence[int]) -> list[int]:
        """``tokens`` (source ids) as target ids: same text, same timestamps, same specials."""
        if self.identity:
            return list(tokens)
        out: list[int] = []
        run: list[int] = []
        for t in tokens:
            if t < self.source.eot:
                run.append(t)
                continue
            out += self._text(run)
            run = []
            mapped = self.special(t)
            if mapped is not None:
                out.append(mapped)
        out += self._text(run)
        return out

    def special(self, token: int) -> int | None:
        """The target id of a special or timestamp token (None: the target has no such token)."""
        s, t = self.source, self.target
        if token == s.eot:
            return t.eot
        if token >= s.timestamp_begin:
            return t.timestamp_begin + token - s.timestamp_begin
        if token not in self._special:
            name = s.hf.id_to_token(token)
            target = t.hf.token_to_id(name) if name is not None else None
            self._special[token] = target if target is not None and t.eot <= target < t.timestamp_begin else None
        return self._special[token]

    def _text(self, run: list[int]) -> list[int]:
        if not run:
            return []
        data = b"".join(self._token_bytes(t) for t in run)
        try:
            return self.target.encode(data.decode("utf-8"))
        except UnicodeDecodeError as e:  # the run ends (or breaks) inside a character
            head, tail = data[: e.start], data[e.start :]
            return self.target.encode(head.decode("utf-8", errors="replace")) + self._raw(tail)

    def _raw(self, data: bytes) -> list[int]:
        """Bytes that are no text on their own, through the target's BPE without pre-splitting."""
        table = _byte_encoder()
        pieces = self.target.hf.model.tokenize("".join(table[b] for b in data))
        return [p.id for p in pieces]

    def _token_bytes(self, token: int) -> bytes:
        data = self._bytes.get(token)
        if data is None:
            data = self._bytes[token] = token_bytes(self.source, token)
        return data
