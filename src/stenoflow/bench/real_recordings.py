"""The recordings of the real-speech set (:mod:`stenoflow.bench.real_speech`) and how each
source's package says what is said in them.

Each source has a parser that lists its recordings with their reference text (``PARSERS``,
by source name), read from the files the package ships: an annotation (``know.trs``), a test's
transcript, a game's word table, or the file names. The telephone conversation is a NIST
SPHERE file of mu-law samples, and the talking clock's are headerless mu-law; both are read
here and resampled through :func:`stenoflow.audio.io.load_audio`.
"""

from __future__ import annotations

import json
import re
import struct
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from stenoflow.audio.io import load_audio

KINDS = ("unscripted", "read", "word", "letter")


@dataclass(frozen=True)
class Recording:
    """One recording and what is said in it, as its source transcribes it.

    ``channel`` picks one channel of a multi-channel file (the telephone conversation has a
    speaker on each); ``raw_ulaw_rate`` marks a headerless mu-law file and its sample rate;
    ``degraded`` says how the recording is worse than a clean microphone.
    """

    source: str
    speaker: str
    kind: str  # one of KINDS
    text: str
    path: Path
    channel: int | None = None
    raw_ulaw_rate: int | None = None
    degraded: str | None = None

    @property
    def label(self) -> str:
        part = "" if self.channel is None else f"#ch{self.channel}"
        return f"{self.source}:{self.speaker}:{self.path.stem}{part}"

    @property
    def voice(self) -> str:
        return f"{self.source}:{self.speaker}"

    def load(self) -> np.ndarray:
        """The samples, 16 kHz mono float32 (one channel of it when ``channel`` is set)."""
        if self.path.suffix == ".sph":
            return _load_sphere(self.path, self.channel)
        if self.raw_ulaw_rate is not None:
            codes = np.frombuffer(self.path.read_bytes(), dtype=np.uint8)
            return load_audio(_pcm16_wav(_ulaw_to_float(codes), self.raw_ulaw_rate))
        return load_audio(self.path)


def _transcriber(folder: Path) -> list[Recording]:
    """Both sides of the telephone call, one channel each, with that speaker's turns.

    The annotation (``know.trs``) gives each turn its speaker; a turn shared by two speakers
    marks whose words follow with ``<Who nb="k"/>``. Noise marks (``{laugh}``, ``{inhale}``) are
    dropped, and words the transcriber was unsure of, ``((Yeah))``, keep their words. Which
    channel carries which speaker is measured: the louder channel during that speaker's turns.
    """
    audio = folder / "know.sph"
    trs = audio.with_suffix(".trs")
    root = ET.fromstring(trs.read_bytes())  # the file's XML declaration names its encoding
    words: dict[str, list[str]] = {}
    solo: dict[str, list[tuple[float, float]]] = {}
    for turn in root.iter("Turn"):
        speakers = (turn.get("speaker") or "").split()
        if not speakers:
            continue
        pieces: list[tuple[str, str]] = []  # (speaker, text)
        current = speakers[0]
        if turn.text:
            pieces.append((current, turn.text))
        for child in turn:
            if child.tag == "Who":
                current = speakers[int(child.get("nb", "1")) - 1]
            if child.tail:
                pieces.append((current, child.tail))
        for who, text in pieces:
            words.setdefault(who, []).extend(_clean_trs(text))
        if len(speakers) == 1:
            solo.setdefault(speakers[0], []).append(
                (float(turn.get("startTime", 0)), float(turn.get("endTime", 0))))
    channels = _channel_of(audio, solo)
    out = []
    for who in sorted(words):
        text = " ".join(words[who])
        if text:
            out.append(Recording("transcriber", f"know-{who}", "unscripted", text, audio,
                                 channel=channels[who], degraded="telephone, 8 kHz mu-law"))
    return out


