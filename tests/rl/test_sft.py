"""The post-training pipeline: rollouts → dataset (vf-data) → supervised fine-tuning (vf-sft).

Masks are checked token-exactly against the chat template's own rendering (character spans of
the assistant turns mapped through the tokenizer's offsets, independent of the prefix method the
code uses); the round trip runs the real CLIs on a real vf-eval run against a loopback server.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from support.trainer_runs import torchrun  # noqa: E402

from verifiers.data.rollouts import RolloutFilter, select  # noqa: E402
from verifiers.rl.algorithm.chat_tokens import TemplateError, assistant_masked  # noqa: E402
from verifiers.testing import cli  # noqa: E402

TOOL_TEMPLATE = (  # ChatML with tool calls and tool results, as tool-using models render them
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{% if m['content'] %}{{ m['content'] }}{% endif %}"
    "{% for c in m.get('tool_calls', []) %}<tool_call>{{ c['function']['name'] }} "
    "{{ c['function']['arguments'] | tojson }}</tool_call>{% endfor %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

CONVERSATION = [
    {"role": "system", "content": "You add numbers with the calculator."},
    {"role": "user", "content": "What is 2 + 3?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
            }
        ],
    },
    {"role": "tool", "content": "5", "tool_call_id": "c1"},
    {"role": "assistant", "content": "The answer is 5."},
    {"role": "user", "content": "And 5 + 5?"},
    {"role": "assistant", "content": "10"},
]


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from verifiers.local_model.models import resolve_model_dir

    model_dir, _ = resolve_model_dir("SmolLM2-135M-Instruct")
    tok = AutoTokenizer.from_pretrained(model_dir)
    tok.chat_template = TOOL_TEMPLATE
    return tok


def test_only_assistant_turns_are_trained_token_exactly(tokenizer):
    from verifiers.rl.algorithm.chat_tokens import template_messages

    ids, mask = assistant_masked(tokenizer, CONVERSATION)
    text = tokenizer.apply_chat_template(template_messages(CONVERSATION), tokenize=False)
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    assert ids == encoded["input_ids"]  # the template's own tokens, nothing added or lost
    # the assistant turns, found in the rendered text: after their header, through <|im_end|>\n
    spans, start = [], 0
    while (head := text.find("<|im_start|>assistant\n", start)) != -1:
        begin = head + len("<|im_start|>assistant\n")
        end = text.index("<|im_end|>\n", begin) + len("<|im_end|>\n")
        spans.append((begin, end))
        start = end
    assert len(spans) == 3  # the tool call, the answer after the tool result, the last reply
    expected = [
        int(any(b <= lo and hi <= e for b, e in spans)) for lo, hi in encoded["offset_mapping"]
    ]
    assert mask == expected
    trained = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m])
    assert (
        '<tool_call>add {"a": 2, "b": 3}</tool_call>' in trained and "The answer is 5." in trained
    )
    assert "What is 2 + 3?" not in trained and "calculator" not in trained
    assert "tool\n5" not in trained and "<|im_start|>" not in trained  # tool result: context


def test_a_template_that_re_renders_history_is_refused(tokenizer):
    import copy

    tok = copy.deepcopy(tokenizer)
    # drops the system message once the conversation has an assistant turn: prefixes differ
    tok.chat_template = (
        "{% for m in messages %}{% if not (m['role'] == 'system' and messages|length > 2) %}"
        "<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    with pytest.raises(TemplateError, match="cannot be located exactly"):
        assistant_masked(tok, [*CONVERSATION[:3], {"role": "assistant", "content": "x"}])


def rows(*groups):
    """Rows of (example_id, reward, completion text, error) tuples."""
    for example_id, reward, text, *error in groups:
        yield {
            "example_id": example_id,
            "reward": reward,
            "completion": [{"role": "assistant", "content": text}],
            "prompt": [{"role": "user", "content": f"q{example_id}"}],
            "error": error[0] if error else None,
            "usage": {"completion_tokens": len(text)},
        }


DATA = [
    (0, 0.2, "a"),
    (0, 0.9, "b"),
    (0, 0.9, "b"),
    (0, 0.5, "c"),
    (1, 1.0, "d", {"type": "X"}),
    (1, 0.1, "e"),
]


def test_the_filters_mean_what_they_say():
    texts = lambda spec: [r["completion"][0]["content"] for r in select(rows(*DATA), spec)]  # noqa: E731
    assert texts(RolloutFilter()) == ["b", "b", "c", "a", "e"]  # errors out, best first per example
    assert texts(RolloutFilter(keep_errors=True, best_of_n=True)) == ["b", "d"]
    assert texts(RolloutFilter(best_of_n=True)) == ["b", "e"]
    assert texts(RolloutFilter(top_k=2, dedup=True)) == ["b", "c", "e"]
    assert texts(RolloutFilter(min_reward=0.5)) == ["b", "b", "c"]
    assert texts(RolloutFilter(max_completion_tokens=1)) == ["b", "b", "c", "a", "e"]  # 1 char each
    long = [(0, 1.0, "a long reply"), (0, 0.5, "ok")]
    assert [
        r["completion"][0]["content"]
        for r in select(rows(*long), RolloutFilter(max_completion_tokens=5))
    ] == ["ok"]
    assert "best of n per example" in RolloutFilter(best_of_n=True).describe()


def uppercase_reply():
    asked: collections.Counter[str] = collections.Counter()

    def handler(request):
        # Counted per prompt, not globally: concurrent rollouts of different examples interleave,
        # and each example's three rollouts must still hold exactly one right answer.
        text = request["messages"][-1]["content"].split(": ", 1)[1]
        asked[text] += 1
        return [text.upper(), text, "no idea"][(asked[text] - 1) % 3]

    return handler


@pytest.mark.slow
def test_eval_run_to_dataset_to_load_dataset_to_an_sft_step(server, tmp_path):
    import datasets
    from support.toy import make_tiny_policy

    server.set_handler(uppercase_reply())
    evaluated = subprocess.run(
        [
            *(sys.executable, "-m", "verifiers.cli.eval", "uppercase", "-b", server.base_url),
            *("-m", "scripted", "-n", "4", "-r", "3", "--output-dir", str(tmp_path / "out")),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert evaluated.returncode == 0, evaluated.stdout + evaluated.stderr
    (run,) = (tmp_path / "out" / "evals").glob("uppercase--scripted/*")
    made = subprocess.run(
        [
            sys.executable,
            "-m",
            "verifiers.cli.data",
            str(run),
            "-o",
            str(tmp_path / "data"),
            "--best-of-n",
        ],
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0 and "wrote 4 rows (of 12 rollouts" in made.stdout, made.stderr
    data = datasets.load_dataset(str(tmp_path / "data"), split="train")
    assert len(data) == 4 and all(r == 1.0 for r in data["reward"])  # each example's best
    first = data[0]["messages"]
    assert [m["role"] for m in first] == ["system", "user", "assistant"]
    assert first[-1]["content"] == first[1]["content"].split(": ", 1)[1].upper()
    card = (tmp_path / "data" / "README.md").read_text()
    meta = json.loads((run / "metadata.json").read_text())
    assert "uppercase" in card and meta["run_id"] in card and "best of n per example" in card

    policy = make_tiny_policy(tmp_path / "policy")
    config = tmp_path / "sft.toml"
    config.write_text(
        f'model = "{policy}"\noutput_dir = "{tmp_path / "sft"}"\nbatch_size = 2\nsteps = 2\n'
        f'[data]\npath = "{tmp_path / "data"}"\n[trainer]\nlr = 1e-3\n'
        '[eval]\nenv_id = "uppercase"\nexamples = 3\nmax_tokens = 6\nevery = 1\n'
    )
    trained = subprocess.run(
        [sys.executable, "-m", "verifiers.cli.sft", "@", str(config)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert trained.returncode == 0, trained.stdout + trained.stderr
    records = [
        json.loads(line) for line in (tmp_path / "sft" / "metrics.jsonl").read_text().splitlines()
    ]
    assert [r["step"] for r in records] == [0, 1] and all(r["trained_tokens"] > 0 for r in records)
    assert (tmp_path / "sft" / "weights" / "model.safetensors").exists()
    assert (tmp_path / "sft" / "metrics.png").stat().st_size > 1000
    # held-out reward through vf-serve, before the first step and after each: the served
    # weights are the trained ones (a policy version per push)
    evals = [
        json.loads(line) for line in (tmp_path / "sft" / "eval.jsonl").read_text().splitlines()
    ]
    assert [e["step"] for e in evals] == [0, 1, 2]
    assert all(e["eval_rollouts"] == 3 and e["eval_errors"] == 0 for e in evals)
    assert "held-out reward after 2 steps" in trained.stdout
    # stdout is no terminal: rich's bar draws nothing there, so progress is a line
    assert "training step 0/2" in trained.stdout.splitlines(), trained.stdout


def conversations_file(path: Path, n: int = 12) -> Path:
    lines = [
        json.dumps(
            {
                "messages": [
                    {"role": "user", "content": f"say {w}"},
                    {"role": "assistant", "content": w.upper()},
                ]
            }
        )
        for w in (f"word{i}" for i in range(n))
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.slow
def test_sft_resume_is_bit_exact(tmp_path):
    from safetensors.torch import load_file
    from support.toy import make_tiny_policy

    policy = make_tiny_policy(tmp_path / "policy")
    data = conversations_file(tmp_path / "chats.jsonl")

    def sft(out, *extra):
        config = tmp_path / f"{out}.toml"
        config.write_text(
            f'model = "{policy}"\noutput_dir = "{tmp_path / out}"\nbatch_size = 4\n'
            f'checkpoint_every = 2\n[data]\npath = "{data}"\n[trainer]\nlr = 1e-3\nschedule = "cosine"\n'
        )
        result = subprocess.run(
            [sys.executable, "-m", "verifiers.cli.sft", "@", str(config), *extra],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        return result

    sft("full", "--steps", "6")
    import shutil

    # the same run cut short after step 4: its later checkpoint and its final weights removed
    split = tmp_path / "split"
    shutil.copytree(tmp_path / "full", split)
    shutil.rmtree(split / "checkpoints" / "step_000006")
    (split / "weights" / "model.safetensors").unlink()
    resumed = sft("split", "--steps", "6", "--resume")
    assert "resuming from" in resumed.stdout and "(step 4)" in resumed.stdout
    full = load_file(str(tmp_path / "full" / "weights" / "model.safetensors"))
    again = load_file(str(split / "weights" / "model.safetensors"))
    assert full.keys() == again.keys()
    assert all(torch.equal(full[k], again[k]) for k in full)
    steps = [
        json.loads(line)["step"] for line in (split / "metrics.jsonl").read_text().splitlines()
    ]
    assert steps == list(range(6))  # the redone steps replaced their records


SFT_STOPPED = "batch_size = 4\nsteps = 240\ncheckpoint_every = 40\n[trainer]\nlr = 1e-3\n"


def sft_config(path: Path, policy: Path, data: Path, out: Path) -> Path:
    """A vf-sft config of SFT_STOPPED's run: long enough to be stopped partway."""
    path.write_text(
        f'model = "{policy}"\noutput_dir = "{out}"\n{SFT_STOPPED}[data]\npath = "{data}"\n'
    )
    return path


