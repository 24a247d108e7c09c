"""A development set of real human speech taken from Debian packages, with its references.

The synthesized sets cover many voices, but synthesized voices are not people, and the
``recorded`` stream is under a minute. This module gathers the recorded speech that ships,
together with what is said in it, inside packages of the one registry of real recordings these
machines reach (Debian's), and lays it into a few cached streams:

=============== ============================ ==============================================
source          what it is                   where the reference text comes from
=============== ============================ ==============================================
transcriber     24 s of an English telephone ``know.trs``, the Transcriber annotation of
                conversation (CALLFRIEND),   it (two speakers, one per channel, spontaneous:
                8 kHz mu-law, two channels   fillers, restarts, "you know", laughter)
sphinxtrain     one TIMIT sentence (SA1)     ``sa1.lsn``, the test's transcript
saytime         a talking clock's words and  the file names (``the_time_is.au``, ``13.au``)
                numbers, 8 kHz mu-law
scid            a chess program's spoken     the file names (``Knight.wav``, ``5.wav``)
                pieces, files and ranks
klettres        KDE alphabet tutor: letters  ``sounds.xml`` (``<sound name="dog" ...>``)
                and short words, US and UK
ktuberling      KDE "potato guy": names of   ``en.soundtheme`` (``<sound name="egypt_camel">``)
                the stamps
tuxpaint        Tux Paint stamps' spoken     the first line of each stamp's ``.txt``
                descriptions ("A crow.")
qabcs           alphabet game for children:  ``abc1.json`` (``"name": "AIRPLANE"``)
                letters and words, US and UK
wims            WIMS word-stress exercise:   the exercise's data file (``per/so/na/li/ty``)
                34 English words
=============== ============================ ==============================================

About 12 speakers (one per source and accent; the package does not always name them) and
9 minutes of speech, most of it single words: the registries hold little else with a
transcript (see ``scripts/build_real_speech.py`` for the tally). ``fetch`` downloads each
package with ``apt-get download`` and unpacks only the members named here into
``<data>/real_speech/<source>/``; ``recordings`` lists every recording with its reference; and
``real_streams`` joins them, trimmed to their voiced extent and levelled, with 0.8 s pauses, into
streams of at most a few minutes whose sentence spans are known.
"""

from __future__ import annotations

import fnmatch
import gzip
import json
import logging
import re
import shutil
import struct
import subprocess
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from stenoflow.audio.io import SAMPLE_RATE, load_audio
from stenoflow.bench import mixing
from stenoflow.bench.clips import Clip, Timeline, data_dir, load_cached, write_clip

log = logging.getLogger(__name__)

SUBDIR = "real_speech"
PAUSE_S = 0.8
EDGE_S = 0.3
LEVEL_DBFS = -20.0
TRIM_DB = -40.0  # below the loudest 10 ms frame: what counts as silence at a recording's edges
TRIM_MARGIN_S = 0.12  # kept around the voiced extent, so soft onsets and codas stay whole
MAX_STREAM_S = 240.0
VERSION = 1
MARKER = "SOURCE.json"  # written last in each source's folder: the unpacking finished

KINDS = ("unscripted", "read", "word", "letter")


@dataclass(frozen=True)
class Source:
    """A Debian package and the members of it that hold recordings and their transcripts."""

    name: str
    package: str
    members: tuple[str, ...]  # paths inside the package, each a file or a folder ("*": any name)
    description: str


