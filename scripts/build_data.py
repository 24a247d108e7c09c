#!/usr/bin/env python3
"""Build (or confirm the cache of) the default evaluation sets.

Run from the repository root after ``scripts/setup.sh``:

    .venv/bin/python scripts/build_data.py

It makes jfk (checked only: setup.sh fetches it), 20 short eval clips, the 2-minute long-form
recording and three 5-minute streams under ``$STENOFLOW_DATA`` or ``.cache/stenoflow/data``.
A second run reuses everything and takes about a second.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

try:
    from stenoflow.bench import datasets
except ModuleNotFoundError:  # not installed: run from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
    from stenoflow.bench import datasets

logger = logging.getLogger("build_data")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log every cached clip")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    started = time.perf_counter()
    clips = datasets.build_default_sets()
    elapsed = time.perf_counter() - started
    total = sum(c.duration for c in clips)
    logger.info("data dir: %s", datasets.data_dir())
    for clip in clips:
        logger.info("  %-22s %7.1f s  %s", clip.name, clip.duration, clip.audio_path)
    logger.info("%d clips, %.1f min of audio, ready in %.1f s", len(clips), total / 60, elapsed)
    if not any(c.name == "jfk" for c in clips):
        logger.error("jfk.wav is missing: run `bash scripts/setup.sh`")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
