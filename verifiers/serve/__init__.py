"""The built-in OpenAI-compatible inference server (``vf-serve``): continuous batching on CPU.

Needs the ``local`` extra (torch, transformers). ``start_server`` runs it in a subprocess for
tools that need a model endpoint for the duration of a job (``vf-eval`` with no endpoint).
"""

from verifiers.processes.server import ServerProcess, start_server

__all__ = ["ServerProcess", "start_server"]
