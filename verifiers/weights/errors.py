"""The one failure the trainer cannot work around: its inference server is gone or refuses."""

from __future__ import annotations

from verifiers.errors import VFError


class InferenceServerError(VFError, RuntimeError):
    """The inference server stopped answering (or refused new weights); training cannot continue."""
