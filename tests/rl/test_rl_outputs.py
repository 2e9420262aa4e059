"""What a vf-rl run leaves for people and tools: bf16 weights in save_pretrained's layout with a
model card, TensorBoard and offline W&B logs, and training_report.html, read in headless Chromium.

One real run of ``vf-rl`` (the CLI, as a user types it) on a tiny random policy and the shipped
uppercase environment feeds every check. Screenshots go to ``$VF_TEST_ARTIFACTS`` (default
``outputs/test-artifacts``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = Path(
    os.environ.get("VF_TEST_ARTIFACTS", Path(__file__).parents[2] / "outputs" / "test-artifacts")
)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    from support.toy import make_tiny_policy

    work = tmp_path_factory.mktemp("vf-rl-run")
    policy = make_tiny_policy(work / "policy")
    out = work / "run"
    config = work / "run.toml"
    config.write_text(
        f'model = "{policy}"\nenv_id = "uppercase"\noutput_dir = "{out}"\nsteps = 3\n'
        'max_off_policy_steps = 0\nreport_to = ["tensorboard", "wandb"]\n'
        "[orchestrator]\nexamples_per_step = 2\nrollouts_per_example = 4\nmax_tokens = 8\n"
        "filter_zero_advantage = false\nreport_groups = 2\n"
        "[trainer]\nlr = 5e-3\n[eval]\nevery = 1\nexamples = 4\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    result = subprocess.run(
        [sys.executable, "-m", "verifiers.cli.rl", "@", str(config)],
        capture_output=True,
        text=True,
        env={**env, "OMP_NUM_THREADS": "1"},
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "report: vf-report" in result.stdout
    return out


@pytest.mark.slow
def test_weights_are_bf16_in_save_pretrained_layout_with_a_model_card(run_dir):
    from transformers import AutoModelForCausalLM

    weights = run_dir / "weights"
    config = json.loads((weights / "config.json").read_text())
    assert config["dtype"] == "bfloat16"
    model = AutoModelForCausalLM.from_pretrained(weights)
    assert next(model.parameters()).dtype == torch.bfloat16
    card = (weights / "README.md").read_text()
    assert "`uppercase`" in card and "Held-out reward" in card and "vf-rl" in card
    import importlib.metadata

    assert importlib.metadata.version("uppercase") in card  # the environment's version


def test_export_shards_with_an_index_as_transformers_writes_them(tmp_path):
    from support.toy import make_tiny_policy
    from transformers import AutoModelForCausalLM

    from verifiers.rl.run.command import prepare_weights_dir
    from verifiers.rl.run.export import INDEX, export_model

    policy = make_tiny_policy(tmp_path / "policy")
    model = AutoModelForCausalLM.from_pretrained(policy)
    prepare_weights_dir(policy, tmp_path / "out")
    files = export_model(model.state_dict(), tmp_path / "out", max_shard_size="60KB")
    shards = [f for f in files if f.startswith("model-")]
    assert len(shards) > 1 and INDEX in files
    index = json.loads((tmp_path / "out" / INDEX).read_text())
    assert set(index["weight_map"].values()) == set(shards)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "out")
    for (name, a), b in zip(model.state_dict().items(), loaded.state_dict().values(), strict=True):
        assert torch.equal(a.to(torch.bfloat16), b), name


def test_report_to_writes_tensorboard_events_and_an_offline_wandb_run(run_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    assert len(events.Scalars("train/reward")) == 3
    assert [e.step for e in events.Scalars("eval/eval_reward")] == [0, 1, 2, 3]
    offline = list((run_dir / "wandb").glob("offline-run-*"))
    assert len(offline) == 1 and list(offline[0].glob("run-*.wandb"))


@pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (apt-get install chromium)")
def test_the_training_report_shows_curves_steps_and_the_tokens_trained_on(run_dir):
    playwright = pytest.importorskip("playwright.sync_api")
    result = subprocess.run(
        [sys.executable, "-m", "verifiers.cli.report", str(run_dir)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    page_path = Path(result.stdout.strip())
    assert page_path == run_dir / "training_report.html"
    recorded = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert len(recorded) == 3 * 2  # two groups a step
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        requests = []
        page.on("request", lambda r: requests.append(r.url))
        page.goto(page_path.as_uri())
        assert [u for u in requests if not u.startswith("file:")] == []  # self-contained
        assert page.locator("#steps tr").count() == 1 + 3
        assert page.locator("#evals tr").count() == 1 + 4
        assert page.locator(".chart polyline").count() >= 6
        first = recorded[0]["samples"][0]
        group = page.locator(".group").first
        tokens = group.locator(".sample").first.locator(".tok")
        assert tokens.count() == len(first["token_ids"])
        trained = group.locator(".sample").first.locator(".tok:not(.ctx)")
        assert trained.count() == sum(first["loss_mask"])
        assert "trainer" in trained.first.get_attribute("title")
        assert "".join(tokens.all_inner_texts()) == "".join(first["tokens"])
        page.select_option("#step-filter", "1")
        assert page.locator(".group:visible").count() == 2
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.select_option("#step-filter", "all")
        page.screenshot(path=str(ARTIFACTS / "training_report.png"), full_page=True)
        browser.close()
