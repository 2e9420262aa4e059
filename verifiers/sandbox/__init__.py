"""Sandboxed code execution: the provider interface and a local, isolated implementation."""

from verifiers.sandbox.base import (
    ExecResult,
    IsolationMode,
    Sandbox,
    SandboxError,
    SandboxLimits,
    SandboxProvider,
    SandboxUnavailableError,
)
from verifiers.sandbox.local import LocalSandbox
from verifiers.sandbox.provider import LocalSandboxProvider, probe_mode

__all__ = [
    "ExecResult",
    "IsolationMode",
    "LocalSandbox",
    "LocalSandboxProvider",
    "Sandbox",
    "SandboxError",
    "SandboxLimits",
    "SandboxProvider",
    "SandboxUnavailableError",
    "probe_mode",
]
