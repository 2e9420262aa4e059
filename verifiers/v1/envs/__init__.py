"""Upstream 0.3's ``verifiers.v1.envs`` module paths: the env classes and configs tasksets and
tests import from there (the single-agent env; the agentic judge's score composition)."""
