"""Start the trainer's inference server: vf-serve (CPU, or one GPU) or vLLM (GPUs).

Both speak the same API to the trainer: OpenAI chat/completions with ``return_token_ids`` and
logprobs, ``policy_version`` in every reply, and the weight-update routes of
``verifiers.weights.transport``. vLLM gets them from ``verifiers.weights.vllm_routes`` (an HTTP middleware)
and ``verifiers.weights.vllm_worker`` (a worker extension), loaded by vLLM's own CLI flags.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from verifiers.processes.server import ServerProcess, free_port, launch, start_server
from verifiers.weights.access import SECRET_ENV, TRUSTED_ENV, VLLM_API_KEY_ENV, new_secret

VLLM_ROUTES = "verifiers.weights.vllm_routes.weight_routes"
VLLM_WORKER_EXTENSION = "verifiers.weights.vllm_worker.WeightUpdateExtension"


def vllm_command(model: str, port: int, inference: Any) -> list[str]:
    """``python -m vllm.entrypoints.openai.api_server`` with what RL needs:
    logprobs of the distribution tokens were actually drawn from (after temperature), no
    sampling defaults taken from the model's generation_config, and the weight-update API."""
    command = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        model,
        "--served-model-name",
        "policy",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--dtype",
        inference.dtype,
        "--max-num-seqs",
        str(inference.max_batch_size),
        "--gpu-memory-utilization",
        str(inference.gpu_memory_utilization),
        "--generation-config",
        "vllm",
        "--logprobs-mode",
        "processed_logprobs",
        "--middleware",
        VLLM_ROUTES,
        "--worker-extension-cls",
        VLLM_WORKER_EXTENSION,
    ]
    if inference.max_model_len:
        command += ["--max-model-len", str(inference.max_model_len)]
    return command + list(inference.extra_args)


def start_inference(
    inference: Any,
    model_dir: Path,
    log_path: Path,
    weights_dir: Path | None = None,
    weights_secret: str | None = None,
) -> ServerProcess:
    """Start the server; ``weights_secret`` (made by the trainer) and ``weights_dir`` (where the
    trainer writes weights) reach it through its environment only.

    The server gets a key of its own, made here for this run and handed over the same way
    (never in argv, which every local user reads in ``/proc/PID/cmdline``): it is meant for its
    one client, the trainer (``server.api_key``), and without the key another local user's
    request is a 401 before its body is read. Its one client keeps no per-client budget
    (vf-serve's rule for a server with a key); what bounds a stranger is the key check, the
    header and body deadlines and the descriptor budget every vf-serve has."""
    api_key = new_secret()
    if inference.backend == "vllm":
        try:
            import vllm  # noqa: F401
        except ImportError as exc:
            raise RuntimeError(
                "inference.backend = 'vllm' needs vLLM installed (pip install vllm) on a CUDA "
                "machine; use backend = 'vf-serve' elsewhere"
            ) from exc
        env = dict(os.environ)
        env.pop(SECRET_ENV, None)
        env[VLLM_API_KEY_ENV] = api_key
        if weights_secret is not None:
            env[SECRET_ENV] = weights_secret
        if weights_dir is not None:
            env[TRUSTED_ENV] = str(Path(weights_dir).resolve())
        if inference.device.startswith("cuda:"):  # vLLM on its own GPU(s)
            env["CUDA_VISIBLE_DEVICES"] = inference.device.split(":", 1)[1]
        port = free_port()
        server = launch(
            vllm_command(str(model_dir), port, inference),
            port=port,
            log_path=log_path,
            env=env,
            timeout=inference.startup_timeout_s,
            model="policy",
        )
        server.weights_secret, server.api_key = weights_secret, api_key
        return server
    return start_server(
        str(model_dir),
        log_path=log_path,
        timeout=inference.startup_timeout_s,
        env_overrides={"OMP_WAIT_POLICY": "PASSIVE"},
        weights_secret=weights_secret,
        trusted_weights_dirs=[weights_dir] if weights_dir is not None else None,
        api_key=api_key,
        extra_args=[
            "--dtype",
            inference.dtype,
            "--device",
            inference.device,
            "--served-model-name",
            "policy",
            "--max-batch-size",
            str(inference.max_batch_size),
            *inference.extra_args,
        ],
    )
