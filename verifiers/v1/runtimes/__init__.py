"""Where a harness's commands run: ``Runtime`` (what a harness and a task's hooks use:
``run``, ``read``, ``write``) and the one kind this SDK runs, ``subprocess``, which is a
confined sandbox of ``verifiers.sandbox`` (bwrap or Landlock, as the machine allows). Upstream's
container and remote kinds (``docker``, ``prime``, ``modal``) are refused by name."""

from verifiers.v1.runtimes.base import ProgramResult, Runtime
from verifiers.v1.runtimes.start import open_runtime
from verifiers.v1.runtimes.subprocess import SubprocessRuntime

__all__ = ["ProgramResult", "Runtime", "SubprocessRuntime", "open_runtime"]
