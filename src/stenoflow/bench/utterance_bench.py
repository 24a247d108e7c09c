"""``stenoflow bench utterance``: voice commands, each shortcut of seed 001 added in turn.

A command stream (:mod:`stenoflow.bench.commands`) is fed in real time (compute-aware clock, 32 ms
chunks) to an utterance session per method; every endpointed utterance is matched to the command
it overlaps. Figures per method: latency after the endpoint and after the end of speech (p50/p90),
WER over the commands (a command no utterance covers counts as deleted, an utterance covering no
command as inserted), compute per second of audio, and the offload rate.

The offload curve: every command's local text and perplexity (the default method) and the remote
model's text (``stenoflow serve --model REMOTE`` in a second process, the command's audio posted to
its REST endpoint once) give, for each perplexity threshold, the WER and the share offloaded; the
same shares offloaded at random (NaiveHybrid: expected WER, exact) and longest-first are the baselines,
and the oracle (the commands where the remote model gains most, known only from the references) is
the ceiling. Beside the curve, rank correlations say whether perplexity can find that gain: it must
rank the local model's errors *and not* the remote model's; where both models err on the same
commands, no local signal beats offloading at random.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from stenoflow.bench.clips import Clip
from stenoflow.bench.commands import command_stream
from stenoflow.bench.machine import write_results
from stenoflow.bench.metrics import wer
from stenoflow.bench.serve_bench import ServeBenchOptions, Server
from stenoflow.model.compute import cpu_compute
from stenoflow.utterance.driver import HeardUtterance, run_utterances
from stenoflow.utterance.offload import OffloadOptions, RemoteTranscriber
from stenoflow.utterance.options import UtteranceOptions

log = logging.getLogger(__name__)

SAMPLE_RATE = 16000


@dataclass(frozen=True)
class UtteranceBenchOptions:
    models: tuple[str, ...] = ("tiny.en", "base")
    compute: str = field(default_factory=cpu_compute)  # what `listen` loads on this CPU
    threads: int = 2
    commands: int = 24
    remote: str = "base"  # the offload server's model
    offload_perplexity: float = 1.3  # threshold of the "+offload" row
    methods: tuple[str, ...] = ()  # names to run (default: all)


@dataclass(frozen=True)
class OffloadCurve:
    """WER at each offload rate per way of choosing (``points``) and the offramp's signal."""

    points: list[dict[str, float]]
    signal: dict[str, float]


def methods() -> list[tuple[str, UtteranceOptions]]:
    """The ablation: each method adds one shortcut to the one before; the last but offload is the default."""
    full = UtteranceOptions()
    steps = [("padded", replace(full, hush=False, pilot_s=None, collapse=False, early_termination=False,
                                final_in_hang=False))]
    steps.append(("+hush", replace(steps[-1][1], hush=True)))
    steps.append(("+pilot", replace(steps[-1][1], pilot_s=full.pilot_s)))
    steps.append(("+collapse", replace(steps[-1][1], collapse=True)))
    steps.append(("+early-termination", replace(steps[-1][1], early_termination=True)))
    steps.append(("+final-in-hang (default)", replace(steps[-1][1], final_in_hang=True)))
    assert steps[-1][1] == full
    return steps


def run_utterance_bench(options: UtteranceBenchOptions, out_dir: Path) -> str:
    import torch

    from stenoflow.api import load_model

    torch.set_num_threads(options.threads)
    clip = command_stream(f"commands-{options.commands}", options.commands)
    audio = clip.load_audio()
    rows: list[dict[str, object]] = []
    curves: dict[str, OffloadCurve] = {}
    with Server(ServeBenchOptions(model=options.remote, compute=options.compute, threads=options.threads),
                out_dir / "server.log") as server:
        offload = OffloadOptions(server.url, options.offload_perplexity)
        for name in options.models:
            model = load_model(name, compute=options.compute)
            default_run: list[HeardUtterance] = []
            for label, opts in methods():
                if options.methods and label not in options.methods:
                    continue
                heard = run_utterances(model.listen(opts), audio, "realtime").heard
                rows.append(_row(name, label, clip, heard, _compute(heard, clip)))
                log.info("%s", rows[-1])
                if opts == UtteranceOptions():
                    default_run = heard
            if not options.methods or "+offload" in options.methods:
                heard = run_utterances(model.listen(UtteranceOptions(), offload), audio, "realtime").heard
                rows.append(_row(name, f"+offload (ppl > {options.offload_perplexity:g})", clip, heard,
                                 _compute(heard, clip)))
                log.info("%s", rows[-1])
            if default_run:
                curves[name] = offload_curve(clip, audio, default_run, RemoteTranscriber(offload))
    table = format_table(rows) + "\n\n" + "\n\n".join(format_curve(m, c) for m, c in curves.items())
    write_results(out_dir, "utterance", "Utterance benchmark", options,
                  rows + [{"curves": {m: asdict(c) for m, c in curves.items()}}], table,
                  f"{options.commands} synthesized commands of 2-7 s ({clip.duration:.0f} s with pauses, several "
                  "voices, room noise), fed at 1x real time in 32 ms chunks. Latency after the endpoint: when the "
                  "text was ready minus when the endpointer knew the person had stopped (end of speech + the "
                  "0.5 s hang); after speech: minus the end of speech. Compute: decoding seconds per audio second. "
                  f"Offload: to `stenoflow serve --model {options.remote}` in a second process on this machine.")
    plot(rows, curves, out_dir / "utterance.png")
    return table


