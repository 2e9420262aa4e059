"""``load_example_dataset``: well-known benchmarks by name, as question/answer rows.

The rows are the classic SDK's: the same source dataset and default split, shuffled with
``seed`` before ``n`` rows are taken, then mapped to ``question``/``answer``. The source comes from
the Hugging Face ``datasets`` cache (or the Hub when online); offline, pass ``path=`` (a local
file or directory with the source's columns) or set ``VF_EXAMPLE_DATA`` to a directory holding
``<name>/<split>.<jsonl|json|parquet|csv>``.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verifiers.data.answers import extract_boxed_answer, extract_hash_answer, strip_non_numeric

Row = dict[str, Any]
LETTERS = "ABCDEFGHIJ"


def _choices_question(question: str, options: list[str]) -> str:
    return f"Question: {question}\n" + "".join(
        f"\n{LETTERS[i]}: {option}" for i, option in enumerate(options)
    )


def _gpqa(x: Row) -> Row:
    letters = list("ABCD")
    random.shuffle(letters)  # as the classic SDK: the process-wide random state
    answers = dict(
        zip(
            letters,
            [
                x["Correct Answer"],
                x["Incorrect Answer 1"],
                x["Incorrect Answer 2"],
                x["Incorrect Answer 3"],
            ],
            strict=True,
        )
    )
    question = f"Question: {x['Question']}\n\n" + "\n".join(f"{k}: {answers[k]}" for k in "ABCD")
    return {"question": question, "answer": letters[0]}


def _openbookqa(x: Row) -> Row:
    labels, texts = x["choices"]["label"], x["choices"]["text"]
    choices = "\n".join(f"{label}. {text}" for label, text in zip(labels, texts, strict=True))
    return {
        "question": f"Question: {x['question_stem']}\n\nChoices:\n{choices}",
        "answer": x["answerKey"],
    }


@dataclass(frozen=True)
class ExampleDataset:
    """Where a named dataset comes from and how a row becomes question/answer."""

    repo: str
    configs: tuple[str | None, ...]
    default_split: str
    to_row: Callable[[Row], Row]
    keep: Callable[[Row], bool] | None = None


def _problem_answer(x: Row) -> Row:
    return {"question": x["problem"], "answer": x["answer"]}


EXAMPLE_DATASETS: dict[str, ExampleDataset] = {
    "aime2024": ExampleDataset(
        "HuggingFaceH4/aime_2024",
        (None,),
        "train",
        lambda x: {"question": x["problem"], "answer": str(int(x["answer"]))},
    ),
    "aime2025": ExampleDataset(
        "opencompass/AIME2025",
        ("AIME2025-I", "AIME2025-II"),
        "test",
        lambda x: {"question": x["question"], "answer": strip_non_numeric(x["answer"])},
    ),
    "amc2023": ExampleDataset("knoveleng/AMC-23", (None,), "train", _problem_answer),
    "gpqa_diamond": ExampleDataset("Idavidrein/gpqa", ("gpqa_diamond",), "train", _gpqa),
    "gpqa_main": ExampleDataset("Idavidrein/gpqa", ("gpqa_main",), "train", _gpqa),
    "gsm8k": ExampleDataset(
        "openai/gsm8k",
        ("main",),
        "test",
        lambda x: {"question": x["question"], "answer": extract_hash_answer(x["answer"])},
    ),
    "math": ExampleDataset(
        "chiayewken/competition_math",
        (None,),
        "train",
        lambda x: {"question": x["problem"], "answer": extract_boxed_answer(x["solution"])},
    ),
    "math500": ExampleDataset("HuggingFaceH4/MATH-500", (None,), "test", _problem_answer),
    "mmlu": ExampleDataset(
        "cais/mmlu",
        ("all",),
        "dev",
        lambda x: {
            "question": _choices_question(x["question"], x["choices"]),
            "answer": LETTERS[x["answer"]],
        },
    ),
    "mmlu_pro": ExampleDataset(
        "TIGER-Lab/MMLU-Pro",
        (None,),
        "validation",
        lambda x: {
            "question": _choices_question(x["question"], x["options"]),
            "answer": x["answer"],
        },
    ),
    "openbookqa": ExampleDataset("allenai/openbookqa", ("main",), "train", _openbookqa),
    "openrs": ExampleDataset("knoveleng/open-rs", (None,), "train", _problem_answer),
    "openrs_easy": ExampleDataset(
        "knoveleng/open-rs", (None,), "train", _problem_answer, lambda x: x["level"] == "Easy"
    ),
    "openrs_hard": ExampleDataset(
        "knoveleng/open-rs", (None,), "train", _problem_answer, lambda x: x["level"] == "Hard"
    ),
    "prime_code": ExampleDataset(
        "PrimeIntellect/verifiable-coding-problems",
        (None,),
        "train",
        lambda x: {"question": x["prompt"], "answer": x["verification_info"]},
        lambda x: x["prompt"].startswith(
            "Solve the following coding problem using the programming language python:"
        ),
    ),
}

_FORMATS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv"}


def _local_source(name: str, split: str, path: str | os.PathLike[str] | None) -> Any:
    """The source rows from ``path`` or ``$VF_EXAMPLE_DATA/<name>/<split>.*``, if given."""
    from datasets import load_dataset, load_from_disk

    candidates: list[Path] = []
    if path is not None:
        candidates.append(Path(path))
    elif os.environ.get("VF_EXAMPLE_DATA"):
        base = Path(os.environ["VF_EXAMPLE_DATA"]) / name
        candidates += [base / f"{split}{ext}" for ext in _FORMATS] + [base / split]
    for candidate in candidates:
        if candidate.is_dir():
            return load_from_disk(str(candidate))
        if candidate.is_file() and candidate.suffix in _FORMATS:
            return load_dataset(
                _FORMATS[candidate.suffix], data_files=str(candidate), split="train"
            )
    if path is not None:
        raise FileNotFoundError(
            f"load_example_dataset({name!r}, path={str(path)!r}): no such file or directory"
        )
    return None


def _hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the Hugging Face Hub answers a TCP connect: offline, ``datasets`` would retry
    for ~25 s before saying what is missing, so the cache alone is asked instead."""
    import socket
    from urllib.parse import urlparse

    from huggingface_hub import constants

    url = urlparse(constants.ENDPOINT)
    try:
        with socket.create_connection(
            (url.hostname or "huggingface.co", url.port or 443), timeout=timeout
        ):
            return True
    except OSError:
        return False


