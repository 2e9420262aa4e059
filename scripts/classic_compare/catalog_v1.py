"""Which of upstream's v1 example tasksets (tag v0.3.0, ``environments/*``) ``compare_v1.py`` runs,
with their options and the known, explained differences (one without an explanation fails the
comparison).

Options: ``n`` (tasks), ``r`` (rollouts per task), ``harness`` (the ``agent`` seat's harness id,
``null`` by default), ``seats`` (the env's agent seats that harness and its caps go to; ``agent``
by default), ``taskset`` / ``env`` (config fields merged into the taskset's and the env's),
``volatile`` (metrics that measure wall-clock time: compared by name, not value), ``skip``
(why it is not run) and ``known`` (the explanation of its differences)."""

from __future__ import annotations

V1_TASKSETS: dict[str, dict] = {
    "reverse_text_v1": {},
    "alphabet_sort_v1": {},
    "glossary_v1": {},
    "scratchpad_v1": {},
    "color_codeword_v1": {},
    "gsm8k_v1": {},
    "code_golf_v1": {"seats": ["golfer"], "volatile": ["latency"]},
    "kuhn_poker_v1": {"seats": ["player0", "player1"]},
    "proposer_solver_v1": {"seats": ["proposer", "solver"]},
    "wordle_v1": {"skip": "TextArena's Wordle needs NLTK's word lists (a network download)"},
    "openenv_wordle_v1": {"skip": "an OpenEnv server in a container (verifiers[openenv])"},
    "nemo_gym_weather_v1": {"skip": "NeMo Gym's resource servers (verifiers[nemo-gym], network)"},
    "wiki_search_v1": {"skip": "a hosted embedding model and a downloaded corpus (network)"},
    "deepwiki_v1": {"skip": "DeepWiki's hosted MCP server (network)"},
    "compact": {"skip": "a harness package, not a taskset"},
}
