"""Run the scripted test server as its own process (benchmarks use this): prints READY <url>."""

from __future__ import annotations

import argparse
import signal
import threading

from verifiers.testing.server import ModelServer


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m verifiers.testing", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument(
        "--reply", default=None, help="fixed reply text (default: echo the last user message)"
    )
    args = parser.parse_args()
    handler = (lambda _req: args.reply) if args.reply is not None else None
    server = ModelServer(handler, host=args.host, port=args.port).start()
    print(f"READY {server.base_url}", flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    done.wait()
    server.stop()


if __name__ == "__main__":
    main()
