"""PEP 723 scripts in the ``subprocess`` runtime (upstream's ``runtime.run_uv_script``, what
gsm8k_v1's reward runs its verifier with): the script's dependency is installed as a wheel by uv
on the host, the script runs inside the rollout's confined sandbox and sees that dependency
read-only; a dependency that cannot be had fails naming it. The package index is a directory
of wheels made here (``UV_FIND_LINKS``, ``UV_NO_INDEX``), so nothing leaves the machine."""

from __future__ import annotations

import asyncio
import os
import zipfile
from pathlib import Path

import pytest

import verifiers.v1 as vf
from verifiers.sandbox import SandboxLimits
from verifiers.testing import Reply
from verifiers.v1.agent import Agent, ModelContext
from verifiers.v1.configs.harness import NullHarnessConfig
from verifiers.v1.configs.runtime import SubprocessConfig
from verifiers.v1.errors import SandboxError
from verifiers.v1.runtimes import Runtime, open_runtime
from verifiers.v1.runtimes.uv_scripts import script_dependencies

SCRIPT = b"""# /// script
# dependencies = ["tinydep"]
# ///
import sys

import tinydep

print(tinydep.__file__)
try:
    open(tinydep.__file__ + ".planted", "w")
except OSError as e:
    print("read-only:", type(e).__name__)
print(tinydep.double(sys.argv[1]))
"""


def make_wheel(where: Path) -> None:
    """``tinydep`` 1.0, a pure-Python wheel with one function."""
    files = {
        "tinydep/__init__.py": "def double(x):\n    return x + x\n",
        "tinydep-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: tinydep\nVersion: 1.0\n",
        "tinydep-1.0.dist-info/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = "".join(f"{name},,\n" for name in files) + "tinydep-1.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(where / "tinydep-1.0-py3-none-any.whl", "w") as wheel:
        for name, text in {**files, "tinydep-1.0.dist-info/RECORD": record}.items():
            wheel.writestr(name, text)


@pytest.fixture
def local_index(tmp_path, monkeypatch) -> Path:
    """uv resolves from a directory holding the ``tinydep`` wheel and nothing else."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    make_wheel(wheels)
    monkeypatch.setenv("UV_FIND_LINKS", str(wheels))
    monkeypatch.setenv("UV_NO_INDEX", "1")
    return wheels


async def test_a_uv_script_runs_in_the_sandbox_with_its_dependency_installed_read_only(
    local_index,
):
    runtime = await open_runtime(SubprocessConfig(), SandboxLimits())
    try:
        result = await runtime.run_uv_script(SCRIPT, args=["ab"])
        again = await runtime.run_uv_script(SCRIPT, args=["cd"])  # prepared once, run twice
    finally:
        await runtime.stop()
    assert result.exit_code == 0, result.stderr
    where, readonly, doubled = result.stdout.splitlines()
    assert "vf-uv-scripts-" in where and where.endswith("tinydep/__init__.py")
    assert readonly.startswith("read-only:")  # the sandbox cannot alter the environment
    assert not await asyncio.to_thread(os.path.exists, where + ".planted")
    assert doubled == "abab"
    assert again.stdout.splitlines()[0] == where and again.stdout.splitlines()[-1] == "cdcd"


async def test_a_uv_script_whose_dependency_cannot_be_installed_fails_naming_it(local_index):
    script = SCRIPT.replace(b'"tinydep"', b'"nosuchdep-vf"')
    runtime = await open_runtime(SubprocessConfig(), SandboxLimits())
    try:
        with pytest.raises(SandboxError, match=r"could not install its dependencies \['nosuchdep"):
            await runtime.run_uv_script(script, args=["x"])
    finally:
        await runtime.stop()


def test_a_scripts_dependencies_are_read_from_its_pep_723_block_and_a_bad_block_is_named():
    assert script_dependencies(SCRIPT) == ["tinydep"]
    assert script_dependencies(b"print(1)\n") == []
    with pytest.raises(SandboxError, match="not TOML"):
        script_dependencies(b"# /// script\n# dependencies = [\n# ///\n")
    with pytest.raises(SandboxError, match="must be a list of requirement strings"):
        script_dependencies(b'# /// script\n# dependencies = "tinydep"\n# ///\n')


class DoubledData(vf.TaskData):
    word: str


class DoubledTask(vf.Task[DoubledData]):
    """gsm8k_v1's shape: ``setup(self, runtime)`` (hooks take what they name) prepares the
    script, the reward runs it in the rollout's runtime."""

    prepared: bool = False

    async def setup(self, runtime: Runtime) -> None:
        await runtime.prepare_uv_script(SCRIPT)
        self.prepared = True

    @vf.reward
    async def doubled(self, trace: vf.Trace, runtime: Runtime) -> float:
        result = await runtime.run_uv_script(SCRIPT, args=[self.data.word])
        if result.exit_code != 0:
            raise RuntimeError(result.stderr[-500:])
        return float(result.stdout.splitlines()[-1] == trace.last_reply)


async def test_a_reward_runs_a_uv_script_in_the_rollouts_runtime_after_setup_prepared_it(
    server, local_index
):
    server.set_handler(lambda request: Reply(content="hihi"))
    agent = Agent(
        "agent",
        vf.AgentConfig(harness=NullHarnessConfig(id="null"), max_turns=2),
        ModelContext(base_url=server.base_url, model="test-model"),
    )
    good, bad = (
        DoubledTask(DoubledData(idx=0, prompt="double hi", word="hi")),
        DoubledTask(DoubledData(idx=1, prompt="double ho", word="ho")),
    )
    traces = [await agent.run(good), await agent.run(bad)]
    assert all(t.ok for t in traces), [t.errors for t in traces]
    assert good.prepared and bad.prepared
    assert [t.reward for t in traces] == [1.0, 0.0]
