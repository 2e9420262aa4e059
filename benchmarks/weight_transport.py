"""How long one weight update takes, trainer → inference server, per transport.

    python benchmarks/weight_transport.py [--model SmolLM2-135M-Instruct] [--repeats 5]

Starts a real vf-serve on the model (float32), then pushes the trainer's full weights with the
filesystem transport (safetensors written atomically + POST /v1/weights/load) and with the
process-group transport (gloo broadcast, no disk), and prints the median / best per update.
The first broadcast also sets the group up; it is reported separately.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import stop_cleanly  # beside this script
from rich.console import Console
from rich.table import Table

from verifiers.local_model.models import DEFAULT_MODEL


def main() -> None:
    stop_cleanly.install()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    from transformers import AutoModelForCausalLM

    from verifiers.local_model.models import resolve_model_dir
    from verifiers.processes.server import start_server
    from verifiers.rl.algorithm.trainer import Trainer
    from verifiers.rl.configs.rl import TrainerConfig
    from verifiers.weights.access import new_secret
    from verifiers.weights.transport import BroadcastTransport, FilesystemTransport

    model_dir, _ = resolve_model_dir(args.model)
    work = stop_cleanly.scratch_dir("vf-bench-weights-")
    server = start_server(
        str(model_dir),
        log_path=work / "serve.log",
        extra_args=["--dtype", "float32"],
        env_overrides={"OMP_WAIT_POLICY": "PASSIVE"},
        weights_secret=(secret := new_secret()),
        trusted_weights_dirs=[work],
    )
    try:
        trainer = Trainer(
            AutoModelForCausalLM.from_pretrained(model_dir, dtype="float32"), TrainerConfig()
        )
        size_mb = sum(t.numel() * t.element_size() for t in trainer.export_state().values()) / 2**20
        results: dict[str, list[float]] = {}
        setup = 0.0
        transports = {
            "filesystem (safetensors + load)": FilesystemTransport(
                server.base_url, work / "w", secret=secret
            ),
            "gloo broadcast": BroadcastTransport(server.base_url, secret=secret),
        }
        for name, transport in transports.items():
            times = []
            for i in range(args.repeats + 1):
                trainer.version = i + 1
                start = time.perf_counter()
                assert transport.push(trainer) == trainer.version
                times.append(time.perf_counter() - start)
            if name.startswith("gloo"):
                setup = times[0]
            results[name] = times[1:]  # the first push warms caches (and sets the group up)
            transport.close()
    finally:
        server.stop()
    table = Table(title=f"weight update, {args.model} ({size_mb:.0f} MiB float32), 2 cores")
    for col in ("transport", "median s", "best s", "MiB/s (median)"):
        table.add_column(col, justify="right")
    for name, times in results.items():
        median = statistics.median(times)
        table.add_row(name, f"{median:.3f}", f"{min(times):.3f}", f"{size_mb / median:,.0f}")
    Console().print(table)
    print(f"first broadcast, including setting the group up: {setup:.3f} s")


if __name__ == "__main__":
    main()
