"""``stenoflow serve --ray-address``: the server as a Ray Serve deployment.

Each replica is the ASGI app of ``stenoflow serve`` (``server.app.create_app``) around its own
loaded model, so the routes, the protocol and the limits are the same code. Ray Serve's proxy
puts the replicas behind one HTTP/WebSocket endpoint. A stream is one WebSocket connection,
which the proxy routes once: every message of a stream reaches the replica that holds its
session (affinity without sticky cookies). Replicas scale between ``min_replicas`` and
``max_replicas`` on the number of open requests per replica, each stream counting as one.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from stenoflow.cluster.runtime import connect
from stenoflow.model.compute import cpu_compute
from stenoflow.server.options import ServerOptions

log = logging.getLogger(__name__)

APP_NAME = "stenoflow"


@dataclass(frozen=True)
class ServeOptions:
    model: str = "base"
    compute: str = field(default_factory=cpu_compute)  # replicas run on CPUs
    threads: int = 1  # torch threads (and CPUs reserved) per replica
    min_replicas: int = 1
    max_replicas: int = 1
    sessions_per_replica: int = 2  # open streams/requests a replica is scaled for
    ray_address: str | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.min_replicas <= self.max_replicas:
            raise ValueError(f"need 1 <= min_replicas <= max_replicas, got {self.min_replicas}, {self.max_replicas}")
        if self.threads < 1 or self.sessions_per_replica < 1:
            raise ValueError("threads and sessions_per_replica must be >= 1")


class ServerReplica:
    """One replica: a loaded model and the server's ASGI app around it."""

    def __init__(self, model: str, compute: str, threads: int, server: ServerOptions) -> None:
        from stenoflow.api import load_model
        from stenoflow.server.app import create_app

        self._app = create_app(load_model(model, compute=compute, threads=threads), server)

    def __serve_build_asgi_app__(self) -> Any:
        return self._app


def application(options: ServeOptions, server: ServerOptions) -> Any:
    """The Serve application: the replica class as an ingress deployment, bound to its arguments."""
    from ray import serve

    autoscaling = None
    if options.max_replicas > options.min_replicas:
        autoscaling = {"min_replicas": options.min_replicas, "max_replicas": options.max_replicas,
                       "target_ongoing_requests": options.sessions_per_replica}
    deployment = serve.deployment(
        serve.ingress()(ServerReplica), name=APP_NAME,
        num_replicas=None if autoscaling else options.min_replicas, autoscaling_config=autoscaling,
        # A replica takes more than the target before Serve routes elsewhere; its own limit
        # (ServerOptions.max_sessions) still answers a clear "busy" past that.
        max_ongoing_requests=max(server.max_sessions, options.sessions_per_replica),
        ray_actor_options={"num_cpus": options.threads})
    return deployment.bind(options.model, options.compute, options.threads, server)


def run_serve(options: ServeOptions, server: ServerOptions, blocking: bool = True) -> None:
    """Deploy on the cluster and serve at ``server.host:server.port`` (until interrupted when blocking)."""
    connect(options.ray_address)
    from ray import serve

    serve.start(http_options={"host": server.host, "port": server.port})
    serve.run(application(options, server), name=APP_NAME, route_prefix="/", blocking=False)
    log.info("serving %s on http://%s:%d through Ray Serve (%d-%d replicas x %d threads)", options.model,
             server.host, server.port, options.min_replicas, options.max_replicas, options.threads)
    if blocking:
        import signal
        import sys
        import time

        # A stop request ends the deployment too, not only this process (a cluster outlives it).
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        try:
            while True:
                time.sleep(3600)
        finally:
            serve.delete(APP_NAME)
