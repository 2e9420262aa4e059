"""alphabet-sort: a multi-turn sorting task where each turn reveals more names.

Turn 1 gives a few names to sort; every later turn adds names, and the model must answer with
the whole list so far in alphabetical order. Each turn is scored by sequence similarity against
the correct cumulative list; the reward is the mean over all turns (unanswered turns score 0).
"""

from __future__ import annotations

import random
from difflib import SequenceMatcher

import verifiers as vf

NAMES = (
    "Abigail Adrian Aiden Alba Aleksander Amara Anika Arjun Astrid Aurora Bashir Beatrix Bjorn Bruno "
    "Camila Casimir Cedric Chiara Cosmo Dalia Dante Delphine Dmitri Dorothea Elio Elodie Emeka Esme "
    "Ezra Fabian Fatima Felix Freya Gideon Giulia Greta Gunnar Hamish Hana Hector Helga Ibrahim Ines "
    "Ingrid Isidore Jasper Jovana Julian Juniper Kaito Kamala Kasimir Kenji Lachlan Leila Lorenzo "
    "Lucian Magnus Malia Marisol Mateo Mireille Nadia Nikolai Noor Octavia Odette Oskar Pavel Petra "
    "Quentin Quilla Rafael Renata Rosalind Rustam Saoirse Selim Signe Soren Tamsin Thiago Tobias "
    "Ulrich Una Valentina Vesna Viggo Wanda Wilhelmina Xavier Ximena Yara Yusuf Zadie Zoltan"
).split()

SYSTEM_PROMPT = """Sort names alphabetically. Always answer with the complete sorted list of every name
given so far, one name per line, inside <alphabetical_sorted> tags:
<alphabetical_sorted>
Name1
Name2
</alphabetical_sorted>"""


def make_rows(n: int, seed: int, turns: tuple[int, int], per_turn: tuple[int, int]) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        batches = [rng.sample(NAMES, rng.randint(*per_turn)) for _ in range(rng.randint(*turns))]
        seen: set[str] = set()
        unique = []
        for batch in batches:
            batch = [name for name in batch if name not in seen]
            seen.update(batch)
            unique.append(batch or [rng.choice([x for x in NAMES if x not in seen])])
            seen.update(unique[-1])
        rows.append(
            {
                "question": "Sort these names alphabetically: " + ", ".join(unique[0]),
                "answer": "\n".join(sorted(seen)),
                "info": {"batches": unique},
            }
        )
    return rows


class AlphabetSortEnv(vf.MultiTurnEnv):
    async def setup_state(self, state: vf.State, **kwargs) -> vf.State:
        state["revealed"] = 1
        return state

    @vf.stop
    async def all_turns_answered(self, state: vf.State) -> bool:
        return state["turn"] >= len(state["info"]["batches"])

    async def env_response(self, messages: vf.Messages, state: vf.State, **kwargs) -> vf.Messages:
        batch = state["info"]["batches"][state["revealed"]]
        state["revealed"] += 1
        return [
            {
                "role": "user",
                "content": "Now add these names and give the whole sorted list: "
                + ", ".join(batch),
            }
        ]


def load_environment(
    num_train_examples: int = 1000,
    num_eval_examples: int = 100,
    min_turns: int = 2,
    max_turns: int = 3,
    min_names_per_turn: int = 2,
    max_names_per_turn: int = 4,
    seed: int = 0,
) -> vf.Environment:
    parser = vf.XMLParser(["alphabetical_sorted"], answer_field="alphabetical_sorted")
    shape = dict(turns=(min_turns, max_turns), per_turn=(min_names_per_turn, max_names_per_turn))

    def turn_scores(completion, info) -> list[float]:
        replies = parser.get_assistant_messages(completion)
        scores, seen = [], []
        for i, batch in enumerate(info["batches"]):
            seen = seen + batch
            if i >= len(replies):
                scores.append(0.0)
                continue
            parsed = parser.parse(replies[i].get("content") or "").alphabetical_sorted or ""
            predicted = [line.strip() for line in parsed.splitlines() if line.strip()]
            scores.append(SequenceMatcher(None, predicted, sorted(seen)).ratio())
        return scores

    def sorted_similarity(completion, info, **kwargs) -> float:
        """Mean over turns of the similarity between the answer and the correct cumulative list."""
        scores = turn_scores(completion, info)
        return sum(scores) / len(scores)

    def all_turns_exact(completion, info, **kwargs) -> float:
        return float(all(s == 1.0 for s in turn_scores(completion, info)))

    format_reward = parser.get_format_reward_func()
    format_reward.__name__ = "format_reward"
    rubric = vf.Rubric(
        funcs=[sorted_similarity, all_turns_exact, format_reward],
        weights=[1.0, 0.0, 0.2],
        parser=parser,
    )
    return AlphabetSortEnv(
        dataset=make_rows(num_train_examples, seed, **shape),
        eval_dataset=make_rows(num_eval_examples, seed + 1, **shape),
        system_prompt=SYSTEM_PROMPT,
        parser=parser,
        rubric=rubric,
        max_turns=max_turns,
    )