@pytest.fixture(scope="module")
def uninterrupted_sft(tmp_path_factory):
    """SFT_STOPPED's run, never stopped: its policy, data and final weights."""
    from safetensors.torch import load_file
    from support.toy import make_tiny_policy

    root = tmp_path_factory.mktemp("sft-whole")
    policy = make_tiny_policy(root / "policy")
    data = conversations_file(root / "chats.jsonl")
    config = sft_config(root / "sft.toml", policy, data, root / "out")
    done = subprocess.run(
        [sys.executable, "-m", "verifiers.cli.sft", "@", str(config)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return policy, data, load_file(str(root / "out" / "weights" / "model.safetensors"))


@pytest.mark.slow
@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stopped_sft_run_resumes_with_the_line_it_printed_to_the_same_weights(
    uninterrupted_sft, tmp_path, sig, when
):
    """vf-sft stopped by Ctrl-C or SIGTERM before or after its first checkpoint prints its
    command line with --resume; that line alone finishes the run, bit-exact with a run never
    stopped, one record per step."""
    from safetensors.torch import load_file
    from support.trainer_runs import stop_and_resume_line

    policy, data, whole = uninterrupted_sft
    out = tmp_path / "out"
    config = sft_config(tmp_path / "sft.toml", policy, data, out)
    process = subprocess.Popen(
        [sys.executable, "-m", "verifiers.cli.sft", "@", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "COLUMNS": "400"},
    )
    mark = out / ("metrics.jsonl" if when == "before" else "checkpoints/step_000040")
    deadline = time.monotonic() + 240
    while not mark.exists() and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.02)
    printed, output = stop_and_resume_line(process, sig)
    assert printed == f"vf-sft @ {config} --resume", output
    checkpoints = sorted((out / "checkpoints").glob("step_*"))
    assert (checkpoints == []) is (when == "before"), output
    resumed = subprocess.run(
        [sys.executable, "-m", "verifiers.cli.sft", *printed.split()[1:]],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    again = load_file(str(out / "weights" / "model.safetensors"))
    assert whole.keys() == again.keys()
    assert all(torch.equal(whole[k], again[k]) for k in whole)
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(240))


@pytest.mark.slow
def test_vf_sft_under_torchrun_equals_one_process(tmp_path):
    """FSDP2 over two ranks (gloo on CPU): sharded checkpoints, and the same weights as one
    process trained on the same batches."""
    import os

    from safetensors.torch import load_file
    from support.toy import make_tiny_policy

    policy = make_tiny_policy(tmp_path / "policy")
    data = conversations_file(tmp_path / "chats.jsonl")
    outputs = {}
    for ranks in (2, 1):
        out = tmp_path / f"ranks-{ranks}"
        config = tmp_path / f"sft-{ranks}.toml"
        config.write_text(
            f'model = "{policy}"\noutput_dir = "{out}"\nbatch_size = 4\nsteps = 3\n'
            f'checkpoint_every = 3\n[data]\npath = "{data}"\n[trainer]\nlr = 1e-3\n'
        )
        launcher = torchrun(2, tmp_path / "logs") if ranks == 2 else [sys.executable]
        result = subprocess.run(
            [*launcher, "-m", "verifiers.cli.sft", "@", str(config)],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
        outputs[ranks] = load_file(str(out / "weights" / "model.safetensors"))
    shards = sorted(
        p.name
        for p in (tmp_path / "ranks-2" / "checkpoints" / "step_000003" / "dcp").glob("*.distcp")
    )
    assert shards == ["__0_0.distcp", "__1_0.distcp"]
    assert outputs[1].keys() == outputs[2].keys()
    for name in outputs[1]:  # bf16 exports: the fp32 sums of two ranks may round one ulp apart
        one, two = outputs[1][name].float(), outputs[2][name].float()
        ulp = torch.maximum(one.abs(), two.abs()) * 2**-7 + 1e-6
        apart = (one - two).abs()
        assert (apart <= ulp).all(), (name, apart.max())
        assert (apart > 0).float().mean() < 0.01, name  # a rounding here and there, no drift


@pytest.mark.parametrize(
    ("command", "argv", "message"),
    [
        ("verifiers.cli.sft", ["@", "nowhere.toml"], "no config file nowhere.toml"),
        ("verifiers.cli.sft", ["--trainer.loss", "grpo"], "vf-sft trains with trainer.loss = 'sft'"),
        ("verifiers.cli.sft", ["--data.path", "no/such/data"], "no dataset at no/such/data"),
        ("verifiers.cli.sft", ["--data.path", "rows.csv"], "rows.csv: a .parquet, .jsonl or .json"),
        ("verifiers.cli.rl", ["--trainer.loss", "sft"], "trainer.loss = 'sft' is vf-sft's"),
    ],
)
def test_sft_and_rl_mistakes_are_one_line_and_exit_2(command, argv, message, tmp_path):
    """Said before torch loads (a fraction of a second), and no run directory is made."""
    (tmp_path / "rows.csv").write_text("prompt,completion\nhi,hello\n")
    result = subprocess.run(
        [sys.executable, "-m", command, *argv, "--output_dir", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in result.stdout + result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_vf_data_keeps_a_tool_messages_name(tmp_path):
    """Chat templates render a tool result with the tool's ``name``; vf-data dropped it."""
    import datasets

    from verifiers.data.rollouts import rollouts_to_dataset

    run = tmp_path / "run"
    run.mkdir()
    call = {"id": "c1", "type": "function", "function": {"name": "calculate", "arguments": "{}"}}
    row = {
        "example_id": 0,
        "rollout_index": 0,
        "prompt": [{"role": "user", "content": "What is 2 * 3?"}],
        "completion": [
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "content": "6", "tool_call_id": "c1", "name": "calculate"},
            {"role": "assistant", "content": "6"},
        ],
        "reward": 1.0,
    }
    (run / "results.jsonl").write_text(json.dumps(row) + "\n")
    rollouts_to_dataset([run], tmp_path / "data")
    (kept,) = datasets.load_dataset(str(tmp_path / "data"), split="train")["messages"]
    tool = kept[2]
    assert tool["role"] == "tool" and tool["name"] == "calculate" and tool["tool_call_id"] == "c1"


def test_vf_sft_shares_the_command_base_not_vf_rls_command():
    """vf-sft took its helpers from the vf-rl command module; both now use the shared bases:
    ``verifiers.cli.training`` for the command line, ``verifiers.rl.run.command`` for the run."""
    import ast

    root = Path(__file__).resolve().parents[2] / "verifiers"

    def imported(path):
        tree = ast.parse(path.read_text())
        return {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}

    command = imported(root / "cli" / "sft.py")
    assert "verifiers.cli.rl" not in command and "verifiers.cli.training" in command
    run = imported(root / "rl" / "training" / "sft.py")
    assert "verifiers.rl.training.rl" not in run and "verifiers.rl.run.command" in run


def test_vf_data_with_a_filter_that_keeps_nothing_says_so_and_writes_nothing(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    rows = [
        {
            "example_id": i,
            "rollout_index": 0,
            "prompt": [{"role": "user", "content": "q"}],
            "completion": [{"role": "assistant", "content": "a"}],
            "reward": 0.25 * i,
        }
        for i in range(3)
    ]
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = subprocess.run(
        [cli("vf-data"), str(run), "-o", str(tmp_path / "data"), "--min-reward", "0.9"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "kept none of the 3 rollouts read (0 errored; the best reward is 0.500)" in result.stderr
    assert not (tmp_path / "data").exists()


def one_step_run(tmp_path: Path) -> tuple[Path, Callable[..., subprocess.CompletedProcess]]:
    """A ``vf-sft`` run of the tiny policy checkpointed after one step (its run dir), and the
    command that continues it with more flags."""
    from support.toy import make_tiny_policy

    policy = make_tiny_policy(tmp_path / "policy")
    data = conversations_file(tmp_path / "chats.jsonl")
    out = tmp_path / "run"
    config = tmp_path / "sft.toml"
    config.write_text(
        f'model = "{policy}"\noutput_dir = "{out}"\nbatch_size = 4\ncheckpoint_every = 1\n'
        f'[data]\npath = "{data}"\n'
    )

    def sft(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "verifiers.cli.sft", "@", str(config), *extra],
            capture_output=True,
            text=True,
            timeout=300,
        )

    first = sft("--steps", "1")
    assert first.returncode == 0, first.stdout + first.stderr
    return out, sft


@pytest.mark.slow
def test_a_run_dir_copied_from_elsewhere_is_never_written_through_or_waited_on(tmp_path):
    """A run dir from elsewhere (a colleague's tarball keeps links and FIFOs): an outside attack
    had ``config.json`` link to a file of the user's, and ``vf-sft --resume`` wrote the run's
    config into it; a FIFO for ``metrics.jsonl`` held the resume forever; a hard link, and a
    ``checkpoints/`` that is a link to another directory, were written through. Each is now
    refused (exit 2, naming the entry) before anything is written, and the run, once they are
    gone, resumes; a record line no run writes (a 5,000-digit number) is dropped with the
    steps it redoes, where it ended the resume with a traceback."""
    import shutil

    out, sft = one_step_run(tmp_path)
    victim = tmp_path / "bashrc"
    victim.write_text("precious\n")
    elsewhere = tmp_path / "elsewhere"
    plants = {
        "config.json": lambda path: path.symlink_to(victim),
        "metrics.jsonl": lambda path: os.mkfifo(path),
        "eval.jsonl": lambda path: os.link(victim, path),
        "checkpoints": lambda path: (
            shutil.copytree(tmp_path / "kept-checkpoints", elsewhere),
            path.symlink_to(elsewhere),
        ),
    }
    for name, plant in plants.items():
        entry = out / name
        kept = tmp_path / f"kept-{name}"
        if entry.exists():
            entry.rename(kept)
        plant(entry)
        refused = sft("--steps", "2", "--resume")
        assert refused.returncode == 2, (name, refused.stdout + refused.stderr)
        assert str(entry) in refused.stdout.replace("\n", ""), (name, refused.stdout)
        assert victim.read_text() == "precious\n", name
        entry.unlink()
        if kept.exists():
            kept.rename(entry)
    shutil.rmtree(elsewhere, ignore_errors=True)
    with (out / "metrics.jsonl").open("a") as records:  # junk a record never is: dropped
        records.write("9" * 5000 + "\n")  # (past int()'s 4,300 digits: a ValueError, exit 1)
    resumed = sft("--steps", "2", "--resume")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert [
        json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()
    ] == [0, 1]


@pytest.mark.slow
def test_a_checkpoint_that_is_data_but_not_a_runs_is_refused_with_its_reason(tmp_path):
    """A checkpoint whose files are data but not what a run saves (a ``state.json`` step that is
    not a number, RNG state of other types, a shard cut short) ended ``vf-sft --resume`` with
    torch's traceback (exit 1). Each is now refused in one line naming the checkpoint and the
    reason (exit 2), and the genuine one then resumes."""
    out, sft = one_step_run(tmp_path)
    checkpoint = out / "checkpoints" / "step_000001"
    breakages = {
        "state.json": lambda path: path.write_text('{"step": "two", "version": 1}'),
        "rng_rank0.pt": lambda path: torch.save({"torch": torch.zeros(3), "python": 5}, path),
        "dcp/__0_0.distcp": lambda path: path.write_bytes(path.read_bytes()[:100]),
    }
    for name, breakage in breakages.items():
        path = checkpoint / name
        genuine = path.read_bytes()
        breakage(path)
        refused = sft("--steps", "2", "--resume")
        told = refused.stdout.replace("\n", "")
        assert refused.returncode == 2, (name, refused.stdout + refused.stderr)
        assert "Traceback" not in refused.stderr and str(checkpoint) in told, (name, told)
        path.write_bytes(genuine)
    resumed = sft("--steps", "2", "--resume")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "resuming from" in resumed.stdout
