"""Community environments (a checkout of a prime-environments collection) written for verifiers
0.1.10+ that run offline, compared against verifiers 0.3.1. Each line says why it qualifies: the
``verifiers>=`` floor of its pyproject and what it exercises. Their data comes from
``community_data.py``; judges and simulated users point at the scripted server.

Options as in catalog.py (``args``, ``judge``, ``known``, ``skip``), plus ``module`` (the
environment an entry runs, so one environment can have several entries) and ``prepare`` (a
function of community_data.py that builds files the environment reads, given its directory).
Placeholders in ``args``: ``{url}`` (the scripted server), ``{env_dir}``, ``{fhir}`` (a FHIR
stand-in), ``{skyrl_db}`` (a directory with a small SQLite database)."""

from __future__ import annotations

STRING_TASK = (
    "written for 0.1.11: its rows carry a plain-string task, which 0.1.14+ (so 0.3.1) refuses; "
    "this SDK run as 0.3.1 refuses it the same way (as written for its floor, 0.1.11, it runs)"
)
ART_E = (
    "one difference: its tool_count_reward calls vf.ToolRubric().total_tool_calls, which 0.3.1 "
    "no longer has (vf.ToolRubric went after 0.1.8), so there it raises and scores 0; this SDK "
    "keeps 0.1.8's ToolRubric, so it scores the call count (0.33 where a tool was called). "
    "Requests, tools and the other metrics are identical"
)
JUDGE = {
    "judge_base_url": "{url}",
    "judge_model": "compare-judge",
    "judge_api_key_var": "JUDGE_API_KEY",
}

COMMUNITY: dict[str, dict] = {
    # >=0.1.10; single-turn: a Parser subclass overriding parse/parse_answer, Dataset.from_generator
    "mmlu": {},
    # >=0.1.11.dev0; multi-turn game: XMLParser(think, guess) format reward, @vf.stop that writes
    # the next vf.UserMessage into state, setup_state, five weighted rewards over state
    "mastermind": {"args": {"num_train_examples": 2, "num_eval_examples": 4}},
    # >=0.1.11.dev0; multi-turn game whose state lives in the "answer" column (rewritten each turn),
    # Parser(extract_fn), getattr on typed messages; its puzzle list is fetched with requests.get
    "nyt_connections": {"args": {"num_eval_samples": 3}, "known": STRING_TASK},
    # >=0.1.11.dev0; multi-turn JSON game reading trajectory[-1]["completion"] in @vf.stop,
    # numpy state in state["current_grid"], max_turns from the trajectory length
    "fruit_box": {"args": {"max_turns": 4}, "known": STRING_TASK},
    # >=0.1.11.dev0; multimodal prompts (image_url parts) rewritten in setup_state, a
    # vf.SystemMessage prepended to state["prompt"], four turns of JSON answers, a dict-returning parser
    "clockbench": {"known": STRING_TASK},
    # >=0.1.11.dev0; two-pass multi-turn (multimodal-shaped prompt, setup_state system message),
    # ThinkParser(extract_fn) with mathruler's grader, named reward functions (__name__ set)
    "vision_sr1": {},
    # >=0.1.11.dev0; a ToolEnv whose env_response and @vf.stop are overridden (tools offered but
    # answered as text), an extract_fn parser, a lambda reward over a local SQLite database
    "skyrl_sql": {
        "args": {"hf_path": "stand-in/skyrl-sql", "db_roots": ["{skyrl_db}"], "max_turns": 3},
        "known": STRING_TASK,
    },
    # >=0.1.11.dev0 (a package); ToolEnv with typed tool calls (tc.name/tc.arguments) ending on a
    # return_final_answer tool, ToolRubric.total_tool_calls, a sync OpenAI judge with
    # chat.completions.parse(response_format=...), partial reward functions via update_wrapper;
    # its email database is built by its own generate_database from stand-in mail
    "art_e": {"args": {"max_turns": 3}, "prepare": "art_e_database", "known": ART_E},
    # >=0.1.11.dev0 (a package); multi-turn with a simulated user (its own AsyncOpenAI client),
    # JudgeRubric plus an added judge reward that writes state["judgements"], random injections
    "spiral_bench": {
        "args": {
            "judge_base_url": "{url}",
            "judge_model": "compare-judge",
            "user_base_url": "{url}",
            "user_model": "compare-user",
            "max_turns": 3,
        },
        "known": STRING_TASK + " (its task is the empty string)",
    },
    # >=0.1.11.dev0; single-turn with an AsyncOpenAI judge inside the reward (answer task)
    "sycophancy_eval:answer": {"module": "sycophancy_eval", "args": {"task": "answer", **JUDGE}},
    # >=0.1.11.dev0; SingleTurnEnv subclass overriding a_generate (pre-1.0 name) to cache
    # baselines, rubric.class_objects, a judge comparing two replies (feedback task)
    "sycophancy_eval:feedback": {
        "module": "sycophancy_eval",
        "args": {"task": "feedback", **JUDGE},
    },
    # >=0.1.11.dev0; question/answer columns with system_prompt, ThinkParser(extract_fn), a
    # JudgeRubric whose added reward calls judge_rubric.judge(prompt, completion, answer, state)
    "bixbench": {
        "args": {
            "answer_mode": "open",
            "use_think": True,
            "llm_judge_base_url": "{url}",
            "llm_judge_model": "compare-judge",
        },
        "known": STRING_TASK,
    },
    # >=0.1.11.dev0; multi-turn navigation reading typed messages as dicts (messages[-1]["role"]),
    # dict messages returned from env_response, XMLParser(link) format reward, question column +
    # system_prompt; its Wikipedia link lookups (requests.get) answered by a stand-in link graph
    "wiki_race": {"args": {"max_turns": 4}},
    # >=0.1.11.dev0; MultiTurnEnv with vf.UserMessage prompts built inside Dataset.map, HTTP
    # calls to a FHIR server (a loopback stand-in), ThinkParser-free Parser, int rewards
    "med_agent_bench": {
        "args": {
            "fhir_api_base": "{fhir}",
            "funcs_path": "{env_dir}/funcs_v1.json",
            "test_data_path": "{env_dir}/test_data_v2.json",
        }
    },
}