def _compute(heard: list[HeardUtterance], clip: Clip) -> float:
    return sum(h.utterance.compute_s for h in heard) / clip.duration


def match(clip: Clip, heard: list[HeardUtterance]) -> tuple[list[str], list[str]]:
    """(references, hypotheses) per command: the text of every utterance overlapping it; an utterance
    overlapping no command is paired with an empty reference."""
    hyps = [""] * len(clip.sentences)
    refs = [text for _, _, text in clip.sentences]
    for h in heard:
        u = h.utterance
        overlaps = [i for i, (s, e, _) in enumerate(clip.sentences) if u.start < e and s < u.end]
        if not overlaps:
            refs.append("")
            hyps.append(u.text)
            continue
        i = overlaps[0]
        hyps[i] = (hyps[i] + " " + u.text).strip()
    return refs, hyps


def _row(model: str, method: str, clip: Clip, heard: list[HeardUtterance], compute: float) -> dict[str, object]:
    refs, hyps = match(clip, heard)
    result = wer(refs, hyps)
    after_end = [h.after_endpoint for h in heard]
    after_speech = [h.after_speech for h in heard]
    return {"model": model, "method": method, "utterances": len(heard), "commands": len(clip.sentences),
            "wer": result.wer, "latency_p50": _pct(after_end, 50), "latency_p90": _pct(after_end, 90),
            "after_speech_p50": _pct(after_speech, 50), "after_speech_p90": _pct(after_speech, 90),
            "compute_per_audio_s": compute,
            "ready_at_endpoint": float(np.mean([h.utterance.ready_at_endpoint for h in heard])) if heard else 0.0,
            "offload_rate": float(np.mean([h.utterance.offloaded for h in heard])) if heard else 0.0}


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def offload_curve(clip: Clip, audio: np.ndarray, heard: list[HeardUtterance],
                  remote: RemoteTranscriber) -> OffloadCurve:
    """WER against the offload rate for each way of choosing what to offload, and the offramp's
    signal (see the module docstring)."""
    refs, local = match(clip, heard)
    n = len(clip.sentences)
    ppl = [float("inf")] * n  # a command with no utterance: unsure by definition
    for h in heard:
        u = h.utterance
        for i, (s, e, _) in enumerate(clip.sentences):
            if u.start < e and s < u.end:
                ppl[i] = u.perplexity if ppl[i] == float("inf") else max(ppl[i], u.perplexity)
                break
    remote_text = [remote(audio[max(0, round((s - 0.3) * SAMPLE_RATE)) : round((e + 0.2) * SAMPLE_RATE)])
                   for s, e, _ in clip.sentences]
    local_err = [wer(refs[i], local[i]).errors for i in range(n)]
    remote_err = [wer(refs[i], remote_text[i]).errors for i in range(n)]
    extra = sum(wer(r, h).errors for r, h in zip(refs[n:], local[n:]))  # insertions outside any command
    words = max(1, wer(refs[:n], refs[:n]).ref_words)
    by_ppl = sorted(range(n), key=lambda i: -ppl[i])
    by_length = sorted(range(n), key=lambda i: -(clip.sentences[i][1] - clip.sentences[i][0]))
    by_gain = sorted(range(n), key=lambda i: remote_err[i] - local_err[i])
    points = []
    for k in range(n + 1):
        rate = k / n
        chosen, longest, best = set(by_ppl[:k]), set(by_length[:k]), set(by_gain[:k])
        points.append({
            "offload_rate": rate,
            "threshold": ppl[by_ppl[k - 1]] if k else float("inf"),
            "wer_perplexity": (extra + sum(remote_err[i] if i in chosen else local_err[i] for i in range(n))) / words,
            "wer_random": (extra + sum((1 - rate) * local_err[i] + rate * remote_err[i] for i in range(n))) / words,
            "wer_length": (extra + sum(remote_err[i] if i in longest else local_err[i] for i in range(n))) / words,
            "wer_oracle": (extra + sum(remote_err[i] if i in best else local_err[i] for i in range(n))) / words,
        })
    return OffloadCurve(points, offramp_signal(ppl, local_err, remote_err))


