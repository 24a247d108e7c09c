"""`stenoflow stream` and `profile-threads`: live captions from a file, stdin or a microphone."""

from __future__ import annotations

import argparse
import json
import logging
import math
import shutil
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    import numpy as np

    from stenoflow.streaming.events import StreamUpdate
    from stenoflow.streaming.options import StreamOptions


log = logging.getLogger("stenoflow")


class StreamPrinter:
    """Committed text on stdout as it arrives; the unconfirmed tail on stderr when it is a terminal.

    When both go to the same terminal the tail is drawn dimmed after the committed text and
    erased before more is committed; otherwise it lives on its own line of stderr.
    """

    def __init__(self, out: TextIO, err: TextIO) -> None:
        self.out, self.err = out, err
        self.tail_on = err.isatty()
        self.same_screen = self.tail_on and out.isatty()
        self.width = shutil.get_terminal_size().columns if out.isatty() else 0
        self.column = 0

    def __call__(self, update: StreamUpdate, emitted_at: float) -> None:
        if self.tail_on:
            self.err.write("\x1b[K" if self.same_screen else "\r\x1b[K")
            self.err.flush()
        for w in update.committed:
            word = w.word.lstrip() if self.column == 0 else w.word
            if self.width and self.column and self.column + len(word) >= self.width:
                self.out.write("\n")
                self.column, word = 0, word.lstrip()
            self.out.write(word)
            self.column += len(word)
            if word.rstrip().endswith((".", "?", "!")):
                self.out.write("\n")
                self.column = 0
        self.out.flush()
        tail = "".join(w.word for w in update.tail)
        if self.tail_on and tail:
            if self.same_screen:
                room = max(0, self.width - self.column - 1)
                self.err.write("\x1b7\x1b[2m" + (tail if self.column else tail.lstrip())[:room] + "\x1b[0m\x1b8")
            else:
                columns = shutil.get_terminal_size().columns
                self.err.write("\x1b[2m" + tail.strip()[-(columns - 1):] + "\x1b[0m")
            self.err.flush()

    def close(self) -> None:
        if self.tail_on:
            self.err.write("\x1b[K" if self.same_screen else "\r\x1b[K")
            self.err.flush()
        if self.column:
            self.out.write("\n")
        self.out.flush()


def check_source(args: argparse.Namespace) -> None:
    """``stream`` and ``listen`` read exactly one source: an AUDIO file, - (PCM on stdin) or --mic."""
    if (args.audio is None) == (not args.mic):
        raise ValueError("give exactly one source: an AUDIO file, - for PCM on stdin, or --mic")


def open_source(args: argparse.Namespace, chunk_s: float) -> tuple[np.ndarray | None, Iterator[np.ndarray] | None]:
    """(the recording, None) for an AUDIO file, else (None, the live chunks): the microphone (opened
    now; MicrophoneUnavailable if it cannot be) or PCM on stdin (read as it is iterated)."""
    from stenoflow.audio.io import load_audio
    from stenoflow.streaming.sources import open_microphone, pcm_chunks

    if args.mic:
        return None, open_microphone(chunk_s)
    if args.audio == "-":
        return None, pcm_chunks(sys.stdin.buffer, args.stdin_format, chunk_s)
    return load_audio(args.audio), None


def cmd_stream(args: argparse.Namespace) -> int:
    from stenoflow.api import load_model
    from stenoflow.streaming.drivers import (
        EmittedWord,
        UnawareClock,
        WallClock,
        run_live,
        run_stream,
    )
    from stenoflow.streaming.sources import Backlog, MicrophoneUnavailable

    check_source(args)
    options = stream_options(args)
    try:
        audio, live = open_source(args, args.chunk)
    except MicrophoneUnavailable as e:
        log.error("%s", e)
        return 2
    model = load_model(args.model, device=args.device, compute=args.compute, threads=args.threads)
    printer = StreamPrinter(sys.stdout, sys.stderr)
    word_log = args.log_words.open("w", encoding="utf-8") if args.log_words else None
    round_log = args.log_rounds.open("w", encoding="utf-8") if args.log_rounds else None

    def on_update(update: StreamUpdate, emitted_at: float) -> None:
        printer(update, emitted_at)
        if word_log is not None:
            for w in update.committed:
                word_log.write(EmittedWord(w.word, w.start, w.end, emitted_at, w.language).to_json() + "\n")
            word_log.flush()
        if round_log is not None:
            for line in round_records(update, emitted_at):
                round_log.write(json.dumps(line, allow_nan=False) + "\n")
            round_log.flush()

    try:
        if audio is not None:
            clock = WallClock() if args.simulate == "realtime" else UnawareClock()
            run = run_stream(lambda: model.stream(options), audio, args.simulate, args.chunk, clock, on_update)
        else:
            assert live is not None
            run = run_live(lambda: model.stream(options), Backlog(live), on_update=on_update)
    finally:
        printer.close()
        for opened in (word_log, round_log):
            if opened is not None:
                opened.close()
    log.info("%d words from %.1f s of audio in %d rounds; compute %.1f s (RTF %.2f)", len(run.words),
             run.audio_s, len(run.rounds), run.compute_s, run.rtf)
    return 0