SOURCES: dict[str, Source] = {
    s.name: s
    for s in (
        Source("transcriber", "transcriber",
               ("usr/share/doc/transcriber/examples/know.sph.gz",
                "usr/share/doc/transcriber/examples/know.trs",
                "usr/share/doc/transcriber/examples/README"),
               "telephone conversation (CALLFRIEND excerpt) with its Transcriber annotation"),
        Source("sphinxtrain", "sphinxtrain",
               ("usr/lib/*/sphinxtrain/python/cmusphinx/test/sa1.wav",
                "usr/lib/*/sphinxtrain/python/cmusphinx/test/sa1.lsn"),
               "TIMIT sentence SA1 from SphinxTrain's tests"),
        Source("saytime", "saytime", ("usr/share/saytime",), "talking clock's words, 8 kHz mu-law"),
        Source("scid", "scid-data", ("usr/share/scid/sounds",), "chess move announcements"),
        Source("klettres", "klettres-data",
               ("usr/share/klettres/en", "usr/share/klettres/en_GB"),
               "KLettres letters and words, US and UK English"),
        Source("ktuberling", "ktuberling-data",
               ("usr/share/ktuberling/sounds/en", "usr/share/ktuberling/sounds/en.soundtheme"),
               "KTuberling stamp names, English"),
        Source("tuxpaint", "tuxpaint-stamps-default", ("usr/share/tuxpaint/stamps",),
               "Tux Paint stamps' English spoken descriptions"),
        Source("qabcs", "qabcs-data",
               ("usr/share/qabcs/abcs/en", "usr/share/qabcs/abcs/en_gb"),
               "qABCs letters and words, US and UK English"),
        Source("wims", "wims-help",
               ("var/lib/wims/public_html/modules/help/example/oefquicktool.fr/images",
                ("var/lib/wims/public_html/modules/help/example/oefquicktool.fr/"
                 "word_stress_patterns_tonic")),
               "WIMS word-stress exercise words"),
    )
}

# Which files of a folder member to keep (the rest of tuxpaint's stamps are pictures and the
# descriptions in other languages; only the English description and its text are wanted).
_KEEP: dict[str, re.Pattern[str]] = {
    "tuxpaint": re.compile(r"(_desc\.ogg|\.txt)$"),
    "wims": re.compile(r"(word_stress_patterns_tonic|images/[a-z]+\.mp3)$"),
}

# Streams: (name, sources, kinds). A group longer than MAX_STREAM_S is split into parts.
STREAMS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("real-phone", ("transcriber", "sphinxtrain", "saytime", "scid"),
     ("unscripted", "read", "word")),
    ("real-words", ("klettres", "ktuberling", "wims", "tuxpaint", "qabcs"), ("word",)),
    ("real-letters", ("klettres", "qabcs", "scid"), ("letter",)),
)


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


# --- fetching -------------------------------------------------------------------------------


def real_speech_dir() -> Path:
    return data_dir() / SUBDIR


def available(root: Path | None = None) -> bool:
    """Whether every source is unpacked (``fetch`` does it)."""
    base = root or real_speech_dir()
    return all((base / name / MARKER).is_file() for name in SOURCES)


def fetch(dest: Path | None = None, sources: Iterable[str] | None = None) -> Path:
    """Download and unpack each source that is not already there; return the folder.

    Each package comes from ``apt-get download`` (no root needed, but the package lists must be
    current: ``apt-get update``), and only its members named in :data:`SOURCES` are unpacked,
    into ``<dest>/<source>/`` with a ``SOURCE.json`` written last as the sign it is complete.
    """
    base = dest or real_speech_dir()
    base.mkdir(parents=True, exist_ok=True)
    for name in sources or SOURCES:
        src = SOURCES[name]
        target = base / name
        if (target / MARKER).is_file():
            log.info("real speech: %s already unpacked in %s", name, target)
            continue
        with tempfile.TemporaryDirectory(prefix=f"real-{name}-") as tmp:
            deb = _apt_download(src.package, Path(tmp))
            version = _deb_field(deb, "Version")
            log.info("real speech: unpacking %s %s (%.1f MB) into %s", src.package, version,
                     deb.stat().st_size / 1e6, target)
            part = base / f"{name}.part"
            shutil.rmtree(part, ignore_errors=True)
            count = _unpack(deb, src, part)
            _gunzip_members(part)
            (part / MARKER).write_text(json.dumps({
                "source": name, "registry": "debian", "package": src.package, "version": version,
                "deb": deb.name, "deb_bytes": deb.stat().st_size, "members": list(src.members),
                "files": count}, indent=1) + "\n", encoding="utf-8")
            shutil.rmtree(target, ignore_errors=True)
            part.rename(target)
            log.info("real speech: %s ready (%d files)", name, count)
    return base


