"""Which environments compare.py runs for each set, with their arguments and the known,
explained differences (a difference without an explanation fails the comparison).

Options: ``args`` (its load_environment's arguments), ``judge`` (point its judge at the scripted
server), ``skip`` (why it is not run), ``classic`` (run it under this real release instead of
the first ``--classic-python``) and ``known``: the explanation of its differences, a string or a
dict from the real release (``"0.1.9.post3"``) to the explanation against that release.

This SDK's side loads each environment by id from its installed package, so it runs as the
release the package's ``verifiers`` requirement names (the ``here as`` column). Where that is
older than the real SDK running it, the older release's behaviour is the point, and what differs
for that reason alone is recorded below (``OLDER``): run from their files with this SDK forced
to the real release's behaviour (``VF_API_VERSION``, this script's earlier form), the same
environments showed none of those differences."""

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

OLDER = (
    "declares an older release (its pyproject's verifiers>=, the 'here as' column) than the real "
    "SDK running it, so here it behaves as that release: "
)
NO_MONITOR = (
    "no monitor metric num_turns (0.1.9 added it; real 0.1.9+ records it on every multi-turn "
    "environment)"
)
STATE_BEFORE = (
    "the scored state of a pre-0.1.11 release (oai_tools, responses, turn, prompt_too_long; no "
    "tool_defs, usage_tracker or task; no final_env_response before 0.1.9)"
)
MONITOR_0_1_9 = OLDER + NO_MONITOR
MATH_0_1_9 = OLDER + NO_MONITOR + " and MathRubric's metric under its pre-0.1.9 name "
MATH_0_1_9 += "correct_answer_reward_func (real 0.1.9+: correct_answer); rewards equal"

# upstream's examples at tag v0.1.8.post2, against verifiers==0.1.8.post2 (and 0.1.9.post3)
RELEASE_0_1_8: dict[str, dict] = {
    "reverse_text": {"known": {"0.1.9.post3": MONITOR_0_1_9}},
    "sentence_repeater": {"known": {"0.1.9.post3": MONITOR_0_1_9}},
    "tool_test": {
        "args": {"num_train_examples": 4, "num_eval_examples": 4},
        "known": {
            "0.1.9.post3": "0.1.9 removed vf.ToolRubric, which this environment uses; it "
            "declares verifiers>=0.1.4, so here it runs as 0.1.4, which has it"
        },
    },
    "gsm8k": {"known": {"0.1.9.post3": MONITOR_0_1_9}},
    "math_group": {"known": {"0.1.9.post3": MONITOR_0_1_9}},
    "gpqa": {
        "known": "the classic SDK shuffles gpqa's answer letters in worker processes: its own "
        "requests differ from run to run (ours are reproducible with a seed)"
        + "; against 0.1.9.post3 also: "
        + MONITOR_0_1_9
    },
    "doublecheck": {"args": {"num_train_examples": 4}, "known": {"0.1.9.post3": MATH_0_1_9}},
    "reasoning_gym_env": {"args": {"num_train_examples": 4, "num_eval_examples": 4}},
    "mcp_env": {
        "args": MCP_SERVERS,
        "known": {
            "0.1.9.post3": OLDER + "no monitor metrics num_turns and total_tool_calls (0.1.9 "
            "added them)"
        },
    },
    "continuation_quality": {
        "judge": True,
        "known": "v0.1.8 fails on it (KeyError 'example_id': completion-mode datasets are never "
        "formatted); v0.1.9 runs it but, as simpleqa, never reaches its judge"
        + "; against 0.1.9.post3 also: "
        + MONITOR_0_1_9,
    },
    "simpleqa": {
        "judge": True,
        "known": "the classic judge() rejects the keyword arguments its reward functions pass, "
        "so the classic never calls the judge and scores 0"
        + "; against 0.1.9.post3 also: "
        + MONITOR_0_1_9,
    },
    "toxicity_explanation": {
        "judge": True,
        "known": "as simpleqa: the classic never reaches its judge"
        + "; against 0.1.9.post3 also: "
        + MONITOR_0_1_9,
    },
}

# upstream's classic examples at tag v0.2.0 (the last tag whose environments/ holds them),
# against verifiers==0.3.1
RELEASE_0_3_1: dict[str, dict] = {
    "reverse_text": {"known": OLDER + NO_MONITOR + "; " + STATE_BEFORE},
    "sentence_repeater": {"known": OLDER + NO_MONITOR + "; " + STATE_BEFORE},
    "tool_test": {
        "args": {"num_train_examples": 4, "num_eval_examples": 4},
        "known": OLDER + STATE_BEFORE + "; its tools are offered without \"strict\": true "
        "(0.2.0 made tool definitions built from functions strict), the only difference in "
        "its requests",
    },
    "gsm8k": {"known": MATH_0_1_9 + "; " + STATE_BEFORE},
    "math_group": {
        "known": OLDER + NO_MONITOR + "; " + STATE_BEFORE + "; an EnvGroup before 0.1.14 routes "
        "rows by task and scores every row with every member's metric names "
        "(math_answer_reward_func is 0 on gsm8k rows), so its state has no info["
        "'env_id'] (verifiers/envs/env_group.py, env_for_group)"
    },
    "doublecheck": {"args": {"num_train_examples": 4}, "known": MATH_0_1_9 + "; " + STATE_BEFORE},
    "alphabet_sort": {"known": OLDER + STATE_BEFORE},
    "reasoning_gym_env": {
        "args": {"num_train_examples": 4, "num_eval_examples": 4},
        "known": OLDER + STATE_BEFORE,
    },
    "wordle": {"skip": "TextArena's Wordle needs NLTK's word lists (a network download) under both SDKs"},
    "continuation_quality": {
        "judge": True,
        "known": JUDGE_QUESTION + "; also " + OLDER + NO_MONITOR + "; " + STATE_BEFORE,
    },
    "toxicity_explanation": {
        "judge": True,
        "known": JUDGE_QUESTION + "; also " + OLDER + NO_MONITOR + "; " + STATE_BEFORE,
    },
    "self_reward": {
        "args": {"base_url": "{url}", "judge_model": "compare-judge"},
        "known": OLDER + NO_MONITOR + "; " + STATE_BEFORE + " (as 0.3.1 its judge requests are "
        "identical too)",
    },
    "math_python": {
        "skip": "needs Prime Intellect's hosted sandboxes (network) under verifiers 0.3.1",
    },
    "wiki_search": {"skip": "needs a hosted embedding model and a downloaded corpus (network)"},
    "mmmu": {"skip": "needs the MMMU images (a network download)"},
    "browser_cua_example": {"skip": "a browser harness (out of scope: not the classic API)"},
    "browser_dom_example": {"skip": "a browser harness (out of scope: not the classic API)"},
}
