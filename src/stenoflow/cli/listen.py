"""`stenoflow listen` (voice commands) and `serve`."""

from __future__ import annotations

import argparse
import json
import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from stenoflow.server.options import AUTO_MAX_SESSIONS, ServerOptions

if TYPE_CHECKING:

    from stenoflow.utterance.offload import OffloadOptions
    from stenoflow.utterance.options import UtteranceOptions
from stenoflow.cli.stream import check_source, open_source

log = logging.getLogger("stenoflow")


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

    auto = args.max_sessions == "auto"
    options = ServerOptions(host=args.host, port=args.port, api_key=ServerOptions.key_from_env(args.api_key),
                            max_upload_bytes=int(args.max_upload_mb * 1024 * 1024),
                            max_sessions=AUTO_MAX_SESSIONS if auto else args.max_sessions,
                            admission="auto" if auto else "fixed", target_latency_s=args.target_latency,
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
