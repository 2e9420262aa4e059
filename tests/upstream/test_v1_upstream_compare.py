"""Upstream's v1 example tasksets (tag v0.3.0) give the same per-task rewards, metrics, turns and
stop conditions under this SDK as under PyPI's ``verifiers==0.3.1`` against one scripted model,
and every ``traces.jsonl`` line this SDK writes parses with 0.3.1's ``WireEpisode``
(``scripts/classic_compare/compare_v1.py``, which prints the table).

The tasksets come from a git copy of PrimeIntellect-ai/verifiers (``VF_UPSTREAM_GIT``), 0.3.1 from
the package index into a virtualenv of its own; the module is skipped where either is missing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
COMPARE = REPO / "scripts" / "classic_compare" / "compare_v1.py"
UPSTREAM_GIT = Path(
    os.environ.get("VF_UPSTREAM_GIT", "/work/.mirror/PrimeIntellect-ai+verifiers/repo")
)
# the tasksets that match today (the rest are skipped in catalog_v1.py, each with its reason)
MATCHING = [
    "reverse_text_v1",
    "alphabet_sort_v1",
    "glossary_v1",
    "scratchpad_v1",
    "gsm8k_v1",
    "color_codeword_v1",
    "code_golf_v1",
    "kuhn_poker_v1",
    "proposer_solver_v1",
]
pytestmark = pytest.mark.slow


def _env() -> dict[str, str]:
    """No PYTHONPATH or virtualenv of ours for the uv calls (they would leak this SDK in)."""
    drop = ("PYTHONPATH", "VIRTUAL_ENV", "VF_API_VERSION")
    return {k: v for k, v in os.environ.items() if k not in drop}


@pytest.fixture(scope="module")
def anchor(tmp_path_factory) -> Path:
    """Upstream's ``environments/`` at tag v0.3.0."""
    if not (UPSTREAM_GIT / "HEAD").is_file():
        pytest.skip("needs a git copy of PrimeIntellect-ai/verifiers (VF_UPSTREAM_GIT)")
    root = tmp_path_factory.mktemp("anchor-v0.3.0")
    archive = subprocess.run(
        ["git", "-C", str(UPSTREAM_GIT), "archive", "v0.3.0", "environments"],
        capture_output=True,
        check=True,
    )
    subprocess.run(["tar", "x", "-C", str(root)], input=archive.stdout, check=True)
    return root


@pytest.fixture(scope="module")
def upstream_python(tmp_path_factory) -> str:
    """A virtualenv with PyPI's verifiers 0.3.1 and the tasksets' own dependencies."""
    from uv import find_uv_bin

    venv = tmp_path_factory.mktemp("upstream-0.3.1") / "venv"
    uv = find_uv_bin()
    made = subprocess.run(
        [uv, "venv", "-q", "--python", sys.executable, str(venv)],
        capture_output=True,
        text=True,
        env=_env(),
    )
    assert made.returncode == 0, made.stderr
    python = str(venv / "bin" / "python")
    done = subprocess.run(
        [uv, "pip", "install", "-q", "--python", python, "verifiers==0.3.1", "pillow>=11.0.0"],
        capture_output=True,
        text=True,
        timeout=600,
        env=_env(),
    )
    if done.returncode != 0:
        pytest.skip(
            f"could not install verifiers==0.3.1 from the package index: {done.stderr[-500:]}"
        )
    return python


@pytest.mark.timeout(900)  # nine tasksets on both sides, after installing 0.3.1: ~6 min alone
def test_v1_example_tasksets_score_as_the_real_0_3_1_and_their_traces_parse_upstream(
    anchor, upstream_python, tmp_path
):
    table = tmp_path / "table.md"
    done = subprocess.run(
        [
            sys.executable,
            str(COMPARE),
            "--anchor",
            str(anchor),
            "--upstream-python",
            upstream_python,
            "--markdown",
            str(table),
            "--only",
            *MATCHING,
        ],
        capture_output=True,
        text=True,
        timeout=1200,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    rows = {
        cells[0]: cells
        for line in table.read_text().splitlines()[2:]
        if (cells := [c.strip() for c in line.strip("|").split("|")])
    }
    assert sorted(rows) == sorted(MATCHING)
    for name, (_, tasks, rewards, metrics, wire, _) in rows.items():
        assert tasks == "3", name
        assert (rewards, metrics) == ("same", "same"), (name, rows[name])
        assert wire == "3/3 parse", (name, wire)
