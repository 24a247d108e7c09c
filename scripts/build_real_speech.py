#!/usr/bin/env python3
"""Fetch the real-speech sources (Debian packages) and build the real-speech streams.

Run from the repository root after ``scripts/setup.sh`` (which leaves the package lists
current):

    .venv/bin/python scripts/build_real_speech.py

Downloads each source with ``apt-get download`` unless it is already unpacked under
``$STENOFLOW_DATA/real_speech`` (or ``.cache/stenoflow/data/real_speech``), builds the cached
streams, and prints recordings, minutes, speakers and kinds per source. A second run downloads
nothing and reuses the streams.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

try:
    from stenoflow.bench import real_speech
except ModuleNotFoundError:  # not installed: run from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
    from stenoflow.bench import real_speech

logger = logging.getLogger("build_real_speech")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, default=None,
                        help="where the sources are unpacked (default: <data dir>/real_speech)")
    parser.add_argument("--fetch-only", action="store_true", help="download and unpack, no streams")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    started = time.perf_counter()
    try:
        root = real_speech.fetch(args.dest)
    except RuntimeError as e:
        logger.error("%s", e)
        return 1
    recs = real_speech.recordings(root)
    table = real_speech.summary(recs)
    print(f"{'source':<12} {'package':<24} {'clips':>5} {'file min':>8} {'speech min':>10} "
          f"{'speakers':>8}  kinds")
    total_s = total_speech = 0.0
    speakers = set()
    kinds: dict[str, int] = {}
    for name, row in table.items():
        src = real_speech.SOURCES[name]
        kind_text = ", ".join(f"{k} {n}" for k, n in sorted(row["kinds"].items()))
        print(f"{name:<12} {src.package:<24} {row['recordings']:>5} {row['seconds'] / 60:>8.2f} "
              f"{row['speech_seconds'] / 60:>10.2f} {len(row['speakers']):>8}  {kind_text}")
        total_s += row["seconds"]
        total_speech += row["speech_seconds"]
        speakers |= {f"{name}:{s}" for s in row["speakers"]}
        for k, n in row["kinds"].items():
            kinds[k] = kinds.get(k, 0) + n
    print(f"{'total':<12} {'':<24} {len(recs):>5} {total_s / 60:>8.2f} {total_speech / 60:>10.2f} "
          f"{len(speakers):>8}  " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
    degraded = sum(1 for r in recs if r.degraded)
    print(f"degraded (telephone / low-rate) recordings: {degraded}")
    if args.fetch_only:
        return 0
    clips = real_speech.real_streams(root)
    print()
    for clip in clips:
        print(f"stream {clip.name:<16} {clip.duration:7.1f} s  {len(clip.sentences):4d} recordings  "
              f"{len(set(clip.sentence_voices)):2d} speakers  {clip.audio_path}")
    print(f"{len(clips)} streams, {sum(c.duration for c in clips) / 60:.1f} min, "
          f"ready in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
