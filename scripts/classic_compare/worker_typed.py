"""Run one environment with the 0.1.11+ public API and print its results as JSON.

Invoked by ``compare.py --release 0.3.1`` once under this SDK and once under real
``verifiers==0.3.1``. It uses only that release's public API (``vf.ClientConfig``,
``evaluate_sync``, ``results["outputs"]``, ``verifiers.clients.resolve_client``), so the same file
runs in both. Besides the evaluation's rows it runs one rollout directly and prints the keys of
its scored state.

With ``"id"`` in its spec (this SDK's side) the environment is the installed package loaded by id
(``vf.load_environment``, see ``worker.load``); without it (the classic side) its file is
imported.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import random
import sys
from pathlib import Path

from stand_in_data import install_stand_in_datasets

SAMPLING = {"temperature": 0.0, "max_tokens": 64}


def plain(value):
    if hasattr(value, "model_dump"):
        return value.model_dump(exclude_none=True)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


async def one_state(env, config) -> list[str]:
    from verifiers.clients import resolve_client

    row = env.get_eval_dataset(n=1).to_list()[0]
    client = resolve_client(config)
    state = await env.rollout(row, client, "compare-model", dict(SAMPLING))
    await env.rubric.score_group([state])
    return sorted(str(k) for k in dict.keys(state))  # what is stored, not what is forwarded


def from_file(spec: dict):
    """The environment built from its file (the classic side), and a way to build it again."""
    path = Path(spec["path"])
    if path.name == "__init__.py":  # a package (environments/NAME/NAME/): import it as one
        sys.path.insert(0, str(path.parent.parent))
        module = importlib.import_module(spec["module"])
    else:
        sys.path.insert(0, str(path.parent))  # the environment's own helper modules
        module_spec = importlib.util.spec_from_file_location(spec["module"], path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[spec["module"]] = module
        module_spec.loader.exec_module(module)
    return module.load_environment(**spec.get("args", {})), lambda: module.load_environment(
        **spec.get("args", {})
    )


def main() -> None:
    spec = json.loads(sys.argv[1])
    install_stand_in_datasets()
    random.seed(0)
    if spec.get("id"):
        from worker import load

        env = load(spec)

        def again():
            return load(spec)
    else:
        env, again = from_file(spec)

    import verifiers as vf

    config = vf.ClientConfig(api_base_url=spec["url"], api_key_var="OPENAI_API_KEY", max_retries=0)
    random.seed(1)
    results = env.evaluate_sync(
        client=config,
        model="compare-model",
        num_examples=spec.get("n", 3),
        rollouts_per_example=spec.get("r", 2),
        max_concurrent=1,
        sampling_args=dict(SAMPLING),
        state_columns=["trajectory"],
    )
    rows = [
        {
            "example_id": out["example_id"],
            "reward": out["reward"],
            "metrics": out.get("metrics") or {},
            "turns": len(out.get("trajectory") or []),
            "completion": plain(out.get("completion")),
            "error": (out.get("error") or {}).get("error"),
        }
        for out in results["outputs"]
    ]
    random.seed(2)
    # a fresh environment: clients it made (judges) belong to the event loop that first used them
    keys = asyncio.run(one_state(again(), config))
    print("SDK " + vf.__file__)
    print("RESULT " + json.dumps({"rows": rows, "state_keys": keys}, default=str))


if __name__ == "__main__":
    main()
