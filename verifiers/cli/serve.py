"""vf-serve: serve a local model (or the embedded SmolLM2-135M-Instruct) over the OpenAI API."""

from __future__ import annotations

import logging
import socket
import sys
from typing import Annotated, Literal

from pydantic import Field

from verifiers.asgi.deadlines import READ_TIMEOUT_S, header_timeout_protocol
from verifiers.cli.settings import CommandSettings, Flag, parse_settings
from verifiers.cli.usage import command
from verifiers.errors import UsageError
from verifiers.local_model.models import DEFAULT_MODEL
from verifiers.processes.server import API_KEY_ENV
from verifiers.weights.access import SECRET_ENV, TRUSTED_ENV


class ServeSettings(CommandSettings):
    """Every vf-serve setting: its flag, default, help and environment variable."""

    model: Annotated[str, Flag(positional=True)] = Field(
        DEFAULT_MODEL, description="embedded model name or a local HF model directory"
    )
    host: str = Field("127.0.0.1", description="address to listen on")
    port: int = Field(8000, description="port to listen on")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto",
        description="compute dtype (auto: bfloat16 on a GPU or on a CPU with native bf16, "
        "else float32)",
    )
    device: str = Field("cpu", description="torch device to run the model on (cpu, cuda:0)")
    max_batch_size: int = Field(32, description="sequences decoded together at most")
    max_model_len: int | None = Field(
        None, description="longest prompt + completion in tokens (none: the model's positions)"
    )
    served_model_name: str | None = Field(
        None, description="the model name clients ask for (none: the model's own name)"
    )
    api_key_file: str | None = Field(
        None,
        description="a 0600 file holding the key every /v1 route requires as 'Authorization: "
        "Bearer KEY'; without a key every client is anonymous and budgeted",
    )
    api_key: Annotated[str | None, Flag(env=API_KEY_ENV)] = Field(
        None,
        description="the key itself (on the command line it is visible to every local user in "
        f"/proc/PID/cmdline: prefer --api-key-file or ${API_KEY_ENV})",
    )
    client_max_tokens: int = Field(
        32_768,
        description="tokens (n x (prompt + max_tokens)) one anonymous client may have in flight "
        "(0: no limit)",
    )
    client_max_requests: int = Field(
        64, description="requests one anonymous client may have in flight"
    )
    client_max_bytes: int = Field(
        64 * 1024 * 1024,
        description="bytes of request bodies one anonymous client may have in flight",
    )
    read_timeout: float = Field(
        READ_TIMEOUT_S,
        gt=0,
        description="seconds a client may take to send a request's headers, and its body "
        "(a connection that trickles or stalls is closed, a stalled body gets a 408)",
    )
    weights_secret_file: str | None = Field(
        None,
        description="a 0600 file holding the secret weight updates must carry; without a "
        "secret, weight updates are off",
    )
    weights_secret: Annotated[str | None, Flag(env=SECRET_ENV, command_line=False)] = Field(
        None,
        description="the secret weight updates must carry (a trainer hands it over here, never "
        "in argv; --weights-secret-file wins)",
    )
    trusted_weights_dir: Annotated[list[str], Flag(env=TRUSTED_ENV)] = Field(
        default_factory=list,
        description="a directory /v1/weights/load may read (repeatable; the variable holds a "
        "list separated by os.pathsep)",
    )


@command("vf-serve")
def main(argv: list[str] | None = None) -> int:
    args = parse_settings(ServeSettings, argv, "vf-serve", __doc__)
    from verifiers.logging_setup import log_to_stderr

    log_to_stderr(logging.INFO, "%(asctime)s %(name)s %(levelname)s %(message)s")
    from verifiers.processes.open_files import raise_open_files_limit

    raise_open_files_limit()  # many clients' connections must not exhaust descriptors
    try:
        api_key = api_key_of(args)
    except (OSError, ValueError) as exc:
        raise UsageError(f"--api-key-file: {exc}") from exc
    try:  # the port first: a busy one fails now, not after the model loaded
        listener = inherited_listener(args.port) or bind(args.host, args.port)
    except OSError as exc:
        raise UsageError(
            f"cannot listen on {args.host}:{args.port} ({exc.strerror}); "
            "pick another --port or stop what holds it"
        ) from exc
    try:
        import uvicorn

        from verifiers.local_model.models import ModelNotAvailableError, load_model
        from verifiers.serve.app import build_app
        from verifiers.serve.engine import Engine
        from verifiers.serve.limits import ClientBudget
        from verifiers.serve.service import ModelService
        from verifiers.weights.access import WeightAccess
    except ImportError as exc:
        from verifiers.installs.sdk_guard import LOCAL_STACK_HINT

        raise UsageError(f"{exc.name} is not installed: {LOCAL_STACK_HINT}") from exc
    try:
        model, tokenizer, name, directory = load_model(
            args.model, dtype=args.dtype, device=args.device
        )
    except ModelNotAvailableError as exc:
        raise UsageError(str(exc)) from exc
    engine = Engine(
        model, tokenizer, max_batch_size=args.max_batch_size, max_model_len=args.max_model_len
    )
    served = args.served_model_name or name
    try:
        access = WeightAccess.configure(
            args.weights_secret_file, args.trusted_weights_dir, secret=args.weights_secret
        )
    except (OSError, ValueError) as exc:
        raise UsageError(f"--weights-secret-file: {exc}") from exc
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
    budget = ClientBudget(args.client_max_tokens, args.client_max_requests, args.client_max_bytes)
    config = uvicorn.Config(
        build_app(service, api_key=api_key, budget=budget, read_timeout=args.read_timeout),
        http=header_timeout_protocol(args.read_timeout),
        log_level="warning",
        timeout_graceful_shutdown=5,
        # a client is the address it connects from: X-Forwarded-For is anyone's to write
        proxy_headers=False,
    )
    try:
        uvicorn.Server(config).run(sockets=[listener])
    finally:
        service.receiver.close()
        engine.shutdown()
    return 0


def api_key_of(args: ServeSettings) -> str | None:
    """The key from its file, the environment, or (with a warning) the command line."""
    from verifiers.weights.access import read_secret_file

    if args.api_key_file:
        return read_secret_file(args.api_key_file)
    if args.api_key and args.given("api_key"):
        print(
            "vf-serve: warning: --api-key is visible to every local user (ps, /proc/PID/cmdline); "
            f"use --api-key-file or ${API_KEY_ENV}",
            file=sys.stderr,
        )
    return args.api_key or None


def inherited_listener(port: int) -> socket.socket | None:
    """The listening socket ``start_server`` made for this child (``LISTEN_FD_ENV``), if any:
    the launcher held the port from before this process started."""
    import os

    from verifiers.processes.server import LISTEN_FD_ENV

    fd = os.environ.pop(LISTEN_FD_ENV, None)
    if fd is None:
        return None
    listener = socket.socket(fileno=int(fd))
    if listener.getsockname()[1] != port:
        listener.close()
        raise OSError(0, f"the inherited listener is not on port {port}")
    return listener


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