def _apt_download(package: str, into: Path) -> Path:
    cmd = ["apt-get", "download", package]
    log.info("real speech: %s", " ".join(cmd))
    try:
        done = subprocess.run(cmd, cwd=into, capture_output=True, text=True, timeout=900,
                              check=False)
    except FileNotFoundError as e:
        raise RuntimeError("apt-get is not on this machine: the real-speech set comes from "
                           "Debian packages") from e
    debs = sorted(into.glob(f"{package}_*.deb"))
    if done.returncode != 0 or not debs:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"`{' '.join(cmd)}` failed (exit {done.returncode}): "
                           f"{' | '.join(tail) or 'no .deb written'}; if the package is unknown, "
                           "run `apt-get update` first")
    return debs[-1]


def _deb_field(deb: Path, field: str) -> str:
    done = subprocess.run(["dpkg-deb", "-f", str(deb), field], capture_output=True, text=True,
                          check=True)
    return done.stdout.strip()


def _unpack(deb: Path, src: Source, into: Path) -> int:
    """Stream the package's file tree and extract the wanted members, relative to their folder.

    A member ``usr/share/klettres/en`` lands as ``<into>/en``; a file member as ``<into>/<name>``.
    """
    wanted = [PurePosixPath(m) for m in src.members]
    keep = _KEEP.get(src.name)
    into.mkdir(parents=True)
    count = 0
    proc = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    try:
        with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
            for member in tar:
                if not member.isfile():
                    continue
                path = PurePosixPath(member.name.removeprefix("./"))
                rel = _member_path(path, wanted)
                if rel is None:
                    continue
                if keep is not None and not keep.search(str(path)):
                    continue
                out = into / Path(*rel.parts)
                out.parent.mkdir(parents=True, exist_ok=True)
                data = tar.extractfile(member)
                assert data is not None
                with open(out, "wb") as f:
                    shutil.copyfileobj(data, f)
                count += 1
    finally:
        proc.stdout.close()
        if proc.wait() != 0:
            raise RuntimeError(f"dpkg-deb could not read {deb}")
    missing = [m for m in wanted if not (into / m.name).exists()]
    if missing:
        raise RuntimeError(f"{deb.name} lacks {', '.join(map(str, missing))}")
    return count


def _member_path(path: PurePosixPath, wanted: Sequence[PurePosixPath]) -> PurePosixPath | None:
    """Where ``path`` goes under the source's folder, or None when no member holds it."""
    for w in wanted:
        if fnmatch.fnmatchcase(str(path), str(w)):
            return PurePosixPath(w.name)
        if w in path.parents:
            return PurePosixPath(w.name) / path.relative_to(w)
    return None


def _gunzip_members(folder: Path) -> None:
    """Decompress ``*.gz`` members (Debian gzips large files under /usr/share/doc)."""
    for gz in folder.rglob("*.gz"):
        with gzip.open(gz, "rb") as f_in, open(gz.with_suffix(""), "wb") as f_out:
            shutil.copyfileobj(f_in, f_out)
        gz.unlink()


# --- the recordings and their transcripts ----------------------------------------------------


def recordings(root: Path | None = None, sources: Iterable[str] | None = None) -> list[Recording]:
    """Every recording of the unpacked sources, with the reference text its source gives."""
    base = root or real_speech_dir()
    out: list[Recording] = []
    for name in sources or SOURCES:
        folder = base / name
        if not (folder / MARKER).is_file():
            raise FileNotFoundError(f"real speech source {name!r} is not unpacked in {folder}: "
                                    "run `python scripts/build_real_speech.py`")
        found = _PARSERS[name](folder)
        if not found:
            raise ValueError(f"no recordings found for {name} in {folder}")
        out.extend(found)
    return out


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


