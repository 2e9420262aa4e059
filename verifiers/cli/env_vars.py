"""The environment variables the SDK's commands read besides their settings models' own.

A command's settings model declares the variables its flags fall back to (``Flag(env=...)``,
``verifiers.cli.settings``); the library under the commands reads a few more, listed here once.
``docs/environment-variables.md`` is the table of both, and
``tests/cli/test_cli_settings.py::test_the_env_var_table_lists_exactly_the_variables_read`` keeps
it exact.
"""

from __future__ import annotations

LIBRARY_VARIABLES: dict[str, str] = {
    # name: where it is read
    "OPENAI_API_KEY": "verifiers.cli.endpoints, verifiers.workers.server, "
    "verifiers.rubrics.judge_rubric",
    "VF_API_KEY": "verifiers.clients.config, verifiers.workers.server",
    "OPENAI_BASE_URL": "verifiers.rubrics.judge_rubric",
    "VF_ENV_SECRET": "verifiers.workers.auth",
    "VF_WORKER_MEMORY_MB": "verifiers.workers.pool",
    "VF_WORKER_MAX_DEATHS": "verifiers.workers.isolation",
    "RAY_ADDRESS": "verifiers.workers.ray_pool (by ray.init)",
    "VF_CACHE_DIR": "verifiers.local_model.models",
    "XDG_CACHE_HOME": "verifiers.local_model.models",
    "XDG_CONFIG_HOME": "verifiers.cli.endpoints, verifiers.installs.uv_config",
    "XDG_CONFIG_DIRS": "verifiers.installs.uv_config",
    "UV_CONFIG_FILE": "verifiers.installs.uv_config",
    "VF_TRUSTED_DIRS": "verifiers.processes.own_dir",
    "VF_API_VERSION": "verifiers.classic.releases",
    "VF_EXAMPLE_DATA": "verifiers.data.examples",
    "VF_CONFIG": "verifiers.v1.mcp.server (a served toolset's config, as upstream names it)",
    "VF_TOOLSET_KEY": "verifiers.v1.mcp.server (the key a served toolset's clients must send)",
    "VF_SANDBOX_PYTHON": "verifiers.sandbox.view",
    "VF_SANDBOX_UID_DIR": "verifiers.sandbox.uids",
    "VLLM_API_KEY": "verifiers.weights.vllm_routes",
    "WANDB_PROJECT": "verifiers.rl.run.tracking",
    "WANDB_MODE": "verifiers.rl.run.tracking",
    "OMP_WAIT_POLICY": "verifiers.cli.training (set to PASSIVE unless set)",
    "NCCL_CUMEM_ENABLE": "verifiers.rl.training.rl (set to 0 unless set)",
    "GLOO_SOCKET_IFNAME": "verifiers.rl.run.distributed (set to lo unless set, ranks on one machine)",
}
"""Variables a user may set that no settings model declares: name -> the modules reading it."""

INTERNAL_VARIABLES = frozenset(
    {
        "VF_PARENT_PID",  # set by the SDK for a child it starts (verifiers.processes)
        "VF_SERVE_LISTEN_FD",  # set by the SDK for a vf-serve it starts (verifiers.processes)
        "VF_ENV_WORKER_API_KEY",  # set inside an environment worker (verifiers.workers.runner)
        "VF_NO_API_KEY",  # the name a client config gives when it has no key; never set
        "RANK",  # set by torchrun
        "LOCAL_RANK",  # set by torchrun
        "WORLD_SIZE",  # set by torchrun
        "LOCAL_WORLD_SIZE",  # set by torchrun
        "TORCHELASTIC_RUN_ID",  # set by torchrun
    }
)
"""Variables the SDK reads that a user does not set: not in the table."""
