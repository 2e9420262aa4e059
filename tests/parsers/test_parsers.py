import pytest

import verifiers as vf
from verifiers.utils.data_utils import extract_boxed_answer, extract_hash_answer


def test_xml_parser_parses_fields_and_alternatives():
    parser = vf.XMLParser(["think", ("answer", "final")])
    parsed = parser.parse("<think>\nsteps\n</think>\n<final> 7 </final>")
    assert parsed.think == "steps" and parsed.final == "7" and parsed.answer is None


def test_xml_parser_parse_answer_uses_last_assistant_message_with_the_field():
    parser = vf.XMLParser(["think", "answer"])
    completion = [
        {"role": "assistant", "content": "<answer>first</answer>"},
        {"role": "user", "content": "again"},
        {"role": "assistant", "content": "<think>no answer here</think>"},
    ]
    assert parser.parse_answer(completion) == "first"
    assert parser.parse_answer("<answer>text mode</answer>") == "text mode"
    assert parser.parse_answer([{"role": "assistant", "content": "nothing"}]) is None


def test_xml_parser_format_round_trips_and_rejects_unknown_fields():
    parser = vf.XMLParser(["think", ("answer", "final")])
    text = parser.format(think="a", final="b")
    assert parser.parse(text).think == "a" and parser.parse(text).answer == "b"
    with pytest.raises(ValueError, match="Missing value for field 'think'"):
        parser.format(final="x")
    assert "<think>" in parser.get_format_str()


def test_xml_parser_rejects_bad_field_specs():
    with pytest.raises(TypeError):
        vf.XMLParser([1])
    with pytest.raises(ValueError, match="Duplicate field name"):
        vf.XMLParser(["a", ("a", "b")])


def test_xml_format_reward_scores_structure():
    reward = vf.XMLParser(["think", "answer"]).get_format_reward_func()
    full = [{"role": "assistant", "content": "<think>x</think>\n<answer>y</answer>"}]
    half = [{"role": "assistant", "content": "<answer>y</answer>"}]
    disordered = [{"role": "assistant", "content": "<answer>y</answer><think>x</think>"}]
    chatter = [{"role": "assistant", "content": "sure! <think>x</think><answer>y</answer>"}]
    # classic score: 0.4 x field share + 0.2 spacing + 0.2 starts with the first field's tag
    # + 0.2 ends with the last field's closing tag
    assert reward(completion=full) == pytest.approx(1.0)
    assert reward(completion=half) == pytest.approx(0.2 + 0.2 + 0.2)
    assert reward(completion=disordered) == pytest.approx(0.4 + 0.2)
    assert reward(completion=chatter) == pytest.approx(0.4 + 0.2 + 0.2)
    assert reward(completion=[]) == 0.0


def test_think_parser_requires_think_block():
    parser = vf.ThinkParser(extract_fn=str.upper)
    assert parser.parse("<think>hmm</think> answer") == "ANSWER"
    assert parser.parse("no thinking") == ""  # classic: nothing is parsed without </think>
    fmt = parser.get_format_reward_func()
    assert fmt(completion=[{"role": "assistant", "content": "<think>a</think>b"}]) == 1.0
    assert fmt(completion=[{"role": "assistant", "content": "b"}]) == 0.0


def test_maybe_think_parser_accepts_both():
    parser = vf.MaybeThinkParser()
    assert parser.parse("<think>x</think> 5") == "5"
    assert parser.parse(" 5 ") == "5"


def test_extract_boxed_answer_matches_the_classic_function():
    assert extract_boxed_answer(r"so \boxed{\frac{1}{2}} done") == r"\frac{1}{2}"
    assert extract_boxed_answer(r"\boxed{1} then \boxed{2}") == "2"
    assert extract_boxed_answer(r"\boxed{ 7 }") == " 7 "  # not stripped
    assert extract_boxed_answer(r"\boxed{unclosed") == r"\boxed{unclosed"
    assert extract_boxed_answer("plain") == "plain"


def test_extract_hash_answer_matches_the_classic_function():
    assert extract_hash_answer("work\n#### 1,234") == "1,234"
    assert extract_hash_answer("a #### 1 #### 2") == "1"
    assert extract_hash_answer("no marker") == "no marker"


def test_load_example_dataset_offline_names_the_dataset_and_how_to_supply_it():
    import os
    import subprocess
    import sys

    code = "import verifiers as vf; vf.load_example_dataset('gsm8k', split='train')"
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    env.pop("VF_EXAMPLE_DATA", None)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode != 0
    assert "openai/gsm8k" in result.stderr and "path=" in result.stderr
    assert "VF_EXAMPLE_DATA" in result.stderr


def test_load_example_dataset_with_the_hub_unreachable_says_so_at_once():
    """No offline switch set and no hub to reach: the cache alone is asked, so the message
    comes at once instead of after ~25 s of retry warnings."""
    import os
    import socket
    import subprocess
    import sys
    import time

    with socket.socket() as s:  # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = "import verifiers as vf; vf.load_example_dataset('gsm8k', split='train')"
    env = {k: v for k, v in os.environ.items() if not k.endswith("_OFFLINE")}
    env.pop("VF_EXAMPLE_DATA", None)
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**env, "HF_ENDPOINT": f"http://127.0.0.1:{port}"},
        timeout=120,
    )
    assert result.returncode != 0 and "openai/gsm8k" in result.stderr
    assert "Retrying" not in result.stderr and time.monotonic() - started < 15


def test_load_example_dataset_from_local_files_shuffles_with_seed_then_maps(tmp_path, monkeypatch):
    import json

    source = tmp_path / "gsm8k"
    source.mkdir()
    rows = [{"question": f"q{i}", "answer": f"steps\n#### {i}"} for i in range(20)]
    (source / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.setenv("VF_EXAMPLE_DATA", str(tmp_path))
    full = vf.load_example_dataset("gsm8k")  # classic default split for gsm8k: test
    assert full.column_names == ["question", "answer"] and full[3] == {
        "question": "q3",
        "answer": "3",
    }
    from datasets import Dataset

    expected = Dataset.from_list(rows).shuffle(seed=0).select(range(5))
    sub = vf.load_example_dataset("gsm8k", n=5)
    assert sub["question"] == expected["question"]
    assert (
        vf.load_example_dataset("gsm8k", path=source / "test.jsonl", n=5)["question"]
        == expected["question"]
    )
    with pytest.raises(ValueError, match="not a known example dataset"):
        vf.load_example_dataset("nope")
