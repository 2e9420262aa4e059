"""Which environments compare.py runs for each classic release, with their arguments and the
known, explained differences (a difference without an explanation fails the comparison)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MCP_SERVERS = {
    "mcp_servers": [
        {"name": "calc", "command": sys.executable, "args": [str(HERE / "mcp_calc_server.py")]}
    ]
}
JUDGE_QUESTION = (
    "verifiers 0.1.11+'s JudgeRubric takes the question only from a dict message, so with typed "
    "messages its judges are always shown an empty question (and score differently); this SDK "
    "shows them the question"
)
MATH_METRIC = (
    "v0.1.9 renamed MathRubric's metric correct_answer_reward_func -> correct_answer; "
    "this SDK keeps v0.1.8's name for a 0.1.8 environment (rewards equal)"
)

# upstream's examples at tag v0.1.8.post2, against verifiers==0.1.8.post2
RELEASE_0_1_8: dict[str, dict] = {
    "reverse_text": {},
    "sentence_repeater": {},
    "tool_test": {"args": {"num_train_examples": 4, "num_eval_examples": 4}},
    "gsm8k": {},
    "math_group": {},
    "gpqa": {
        "known": "the classic SDK shuffles gpqa's answer letters in worker processes: its own "
        "requests differ from run to run (ours are reproducible with a seed)"
    },
    "doublecheck": {"args": {"num_train_examples": 4}},
    "reasoning_gym_env": {"args": {"num_train_examples": 4, "num_eval_examples": 4}},
    "mcp_env": {"args": MCP_SERVERS},
    "continuation_quality": {
        "judge": True,
        "known": "v0.1.8 fails on it (KeyError 'example_id': completion-mode datasets are never "
        "formatted); v0.1.9 runs it but, as simpleqa, never reaches its judge",
    },
    "simpleqa": {
        "judge": True,
        "known": "the classic judge() rejects the keyword arguments its reward functions pass, "
        "so the classic never calls the judge and scores 0",
    },
    "toxicity_explanation": {
        "judge": True,
        "known": "as simpleqa: the classic never reaches its judge",
    },
}

# upstream's classic examples at tag v0.2.0 (the last tag whose environments/ holds them),
# against verifiers==0.3.1
RELEASE_0_3_1: dict[str, dict] = {
    "reverse_text": {},
    "sentence_repeater": {},
    "tool_test": {"args": {"num_train_examples": 4, "num_eval_examples": 4}},
    "gsm8k": {},
    "math_group": {},
    "doublecheck": {"args": {"num_train_examples": 4}},
    "alphabet_sort": {},
    "reasoning_gym_env": {"args": {"num_train_examples": 4, "num_eval_examples": 4}},
    "wordle": {"skip": "TextArena's Wordle needs NLTK's word lists (a network download) under both SDKs"},
    "continuation_quality": {"judge": True, "known": JUDGE_QUESTION},
    "toxicity_explanation": {"judge": True, "known": JUDGE_QUESTION},
    "self_reward": {
        "args": {"base_url": "{url}", "judge_model": "compare-judge"},
        "known": JUDGE_QUESTION,
    },
    "math_python": {
        "skip": "needs Prime Intellect's hosted sandboxes (network) under verifiers 0.3.1",
    },
    "wiki_search": {"skip": "needs a hosted embedding model and a downloaded corpus (network)"},
    "mmmu": {"skip": "needs the MMMU images (a network download)"},
    "browser_cua_example": {"skip": "a browser harness (out of scope: not the classic API)"},
    "browser_dom_example": {"skip": "a browser harness (out of scope: not the classic API)"},
}
