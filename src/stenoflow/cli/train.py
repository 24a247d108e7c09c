"""`stenoflow train-hush` and `train-medusa`."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, replace
from pathlib import Path

log = logging.getLogger("stenoflow")


def cmd_train_hush(args: argparse.Namespace) -> int:
    from stenoflow.api import load_model
    from stenoflow.audio.hush import HushWord
    from stenoflow.model.quant import trainable_int8_layers
    from stenoflow.training.hush_data import HushDataOptions, hush_examples
    from stenoflow.training.hush_train import HushTrainOptions, train_hush

    options = HushTrainOptions(steps=args.steps, clips_per_step=args.clips_per_step, lr=args.lr,
                               lr_final=args.lr_final, amplitude=args.amplitude, eot_weight=args.eot_weight,
                               early_eot_weight=args.early_eot_weight,
                               eval_every=args.eval_every, seed=args.seed)
    data = HushDataOptions(train_clips=args.train_clips, heldout_clips=args.heldout_clips, cut_share=args.cut_share,
                           prompt_share=args.prompt_share, window_share=args.window_share, seed=args.seed)
    model = load_model(args.model, compute=args.compute, threads=args.threads)
    log.info("building %d training and %d held-out clips with self-distilled targets", data.train_clips,
             data.heldout_clips)
    train, heldout = hush_examples(model, data)
    if args.compute == "int8":
        trainable_int8_layers(model.whisper)
    init = HushWord.load(args.init).samples if args.init else None
    run_dir = args.run_dir or Path(".cache/stenoflow/hush-runs") / f"{args.model}.{args.compute}"

    def shown(row: dict[str, float]) -> dict[str, str]:
        return {"held-out WER": f"{100 * row['wer']:.1f}%", "runaways": f"{100 * row['runaways']:.0f}%"} \
            if "wer" in row else {}

    with _training_progress(options.steps, args.no_progress, shown) as progress:
        hush = train_hush(model, train, heldout, options, run_dir, progress, init)
    hush = replace(hush, record={**hush.record, "data": asdict(data), "compute": args.compute,
                                 "init": str(args.init) if args.init else None})
    out = args.out or run_dir / "hush.npz"
    hush.save(out)
    (out.with_suffix(".json")).write_text(json.dumps(hush.record, indent=1))
    log.info("hush word written to %s (record: %s)", out, out.with_suffix(".json"))
    return 0


def cmd_train_medusa(args: argparse.Namespace) -> int:
    from stenoflow.api import load_model
    from stenoflow.training.medusa_data import MedusaDataOptions, load_or_build_examples, shortlist
    from stenoflow.training.medusa_train import MedusaTrainOptions, train_medusa

    options = MedusaTrainOptions(kind=args.kind, heads=args.heads, steps=args.steps,
                                 examples_per_step=args.examples_per_step, lr=args.lr, lr_final=args.lr_final,
                                 shortlist=args.shortlist, eval_every=args.eval_every, seed=args.seed)
    data = MedusaDataOptions(train_clips=args.train_clips, heldout_clips=args.heldout_clips, seed=args.seed)
    model = load_model(args.model, compute="float32", threads=args.threads)  # heads train on the float model
    run_dir = args.run_dir or Path(".cache/stenoflow/medusa-runs") / args.model
    train, heldout = load_or_build_examples(model, data, run_dir / "examples.pt")
    vocab = shortlist(train, model.tokenizer, model.dims.n_vocab, options.shortlist)

    def shown(row: dict[str, float]) -> dict[str, str]:
        return {"held-out accepted/pass": f"{row['accepted_per_pass']:.2f}",
                "head1": f"{row['head1_top1']:.2f}"} if "accepted_per_pass" in row else {}

    with _training_progress(options.steps, args.no_progress, shown) as progress:
        heads, record = train_medusa(model, train, heldout, vocab, options, run_dir / args.kind, progress)
    record = {**record, "data": asdict(data), "model": args.model}
    out = args.out or run_dir / f"{args.model}.{args.kind}.pt"
    heads.save(out, args.model, record)
    out.with_suffix(".json").write_text(json.dumps(record, indent=1))
    best = record["heldout"]
    log.info("Medusa-%s heads written to %s: held-out %.2f draft tokens accepted per pass (record: %s)",
             args.kind, out, best["accepted_per_pass"], out.with_suffix(".json"))  # type: ignore[index]
    return 0


@contextmanager
def _training_progress(steps: int, off: bool, shown: Callable[[dict[str, float]], dict[str, str]]
                       ) -> Iterator[Callable[[dict[str, float]], None]]:
    """A progress callback for a training loop: a bar over the steps with the loss and the latest
    held-out figures (``shown`` picks them from an evaluation row), logging routed around it."""
    from tqdm import tqdm
    from tqdm.contrib.logging import logging_redirect_tqdm

    bar = None if off else tqdm(total=steps, unit="step", file=sys.stderr)
    postfix: dict[str, str] = {}

    def progress(row: dict[str, float]) -> None:
        if bar is None:
            return
        figures = shown(row)
        if figures:
            postfix.update(figures)
        else:
            postfix["loss"] = f"{row['loss']:.3f}"
            bar.update(int(row["step"]) - bar.n)
        bar.set_postfix(postfix, refresh=False)

    try:
        with logging_redirect_tqdm():
            yield progress
    finally:
        if bar is not None:
            bar.close()
