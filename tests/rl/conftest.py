"""The trainer tests' fixtures: a tiny random model, a policy directory the built-in server
loads."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def tiny_model():
    from support.toy import tiny_llama

    return tiny_llama()


@pytest.fixture(scope="module")
def policy_dir(tmp_path_factory):
    from support.toy import make_tiny_policy

    return make_tiny_policy(tmp_path_factory.mktemp("policy"))
