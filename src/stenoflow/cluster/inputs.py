"""What a batch job transcribes: directories, globs and manifests expanded to a list of inputs.

Each input has a source (a local path or a URI Ray Data can read, such as ``s3://...``) and a
key: the relative path, without suffix, its outputs are written under. Keys are unique, so two
``talk.wav`` files in different folders never overwrite each other's transcripts.
"""

from __future__ import annotations

import glob
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

AUDIO_SUFFIXES = frozenset({".wav", ".flac", ".mp3", ".ogg", ".opus", ".m4a", ".aac", ".webm", ".mp4", ".mka",
                            ".mkv", ".wma", ".aif", ".aiff", ".au", ".amr", ".3gp"})
MANIFEST_SUFFIXES = frozenset({".txt", ".lst", ".list", ".jsonl"})


@dataclass(frozen=True)
class BatchInput:
    source: str  # a local path (absolute) or a URI
    key: str  # relative output path without suffix, e.g. "day1/talk"


def is_uri(text: str) -> bool:
    return "://" in text and not text.startswith("file://")


def expand_inputs(inputs: Sequence[str]) -> list[BatchInput]:
    """Directories (searched recursively for audio files), globs, single files and manifests
    (``.txt``/``.lst``/``.list``: one path or URI per line, ``#`` comments; ``.jsonl``: objects with
    a ``path``), in the order given, each source once. Raises ValueError for an input that
    matches nothing, so a typo is not a silently empty job."""
    found: list[tuple[str, str]] = []  # (source, key)
    for given in inputs:
        if is_uri(given):
            found.append((given, PurePosixPath(given.split("://", 1)[1]).with_suffix("").name))
            continue
        path = Path(given.removeprefix("file://")).expanduser()
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in AUDIO_SUFFIXES)
            found += [(str(p.resolve()), p.relative_to(path).with_suffix("").as_posix()) for p in files]
        elif path.is_file() and path.suffix.lower() in MANIFEST_SUFFIXES:
            found += [(s, PurePosixPath(s.split("://", 1)[-1]).with_suffix("").name)
                      for s in _manifest_entries(path)]
        elif path.is_file():
            found.append((str(path.resolve()), path.with_suffix("").name))
        elif glob.has_magic(given):
            files = sorted(Path(p) for p in glob.glob(str(path), recursive=True) if Path(p).is_file())
            found += [(str(p.resolve()), p.with_suffix("").name) for p in files]
        else:
            raise ValueError(f"{given}: no such file, directory or glob match")
    return _unique(found)


def _manifest_entries(path: Path) -> Iterable[str]:
    base = path.parent
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if path.suffix.lower() == ".jsonl":
                try:
                    entry = json.loads(line)["path"]
                except (ValueError, KeyError, TypeError) as e:
                    raise ValueError(f"{path}:{n}: expected a JSON object with a \"path\"") from e
            else:
                entry = line
            yield entry if is_uri(entry) else str((base / Path(entry).expanduser()).resolve())


def _unique(found: Iterable[tuple[str, str]]) -> list[BatchInput]:
    """Each source once; a key already taken gets ``-2``, ``-3``, ... appended."""
    seen: set[str] = set()
    keys: set[str] = set()
    out: list[BatchInput] = []
    for source, key in found:
        if source in seen:
            continue
        seen.add(source)
        unique, n = key, 1
        while unique in keys:
            n += 1
            unique = f"{key}-{n}"
        keys.add(unique)
        out.append(BatchInput(source, unique))
    return out