_NOISE_MARK = re.compile(r"\{[^}]*\}|\[[^\]]*\]")
_UNSURE = re.compile(r"\(\(\s*(.*?)\s*\)\)")


def _clean_trs(text: str) -> list[str]:
    text = _NOISE_MARK.sub(" ", text)
    return _UNSURE.sub(r"\1", text).split()


def _channel_of(audio: Path, turns: dict[str, list[tuple[float, float]]]) -> dict[str, int]:
    header, data = _read_sphere(audio)
    n_ch = int(header["channel_count"])
    rate = int(header["sample_rate"])
    pcm = _ulaw_to_float(np.frombuffer(data, dtype=np.uint8)).reshape(-1, n_ch)
    found = {}
    for who, spans in turns.items():
        energy = np.zeros(n_ch)
        for start, end in spans:
            seg = pcm[int(start * rate) : int(end * rate)]
            energy += (seg.astype(np.float64) ** 2).sum(axis=0)
        found[who] = int(np.argmax(energy))
    if len(set(found.values())) != len(found):
        raise ValueError(f"{audio}: speakers {found} do not sit on separate channels")
    return found


def _sphinxtrain(folder: Path) -> list[Recording]:
    """``sa1.lsn`` lines read ``<s> SHE HAD ... </s> (sa1)``; the first names the recording."""
    line = next(ln for ln in (folder / "sa1.lsn").read_text(encoding="utf-8").splitlines()
                if ln.strip())
    m = re.search(r"<s>\s*(.*?)\s*</s>", line)
    if not m:
        raise ValueError(f"{folder / 'sa1.lsn'}: no transcript line")
    return [Recording("sphinxtrain", "timit-sa1", "read", m.group(1).lower(), folder / "sa1.wav")]


# saytime's file names spell what is said, except where the name drops an apostrophe or the
# dots of an abbreviation (the program composes times from these names).
_SAYTIME_SPELLING = {"oclock": "o'clock", "am": "a.m.", "pm": "p.m."}
_SAYTIME_RATE = 8000  # the files have no header: saytime plays them with `sox -t .ul -r 8000`


def _saytime(folder: Path) -> list[Recording]:
    out = []
    for path in sorted((folder / "saytime").glob("*.au"), key=_natural):
        stem = path.stem
        text = _SAYTIME_SPELLING.get(stem, stem.replace("_", " "))
        out.append(Recording("saytime", "clock", "word", text, path,
                             raw_ulaw_rate=_SAYTIME_RATE, degraded="8 kHz mu-law"))
    return out


# Scid's announcement files whose names are the word said; the rest (Back, CastleK, CastleQ,
# Promote, move, x, alert) are named for what they announce, not for their words.
_SCID_WORDS = ("1", "2", "3", "4", "5", "6", "7", "8", "King", "Queen", "Rook", "Bishop",
               "Knight", "Check", "Mate")


def _scid(folder: Path) -> list[Recording]:
    sounds = folder / "sounds"
    out = [Recording("scid", "announcer", "word", w, sounds / f"{w}.wav",
                     degraded="11 kHz") for w in _SCID_WORDS]
    out += [Recording("scid", "announcer", "letter", c, sounds / f"{c}.wav",
                      degraded="11 kHz") for c in "abcdefgh"]
    return [r for r in out if r.path.is_file()]


# KLettres' "syllables" that are spelling sounds rather than words.
_KLETTRES_SOUNDS = {"aw", "ch", "th"}


def _klettres(folder: Path) -> list[Recording]:
    out = []
    for lang in ("en", "en_GB"):
        xml = folder / lang / "sounds.xml"
        root = ET.fromstring(xml.read_bytes())
        for section, kind in (("alphabet", "letter"), ("syllables", "word")):
            for node in root.iter(section):
                for sound in node.iter("sound"):
                    name = (sound.get("name") or "").strip()
                    file = sound.get("file") or ""
                    if not name or not file or name.lower() in _KLETTRES_SOUNDS:
                        continue
                    path = folder / file  # "en/alpha/A.ogg", relative to the data folder
                    if path.is_file():
                        # Words are listed in capitals ("DOG"); case is not part of what is said.
                        text = name.lower() if kind == "word" else name
                        out.append(Recording("klettres", lang, kind, text, path))
    return out


