"""The ``stenoflow`` command line: the only place that parses arguments.

Each subcommand is a thin layer over the Python API.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from stenoflow.output import FORMATS

log = logging.getLogger("stenoflow")


def _temperatures(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(t) for t in text.split(","))
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"temperature must be a number or a comma list, got {text!r}") from e
    return values


def add_model_args(p: argparse.ArgumentParser, default_compute: str = "float32") -> None:
    p.add_argument("--model", default="tiny.en", help="tiny.en, base, or a path to a model file/directory")
    p.add_argument("--compute", default=default_compute, choices=["float32", "int8", "float16"],
                   help="precision: float32 (default), int8 (dynamic quantisation, CPU), float16 (CUDA)")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--threads", type=int, default=None, help="CPU threads for PyTorch (default: all cores)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="stenoflow", description="Fast, low-latency Whisper speech recognition.")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    sub = parser.add_subparsers(dest="command", required=True)

    t = sub.add_parser("transcribe", help="transcribe audio files")
    t.add_argument("files", nargs="+", type=Path, help="audio files (wav, flac, ogg, mp3, m4a, ...)")
    add_model_args(t)
    t.add_argument("--language", default=None, help="language code; default: detect (multilingual models)")
    t.add_argument("--task", default="transcribe", choices=["transcribe", "translate"])
    t.add_argument("--beam-size", type=int, default=5, help="beams (1 = greedy)")
    t.add_argument("--temperature", type=_temperatures, default=(0.0, 0.2, 0.4, 0.6, 0.8, 1.0),
                   help="temperature, or a comma list tried in turn on failure (default 0,0.2,...,1)")
    t.add_argument("--best-of", type=int, default=5, help="samples per temperature above 0")
    t.add_argument("--patience", type=float, default=None)
    t.add_argument("--length-penalty", type=float, default=None)
    t.add_argument("--initial-prompt", default=None, help="text to condition the first window on")
    t.add_argument("--no-condition-on-previous-text", action="store_true")
    t.add_argument("--without-timestamps", action="store_true")
    t.add_argument("--word-timestamps", action="store_true", help="word times by cross-attention alignment")
    t.add_argument("--hush", action="store_true",
                   help="encode short windows as speech + the model's hush word instead of 30 s padding")
    t.add_argument("--output-format", "-f", default="txt", choices=[*FORMATS, "all"])
    t.add_argument("--output-dir", "-o", type=Path, default=Path("."))
    t.add_argument("--no-progress", action="store_true", help="no progress bar")

    sub.add_parser("models", help="list the named models and whether they resolve here")

    b = sub.add_parser("bench", help="benchmarks against peers, in the same run")
    bsub = b.add_subparsers(dest="bench", required=True)
    bt = bsub.add_parser("transcribe", help="file transcription: stenoflow vs faster-whisper")
    bt.add_argument("--models", default="tiny.en,base", help="comma list of model names")
    bt.add_argument("--computes", default="float32,int8", help="comma list: float32,int8")
    bt.add_argument("--threads", type=int, default=2)
    bt.add_argument("--beam-size", type=int, default=5)
    bt.add_argument("--long-minutes", type=float, default=2.0, help="length of the synthesized long-form file")
    bt.add_argument("--repeats", type=int, default=3, help="timing repeats (best of)")
    bt.add_argument("--out", type=Path, default=Path("bench-results/transcribe.json"))

    h = sub.add_parser("train-hush", help="train a hush word (0.5 s of audio that replaces 30 s padding)")
    h.add_argument("--model", default="tiny.en")
    h.add_argument("--steps", type=int, default=1000)
    h.add_argument("--clips-per-step", type=int, default=3)
    h.add_argument("--lr", type=float, default=1e-3)
    h.add_argument("--amplitude", type=float, default=0.1, help="bound on |sample|")
    h.add_argument("--eot-weight", type=float, default=4.0)
    h.add_argument("--train-clips", type=int, default=150)
    h.add_argument("--heldout-clips", type=int, default=16)
    h.add_argument("--eval-every", type=int, default=100)
    h.add_argument("--threads", type=int, default=None)
    h.add_argument("--run-dir", type=Path, default=None, help="checkpoints (resumable); default .cache/stenoflow/hush-runs/MODEL")
    h.add_argument("--out", type=Path, default=None, help="where to write the hush word (.npz)")

    bh = bsub.add_parser("hush", help="input schemes after short speech: padding, zeros, noise, hush word")
    bh.add_argument("--models", default="tiny.en,base")
    bh.add_argument("--clips", type=int, default=20)
    bh.add_argument("--threads", type=int, default=2)
    bh.add_argument("--out", type=Path, default=Path("bench-results"))

    d = sub.add_parser("data", help="evaluation and training data sets")
    dsub = d.add_subparsers(dest="data", required=True)
    dsub.add_parser("build", help="synthesize and cache the default data sets")
    return parser


def cmd_transcribe(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from stenoflow.api import load_model
    from stenoflow.output import write_outputs

    model = load_model(args.model, device=args.device, compute=args.compute, threads=args.threads)
    formats = list(FORMATS) if args.output_format == "all" else [args.output_format]
    for path in args.files:
        bar = None if args.no_progress else tqdm(total=0.0, unit="s", desc=path.name, file=sys.stderr,
                                                  bar_format="{l_bar}{bar}| {n:.0f}/{total:.0f} s [{elapsed}<{remaining}]")

        def progress(done: float, total: float) -> None:
            if bar is not None:
                bar.total = round(total, 1)
                bar.n = round(done, 1)
                bar.refresh()

        segments_iter, info = model.transcribe(
            path, progress=progress, language=args.language, task=args.task,
            beam_size=args.beam_size, best_of=args.best_of, patience=args.patience,
            length_penalty=args.length_penalty, temperature=args.temperature,
            initial_prompt=args.initial_prompt, condition_on_previous_text=not args.no_condition_on_previous_text,
            without_timestamps=args.without_timestamps, word_timestamps=args.word_timestamps, hush=args.hush,
        )
        segments = []
        for seg in segments_iter:
            segments.append(seg)
            line = f"[{seg.start:7.2f} -> {seg.end:7.2f}] {seg.text.strip()}"
            (bar.write(line) if bar is not None else sys.stdout.write(line + "\n"))
        if bar is not None:
            bar.close()
        written = write_outputs(segments, info, path, args.output_dir, formats)
        log.info("%s: language %s, %d segments -> %s", path, info.language, len(segments),
                 ", ".join(str(p) for p in written))
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    from stenoflow.weights.registry import available_models

    for entry in available_models():
        state = "ok" if entry.resolvable else f"unavailable: {entry.why_not}"
        sys.stdout.write(f"{entry.name:10s} {entry.format:12s} {state}  {entry.path or ''}\n")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    if args.bench == "transcribe":
        from stenoflow.bench.transcribe_bench import BenchOptions, run_transcribe_bench

        opts = BenchOptions(models=tuple(args.models.split(",")), computes=tuple(args.computes.split(",")),
                            threads=args.threads, beam_size=args.beam_size, long_minutes=args.long_minutes,
                            repeats=args.repeats)
        table = run_transcribe_bench(opts, args.out)
        sys.stdout.write(table + "\n")
        return 0
    if args.bench == "hush":
        from stenoflow.bench.hush_bench import HushBenchOptions, run_hush_bench

        table = run_hush_bench(HushBenchOptions(models=tuple(args.models.split(",")), clips=args.clips,
                                                threads=args.threads), args.out)
        sys.stdout.write(table + "\n")
        return 0
    raise AssertionError(args.bench)


def cmd_data(args: argparse.Namespace) -> int:
    from stenoflow.bench.datasets import build_default_sets

    build_default_sets()
    return 0


def cmd_train_hush(args: argparse.Namespace) -> int:
    from stenoflow.api import load_model
    from stenoflow.training.hush_data import hush_examples
    from stenoflow.training.hush_train import HushTrainOptions, train_hush

    options = HushTrainOptions(steps=args.steps, clips_per_step=args.clips_per_step, lr=args.lr,
                               amplitude=args.amplitude, eot_weight=args.eot_weight, eval_every=args.eval_every)
    model = load_model(args.model, threads=args.threads)
    log.info("building %d training and %d held-out clips with self-distilled targets", args.train_clips,
             args.heldout_clips)
    train, heldout = hush_examples(model, args.train_clips, args.heldout_clips, options.timestamp_share)
    run_dir = args.run_dir or Path(".cache/stenoflow/hush-runs") / args.model
    hush = train_hush(model, train, heldout, options, run_dir)
    out = args.out or run_dir / "hush.npz"
    hush.save(out)
    (out.with_suffix(".json")).write_text(json.dumps(hush.record, indent=1))
    log.info("hush word written to %s (record: %s)", out, out.with_suffix(".json"))
    return 0


COMMANDS = {"transcribe": cmd_transcribe, "models": cmd_models, "bench": cmd_bench, "data": cmd_data,
            "train-hush": cmd_train_hush}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2) if args.verbose else logging.INFO
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        return COMMANDS[args.command](args)
    except (ValueError, FileNotFoundError) as e:
        log.error("%s", e)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
