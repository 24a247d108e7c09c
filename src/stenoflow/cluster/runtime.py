"""Joining a Ray cluster, or starting a local one."""

from __future__ import annotations

import logging
import os
from types import ModuleType

log = logging.getLogger(__name__)

LOCAL = "local"


def import_ray() -> ModuleType:
    try:
        import ray
    except ImportError as e:
        raise ModuleNotFoundError("Ray is not installed: pip install 'stenoflow[cluster]'", name="ray") from e
    return ray


def connect(address: str | None, dashboard: bool = False) -> ModuleType:
    """Connect to the cluster at ``address`` (``auto``: the one started on this machine with
    ``ray start``; ``host:port`` or ``ray://...``), or start a local Ray (None or ``local``)
    that ends with this process, with Ray's dashboard if asked. Returns the ``ray`` module,
    initialised."""
    ray = import_ray()
    if ray.is_initialized():
        return ray
    # Workers inherit this: the package must import the same way there (an editable install does).
    env = {"env_vars": {"TOKENIZERS_PARALLELISM": "false"}}
    if address in (None, LOCAL):
        log.info("starting a local Ray with %d CPUs", os.cpu_count() or 1)
        context = ray.init(runtime_env=env, log_to_driver=False, configure_logging=False,
                           include_dashboard=dashboard)
    else:
        log.info("joining the Ray cluster at %s", address)
        context = ray.init(address=address, runtime_env=env, log_to_driver=False, configure_logging=False)
    if context.dashboard_url:
        log.info("Ray dashboard: http://%s", context.dashboard_url)
    return ray


def cluster_cpus(ray: ModuleType) -> int:
    return max(1, int(ray.cluster_resources().get("CPU", 1)))