def offramp_signal(perplexity: list[float], local_err: list[int], remote_err: list[int]) -> dict[str, float]:
    """Spearman rank correlations of the perplexity with the local errors, the remote errors and the
    gain (local minus remote errors) per command: the offramp pays only where the last is high."""
    from scipy.stats import spearmanr

    ppl = np.nan_to_num(np.asarray(perplexity, dtype=float), posinf=1e9)
    local, remote = np.asarray(local_err, dtype=float), np.asarray(remote_err, dtype=float)

    def rho(errors: np.ndarray) -> float:
        return float(spearmanr(ppl, errors)[0]) if np.ptp(errors) > 0 and np.ptp(ppl) > 0 else float("nan")

    return {"local_errors": rho(local), "remote_errors": rho(remote), "gain": rho(local - remote),
            "commands_remote_better": int(np.sum(local > remote)), "commands_remote_worse": int(np.sum(local < remote))}


def format_table(rows: list[dict[str, object]]) -> str:
    head = ("| model | method | WER | after endpoint p50 / p90 (ms) | after speech p50 / p90 (ms) | compute / audio s "
            "| ready at endpoint | offloaded | utterances / commands |\n|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for r in rows:
        lines.append(f"| {r['model']} | {r['method']} | {100 * float(r['wer']):.2f} % "  # type: ignore[arg-type]
                     f"| {1000 * float(r['latency_p50']):.0f} / {1000 * float(r['latency_p90']):.0f} "  # type: ignore[arg-type]
                     f"| {1000 * float(r['after_speech_p50']):.0f} / {1000 * float(r['after_speech_p90']):.0f} "  # type: ignore[arg-type]
                     f"| {float(r['compute_per_audio_s']):.3f} | {100 * float(r['ready_at_endpoint']):.0f} % "  # type: ignore[arg-type]
                     f"| {100 * float(r['offload_rate']):.0f} % | {r['utterances']} / {r['commands']} |")  # type: ignore[arg-type]
    return "\n".join(lines)


def format_curve(model: str, curve: OffloadCurve) -> str:
    points, signal = curve.points, curve.signal
    lines = [f"Offloading from {model} (WER % at each offload rate):", "",
             "| offloaded | perplexity above | by perplexity | NaiveHybrid (random) | longest first | oracle |",
             "|---|---|---|---|---|---|"]
    step = max(1, len(points) // 8)
    for p in points[::step] + ([points[-1]] if (len(points) - 1) % step else []):
        lines.append(f"| {100 * p['offload_rate']:.0f} % | {p['threshold']:.3f} | {100 * p['wer_perplexity']:.2f} "
                     f"| {100 * p['wer_random']:.2f} | {100 * p['wer_length']:.2f} | {100 * p['wer_oracle']:.2f} |")
    lines += ["", (f"Perplexity's rank correlation (Spearman) with {model}'s errors per command "
              f"{signal['local_errors']:.2f}, with the remote model's {signal['remote_errors']:.2f}, with the gain "
              f"from offloading {signal['gain']:.2f}; the remote model is better on "
              f"{signal['commands_remote_better']:.0f} commands, worse on {signal['commands_remote_worse']:.0f}.")]
    return "\n".join(lines)


def plot(rows: list[dict[str, object]], curves: dict[str, OffloadCurve], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5))
    for model in dict.fromkeys(str(r["model"]) for r in rows):
        mine = [r for r in rows if r["model"] == model]
        ax1.plot([1000 * float(r["latency_p50"]) for r in mine], [100 * float(r["wer"]) for r in mine], "o-",  # type: ignore[arg-type]
                 label=model)
        for r in mine:
            ax1.annotate(str(r["method"]).split(" ")[0], (1000 * float(r["latency_p50"]), 100 * float(r["wer"])),  # type: ignore[arg-type]
                         fontsize=7)
    ax1.set_xscale("symlog", linthresh=10)
    ax1.set_xlabel("median latency after the endpoint (ms)")
    ax1.set_ylabel("WER (%)")
    ax1.legend()
    for model, curve in curves.items():
        points = curve.points
        rates = [100 * p["offload_rate"] for p in points]
        ax2.plot(rates, [100 * p["wer_perplexity"] for p in points], "-", label=f"{model}: by perplexity")
        ax2.plot(rates, [100 * p["wer_random"] for p in points], "--", label=f"{model}: NaiveHybrid (random)")
        ax2.plot(rates, [100 * p["wer_length"] for p in points], ":", label=f"{model}: longest first")
        ax2.plot(rates, [100 * p["wer_oracle"] for p in points], "-.", label=f"{model}: oracle")
    ax2.set_xlabel("utterances offloaded (%)")
    ax2.set_ylabel("WER (%)")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
