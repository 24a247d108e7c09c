"""``stenoflow profile-threads``: the offline profiler of pipelined live streams (WhisperFlow §4.3).

For every way of splitting the machine's cores between the encoder and the decoder executor,
and for running the two stages one after the other on all cores, a live stream of a short
synthesized recording is fed in simulated real time and its per-word latency measured against
gold word times. The split with the lowest mean latency is stored (see
:mod:`stenoflow.streaming.threads`) and ``stenoflow stream`` uses it.
"""

from __future__ import annotations

import logging
import os
from dataclasses import asdict, dataclass, replace

import torch

from stenoflow.api import load_model
from stenoflow.bench.gold import gold_words
from stenoflow.bench.latency import LatencyStats, word_latencies
from stenoflow.bench.machine import machine_record
from stenoflow.bench.metrics import wer
from stenoflow.bench.varied import varied_stream
from stenoflow.streaming.drivers import run_stream
from stenoflow.streaming.options import StreamOptions
from stenoflow.streaming.threads import store_split

log = logging.getLogger(__name__)

Split = tuple[int, int] | None  # (encoder threads, decoder threads); None: sequential


@dataclass(frozen=True)
class ThreadProfileOptions:
    model: str = "base"
    compute: str = "int8"
    minutes: float = 0.75  # length of the synthesized sample
    cores: int = os.cpu_count() or 1
    gold_model: str = "base"


def candidate_splits(cores: int) -> list[Split]:
    """Sequential, then every (encoder, decoder) split of the cores, then both on all cores."""
    splits: list[Split] = [None]
    splits += [(e, cores - e) for e in range(1, cores)]
    if cores > 1:
        splits.append((cores, cores))
    return splits if cores > 1 else [None, (1, 1)]


def profile_threads(options: ThreadProfileOptions, stream: StreamOptions | None = None
                    ) -> tuple[str, Split, list[dict[str, object]]]:
    """Measure every split; store and return the best (a table, the split, the rows)."""
    base = replace(stream or StreamOptions(), policy="live")
    model = load_model(options.model, compute=options.compute)
    clip = varied_stream(f"profile-{options.minutes:g}min", options.minutes, seed=101)
    audio = clip.load_audio()
    gold = gold_words(clip, load_model(options.gold_model, compute="float32") if options.gold_model != options.model else model, audio)
    rows: list[dict[str, object]] = []
    for split in candidate_splits(options.cores):
        torch.set_num_threads(options.cores)
        run = run_stream(lambda s=split: model.stream(replace(base, pipeline=s)), audio, "realtime")
        latency = LatencyStats.of(word_latencies(gold, run.words))
        pipelined = sum(r.get("pipelined", 0.0) for r in run.rounds)
        rows.append({"split": "sequential" if split is None else f"{split[0]}:{split[1]}", "mean_s": latency.mean,
                     "p90_s": latency.p90, "rtf": run.rtf, "wer": wer(clip.text, run.text).wer,
                     "rounds": len(run.rounds), "pipelined_rounds": pipelined})
        log.info("split %s: latency mean %.2f s, p90 %.2f s, RTF %.2f", rows[-1]["split"], latency.mean,
                 latency.p90, run.rtf)
    best = min(range(len(rows)), key=lambda i: float(rows[i]["mean_s"]))  # type: ignore[arg-type]
    splits = candidate_splits(options.cores)
    record = {"machine": machine_record(), "options": asdict(options), "stream": asdict(base), "rows": rows}
    path = store_split(options.model, options.compute, splits[best], record)
    lines = ["| split (encoder:decoder threads) | latency mean s | p90 s | RTF | WER % | pipelined rounds |",
             "|---|---|---|---|---|---|"]
    for i, r in enumerate(rows):
        mark = " **(chosen)**" if i == best else ""
        lines.append(f"| {r['split']}{mark} | {float(r['mean_s']):.2f} | {float(r['p90_s']):.2f} | "  # type: ignore[arg-type]
                     f"{float(r['rtf']):.2f} | {100 * float(r['wer']):.1f} | {r['pipelined_rounds']:.0f}/{r['rounds']} |")
    lines.append(f"\nStored in {path}; `stenoflow stream --model {options.model}` uses it.")
    return "\n".join(lines), splits[best], rows
