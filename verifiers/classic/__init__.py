"""The classic ``verifiers`` API across its releases (0.1.0 to 0.3.x): which release an
environment was written for and what that changes (``verifiers.classic.releases``)."""

from verifiers.classic.releases import LATEST, Release, current, written_for

__all__ = ["LATEST", "Release", "current", "written_for"]