# KTuberling's sound names are "<theme>_<object>"; the object is the word said. These few are
# left out because the name is not how the word is written (run together, misspelt, or an
# abbreviation said as letters).
_KTUBERLING_SKIP = {"palmtree", "fallingstar", "moonwalker", "sphynx", "broccolli", "ufo"}
_KTUBERLING_THEMES = ("egypt_", "moon_", "pizzeria_", "tv_")


def _ktuberling(folder: Path) -> list[Recording]:
    root = ET.fromstring((folder / "en.soundtheme").read_bytes())
    out = []
    for sound in root.iter("sound"):
        name = sound.get("name") or ""
        word = name
        for prefix in _KTUBERLING_THEMES:
            word = word.removeprefix(prefix)
        path = folder / (sound.get("file") or "")
        if word in _KTUBERLING_SKIP or "_" in word or not path.is_file():
            continue
        out.append(Recording("ktuberling", "en", "word", word, path))
    return out


def _tuxpaint(folder: Path) -> list[Recording]:
    """``<stamp>_desc.ogg`` speaks the English description: the first line of ``<stamp>.txt``."""
    out = []
    for desc in sorted((folder / "stamps").rglob("*_desc.ogg")):
        txt = desc.with_name(desc.name.removesuffix("_desc.ogg") + ".txt")
        if not txt.is_file():
            continue
        first = txt.read_text(encoding="utf-8", errors="replace").splitlines()
        text = first[0].strip() if first else ""
        if not text or "=" in text:  # no English line (the file starts with translations)
            continue
        out.append(Recording("tuxpaint", "en", "word", text, desc))
    return out


def _qabcs(folder: Path) -> list[Recording]:
    """Letters and pictures' names from ``abc1.json``; en_gb inherits what it does not override.

    Only recordings of the language's own folder are taken (en_gb leaves most words to en).
    Names are written in capitals for children; case is not part of what is said.
    """
    en = _qabcs_table(folder / "en" / "abc1.json", None)
    out = []
    for lang, base in (("en", None), ("en_gb", en)):
        table = _qabcs_table(folder / lang / "abc1.json", base)
        sounds = folder / lang / "sounds"
        for letter, entry in table.items():
            file = entry.get("sound_letter")
            if file and (sounds / "alpha" / file).is_file():
                out.append(Recording("qabcs", lang, "letter", letter, sounds / "alpha" / file))
            elif file and (sounds / "alpha" / file.lower()).is_file():
                out.append(Recording("qabcs", lang, "letter", letter,
                                     sounds / "alpha" / file.lower()))
            for item in entry.values():
                if not isinstance(item, dict):
                    continue
                name, pic = item.get("name"), item.get("sound_pic")
                if name and pic and (sounds / "words" / pic).is_file():
                    out.append(Recording("qabcs", lang, "word", str(name).lower(),
                                         sounds / "words" / pic))
    return out


def _qabcs_table(path: Path, base: dict[str, dict[str, Any]] | None) -> dict[str, dict[str, Any]]:
    raw = json.loads(path.read_text(encoding="utf-8"))
    table: dict[str, dict[str, Any]] = {k: {c: (dict(v) if isinstance(v, dict) else v)
                                            for c, v in e.items()}
                                        for k, e in (base or {}).items()}
    own_letters: dict[str, Any] = {}
    for block in raw.get("letters", []):
        for letter, entry in block.items():
            own_letters[letter] = entry
    for letter, entry in own_letters.items():
        row = table.setdefault(letter, {})
        for key, value in entry.items():
            if isinstance(value, dict):
                row.setdefault(key, {}).update(value)
            else:
                row[key] = value
    if base is not None:
        # A letter sound inherited from en is en's recording, not this language's.
        for letter, row in table.items():
            if "sound_letter" not in own_letters.get(letter, {}):
                row.pop("sound_letter", None)
    return table


