"""The ``stenoflow`` command line: the only place that parses arguments.

Each subcommand is a thin layer over the Python API.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import math
import shlex
import shutil
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, redirect_stderr
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from stenoflow.model.compute import COMPUTE_TYPES, INT8_BFLOAT16, default_compute
from stenoflow.output import FORMATS
from stenoflow.server.options import ServerOptions
from stenoflow.streaming.variants import ABLATION

if TYPE_CHECKING:
    import numpy as np

    from stenoflow.api import Model
    from stenoflow.bench.stream_bench import BenchLine
    from stenoflow.streaming.events import StreamUpdate
    from stenoflow.streaming.options import StreamOptions
    from stenoflow.utterance.offload import OffloadOptions
    from stenoflow.utterance.options import UtteranceOptions

log = logging.getLogger("stenoflow")


def _temperatures(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(t) for t in text.split(","))
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"temperature must be a number or a comma list, got {text!r}") from e
    return values


def add_model_args(p: argparse.ArgumentParser) -> None:
    """--model, --compute, --device, --threads; ``main`` resolves an absent --compute by device."""
    p.add_argument("--model", default="tiny.en", help="tiny.en, base, or a path to a model file/directory")
    p.add_argument("--compute", default=None, choices=COMPUTE_TYPES,
                   help="precision: float32, int8 (per-channel weights, per-row activations; CPU), "
                        f"{INT8_BFLOAT16} (the encoder in bfloat16, the decoder in int8; CPU), float16 (CUDA); "
                        f"default on the CPU {INT8_BFLOAT16} where it has bfloat16 matrix units (AMX), else int8; "
                        "float16 on CUDA")
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
    t.add_argument("--speculative", default=None, metavar="DRAFT",
                   help="draft model (name or path) proposing tokens for --model to verify; "
                        "with --beam-size 1 the text equals plain greedy decoding")
    t.add_argument("--medusa", default=None, metavar="KIND",
                   help="Medusa heads propose tokens for --model to verify: linear or block (the model's "
                        "shipped heads) or a heads file; with --beam-size 1 the text equals plain greedy decoding")
    t.add_argument("--typical", action="store_true",
                   help="with --speculative/--medusa: typical acceptance (epsilon 0.09, alpha 0.3, as published) "
                        "instead of greedy-exact; faster, not greedy's text")
    t.add_argument("--lookahead", type=int, default=4, help="tokens the draft proposes at a time (start)")
    t.add_argument("--adaptive-lookahead", action="store_true",
                   help="choose the lookahead after each draft from the measured acceptance and cost")
    t.add_argument("--output-format", "-f", default="txt", choices=[*FORMATS, "all"])
    t.add_argument("--output-dir", "-o", type=Path, default=Path("."))
    t.add_argument("--no-progress", action="store_true", help="no progress bar")

    st = sub.add_parser("stream", help="streaming transcription: words appear as they become final",
                        description="Streaming transcription. Every option left out keeps the default of "
                                    "StreamOptions, the configuration the streaming benchmark found best.")
    st.add_argument("audio", nargs="?", help="audio file, or - for raw 16 kHz mono PCM on stdin")
    st.add_argument("--mic", action="store_true", help="read the default microphone (needs sounddevice)")
    add_model_args(st)
    st.add_argument("--variant", default=None,
                    help="a named variant, e.g. live+hush+draft or whisper-s+hush+verify (see docs/live-captions.md)")
    st.add_argument("--policy", default=None, choices=["live", "whisper-s"], help="session policy")
    st.add_argument("--step", type=float, default=None, help="seconds of new audio between rounds")
    st.add_argument("--beam-size", type=int, default=None, help="beams per round (1 = greedy)")
    st.add_argument("--hush", action=argparse.BooleanOptionalAction, default=None,
                    help="encode buffer + the model's hush word instead of padding it with silence "
                         "(default: whisper-s yes, live no)")
    st.add_argument("--window", type=float, default=None, dest="window_s", metavar="S",
                    help="live, without --hush: the buffer is padded with silence to S seconds "
                         "(default 15; 30: Whisper's own window)")
    st.add_argument("--silence-cache", action=argparse.BooleanOptionalAction, default=None, dest="silence_cache",
                    help="live, in a window: the encoder computes the speech only and takes the silence after it "
                         "from a kept pass over silence (default yes; --no-silence-cache: the full pass)")
    st.add_argument("--guide", choices=["prune", "verify", "draft"], default=None,
                    help="the previous round guides decoding: prune/verify (whisper-s), draft (live)")
    st.add_argument("--gate", type=float, default=None,
                    help="confidence gate in nats: beam search only where the best token leads by less")
    st.add_argument("--gate-close", action="store_const", const=True, default=None, dest="gate_close",
                    help="live, with --gate: the beam closes again once its best row leads the next by the gate "
                         "or stayed the best for a few tokens")
    st.add_argument("--beam-tail", action="store_const", const=True, default=None, dest="beam_tail",
                    help="live, with --gate: the beam opens only past the words a round may commit "
                         "(greedy over them)")
    st.add_argument("--commit", choices=["agreement", "alignatt"], default=None,
                    help="live: commit by LocalAgreement or by attention (AlignAtt)")
    st.add_argument("--align-frames", type=int, default=None,
                    help="live: a committed word was heard this many 20 ms frames before the audio's end")
    st.add_argument("--agree-rounds", type=int, default=None, help="live agreement: rounds that must agree")
    st.add_argument("--commit-confident", type=_or_off(float, "a probability"), default=None, metavar="P",
                    help="live agreement: words at least this probable are final without a second round "
                         "(default 0.9; 'off': every word waits for a second round)")
    st.add_argument("--commit-flanked", type=_or_off(int, "a whole number"), default=None, dest="commit_flanked",
                    metavar="N",
                    help="live agreement: words rounds keep hearing differently (up to 3, split alike or not) "
                         "are final once the N words after them agree (default 2; 'off': they wait for the "
                         "rounds to agree on them)")
    st.add_argument("--cold-margin", type=float, default=None, dest="cold_margin_s", metavar="S",
                    help="live agreement: a stream's first words wait until S seconds of audio follow them "
                         "(default 1.2; 0: only the usual margin)")
    st.add_argument("--skip-idle", action=argparse.BooleanOptionalAction, default=None, dest="skip_idle",
                    help="live: skip rounds whose new audio holds no speech while no word waits (default yes)")
    st.add_argument("--context", type=float, default=None, dest="context_s",
                    help="live: seconds of committed speech kept in the buffer")
    st.add_argument("--prompt-chars", type=int, default=None, metavar="N",
                    help="characters of committed text before the buffer given as the prompt "
                         "(default: live 600, whisper-s 200)")
    st.add_argument("--pipeline", default=None,
                    help="live: ENC:DEC threads of the two executors (e.g. 1:1), 'profile' for the split "
                         "`stenoflow profile-threads` stored, or 'off'")
    st.add_argument("--speculative", default=None, metavar="DRAFT",
                    help="live: a draft model (name or path) drafts past the previous round's words")
    st.add_argument("--medusa", default=None, metavar="KIND",
                    help="live: the model's Medusa heads (linear, block or a heads file) draft past the previous "
                         "round's words")
    st.add_argument("--language", default=None, help="language code (default en)")
    st.add_argument("--simulate", default="realtime", choices=["realtime", "unaware"],
                    help="for files: feed at 1x wall clock (realtime) or as fast as rounds run (unaware)")
    st.add_argument("--chunk", type=float, default=0.1, help="seconds of audio per read (default 0.1)")
    st.add_argument("--stdin-format", default="f32le", choices=["f32le", "s16le"], help="PCM format of -")
    st.add_argument("--log-words", type=Path, default=None,
                    help="write one JSON line per committed word: word, start, end, emitted_at")
    st.add_argument("--log-rounds", type=Path, default=None,
                    help="write one JSON line per processing round: when it reported (emitted_at), its figures "
                         "(buffer, encoder/decoder/alignment ms, decoder passes, ...) and, on the last round of "
                         "each update, the committed words (text) and the unconfirmed tail")

    ls = sub.add_parser("listen", help="voice commands: one line of text per utterance, as soon as it ends",
                        description="Endpoints utterances by voice activity, decodes while the person speaks "
                                    "(pilot inference) and prints each utterance's text with its latency.")
    ls.add_argument("audio", nargs="?", help="audio file, or - for raw 16 kHz mono PCM on stdin")
    ls.add_argument("--mic", action="store_true", help="read the default microphone (needs sounddevice)")
    add_model_args(ls)
    ls.add_argument("--language", default="en", help="language code (default en)")
    ls.add_argument("--beam-size", type=int, default=5, help="beams of the final pass (1 = greedy)")
    ls.add_argument("--hang", type=float, default=None, help="seconds of silence that end an utterance (0.5)")
    ls.add_argument("--pilot", type=float, default=0.5, help="seconds between pilot decodings (0: none)")
    ls.add_argument("--no-collapse", action="store_true", help="final pass: full beam search, not verifying the pilot")
    ls.add_argument("--no-early-termination", action="store_true", help="final pass: no token budget from the pilot")
    ls.add_argument("--no-final-in-hang", action="store_true", help="decode only after the hang time, not during it")
    ls.add_argument("--no-hush", action="store_true", help="pad utterances to 30 s instead of the hush word")
    ls.add_argument("--offload-url", default=None,
                    help="a stenoflow server (or OpenAI-compatible one) for the utterances the model is unsure of")
    ls.add_argument("--offload-perplexity", type=float, default=1.3,
                    help="offload utterances whose perplexity is above this (default 1.3)")
    ls.add_argument("--api-key", default=None, help="bearer token for --offload-url (default $STENOFLOW_API_KEY)")
    ls.add_argument("--simulate", default="realtime", choices=["realtime", "unaware"],
                    help="for files: feed at 1x wall clock (realtime) or as fast as it runs (unaware)")
    ls.add_argument("--stdin-format", default="f32le", choices=["f32le", "s16le"], help="PCM format of -")
    ls.add_argument("--json", action="store_true", help="one JSON object per utterance instead of text lines")

    sv = sub.add_parser("serve", help="a server: WebSocket live captions, a caption page, OpenAI-compatible REST")
    add_model_args(sv)
    sv.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0: every interface)")
    sv.add_argument("--port", type=int, default=8000)
    sv.add_argument("--api-key", default=None,
                    help="bearer token every request must carry (default: $STENOFLOW_API_KEY; none: open)")
    sv.add_argument("--max-upload-mb", type=float, default=100.0, help="largest file POSTed for transcription")
    sv.add_argument("--max-sessions", type=int, default=16, help="WebSocket streams open at once")
    sv.add_argument("--idle-timeout", type=float, default=30.0, help="seconds a stream may send nothing")
    sv.add_argument("--batch", type=int, default=ServerOptions.batch,
                    help="sessions whose rounds run together, decoder passes merged (1: one at a time)")
    sv.add_argument("--max-message-kb", type=float, default=1024.0, help="largest WebSocket message")
    sv.add_argument("--ray-address", default=None,
                    help="serve through Ray Serve on this cluster (auto, host:port, or local for a local Ray): "
                         "replicas of the server behind one endpoint")
    sv.add_argument("--replicas", type=int, default=1, help="with --ray-address: replicas (the least, if autoscaling)")
    sv.add_argument("--max-replicas", type=int, default=None,
                    help="with --ray-address: autoscale up to this many replicas on open streams")
    sv.add_argument("--sessions-per-replica", type=int, default=2,
                    help="with --ray-address: open streams a replica is scaled for")

    tb = sub.add_parser("transcribe-batch", help="transcribe an archive on Ray: a pool of model replicas, resumable",
                        description="Transcribe directories, globs or manifests of paths/URIs on a Ray cluster "
                                    "(a local one by default). Writes the transcribe formats and manifest.jsonl "
                                    "under --output-dir; a rerun skips what is done.")
    tb.add_argument("inputs", nargs="+", help="directories, globs, audio files, or manifests (.txt/.lst: a path or "
                                              "URI per line; .jsonl: {\"path\": ...} per line)")
    tb.add_argument("--model", default="tiny.en", help="tiny.en, base, or a path every node can read")
    tb.add_argument("--compute", default=None, choices=["float32", "int8", INT8_BFLOAT16],
                    help="precision of the replicas (CPU); default: what a model loads on this CPU")
    tb.add_argument("--output-dir", "-o", type=Path, default=Path("transcripts"))
    tb.add_argument("--output-format", "-f", default="txt,json",
                    help=f"comma list of {', '.join(FORMATS)} (or all); default txt,json")
    tb.add_argument("--ray-address", default=None,
                    help="auto (the cluster of `ray start` here), host:port, or ray://...; default: a local Ray")
    tb.add_argument("--actors", type=int, default=None,
                    help="model replicas (default: the cluster's CPUs / --threads)")
    tb.add_argument("--threads", type=int, default=1, help="torch threads (and CPUs reserved) per replica")
    tb.add_argument("--language", default=None)
    tb.add_argument("--beam-size", type=int, default=5)
    tb.add_argument("--word-timestamps", action="store_true")
    tb.add_argument("--chunk-minutes", type=float, default=10.0,
                    help="recordings longer than 1.5x this are cut at pauses into parts that replicas "
                         "transcribe side by side (0: never)")
    tb.add_argument("--no-progress", action="store_true")
    tb.add_argument("--dashboard", action="store_true", help="a local Ray starts its dashboard (its URL is logged)")

    sub.add_parser("models", help="list the named models and whether they resolve here")

    pt = sub.add_parser("profile-threads",
                        help="measure live-stream latency for each thread split of the pipeline; store the best",
                        description="The offline profiler of pipelined live streams: runs a short synthesized "
                                    "stream with every encoder:decoder thread split (and sequentially), prints "
                                    "the per-word latency of each and stores the best for `stenoflow stream`.")
    pt.add_argument("--model", default="base")
    pt.add_argument("--compute", default=None, choices=["float32", "int8", INT8_BFLOAT16],
                    help="default: what `stenoflow stream` loads on this CPU")
    pt.add_argument("--minutes", type=float, default=0.75, help="length of the synthesized sample")

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
    bd = bsub.add_parser("decode", help="decoding strategies (greedy, beam, draft models) vs faster-whisper")
    bd.add_argument("--model", default="base")
    bd.add_argument("--compute", default=None, choices=["float32", "int8"],
                    help="default: what the commands load (int8 on the CPU)")
    bd.add_argument("--draft", default="tiny.en", help="the draft model of another vocabulary")
    bd.add_argument("--threads", type=int, default=2)
    bd.add_argument("--beam-size", type=int, default=5)
    bd.add_argument("--lookahead", type=int, default=4, help="draft tokens per verification (start)")
    bd.add_argument("--long-minutes", type=float, default=5.0, help="length of the synthesized long file")
    bd.add_argument("--medusa", default="linear,block", help="Medusa kinds to run (the model's heads); '' for none")
    bd.add_argument("--only", default="", help="comma list of method-name starts to run (greedy always runs), "
                                               "e.g. 'Medusa,draft: tiny'")
    bd.add_argument("--out", type=Path, default=Path("bench-results"))

    h = sub.add_parser("train-hush", help="train a hush word (0.5 s of audio that replaces 30 s padding)")
    h.add_argument("--model", default="tiny.en")
    h.add_argument("--compute", choices=("float32", "int8"), default="int8",
                   help="the precision the hush word is optimised through (it is used best in the same one)")
    h.add_argument("--init", type=Path, default=None,
                   help="start from this hush word (.npz) instead of noise, e.g. one trained in another precision")
    h.add_argument("--steps", type=int, default=2000)
    h.add_argument("--clips-per-step", type=int, default=4)
    h.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate, decayed along a cosine")
    h.add_argument("--lr-final", type=float, default=1e-4)
    h.add_argument("--amplitude", type=float, default=0.1, help="bound on |sample|")
    h.add_argument("--eot-weight", type=float, default=2.0, help="weight of the end-of-text target")
    h.add_argument("--early-eot-weight", type=float, default=1.0,
                   help="weight of the penalty on end-of-text before the end of the transcript")
    h.add_argument("--train-clips", type=int, default=300)
    h.add_argument("--heldout-clips", type=int, default=40)
    h.add_argument("--cut-share", type=float, default=0.4, help="clips also cut off inside the speech")
    h.add_argument("--prompt-share", type=float, default=0.4, help="examples decoded after a text prompt")
    h.add_argument("--window-share", type=float, default=0.0,
                   help="clips that also give a live round's window: from a pause inside the speech, 2-10 s, "
                        "after the model's transcript of what came before")
    h.add_argument("--eval-every", type=int, default=200)
    h.add_argument("--seed", type=int, default=0)
    h.add_argument("--threads", type=int, default=None)
    h.add_argument("--run-dir", type=Path, default=None, help="checkpoints (resumable); default .cache/stenoflow/hush-runs/MODEL")
    h.add_argument("--out", type=Path, default=None, help="where to write the hush word (.npz)")
    h.add_argument("--no-progress", action="store_true", help="no progress bar")

    mt = sub.add_parser("train-medusa", help="train Medusa heads (drafting heads on the frozen model) by self-distillation")
    mt.add_argument("--model", default="tiny.en")
    mt.add_argument("--kind", choices=("linear", "block"), default="linear",
                    help="linear: a residual linear layer per head; block: plus one shared decoder block")
    mt.add_argument("--heads", type=int, default=4)
    mt.add_argument("--steps", type=int, default=600)
    mt.add_argument("--examples-per-step", type=int, default=8)
    mt.add_argument("--lr", type=float, default=1e-3, help="AdamW learning rate, decayed along a cosine")
    mt.add_argument("--lr-final", type=float, default=1e-5)
    mt.add_argument("--shortlist", type=int, default=8192, help="lowest text token ids the heads may propose")
    mt.add_argument("--train-clips", type=int, default=300)
    mt.add_argument("--heldout-clips", type=int, default=40)
    mt.add_argument("--eval-every", type=int, default=100)
    mt.add_argument("--seed", type=int, default=0)
    mt.add_argument("--threads", type=int, default=None)
    mt.add_argument("--run-dir", type=Path, default=None,
                    help="examples and checkpoints (resumable); default .cache/stenoflow/medusa-runs/MODEL")
    mt.add_argument("--out", type=Path, default=None, help="where to write the heads (.pt); default RUN_DIR/MODEL.KIND.pt")
    mt.add_argument("--no-progress", action="store_true", help="no progress bar")

    bv = bsub.add_parser("serve", help="N concurrent real-time streams against one server: latency, CPU, memory")
    bv.add_argument("--model", default="tiny.en")
    bv.add_argument("--compute", default=None, choices=["float32", "int8"], help="default: serve's default")
    bv.add_argument("--clients", default="1,2,4,8", help="comma list of concurrent client counts")
    bv.add_argument("--minutes", type=float, default=1.5, help="length of each client's recording")
    bv.add_argument("--threads", type=int, default=2)
    bv.add_argument("--drift-minutes", type=float, default=0.0,
                    help="then one real-time stream this long (latency first vs last 5 min, server memory)")
    bv.add_argument("--batch", default=str(ServerOptions.batch),
                    help="comma list of the server's --batch values to compare (the long stream runs with the first)")
    bv.add_argument("--out", type=Path, default=Path("bench-results"))

    bu = bsub.add_parser("utterance", help="voice commands: latency after the endpoint, WER, compute, offloading")
    bu.add_argument("--models", default="tiny.en,base", help="comma list of local models")
    bu.add_argument("--compute", default=None, choices=["float32", "int8", INT8_BFLOAT16],
                    help="default: what `stenoflow listen` loads on this CPU")
    bu.add_argument("--threads", type=int, default=2)
    bu.add_argument("--commands", type=int, default=24, help="synthesized commands in the stream")
    bu.add_argument("--remote", default="base", help="model of the offload server (a second process)")
    bu.add_argument("--offload-perplexity", type=float, default=1.3, help="threshold of the +offload row")
    bu.add_argument("--methods", default="", help="comma list of methods to run (default: all)")
    bu.add_argument("--out", type=Path, default=Path("bench-results"))

    bb = bsub.add_parser("batch", help="archive throughput: Ray replicas vs one process vs faster-whisper batched")
    bb.add_argument("--models", default="tiny.en,base", help="comma list of models")
    bb.add_argument("--compute", default=None, choices=["float32", "int8", INT8_BFLOAT16],
                    help="default: what transcribe-batch loads on this CPU")
    bb.add_argument("--files", type=int, default=32, help="synthesized files of 5-25 s in the archive")
    bb.add_argument("--beam-size", type=int, default=5)
    bb.add_argument("--threads", type=int, default=2, help="cores the configurations share")
    bb.add_argument("--out", type=Path, default=Path("bench-results"))

    bh = bsub.add_parser("hush", help="input schemes after short speech: padding, zeros, noise, hush word")
    bh.add_argument("--models", default="tiny.en,base")
    bh.add_argument("--clips", type=int, default=40, help="synthesized clips of 2-25 s (plus jfk.wav)")
    bh.add_argument("--threads", type=int, default=2)
    bh.add_argument("--compute", choices=("float32", "int8"), default="float32",
                    help="the precision the models run in, each with its hush word for it")
    bh.add_argument("--out", type=Path, default=Path("bench-results"))

    bs = bsub.add_parser("stream", help="streaming latency and WER: the ablation, the default and the peers")
    bs.add_argument("--models", default="tiny.en,base", help="comma list of model names")
    bs.add_argument("--stages", default=",".join(s.label for s in ABLATION),
                    help="comma list of ablation stages to run (all by default; empty: none)")
    bs.add_argument("--variants", default="",
                    help="comma list of further variants (e.g. live+hush+draft), at the default step and beam")
    bs.add_argument("--line", action="append", default=[], metavar="NAME=OPTIONS",
                    help="a line beside the default: `stenoflow stream` options, e.g. "
                         "'gated=--beam-size 5 --gate 1 --gate-close' or 'f32=--compute float32' (repeatable)")
    bs.add_argument("--no-peers", action="store_true", help="leave out the WhisperLiveKit peers")
    bs.add_argument("--streams", type=int, default=2, help="continuous read-prose streams")
    bs.add_argument("--minutes", type=float, default=3.0, help="length of each continuous stream")
    bs.add_argument("--varied", type=int, default=2, help="varied streams (short items, pauses, lists, numbers)")
    bs.add_argument("--varied-minutes", type=float, default=1.5, help="length of each varied stream")
    bs.add_argument("--sparse", type=int, default=0,
                    help="sparse streams (the varied streams' items, 4 to 12 s apart, as a voice interface hears them)")
    bs.add_argument("--sparse-minutes", type=float, default=1.5, help="length of each sparse stream")
    bs.add_argument("--no-recorded", action="store_true",
                    help="leave out the stream of recorded human speech (LibriVox, jfk, card names, a command)")
    bs.add_argument("--real", action="store_true",
                    help="add the real-speech development set (recordings from package registries, "
                         "scripts/build_real_speech.py)")
    bs.add_argument("--drift-minutes", type=float, default=20.0,
                    help="one long stream through the default configuration (0: none)")
    bs.add_argument("--noise-db", type=float, default=None,
                    help="room noise at this level (dBFS RMS, e.g. -30) over every stream, pauses included")
    bs.add_argument("--configs", default="", help="comma list of configuration names or globs to run")
    bs.add_argument("--quick", action="store_true", help="1 stream of each kind, 1 minute, no drift (development)")
    bs.add_argument("--threads", type=int, default=2)
    bs.add_argument("--chunk", type=float, default=0.1, help="seconds of audio per push")
    bs.add_argument("--gold-model", default="base", help="model that aligns the reference for gold word times")
    bs.add_argument("--out", type=Path, default=Path("bench-results/stream"))

    d = sub.add_parser("data", help="evaluation and training data sets")
    dsub = d.add_subparsers(dest="data", required=True)
    dsub.add_parser("build", help="synthesize and cache the default data sets")
    return parser


def compute_for(device: str) -> str:
    """The precision a command loads on ``device`` when none is given: what ``load_model`` loads
    (:func:`stenoflow.model.compute.default_compute`): int8 on the CPU, where it is about twice as
    fast as float32 at the same WER (docs/benchmarks.md, docs/live-captions.md, docs/voice-commands.md), with the
    encoder in bfloat16 where the CPU has bfloat16 matrix units; float16 on CUDA."""
    return default_compute(device)


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
                                  clients=tuple(int(n) for n in args.clients.split(",")), minutes=args.minutes,
                                  threads=args.threads, drift_minutes=args.drift_minutes,
                                  batches=tuple(int(b) for b in args.batch.split(",")))
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
                word_log.write(EmittedWord(w.word, w.start, w.end, emitted_at).to_json() + "\n")
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
                                                    "align_frames", "agree_rounds", "commit_confident", "cold_margin_s", "commit_flanked",
                                                    "context_s", "skip_idle", "prompt_chars", "window_s", "silence_cache", "language", "speculative",
                                                    "medusa")
             if getattr(args, name) is not None}
    for name in ("commit_confident", "commit_flanked"):
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


def cmd_data(args: argparse.Namespace) -> int:
    from stenoflow.bench.datasets import build_default_sets

    build_default_sets()
    return 0


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


def cmd_listen(args: argparse.Namespace) -> int:
    from stenoflow.api import load_model
    from stenoflow.streaming.drivers import UnawareClock, WallClock
    from stenoflow.streaming.sources import Backlog, MicrophoneUnavailable
    from stenoflow.utterance.driver import (
        CHUNK_S,
        HeardUtterance,
        run_live_utterances,
        run_utterances,
    )

    check_source(args)
    options, offload = utterance_options(args)
    try:
        audio, live = open_source(args, CHUNK_S)
    except MicrophoneUnavailable as e:
        log.error("%s", e)
        return 2
    model = load_model(args.model, device=args.device, compute=args.compute, threads=args.threads)
    session = model.listen(options, offload)

    def show(heard: HeardUtterance) -> None:
        u = heard.utterance
        if args.json:
            print(json.dumps(heard.to_dict(), ensure_ascii=False), flush=True)
            return
        where = " offloaded," if u.offloaded else ""
        print(f"[{u.start:7.2f} -> {u.end:7.2f}] {u.text}   ({1000 * heard.after_endpoint:.0f} ms after the "
              f"endpoint,{where} perplexity {u.perplexity:.2f})", flush=True)

    if audio is not None:
        clock = WallClock() if args.simulate == "realtime" else UnawareClock()
        run = run_utterances(session, audio, args.simulate, clock, on_heard=show)
    else:
        assert live is not None
        run = run_live_utterances(session, Backlog(live), on_heard=show)
    log.info("%d utterances in %.1f s of audio; compute %.1f s (RTF %.2f)", len(run.heard), run.audio_s,
             run.compute_s, run.rtf)
    return 0


def utterance_options(args: argparse.Namespace) -> tuple[UtteranceOptions, OffloadOptions | None]:
    from stenoflow.utterance.offload import OffloadOptions
    from stenoflow.utterance.options import UtteranceOptions

    base = UtteranceOptions()
    endpoint = base.endpoint if args.hang is None else replace(base.endpoint, hang_s=args.hang)
    options = UtteranceOptions(language=args.language, beam_size=args.beam_size, hush=not args.no_hush,
                               pilot_s=args.pilot or None, collapse=not args.no_collapse,
                               early_termination=not args.no_early_termination,
                               final_in_hang=not args.no_final_in_hang, endpoint=endpoint)
    offload = None
    if args.offload_url:
        offload = OffloadOptions(args.offload_url, args.offload_perplexity, ServerOptions.key_from_env(args.api_key))
    return options, offload


def cmd_serve(args: argparse.Namespace) -> int:
    from stenoflow.api import load_model
    from stenoflow.server.app import serve

    options = ServerOptions(host=args.host, port=args.port, api_key=ServerOptions.key_from_env(args.api_key),
                            max_upload_bytes=int(args.max_upload_mb * 1024 * 1024), max_sessions=args.max_sessions,
                            idle_timeout_s=args.idle_timeout, max_message_bytes=int(args.max_message_kb * 1024),
                            batch=args.batch)
    if args.ray_address is not None:
        from stenoflow.cluster.serving import ServeOptions, run_serve

        run_serve(ServeOptions(model=args.model, compute=args.compute, threads=args.threads or 1,
                               min_replicas=args.replicas, max_replicas=args.max_replicas or args.replicas,
                               sessions_per_replica=args.sessions_per_replica, ray_address=args.ray_address),
                  options)
        return 0
    model = load_model(args.model, device=args.device, compute=args.compute, threads=args.threads)
    serve(model, options)
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


BENCH_COMMANDS = ("bench", "data", "train-hush", "train-medusa", "profile-threads")  # what the bench extra serves
COMMANDS = {"transcribe": cmd_transcribe, "stream": cmd_stream, "models": cmd_models, "bench": cmd_bench, "data": cmd_data,
            "train-hush": cmd_train_hush, "train-medusa": cmd_train_medusa, "profile-threads": cmd_profile_threads, "serve": cmd_serve,
            "listen": cmd_listen, "transcribe-batch": cmd_transcribe_batch}


def parse_command(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """``argv`` parsed, an absent --compute resolved by the command's device (the CPU where it
    has no --device), as ``load_model`` resolves it. ``bench serve`` keeps None: the server it
    starts resolves its own."""
    args = parser.parse_args(argv)
    if getattr(args, "compute", "") is None and getattr(args, "bench", None) != "serve":
        args.compute = compute_for(getattr(args, "device", None) or "cpu")
    return args


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


if __name__ == "__main__":
    sys.exit(main())
