"""The ``stenoflow`` command line: the only place that parses arguments.

Each subcommand is a thin layer over the Python API, in a module of its own
(:mod:`.transcribe`, :mod:`.stream`, :mod:`.listen`, :mod:`.bench`, :mod:`.train`); their
arguments are all in :mod:`.parser`. ``main`` parses, sets up logging and runs one.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence

from stenoflow.cli.bench import bench_lines, cmd_bench, cmd_data
from stenoflow.cli.listen import cmd_listen, cmd_serve
from stenoflow.cli.parser import build_parser, compute_for, parse_command
from stenoflow.cli.stream import cmd_profile_threads, cmd_stream, stream_options
from stenoflow.cli.train import cmd_train_hush, cmd_train_medusa
from stenoflow.cli.transcribe import cmd_models, cmd_transcribe, cmd_transcribe_batch

__all__ = ["bench_lines", "build_parser", "compute_for", "main", "parse_command", "run", "stream_options"]

log = logging.getLogger("stenoflow")


# Commands that end when their files are written: the process leaves without the interpreter's
# teardown, which with torch loaded takes 0.3-0.5 s of a short file's whole run. Every file they
# write is closed by then; the server, streams and benches end the usual way.
QUICK_EXIT_COMMANDS = ("transcribe", "models")

BENCH_COMMANDS = ("bench", "data", "train-hush", "train-medusa", "profile-threads")  # what the bench extra serves


COMMANDS = {"transcribe": cmd_transcribe, "stream": cmd_stream, "models": cmd_models, "bench": cmd_bench, "data": cmd_data,
            "train-hush": cmd_train_hush, "train-medusa": cmd_train_medusa, "profile-threads": cmd_profile_threads, "serve": cmd_serve,
            "listen": cmd_listen, "transcribe-batch": cmd_transcribe_batch}


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_command(build_parser(), argv)
    level = logging.WARNING - 10 * min(args.verbose, 2) if args.verbose else logging.INFO
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        return COMMANDS[args.command](args)
    except ModuleNotFoundError as e:
        extra = "bench" if args.command in BENCH_COMMANDS else "server" if args.command == "serve" else \
            "utterance" if args.command == "listen" else "cluster" if args.command == "transcribe-batch" else "dev"
        log.error("`stenoflow %s` needs the %r module: install the %s extra (pip install -e '.[%s]')",
                  args.command, e.name, extra, extra)
        return 2
    except (ValueError, FileNotFoundError) as e:
        log.error("%s", e)
        return 2
    except KeyboardInterrupt:
        return 130


def run() -> None:
    """The console script: :func:`main`, then the exit. After a command of
    ``QUICK_EXIT_COMMANDS`` the output streams and log handlers are flushed and the process ends
    at once (``os._exit``), skipping the teardown of every loaded module; ``main`` itself, which
    tests and scripts call, always returns."""
    command = next((a for a in sys.argv[1:] if not a.startswith("-")), "")  # -v is the only global option
    status = main()
    if command in QUICK_EXIT_COMMANDS:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        logging.shutdown()
        os._exit(status)
    sys.exit(status)
