"""The repository's shell scripts under the conditions a newcomer meets: an optional system
package that will not install, a pipeline run that was interrupted.

The stage commands of the pipeline (vf-eval, vf-data, vf-sft, vf-rl) are replaced by small
scripts that write what each stage writes: what is tested here is the script's own logic
(which stages run, with which sizes, what a rerun skips), not the stages (tests/workflows/test_e2e.py,
test_sft.py and the test_rl_*.py files run those for real).
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def shim(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def system_packages(bin_dir: Path) -> subprocess.CompletedProcess:
    """scripts/system_packages.sh with only ``bin_dir`` on PATH."""
    return subprocess.run(
        ["/bin/bash", str(REPO / "scripts/system_packages.sh")],
        env={"PATH": str(bin_dir)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def expected_missing() -> list[str]:
    """With only the shims on PATH every tool is missing, except PostgreSQL where the
    distribution's server is installed (found by its path, not PATH)."""
    tools = ["bubblewrap", "slirp4netns", "chromium"]
    return (
        tools if list(Path("/usr/lib/postgresql").glob("*/bin/initdb")) else [*tools, "postgresql"]
    )


def test_an_optional_system_package_that_fails_to_install_stops_nothing(tmp_path):
    """As root with apt-get, none of the four tools present and chromium unavailable: each
    package is tried on its own, chromium's failure is a note, and the script succeeds."""
    bin_dir, log = tmp_path / "bin", tmp_path / "apt.log"
    bin_dir.mkdir()
    shim(
        bin_dir,
        "apt-get",
        f'echo "$*" >> {log}\n[[ " $* " == *" chromium "* ]] && exit 100\nexit 0\n',
    )
    shim(bin_dir, "id", "echo 0\n")
    for tool in ("ls",):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    done = system_packages(bin_dir)
    assert done.returncode == 0, done.stderr
    assert "could not install chromium" in done.stderr
    installs = [line for line in log.read_text().splitlines() if line.startswith("install")]
    assert [line.split()[-1] for line in installs] == expected_missing()
    assert "could not install" not in done.stderr.replace("could not install chromium", "")