_PARSERS = {
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


# --- streams ---------------------------------------------------------------------------------


def real_streams(root: Path | None = None, max_s: float = MAX_STREAM_S) -> list[Clip]:
    """The recordings joined into streams (see :data:`STREAMS`), built once and cached.

    Each recording is trimmed to its voiced extent (plus a short margin) and set to one speech
    level, then laid after the previous one with :data:`PAUSE_S` of silence; a group longer
    than ``max_s`` is split into parts (``real-words-1``, ``real-words-2``, ...).
    """
    base = root or real_speech_dir()
    all_recs = recordings(base)
    clips = []
    for name, sources, kinds in STREAMS:
        recs = [r for s in sources for r in all_recs if r.source == s and r.kind in kinds]
        pieces = [(r.voice, r.label, r.text, _prepared(r)) for r in recs]
        parts = _split(pieces, max_s)
        for k, part in enumerate(parts, 1):
            stream = name if len(parts) == 1 else f"{name}-{k}"
            clips.append(_stream(stream, part, base / "streams"))
    return clips


def _prepared(rec: Recording) -> np.ndarray:
    return mixing.set_level(_trimmed(rec.load(), rec.label), LEVEL_DBFS)


def _trimmed(audio: np.ndarray, label: str) -> np.ndarray:
    trimmed = mixing.trim_silence(audio, threshold_db=TRIM_DB, margin_s=TRIM_MARGIN_S)
    if trimmed.size == 0:
        raise ValueError(f"{label}: silent")
    return trimmed


Piece = tuple[str, str, str, np.ndarray]  # (voice, label, text, samples)


def _split(pieces: Sequence[Piece], max_s: float) -> list[list[Piece]]:
    total = sum(p[3].size for p in pieces) / SAMPLE_RATE + PAUSE_S * len(pieces)
    n = max(1, int(np.ceil(total / max_s)))
    target = total / n
    parts: list[list[Piece]] = [[]]
    length = 0.0
    for p in pieces:
        seconds = p[3].size / SAMPLE_RATE + PAUSE_S
        if parts[-1] and length + seconds > target * 1.02 and len(parts) < n:
            parts.append([])
            length = 0.0
        parts[-1].append(p)
        length += seconds
    return parts


def _stream(name: str, pieces: Sequence[Piece], folder: Path) -> Clip:
    params = {"kind": "real_speech", "version": VERSION, "pause": PAUSE_S, "edge": EDGE_S,
              "level": LEVEL_DBFS, "trim": [TRIM_DB, TRIM_MARGIN_S],
              "pieces": [(label, text, int(audio.size)) for _, label, text, audio in pieces]}
    stem = folder / name
    clip = load_cached(stem, params)
    if clip is not None:
        return clip
    timeline = Timeline()
    timeline.pause(EDGE_S)
    for k, (voice, _label, text, audio) in enumerate(pieces):
        if k:
            timeline.pause(PAUSE_S)
        timeline.speech(audio, text, voice)
    timeline.pause(EDGE_S)
    audio = timeline.render().astype(np.float32)
    clip = write_clip(stem, params, audio, timeline, "human", name, noise_snr_db=None,
                      extra={"labels": [label for _, label, _, _ in pieces]})
    log.info("built real-speech stream %s: %.1f s, %d recordings", name, clip.duration,
             len(pieces))
    return clip


def summary(recs: Sequence[Recording]) -> dict[str, dict[str, Any]]:
    """Per source: recordings, seconds of audio (whole files, and trimmed to their voiced
    extent as the streams hold them), speakers and recordings by kind."""
    out: dict[str, dict[str, Any]] = {}
    for r in recs:
        row = out.setdefault(r.source, {"recordings": 0, "seconds": 0.0, "speech_seconds": 0.0,
                                        "speakers": set(), "kinds": {}})
        audio = r.load()
        row["recordings"] += 1
        row["seconds"] += audio.size / SAMPLE_RATE
        row["speech_seconds"] += _trimmed(audio, r.label).size / SAMPLE_RATE
        row["speakers"].add(r.speaker)
        row["kinds"][r.kind] = row["kinds"].get(r.kind, 0) + 1
    return out
