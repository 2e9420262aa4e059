"""A vf-eval run collects young objects less often than CPython's default (every
``YOUNG_COLLECTION_THRESHOLD`` allocations, not 700), set once the environment is loaded so that
workers forked from the run inherit it: at -c 256 the default spent about a quarter of the
caller's CPU per rollout in the collector (``benchmarks/eval_default_path.py``)."""

from __future__ import annotations

import gc
import textwrap

import pytest

from verifiers.cli.eval.start import YOUNG_COLLECTION_THRESHOLD, load_and_launch


@pytest.fixture
def restored_thresholds():
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


def test_a_run_sets_the_young_threshold_and_keeps_the_older_ones(
    tmp_path, monkeypatch, restored_thresholds
):
    (tmp_path / "collector_env.py").write_text(
        textwrap.dedent(
            """
            import verifiers as vf

            def load_environment(**kwargs):
                return vf.SingleTurnEnv(dataset=[{"question": "q", "answer": "a"}],
                                        rubric=vf.Rubric())
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    gc.set_threshold(700, 9, 8)
    launched: list = []
    env = load_and_launch("collector-env", None, {}, launched)
    assert env is not None and launched == []
    assert gc.get_threshold() == (YOUNG_COLLECTION_THRESHOLD, 9, 8)
