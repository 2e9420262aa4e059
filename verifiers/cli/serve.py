"""vf-serve: serve a local model (or the embedded SmolLM2-135M-Instruct) over the OpenAI API."""

from __future__ import annotations

import argparse
import logging
import sys


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
        "--api-key", default=None, help="require 'Authorization: Bearer KEY' on every /v1 route"
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
        import uvicorn

        from verifiers.local_models import ModelNotAvailableError, load_model
        from verifiers.serve.app import ModelService, build_app
        from verifiers.serve.engine import Engine
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
    try:
        uvicorn.run(
            build_app(service, api_key=args.api_key),
            host=args.host,
            port=args.port,
            log_level="warning",
            timeout_graceful_shutdown=5,
        )
    finally:
        service.receiver.close()
        engine.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
