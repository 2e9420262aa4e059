"""Module path kept for environments that import ``verifiers.parsers.maybe_think_parser``."""

from verifiers.parsers.think_parser import MaybeThinkParser

__all__ = ["MaybeThinkParser"]