def _wims(folder: Path) -> list[Recording]:
    """The word-stress exercise lists each word by syllable (``per/so/na/li/ty``) with its
    stressed syllable; the recording of each is ``images/<word>.mp3``."""
    data = (folder / "word_stress_patterns_tonic").read_text(encoding="latin-1")
    out = []
    for line in data.splitlines():
        line = line.strip().lstrip(":")
        if "/" not in line:
            continue
        word = line.replace("/", "")
        path = folder / "images" / f"{word}.mp3"
        if path.is_file():
            out.append(Recording("wims", "teacher", "word", word, path))
    return out


PARSERS: dict[str, Callable[[Path], list[Recording]]] = {
    "transcriber": _transcriber,
    "sphinxtrain": _sphinxtrain,
    "saytime": _saytime,
    "scid": _scid,
    "klettres": _klettres,
    "ktuberling": _ktuberling,
    "tuxpaint": _tuxpaint,
    "qabcs": _qabcs,
    "wims": _wims,
}


def _natural(path: Path) -> tuple[int, int | str]:
    return (0, int(path.stem)) if path.stem.isdigit() else (1, path.stem)


# --- NIST SPHERE (the telephone call) --------------------------------------------------------


def _read_sphere(path: Path) -> tuple[dict[str, str], bytes]:
    raw = path.read_bytes()
    if not raw.startswith(b"NIST_1A"):
        raise ValueError(f"{path}: not a NIST SPHERE file")
    size = int(raw[8:16].strip())
    header = {}
    for line in raw[16:size].decode("ascii", errors="replace").splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3:
            header[parts[0]] = parts[2].strip()
        if line.strip() == "end_head":
            break
    return header, raw[size:]


def _ulaw_to_float(codes: np.ndarray) -> np.ndarray:
    """G.711 mu-law bytes to float32 in [-1, 1]."""
    u = ~codes.astype(np.uint8)
    sign = u & 0x80
    exponent = (u >> 4) & 0x07
    mantissa = u & 0x0F
    magnitude = ((mantissa.astype(np.int32) << 3) + 0x84) << exponent.astype(np.int32)
    value = np.where(sign != 0, 0x84 - magnitude, magnitude - 0x84)
    return (value / 32768.0).astype(np.float32)


def _load_sphere(path: Path, channel: int | None) -> np.ndarray:
    """One channel (or the mix) of a mu-law SPHERE file, through load_audio for the resampling."""
    header, data = _read_sphere(path)
    if header.get("sample_coding", "").split(",")[0] != "ulaw":
        raise ValueError(f"{path}: only mu-law SPHERE files are handled")
    n_ch = int(header.get("channel_count", "1"))
    rate = int(header["sample_rate"])
    codes = np.frombuffer(data[: len(data) - len(data) % n_ch], dtype=np.uint8).reshape(-1, n_ch)
    pcm = _ulaw_to_float(codes)
    mono = pcm[:, channel] if channel is not None else pcm.mean(axis=1)
    return load_audio(_pcm16_wav(mono, rate))


def _pcm16_wav(samples: np.ndarray, rate: int) -> bytes:
    """A mono 16-bit WAV file in memory, for load_audio to resample."""
    ints = np.clip(np.round(samples * 32767), -32768, 32767).astype("<i2").tobytes()
    return (b"RIFF" + struct.pack("<I", 36 + len(ints)) + b"WAVEfmt "
            + struct.pack("<IHHIIHH", 16, 1, 1, rate, rate * 2, 2, 16)
            + b"data" + struct.pack("<I", len(ints)) + ints)
