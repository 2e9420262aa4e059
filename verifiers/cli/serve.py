"""vf-serve: serve a local model (or the embedded SmolLM2-135M-Instruct) over the OpenAI API."""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys

API_KEY_ENV = "VF_SERVE_API_KEY"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vf-serve", description=__doc__)
    parser.add_argument(
        "model",
        nargs="?",
        default="SmolLM2-135M-Instruct",
        help="embedded model name or a local HF model directory",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument(
        "--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16"]
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--max-batch-size", type=int, default=32)
    parser.add_argument("--max-model-len", type=int, default=None)
    parser.add_argument("--served-model-name", default=None)
    parser.add_argument(
        "--api-key-file",
        default=None,
        help="a 0600 file holding the key every /v1 route requires as 'Authorization: Bearer "
        f"KEY' (or ${API_KEY_ENV}); without a key every client is anonymous and budgeted",
    )
    parser.add_argument(
        "--api-key",
        default=None,
        help="the key itself (visible to every local user in /proc/PID/cmdline: prefer "
        f"--api-key-file or ${API_KEY_ENV})",
    )
    parser.add_argument(
        "--client-max-tokens",
        type=int,
        default=32_768,
        help="tokens (prompt + n x max_tokens) one anonymous client may have in flight (0: no limit)",
    )
    parser.add_argument(
        "--client-max-requests",
        type=int,
        default=64,
        help="requests one anonymous client may have in flight",
    )
    parser.add_argument(
        "--weights-secret-file",
        default=None,
        help="a 0600 file holding the secret weight updates must carry (or $VF_WEIGHTS_SECRET); "
        "without one, weight updates are off",
    )
    parser.add_argument(
        "--trusted-weights-dir",
        action="append",
        default=[],
        help="a directory /v1/weights/load may read (repeatable; also $VF_TRUSTED_WEIGHTS_DIRS)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        api_key = api_key_of(args)
    except (OSError, ValueError) as exc:
        print(f"vf-serve: --api-key-file: {exc}", file=sys.stderr)
        return 2
    try:  # the port first: a busy one fails now, not after the model loaded
        listener = bind(args.host, args.port)
    except OSError as exc:
        print(
            f"vf-serve: cannot listen on {args.host}:{args.port} ({exc.strerror}); "
            "pick another --port or stop what holds it",
            file=sys.stderr,
        )
        return 2
    try:
        import uvicorn

        from verifiers.local_models import ModelNotAvailableError, load_model
        from verifiers.serve.app import build_app
        from verifiers.serve.engine import Engine
        from verifiers.serve.limits import ClientBudget
        from verifiers.serve.service import ModelService
        from verifiers.weights.access import WeightAccess
    except ImportError as exc:
        from verifiers.sdk_guard import LOCAL_STACK_HINT

        print(f"vf-serve: {exc.name} is not installed: {LOCAL_STACK_HINT}", file=sys.stderr)
        return 2
    try:
        model, tokenizer, name, directory = load_model(
            args.model, dtype=args.dtype, device=args.device
        )
    except ModelNotAvailableError as exc:
        print(f"vf-serve: {exc}", file=sys.stderr)
        return 2
    engine = Engine(
        model, tokenizer, max_batch_size=args.max_batch_size, max_model_len=args.max_model_len
    )
    served = args.served_model_name or name
    try:
        access = WeightAccess.configure(args.weights_secret_file, args.trusted_weights_dir)
    except (OSError, ValueError) as exc:
        print(f"vf-serve: --weights-secret-file: {exc}", file=sys.stderr)
        return 2
    service = ModelService(
        engine, served, aliases=(name, str(directory), args.model), access=access
    )
    logging.getLogger("verifiers.serve").info(
        "serving %s (%s, %s) on http://%s:%d/v1",
        served,
        directory,
        next(model.parameters()).dtype,
        args.host,
        args.port,
    )
    budget = ClientBudget(args.client_max_tokens, args.client_max_requests)
    config = uvicorn.Config(
        build_app(service, api_key=api_key, budget=budget),
        log_level="warning",
        timeout_graceful_shutdown=5,
    )
    try:
        uvicorn.Server(config).run(sockets=[listener])
    finally:
        service.receiver.close()
        engine.shutdown()
    return 0


def api_key_of(args: argparse.Namespace) -> str | None:
    """The key from its file, the environment, or (with a warning) the command line."""
    from verifiers.weights.access import read_secret_file

    if args.api_key_file:
        return read_secret_file(args.api_key_file)
    if args.api_key:
        print(
            "vf-serve: warning: --api-key is visible to every local user (ps, /proc/PID/cmdline); "
            f"use --api-key-file or ${API_KEY_ENV}",
            file=sys.stderr,
        )
        return args.api_key
    return os.environ.get(API_KEY_ENV) or None


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
        listener.listen(2048)
    except OSError:
        listener.close()
        raise
    return listener


if __name__ == "__main__":
    sys.exit(main())
