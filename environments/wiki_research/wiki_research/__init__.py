"""wiki-research: multi-hop questions over an offline encyclopedia, with search and open tools.

The corpus (``world.py``: 3,120 short articles about a fictional world) is generated from a
seed and indexed in SQLite FTS5 in memory when the environment loads (under a second). The model has two tools,
``search(query)`` (BM25-ranked titles and snippets) and ``open(doc_id)`` (an article's text), and
answers in ``<answer>...</answer>``. Every question needs two or three articles (the founder of a
company, then where that person was born, then that city's country...): no single article names
both the question's subject and its answer.

Reward: the answer matches the gold one after normalisation (case, punctuation, articles), or,
with ``judge_model`` set, a ``JudgeRubric`` verdict. Only the ``<answer>`` field is judged, and
only if it is short (``MAX_ANSWER_CHARS``): a long answer, where a list of guesses or
instructions to a judge would go, scores 0 without being shown to the judge. The tools only read
the corpus; nothing the model does reaches the answer key. ``docs_opened`` (a metric) is the share
of the question's articles the model opened.
"""

from __future__ import annotations

import os
import re
import sqlite3
import string
from typing import Any

import verifiers as vf
from wiki_research.world import World, build_world

MAX_ANSWER_CHARS = 80
SYSTEM_PROMPT = """Answer the question using the encyclopedia tools: `search` finds articles, `open` reads one.
Questions need facts from two or three articles: look each one up, do not guess.
When you know the answer, reply with just the name or number in <answer></answer> tags."""

JUDGE_PROMPT = """A question, its correct answer and a response. Is the response the same answer (a name or a number)?

Question: {question}
Correct answer: {answer}
Response: {response}

Reply "yes" or "no" only."""


class Encyclopedia:
    """The corpus in an in-memory SQLite FTS5 index (one per environment; tools run on the
    event loop thread, one call at a time)."""

    def __init__(self, world: World) -> None:
        self.db = sqlite3.connect(":memory:", check_same_thread=False)
        self.db.execute("CREATE VIRTUAL TABLE docs USING fts5(id UNINDEXED, title, text)")
        self.db.executemany(
            "INSERT INTO docs VALUES (?, ?, ?)",
            [(d["id"], d["title"], d["text"]) for d in world.docs],
        )
        self.by_id = {d["id"]: d for d in world.docs}

    def search(self, query: str, limit: int = 5) -> list[tuple[str, str, str]]:
        """(id, title, snippet) of the best matches for any of the query's words."""
        words = re.findall(r"\w+", query)
        if not words:
            return []
        match = " OR ".join(f'"{w}"' for w in words[:16])
        return self.db.execute(
            "SELECT id, title, snippet(docs, 2, '', '', '...', 12) FROM docs WHERE docs MATCH ? "
            "ORDER BY bm25(docs, 0.0, 5.0, 1.0) LIMIT ?",
            (match, limit),
        ).fetchall()


def normalize(text: str) -> str:
    text = text.lower().translate(str.maketrans("", "", string.punctuation))
    return " ".join(w for w in text.split() if w not in ("a", "an", "the"))


def make_tools(book: Encyclopedia) -> list:
    def search(query: str) -> str:
        """Search the encyclopedia; returns up to five matching articles with their ids.

        Args:
            query: Words to look for, e.g. a name.
        """
        hits = book.search(query)
        if not hits:
            return "No articles match. Try other words (e.g. a single name)."
        return "\n".join(f"[{doc_id}] {title}: {snippet}" for doc_id, title, snippet in hits)

    def open(doc_id: str) -> str:  # the tool's name is "open"; it shadows nothing outside
        """Read an article.

        Args:
            doc_id: The article's id from search results, e.g. "d0042".
        """
        doc = book.by_id.get(doc_id.strip().strip("[]"))
        if doc is None:
            return f"No article has the id {doc_id!r}; ids look like d0042 (see search results)."
        return f"{doc['title']}\n\n{doc['text']}"

    return [search, open]


def make_rows(world: World, indices: range) -> list[dict[str, Any]]:
    return [
        {
            "question": world.questions[i]["question"],
            "answer": world.questions[i]["answer"],
            "info": {"docs": world.questions[i]["docs"]},
        }
        for i in indices
    ]


def load_environment(
    num_eval_examples: int = 100,
    max_turns: int = 8,
    seed: int = 0,
    judge_model: str | None = None,
    judge_base_url: str | None = None,
    judge_api_key_var: str = "OPENAI_API_KEY",
) -> vf.Environment:
    """
    Args:
        num_eval_examples: questions held out for evaluation (the rest, of 800, train).
        seed: the world's seed (a different seed is a different world).
        judge_model: judge answers with this model (JudgeRubric) instead of exact match.
        judge_base_url / judge_api_key_var: the judge's endpoint and the variable holding its key.
    """
    world = build_world(seed)
    book = Encyclopedia(world)
    parser = vf.XMLParser(["answer"], answer_field="answer")

    def short_answer(completion) -> str:
        answer = (parser.parse_answer(completion) or "").strip()
        return answer if len(answer) <= MAX_ANSWER_CHARS else ""

    def docs_opened(completion, info, **kwargs) -> float:
        opened = set()
        for message in completion:
            for call in getattr(message, "tool_calls", None) or []:
                if call.name == "open":
                    opened.update(re.findall(r"d\d{4}", str(call.arguments)))
        return len(opened & set(info["docs"])) / len(info["docs"])

    if judge_model:
        from verifiers.clients import OpenAICompatibleClient

        client = OpenAICompatibleClient(
            judge_base_url or "https://api.openai.com/v1", os.environ.get(judge_api_key_var)
        )
        rubric = vf.JudgeRubric(
            parser=parser,
            judge_client=client,
            judge_model=judge_model,
            judge_prompt=JUDGE_PROMPT,
            judge_sampling_args={"temperature": 0, "max_tokens": 4},
        )

        async def judged_correct(judge, prompt, completion, answer, state) -> float:
            if not short_answer(completion):
                return 0.0
            verdict = await judge(prompt, completion, answer, state)
            return float(verdict.strip().lower().startswith("yes"))

        rubric.add_reward_func(judged_correct)
    else:
        rubric = vf.Rubric(parser=parser)

        def exact_match(completion, answer) -> float:
            return float(normalize(short_answer(completion)) == normalize(answer))

        rubric.add_reward_func(exact_match)
    rubric.add_reward_func(docs_opened, weight=0.0)
    n = len(world.questions)
    return vf.ToolEnv(
        tools=make_tools(book),
        dataset=make_rows(world, range(num_eval_examples, n)),
        eval_dataset=make_rows(world, range(num_eval_examples)),
        system_prompt=SYSTEM_PROMPT,
        parser=parser,
        rubric=rubric,
        max_turns=max_turns,
    )
