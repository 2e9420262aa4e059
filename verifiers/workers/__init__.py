"""Environment workers: environment code out of the caller's process, and across machines.

A rollout's environment code (``env_response``, tools, reward functions, sandboxes) runs in
worker processes, so a blocking reward function stalls only its worker, a crash (a segfaulting
extension, ``os._exit``, an OOM kill) costs only the group that caused it (the groups beside it
run again alone, and a remote server that goes away has its groups run on the others, without
spending their attempts), and a run can use every core, or other machines:

- ``WorkerPool`` (``verifiers.workers.pool``): N processes on this machine;
- ``RemoteWorkers`` (``verifiers.workers.remote``): one or more ``vf-env-server`` processes on
  other hosts, over TCP, authenticated and encrypted with a shared secret;
- ``RayPool`` (``verifiers.workers.ray_pool``): workers as Ray actors on a Ray cluster.

``Environment.generate(..., env_workers=...)`` takes any of them, or a spec that starts a pool for
the run: ``N``, ``"auto"`` (one per core), ``"ray"`` / ``"ray:N"``. ``vf-eval`` and the trainer use
workers by default. The wire protocol is in ``verifiers.workers.protocol``.
"""

from verifiers.workers.launch import parse_spec, start_workers
from verifiers.workers.runner import EnvWorkers, WorkerGroups, client_config_of

__all__ = ["EnvWorkers", "WorkerGroups", "client_config_of", "parse_spec", "start_workers"]
