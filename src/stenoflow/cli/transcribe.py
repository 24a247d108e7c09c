"""`stenoflow transcribe`, `transcribe-batch` and `models`."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from stenoflow.output import FORMATS

if TYPE_CHECKING:

    from stenoflow.api import Model
from stenoflow.cli.bench import _list

log = logging.getLogger("stenoflow")


def cmd_transcribe(args: argparse.Namespace) -> int:
    from stenoflow.api import load_model

    if args.typical and not (args.speculative or args.medusa):
        raise ValueError("--typical accepts drafted tokens: give --speculative DRAFT or --medusa KIND")
    model = load_model(args.model, device=args.device, compute=args.compute, threads=args.threads)
    draft = model.draft_model(args.speculative) if args.speculative else None
    formats = list(FORMATS) if args.output_format == "all" else [args.output_format]
    failed: list[Path] = []
    for path in args.files:
        # One bad file (missing, corrupt, empty) is reported and the others still get transcribed,
        # as openai-whisper does; the exit status says that something failed.
        try:
            _transcribe_one(model, path, args, formats, draft)
        except (ValueError, OSError) as e:
            log.error("%s: skipped: %s", path, e)
            failed.append(path)
    if failed:
        log.error("%d of %d files failed: %s", len(failed), len(args.files), ", ".join(map(str, failed)))
        return 1
    return 0


def _transcribe_one(model: Model, path: Path, args: argparse.Namespace, formats: list[str],
                    draft: Model | None = None) -> None:
    from tqdm import tqdm

    from stenoflow.decoding.options import TYPICAL_PUBLISHED
    from stenoflow.output import write_outputs

    bar = None if args.no_progress else tqdm(total=0.0, unit="s", desc=path.name, file=sys.stderr,
                                              bar_format="{l_bar}{bar}| {n:.0f}/{total:.0f} s [{elapsed}<{remaining}]")

    def progress(done: float, total: float) -> None:
        if bar is not None:
            bar.total = round(total, 1)
            bar.n = round(done, 1)
            bar.refresh()

    try:
        segments_iter, info = model.transcribe(
            path, progress=progress, language=args.language, task=args.task,
            beam_size=args.beam_size, best_of=args.best_of, patience=args.patience,
            length_penalty=args.length_penalty, temperature=args.temperature,
            initial_prompt=args.initial_prompt, condition_on_previous_text=not args.no_condition_on_previous_text,
            without_timestamps=args.without_timestamps, word_timestamps=args.word_timestamps, hush=args.hush,
            draft=draft, medusa=args.medusa, lookahead=args.lookahead, adaptive_lookahead=args.adaptive_lookahead,
            typical=TYPICAL_PUBLISHED if args.typical else None,
        )
        segments = []
        for seg in segments_iter:
            segments.append(seg)
            line = f"[{seg.start:7.2f} -> {seg.end:7.2f}] {seg.text.strip()}"
            # Through the bar, so a segment line never lands inside the progress line.
            (bar.write(line, file=sys.stdout) if bar is not None else sys.stdout.write(line + "\n"))
    finally:
        if bar is not None:
            bar.close()
    written = write_outputs(segments, info, path, args.output_dir, formats)
    log.info("%s: language %s, %d segments -> %s", path, info.language, len(segments),
             ", ".join(str(p) for p in written))


def cmd_transcribe_batch(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from stenoflow.cluster.batch import BatchOptions, ManifestRow, run_batch
    from stenoflow.cluster.inputs import expand_inputs

    formats = FORMATS if args.output_format == "all" else tuple(_list(args.output_format))
    options = BatchOptions(model=args.model, compute=args.compute, actors=args.actors, threads=args.threads,
                           beam_size=args.beam_size, language=args.language, word_timestamps=args.word_timestamps,
                           formats=formats, output_dir=args.output_dir, ray_address=args.ray_address,
                           dashboard=args.dashboard, chunk_s=60 * args.chunk_minutes)
    inputs = expand_inputs(args.inputs)
    if not inputs:
        raise ValueError(f"no audio files in {' '.join(args.inputs)}")
    if args.verbose < 2:
        logging.getLogger("ray").setLevel(logging.WARNING)
    bar = None if args.no_progress else tqdm(total=len(inputs), unit="file", file=sys.stderr, desc="transcribe-batch")
    audio = 0.0

    def progress(row: ManifestRow) -> None:
        nonlocal audio
        audio += row.duration
        if bar is not None:
            bar.update(1)
            bar.set_postfix_str(f"{audio / 3600:.2f} h of audio")

    try:
        summary = run_batch(inputs, options, progress)
    finally:
        if bar is not None:
            bar.close()
    log.info("%d files: %d done now, %d done before, %d failed; %.2f h of audio at %.1fx real time "
             "(%d replicas x %d threads) -> %s", summary.files, summary.done, summary.skipped, summary.failed,
             summary.audio_s / 3600, summary.speed, summary.actors, summary.threads, args.output_dir)
    return 1 if summary.failed else 0


def cmd_models(args: argparse.Namespace) -> int:
    from stenoflow.weights.registry import available_models

    for entry in available_models():
        state = "ok" if entry.resolvable else f"unavailable: {entry.why_not}"
        sys.stdout.write(f"{entry.name:10s} {entry.format:12s} {state}  {entry.path or ''}\n")
    return 0
