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
``<data>/real_speech/<source>/``; ``recordings`` lists every recording with its reference (read
by :mod:`.real_recordings`); and
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
import subprocess
import tarfile
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from stenoflow.audio.io import SAMPLE_RATE
from stenoflow.bench import mixing
from stenoflow.bench.clips import Clip, Timeline, data_dir, load_cached, write_clip
from stenoflow.bench.real_recordings import PARSERS, Recording

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


# --- fetching -------------------------------------------------------------------------------


def real_speech_dir() -> Path:
    return data_dir() / SUBDIR


def available(root: Path | None = None) -> bool:
    """Whether every source is unpacked (``fetch`` does it)."""
    base = root or real_speech_dir()
    return all((base / name / MARKER).is_file() for name in SOURCES)


def fetch(dest: Path | None = None, sources: Iterable[str] | None = None,
          catalog: Mapping[str, Source] = SOURCES) -> Path:
    """Download and unpack each source of ``catalog`` (or those named) that is not already there;
    return the folder.

    Each package comes from ``apt-get download`` (no root needed, but the package lists must be
    current: ``apt-get update``), and only its members named in its :class:`Source` are unpacked,
    into ``<dest>/<source>/`` with a ``SOURCE.json`` written last as the sign it is complete.
    """
    base = dest or real_speech_dir()
    base.mkdir(parents=True, exist_ok=True)
    for name in sources or catalog:
        src = catalog[name]
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
        found = PARSERS[name](folder)
        if not found:
            raise ValueError(f"no recordings found for {name} in {folder}")
        out.extend(found)
    return out


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
        pieces = [(r.voice, r.label, r.text, prepared(r)) for r in recs]
        parts = _split(pieces, max_s)
        for k, part in enumerate(parts, 1):
            stream = name if len(parts) == 1 else f"{name}-{k}"
            clips.append(joined_stream(stream, part, base / "streams"))
    return clips


def prepared(rec: Recording) -> np.ndarray:
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


def joined_stream(name: str, pieces: Sequence[Piece], folder: Path) -> Clip:
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
