"""Run one upstream example environment and print its results as JSON (any verifiers SDK).

Invoked by ``compare.py`` once under this SDK and once under the classic one; it uses only the
classic public API, so the same file runs in both. ``datasets.load_dataset`` is replaced by small
stand-in datasets (offline), and the global random state is seeded, so both runs see equal rows.

With ``"id"`` in its spec (this SDK's side) the environment is the installed package loaded by id
(``vf.load_environment``), so the release it runs as comes from its own ``verifiers``
requirement; without it (the classic side) its file is imported as it always was.
"""

from __future__ import annotations

import importlib.util
import json
import random
import sys

from stand_in_data import install_stand_in_datasets


def load(spec: dict):
    """The environment, built as the spec says: by id (installed) or from its file."""
    if spec.get("id"):
        import verifiers as vf

        env = vf.load_environment(spec["id"], **spec.get("args", {}))
        built = sys.modules.get(spec["module"])  # the installed module it imported
        print(
            "LOADED "
            + json.dumps(
                {
                    "release": str(env.release),
                    "distribution": env.env_distribution,
                    "file": getattr(built, "__file__", None),
                }
            )
        )
        return env
    sys.path.insert(0, str(__import__("pathlib").Path(spec["path"]).parent))  # its own helpers
    module_spec = importlib.util.spec_from_file_location(spec["module"], spec["path"])
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[spec["module"]] = module
    module_spec.loader.exec_module(module)
    return module.load_environment(**spec.get("args", {}))


def main() -> None:
    spec = json.loads(sys.argv[1])
    install_stand_in_datasets()
    random.seed(0)
    env = load(spec)

    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=spec["url"], api_key="compare")
    random.seed(1)
    results = env.evaluate_sync(
        client,
        "compare-model",
        num_examples=spec.get("n", 3),
        rollouts_per_example=spec.get("r", 2),
        max_concurrent=1,
        sampling_args={"temperature": 0.0, "max_tokens": 64},
    )
    rows = []
    for i, state in enumerate(results["state"]):
        rows.append(
            {
                "example_id": results["example_id"][i],
                "reward": results["reward"][i],
                "metrics": {k: v[i] for k, v in results["metrics"].items()},
                "turns": len(state.get("trajectory") or []),
                "completion": results["completion"][i],
            }
        )
    import verifiers

    print("SDK " + verifiers.__file__)
    print("RESULT " + json.dumps(rows, default=str))


if __name__ == "__main__":
    main()