def test_without_root_the_missing_packages_are_one_note(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim(bin_dir, "id", "echo 1000\n")
    (bin_dir / "ls").symlink_to(shutil.which("ls"))
    done = system_packages(bin_dir)
    assert done.returncode == 0
    assert f"install {' '.join(expected_missing())} (e.g." in done.stderr


STAGES = """
echo "$(basename "$0") $*" >> {log}
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --output-dir|--output_dir|-o) out=$2; shift;;
    --resume) [ $# -gt 1 ] && out=${{2%/evals/*}} && shift;;
  esac
  shift
done
[ -n "$out" ] || {{ echo "no output dir" >&2; exit 9; }}
"""
# With STOP_AT=N the pipeline's Nth command, having begun (its run or config written), waits to
# be stopped, and exits as vf-eval, vf-sft and vf-rl do on SIGINT/SIGTERM: 130.
WAIT = """
if [ "${{STOP_AT:-}}" = "$(wc -l < {log})" ]; then
  trap 'exit 130' INT TERM
  touch {log}.waiting
  while :; do sleep 0.05; done
fi
"""


def pipeline_checkout(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The pipeline script in a checkout of its own (no .venv: the stage shims are found)."""
    checkout, bin_dir, log = tmp_path / "checkout", tmp_path / "bin", tmp_path / "calls.log"
    (checkout / "examples").mkdir(parents=True)
    for part in ("pipeline", "sft", "rl"):
        shutil.copytree(REPO / "examples" / part, checkout / "examples" / part)
    bin_dir.mkdir()
    head, wait = STAGES.format(log=log), WAIT.format(log=log)
    shim(
        bin_dir,
        "vf-eval",
        head + 'mkdir -p "$out/evals/m/run"\n'
        'echo \'{"summary": {"avg_reward": 0.5, "avg_metrics": {"exact": 0.25}}}\''
        ' > "$out/evals/m/run/metadata.json"\n' + wait,
    )
    shim(bin_dir, "vf-data", head + 'mkdir -p "$out"\n' + wait)
    for name in ("vf-sft", "vf-rl"):
        shim(
            bin_dir,
            name,
            head + f'[ "${{FAIL_AT:-}}" = {name} ] && {{ mkdir -p "$out/partial"; '
            'echo {} > "$out/config.json"; exit 1; }\n'
            'mkdir -p "$out" && echo {} > "$out/config.json"\n'
            + wait
            + 'mkdir -p "$out/weights"\n',
        )
    return checkout, bin_dir, log


def run_pipeline(checkout: Path, bin_dir: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "examples/pipeline/uppercase_cpu.sh"],
        cwd=checkout,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(checkout), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_pipeline_resumes_after_an_interruption_and_scales(tmp_path):
    """Interrupted in vf-sft, the rerun skips the three finished stages, resumes vf-sft (its
    output kept, --resume) and finishes; PIPELINE_SCALE shrinks every stage, and everything
    lands under PIPELINE_DIR, which a run at another scale is refused."""
    checkout, bin_dir, log = pipeline_checkout(tmp_path)
    out = tmp_path / "pipeline-out"
    env = {"PIPELINE_SCALE": "0.2", "PIPELINE_DIR": str(out)}
    first = run_pipeline(checkout, bin_dir, FAIL_AT="vf-sft", **env)
    assert first.returncode != 0 and (out / "sft" / "partial").exists()
    done_first = [line.split("\t")[0] for line in (out / "stages.tsv").read_text().splitlines()]
    assert done_first == ["eval base", "generate 60 x 8", "vf-data best-of-8"]
    calls_first = log.read_text().splitlines()
    generate = next(c for c in calls_first if "--split train" in c)
    assert "-n 60 " in generate and "-r 8" in generate  # 300 x 0.2
    assert "-n 12 " in calls_first[0]  # held-out rows: 60 x 0.2

    second = run_pipeline(checkout, bin_dir, **env)
    assert second.returncode == 0, second.stderr
    calls_second = log.read_text().splitlines()[len(calls_first) :]
    assert [c.split()[0] for c in calls_second] == ["vf-sft", "vf-eval", "vf-rl", "vf-eval"]
    assert calls_second[0].endswith("--resume")  # the interrupted stage goes on, not over
    assert "--steps 2" in calls_second[2]  # 12 x 0.2, at least 2
    assert (out / "sft" / "partial").exists() and (out / "rl" / "weights").is_dir()
    for stage in ("eval base", "generate 60 x 8", "vf-data best-of-8"):
        assert f"== {stage}: done already" in second.stdout, second.stdout
    assert "SFT+RL" in second.stdout and "0.500" in second.stdout
    assert sorted(p.name for p in checkout.iterdir()) == ["examples"]  # nothing else written
    assert os.listdir(out)
    other = run_pipeline(checkout, bin_dir, PIPELINE_SCALE="1", PIPELINE_DIR=str(out))
    assert other.returncode == 2 and "holds a run at PIPELINE_SCALE=0.2, not 1" in other.stderr


def test_an_interrupted_eval_stage_of_the_pipeline_is_resumed_not_redone(tmp_path):
    """vf-eval had just said `--resume RUN`; the pipeline's rerun deleted that run instead. Each
    scale has a directory of its own by default."""
    checkout, bin_dir, log = pipeline_checkout(tmp_path)
    out = checkout / "outputs" / "pipeline" / "scale-0.2"
    run = out / "eval-base" / "evals" / "m" / "run"
    run.mkdir(parents=True)
    (run / "metadata.json").write_text('{"status": "running"}')
    done = run_pipeline(checkout, bin_dir, PIPELINE_SCALE="0.2")
    assert done.returncode == 0, done.stderr
    first = log.read_text().splitlines()[0]
    assert first == f"vf-eval uppercase --resume {run.relative_to(checkout)}", first


PIPELINE_STAGES = [  # (stage, the command it runs, the directory it writes under PIPELINE_DIR)
    ("eval base", "vf-eval", "eval-base"),
    ("generate 60 x 8", "vf-eval", "generate"),
    ("vf-data best-of-8", "vf-data", "data"),  # seconds of work: redone whole, no --resume
    ("vf-sft", "vf-sft", "sft"),
    ("eval sft", "vf-eval", "eval-sft"),
    ("vf-rl 2 steps", "vf-rl", "rl"),
    ("eval sft+rl", "vf-eval", "eval-rl"),
]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("stage", range(len(PIPELINE_STAGES)), ids=[s[0] for s in PIPELINE_STAGES])
def test_the_pipeline_stopped_at_each_stage_by_a_signal_resumes_that_stage(tmp_path, stage, sig):
    """Ctrl-C (SIGINT) or a closed session / scheduler (SIGTERM) sent to the pipeline's process
    group while stage N runs: the rerun skips stages 1..N-1, goes on with stage N where it was
    (vf-eval --resume on the run it began, vf-sft/vf-rl --resume; vf-data redone), then runs the
    rest, and the finished directory holds every stage's output (the real commands:
    tests/workflows/test_pipeline_stopped.py)."""
    checkout, bin_dir, log = pipeline_checkout(tmp_path)
    out = tmp_path / "pipeline-out"
    scale = {"PIPELINE_SCALE": "0.2", "PIPELINE_DIR": str(out)}
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(checkout), **scale}
    proc = subprocess.Popen(
        ["bash", "examples/pipeline/uppercase_cpu.sh"],
        cwd=checkout,
        env={**env, "STOP_AT": str(stage + 1)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    waiting = Path(f"{log}.waiting")
    deadline = time.monotonic() + 60
    while not waiting.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    os.killpg(proc.pid, sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode != 0, err
    names = [name for name, _, _ in PIPELINE_STAGES]
    done = [line.split("\t")[0] for line in (out / "stages.tsv").read_text().splitlines()]
    assert done == names[:stage]  # the stopped stage is not recorded as done
    before = len(log.read_text().splitlines())
    assert before == stage + 1

    rerun = run_pipeline(checkout, bin_dir, **scale)
    assert rerun.returncode == 0, rerun.stderr
    for name in names[:stage]:
        assert f"== {name}: done already" in rerun.stdout
    calls = log.read_text().splitlines()[before:]
    assert [c.split()[0] for c in calls] == [command for _, command, _ in PIPELINE_STAGES[stage:]]
    _, command, directory = PIPELINE_STAGES[stage]
    if command == "vf-eval":  # the run vf-eval had begun, by the line it prints
        assert calls[0] == f"vf-eval uppercase --resume {out / directory / 'evals/m/run'}"
    elif command == "vf-data":
        assert "--resume" not in calls[0] and f"-o {out / directory}" in calls[0]
    else:
        assert calls[0].endswith(" --resume") and str(out / directory) in calls[0], calls[0]
    assert [c for c in calls[1:] if "--resume" in c] == []  # later stages start fresh
    done = [line.split("\t")[0] for line in (out / "stages.tsv").read_text().splitlines()]
    assert done == names
    assert (out / "sft" / "weights").is_dir() and (out / "rl" / "weights").is_dir()
    assert "SFT+RL" in rerun.stdout