def round_records(update: StreamUpdate, emitted_at: float) -> list[dict[str, object]]:
    """The ``--log-rounds`` lines of one update: each round's figures (NaN as null; ``committed``
    counts the words it committed), when the update reported them, and on its last round (or a
    line of its own, if the update committed words without one) the committed words as ``text``
    and the unconfirmed ``tail`` left after them; before them, a line for each run of words the
    rounds set aside, with the rule that did (``dropped``)."""
    records: list[dict[str, object]] = [
        {"emitted_at": round(emitted_at, 3), **{k: None if math.isnan(v) else v for k, v in r.items()}}
        for r in update.rounds]
    if not records and update.committed:
        records.append({"emitted_at": round(emitted_at, 3)})
    if records:
        records[-1]["text"] = "".join(w.word for w in update.committed)
        records[-1]["tail"] = "".join(w.word for w in update.tail)
    drops: list[dict[str, object]] = [{"emitted_at": round(emitted_at, 3), "dropped": d.rule, "words": d.text,
                                       "start": round(d.start, 3), "end": round(d.end, 3), "final": d.final}
                                      for d in update.dropped]
    return drops + records


def _or_off(parse: Callable[[str], float], what: str) -> Callable[[str], float | str]:
    """An argparse type: the text read by ``parse`` (``what`` it must be), or "off"."""

    def convert(text: str) -> float | str:
        if text == "off":
            return text
        try:
            return parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what} or 'off', got {text!r}") from None

    return convert


def stream_options(args: argparse.Namespace) -> StreamOptions:
    """StreamOptions from the defaults, the variant, then each option given on the command line."""
    from stenoflow.streaming.options import StreamOptions
    from stenoflow.streaming.threads import stored_split, with_stored_split
    from stenoflow.streaming.variants import parse_variant

    options = StreamOptions()
    if args.variant:
        split = stored_split(args.model, args.compute)
        options = parse_variant(args.variant).apply(options, split if isinstance(split, tuple) else None)
    given = {name: getattr(args, name) for name in ("policy", "step", "beam_size", "hush", "guide", "gate", "gate_close", "beam_tail", "commit",
                                                    "align_frames", "agree_rounds", "commit_confident", "cold_margin_s", "commit_flanked", "settle_beam",
                                                    "context_s", "skip_idle", "prompt_chars", "window_s", "silence_cache", "language", "task", "speculative",
                                                    "medusa", "encoder_reuse_s")
             if getattr(args, name) is not None}
    for name in ("commit_confident", "commit_flanked", "encoder_reuse_s"):
        if given.get(name) == "off":
            given[name] = None
    options = replace(options, **given)
    if options.policy != "live":
        return options
    if args.pipeline is None or args.pipeline == "profile":
        if args.pipeline == "profile" and stored_split(args.model, args.compute) is None:
            raise ValueError(f"no stored thread split for {args.model} ({args.compute}): run "
                             f"`stenoflow profile-threads --model {args.model} --compute {args.compute}` first")
        if args.pipeline == "profile" or not args.variant:  # a named variant says itself whether it pipelines
            options = with_stored_split(options, args.model, args.compute)
    else:
        if args.pipeline == "off":
            split = None
        else:
            try:
                enc, dec = (int(x) for x in args.pipeline.split(":"))
            except ValueError:
                raise ValueError(f"--pipeline takes ENC:DEC threads (e.g. 1:1), 'profile' or 'off', "
                                 f"got {args.pipeline!r}") from None
            split = (enc, dec)
        options = replace(options, pipeline=split)
    return options


def cmd_profile_threads(args: argparse.Namespace) -> int:
    from stenoflow.bench.threads_profile import ThreadProfileOptions, profile_threads

    table, _, _ = profile_threads(ThreadProfileOptions(model=args.model, compute=args.compute, minutes=args.minutes))
    sys.stdout.write(table + "\n")
    return 0
