"""`stenoflow bench` and `data`."""

from __future__ import annotations

import argparse
import io
import logging
import shlex
import sys
from collections.abc import Sequence
from contextlib import redirect_stderr
from typing import TYPE_CHECKING

if TYPE_CHECKING:

    from stenoflow.bench.stream_bench import BenchLine
from stenoflow.cli.parser import build_parser, parse_command
from stenoflow.cli.stream import stream_options

log = logging.getLogger("stenoflow")


def cmd_bench(args: argparse.Namespace) -> int:
    if args.bench == "transcribe":
        from stenoflow.bench.transcribe_bench import BenchOptions, run_transcribe_bench

        opts = BenchOptions(models=tuple(args.models.split(",")), computes=tuple(args.computes.split(",")),
                            threads=args.threads, beam_size=args.beam_size, long_minutes=args.long_minutes,
                            repeats=args.repeats)
        table = run_transcribe_bench(opts, args.out)
        sys.stdout.write(table + "\n")
        return 0
    if args.bench == "decode":
        from stenoflow.bench.decode_bench import DecodeBenchOptions, run_decode_bench

        dopts = DecodeBenchOptions(model=args.model, compute=args.compute, draft=args.draft, threads=args.threads,
                                   beam_size=args.beam_size, lookahead=args.lookahead,
                                   long_minutes=args.long_minutes,
                                   medusa=tuple(k for k in args.medusa.split(",") if k),
                                   only=tuple(k.strip() for k in args.only.split(",") if k.strip()))
        sys.stdout.write(run_decode_bench(dopts, args.out) + "\n")
        return 0
    if args.bench == "serve":
        from stenoflow.bench.serve_bench import ServeBenchOptions, run_serve_bench

        vopts = ServeBenchOptions(model=args.model, compute=args.compute,
                                  clients=tuple(int(n) for n in args.clients.split(",") if n.strip()), minutes=args.minutes,
                                  threads=args.threads, drift_minutes=args.drift_minutes,
                                  batches=tuple(int(b) for b in args.batch.split(",")), alone=not args.no_alone,
                                  auto_clients=args.auto_clients, target_latency=args.target_latency)
        sys.stdout.write(run_serve_bench(vopts, args.out) + "\n")
        return 0
    if args.bench == "batch":
        from stenoflow.bench.batch_bench import BatchBenchOptions, run_batch_bench

        bopts = BatchBenchOptions(models=tuple(_list(args.models)), compute=args.compute, files=args.files,
                                  beam_size=args.beam_size, threads=args.threads)
        sys.stdout.write(run_batch_bench(bopts, args.out) + "\n")
        return 0
    if args.bench == "utterance":
        from stenoflow.bench.utterance_bench import UtteranceBenchOptions, run_utterance_bench

        uopts = UtteranceBenchOptions(models=tuple(_list(args.models)), compute=args.compute, threads=args.threads,
                                      commands=args.commands, remote=args.remote,
                                      offload_perplexity=args.offload_perplexity, methods=tuple(_list(args.methods)))
        sys.stdout.write(run_utterance_bench(uopts, args.out) + "\n")
        return 0
    if args.bench == "stream" and args.languages:
        from stenoflow.bench.language_bench import LanguageBenchOptions, run_language_bench

        models = _list(args.models)
        if len(models) != 1:
            raise ValueError(f"--languages runs one multilingual model (--models base), got {models}")
        lopts = LanguageBenchOptions(model=models[0], languages=tuple(_list(args.languages)), threads=args.threads,
                                     chunk_s=args.chunk)
        sys.stdout.write(run_language_bench(lopts, args.out) + "\n")
        return 0
    if args.bench == "stream":
        from stenoflow.bench.stream_bench import StreamBenchOptions, run_stream_bench

        quick = args.quick
        sopts = StreamBenchOptions(
            models=tuple(_list(args.models)), stages=tuple(_list(args.stages)), variants=tuple(_list(args.variants)),
            peers=not args.no_peers, streams=1 if quick else args.streams, minutes=1.0 if quick else args.minutes,
            varied=1 if quick else args.varied, varied_minutes=1.0 if quick else args.varied_minutes,
            sparse=0 if quick else args.sparse, sparse_minutes=args.sparse_minutes,
            recorded=not args.no_recorded, real=args.real, drift_minutes=0.0 if quick else args.drift_minutes,
            chunk_s=args.chunk, threads=args.threads,
            gold_model=args.gold_model, configs=tuple(_list(args.configs)), noise_db=args.noise_db,
            lines=bench_lines(args.line, _list(args.models)))
        sys.stdout.write(run_stream_bench(sopts, args.out) + "\n")
        return 0
    if args.bench == "hush":
        from stenoflow.bench.hush_bench import HushBenchOptions, run_hush_bench

        table = run_hush_bench(HushBenchOptions(models=tuple(args.models.split(",")), clips=args.clips,
                                                threads=args.threads, compute=args.compute), args.out)
        sys.stdout.write(table + "\n")
        return 0
    raise AssertionError(args.bench)


def bench_lines(specs: Sequence[str], models: Sequence[str]) -> tuple[BenchLine, ...]:
    """The ``bench stream --line NAME=OPTIONS`` lines, for each model: OPTIONS are parsed as
    `stenoflow stream` parses them, so a line runs exactly what that command would."""
    from stenoflow.bench.stream_bench import BenchLine

    parser = build_parser()
    lines: list[BenchLine] = []
    names: set[str] = set()
    for spec in specs:
        name, sep, flags = spec.partition("=")
        name, flags = name.strip(), " ".join(flags.split())
        if not sep or not name or "/" in name or name.startswith(("default", "offline")) or name in names:
            raise ValueError(f"--line takes NAME=OPTIONS with a new name (not starting default or offline, no '/'), "
                             f"e.g. 'gated=--beam-size 5 --gate 1', got {spec!r}")
        names.add(name)
        try:
            tokens = shlex.split(flags)
        except ValueError as e:  # an unclosed quote
            raise ValueError(f"--line {spec!r}: {e}") from None
        for model in models:
            args = _stream_args(parser, tokens, model, spec)
            lines.append(BenchLine(model, name, flags, args.compute, stream_options(args)))
    return tuple(lines)


def _stream_args(parser: argparse.ArgumentParser, flags: list[str], model: str, spec: str) -> argparse.Namespace:
    """``flags`` parsed by the `stream` command of ``parser`` (the command line's), on ``model``,
    as ``main`` parses them; a clear error for what that parser rejects and for what is not a
    stream option (an input, a model, a clock)."""
    try:
        with redirect_stderr(io.StringIO()) as err:
            args = parse_command(parser, ["stream", "--model", model, *flags])
    except SystemExit:
        message = err.getvalue().strip().splitlines()
        raise ValueError(f"--line {spec!r}: {message[-1] if message else 'not `stenoflow stream` options'}") from None
    defaults = parser.parse_args(["stream", "--model", model])
    given = [name for name in ("audio", "mic", "model", "device", "threads", "simulate", "chunk", "stdin_format",
                               "log_words", "log_rounds") if getattr(args, name) != getattr(defaults, name)]
    if given:
        raise ValueError(f"--line {spec!r}: {', '.join(given)} is not a stream option (the bench gives each line "
                         "its streams, models, threads and clock)")
    return args


def _list(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def cmd_data(args: argparse.Namespace) -> int:
    from stenoflow.bench.datasets import build_default_sets

    build_default_sets()
    return 0