@contextmanager
def _cache_only() -> Iterator[None]:
    """``datasets`` and ``huggingface_hub`` in offline mode (the cache only) for one call."""
    import datasets
    from huggingface_hub import constants

    saved = datasets.config.HF_HUB_OFFLINE, constants.HF_HUB_OFFLINE
    datasets.config.HF_HUB_OFFLINE = constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        datasets.config.HF_HUB_OFFLINE, constants.HF_HUB_OFFLINE = saved


def _hub_source(name: str, spec: ExampleDataset, split: str) -> Any:
    from datasets import concatenate_datasets, load_dataset

    try:
        with _cache_only() if not _hub_reachable() else nullcontext():
            parts = [load_dataset(spec.repo, config)[split] for config in spec.configs]
    except Exception as exc:  # offline and not cached, or an unknown split
        raise RuntimeError(
            f"load_example_dataset({name!r}) needs {spec.repo} (split {split!r}), which is neither in "
            f"the datasets cache nor reachable ({type(exc).__name__}: {str(exc)[:160]}). Offline, pass "
            f"path= a local file or directory with its columns, or set VF_EXAMPLE_DATA to a directory "
            f"holding {name}/{split}.jsonl; or install an environment that ships its data "
            "(e.g. `vf-install gsm8k-mini`)."
        ) from exc
    return parts[0] if len(parts) == 1 else concatenate_datasets(parts)


def load_example_dataset(
    name: str = "gsm8k",
    split: str | None = None,
    n: int | None = None,
    seed: int = 0,
    path: str | os.PathLike[str] | None = None,
) -> Any:
    """``name``'s rows as a ``datasets.Dataset`` of ``question``/``answer`` (see module doc)."""
    spec = EXAMPLE_DATASETS.get(name)
    if spec is None:
        raise ValueError(
            f"Dataset {name!r} is not a known example dataset; known: {', '.join(sorted(EXAMPLE_DATASETS))}. "
            "Build your own with datasets.Dataset.from_list([{'question': ..., 'answer': ...}])."
        )
    split = split or spec.default_split
    dataset = _local_source(name, split, path)
    if dataset is None:
        dataset = _hub_source(name, spec, split)
    if spec.keep is not None:
        dataset = dataset.filter(spec.keep)
    if n is not None and n > 0:
        dataset = dataset.shuffle(seed=seed).select(range(n))
    # In-process map: gpqa's answer order comes from the global random state, so seeding it
    # reproduces the rows (the classic SDK maps in worker processes and never reproduces them).
    return dataset.map(spec.to_row, remove_columns=dataset.column_names)
