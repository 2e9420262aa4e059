"""Evaluate an environment against a scripted model server, from Python, with no API key.

A scripted OpenAI-compatible server on loopback (``verifiers.testing.ModelServer``) plays the
model: it reverses the text it is given, making a mistake now and then, so rewards vary. The
results land in ``outputs/evals/...`` exactly as a real run's would.

    python examples/quickstart.py
"""

from __future__ import annotations

import random
from difflib import SequenceMatcher

import verifiers as vf
from verifiers.testing import ModelServer, last_user_text

WORDS = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november".split()
)


def make_dataset(n: int = 20, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        text = " ".join(rng.sample(WORDS, 3))
        rows.append(
            {"question": f"Reverse this text character by character: {text}", "answer": text[::-1]}
        )
    return rows


def load_environment() -> vf.Environment:
    parser = vf.XMLParser(["think", "answer"], answer_field="answer")

    def lcs_reward(completion, answer) -> float:
        """Similarity of the parsed answer to the reversed text (1.0 = exact)."""
        response = parser.parse_answer(completion) or ""
        return SequenceMatcher(None, response, answer).ratio()

    rubric = vf.Rubric(funcs=[lcs_reward, parser.get_format_reward_func()], weights=[1.0, 0.2])
    return vf.SingleTurnEnv(
        dataset=make_dataset(),
        system_prompt=f"Reverse the given text. Answer in this format:\n{parser.get_format_str()}",
        parser=parser,
        rubric=rubric,
        env_id="reverse-text-demo",
    )


def scripted_model(request: dict) -> str:
    """Reverse the text, dropping a character a third of the time."""
    text = last_user_text(request).split(": ", 1)[-1][::-1]
    rng = random.Random(text + str(len(request.get("messages", []))))
    if rng.random() < 0.33:
        i = rng.randrange(len(text))
        text = text[:i] + text[i + 1 :]
    return f"<think>\nreverse it\n</think>\n<answer>\n{text}\n</answer>"


def main() -> None:
    env = load_environment()
    with ModelServer(scripted_model) as server:
        results = env.evaluate_sync(
            server.base_url,
            "scripted-reverser",
            rollouts_per_example=2,
            max_concurrent=8,
            save_results=True,
        )
    summary = results.metadata.summary
    print(f"rollouts: {summary.num_rollouts}  errors: {summary.num_errors}")
    print(f"reward: mean {summary.avg_reward:.3f}  std {summary.std_reward:.3f}")
    for name, value in summary.avg_metrics.items():
        print(f"  {name}: {value:.3f}")
    print(f"results: {results.path}")


if __name__ == "__main__":
    main()
