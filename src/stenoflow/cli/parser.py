"""Every command's arguments: the one parser of the command line."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from pathlib import Path

from stenoflow.cli.stream import _or_off
from stenoflow.model.compute import COMPUTE_TYPES, INT8_BFLOAT16, default_compute
from stenoflow.output import FORMATS
from stenoflow.server.options import AUTO_MAX_SESSIONS, ServerOptions
from stenoflow.streaming.variants import ABLATION

log = logging.getLogger("stenoflow")


def _temperatures(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(t) for t in text.split(","))
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"temperature must be a number or a comma list, got {text!r}") from e
    return values


def max_sessions(text: str) -> int | str:
    """``--max-sessions``: a number of streams, or ``auto``."""
    if text == "auto":
        return text
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a number of streams or auto, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"at least 1 stream, got {n}")
    return n


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


def add_source_args(p: argparse.ArgumentParser) -> None:
    """Where live audio comes from: a file, stdin (``-``) or ``--mic``."""
    p.add_argument("audio", nargs="?", help="audio file, or - for raw 16 kHz mono PCM on stdin")
    p.add_argument("--mic", action="store_true", help="read the default microphone (needs sounddevice)")


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
    add_source_args(st)
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
    st.add_argument("--encoder-reuse", type=_or_off(float, "seconds"), default=None, dest="encoder_reuse_s", metavar="S",
                    help="live, with the silence cache: a round computes the encoder's positions from S seconds "
                         "before the end of the last round's speech on and reuses that round's pass for the "
                         "audio before (off: every position every round, the default)")
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
    st.add_argument("--settle-beam", type=int, default=None, dest="settle_beam", metavar="N",
                    help="live: the first round to hear a pause after its words decodes them again with beam "
                         "search of N rows, and that is final (default 1: the rounds' agreement decides; 5 is "
                         "0.7 WER points nearer offline on real speech, for a seventh to a third more compute)")
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
    st.add_argument("--language", default=None,
                    help="language code, or auto: detected, and followed where it changes (multilingual "
                         "models; default en)")
    st.add_argument("--task", default=None, choices=["transcribe", "translate"],
                    help="translate: English text of speech in any language (multilingual models)")
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
    add_source_args(ls)
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
    sv.add_argument("--max-sessions", type=max_sessions, default="auto",
                    help="WebSocket streams open at once, or auto (the default): a stream is admitted while the "
                         "open ones keep --target-latency and the measured load leaves room for it, up to "
                         f"{AUTO_MAX_SESSIONS} (else error busy)")
    sv.add_argument("--target-latency", type=float, default=ServerOptions.target_latency_s,
                    help="per-word latency (p90, seconds) --max-sessions auto keeps streams within; /metrics "
                         "counts the words later than it")
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
    bv.add_argument("--clients", default="1,2,4,6,8", help="comma list of concurrent client counts")
    bv.add_argument("--auto-clients", type=int, default=6,
                    help="then this many clients at once against --max-sessions auto (0: none)")
    bv.add_argument("--target-latency", type=float, default=ServerOptions.target_latency_s,
                    help="the --target-latency of the auto server")
    bv.add_argument("--no-alone", action="store_true", help="do not serve each stream alone for its unloaded WER")
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
    bs.add_argument("--languages", default="", metavar="LANGS",
                    help="instead: live captions with language auto on real prompts in these languages (es,fr,it,ru) "
                         "and a stream that switches between them, against offline transcribe (one model)")
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


def parse_command(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """``argv`` parsed, an absent --compute resolved by the command's device (the CPU where it
    has no --device), as ``load_model`` resolves it. ``bench serve`` keeps None: the server it
    starts resolves its own."""
    args = parser.parse_args(argv)
    if getattr(args, "compute", "") is None and getattr(args, "bench", None) != "serve":
        args.compute = compute_for(getattr(args, "device", None) or "cpu")
    return args
