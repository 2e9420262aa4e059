"""Upstream environments, installed and loaded by id under this SDK, and run from their files
under a real classic release.

    python scripts/classic_compare/compare.py --set 0.1.8 --anchor PATH --classic-python PY
    python scripts/classic_compare/compare.py --set 0.3.1 --anchor PATH --classic-python PY \
        [--classic-python PY2] [--ours-venv DIR] [--community PATH] [--only NAME...] \
        [--details DIR] [--markdown FILE]

``--set`` picks the examples (``catalog.py``) and the public API the driver uses: ``0.1.8``
for upstream's examples at tag v0.1.8.post2 driven through the dict-era API (``worker.py``),
``0.3.1`` for those at tag v0.2.0 driven through the 0.1.11+ API (``worker_typed.py``). It is not
a release for this SDK. ``--anchor`` is a checkout (or ``git archive``) of PrimeIntellect-ai/
verifiers at that tag. ``--classic-python`` is an interpreter with a real release installed in
its own virtualenv (``pip install verifiers==0.1.8.post2``, ``==0.3.1``); the first one given runs
every environment except those whose catalog entry names another release (``"classic"``), which
run under the ``--classic-python`` that has it (0.3.1 refuses some that 0.1.12 runs).
``--community`` is a checkout of a collection of community environments
(``environments/<name>/<name>.py`` or the package ``environments/<name>/<name>/``; the ones listed
in ``community.py`` are run).

This SDK's side takes the path users take. ``--ours-venv`` (default
``$TMPDIR/classic-compare-ours-SET``) is a scratch virtualenv, made when missing: this checkout's
SDK installed editable without dependencies, a ``.pth`` file that makes the running
interpreter's packages importable (a view of its site-packages without ``verifiers`` and without
editable installs, so this repository's own environments never shadow upstream's), and a
constraints file pinning every dependency to the version the running interpreter has. Each
environment's own dependencies are installed into it (``uv pip install -c``, those pins), the
environment itself with that virtualenv's ``vf-install DIR``, and the worker loads it with
``vf.load_environment(ID)``. No release is set anywhere (``VF_API_VERSION`` is removed from both
sides' environment): it comes only from the ``verifiers`` requirement of the environment's own
``pyproject.toml``, and the table shows it (``here as``, ``env.release``). The classic side runs
the environment's file, as before.

Both SDKs talk to one scripted OpenAI-compatible server whose replies are a pure function of
the request, and load the same stand-in datasets, so equal code paths give equal results. The
table says, per environment, whether rewards, metrics and turns, the scored state's keys (set
0.3.1) and the requests themselves were identical, and what differed; a difference without a
recorded explanation (``known`` in the catalog, per real release where it depends on it) fails
the run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
import tomllib
from pathlib import Path

from catalog import RELEASE_0_1_8, RELEASE_0_3_1
from rich.console import Console
from rich.table import Table

from verifiers.testing import Reply, conversation

HERE = Path(__file__).resolve().parent


def _asks_for_json(messages: list[dict]) -> bool:
    return any(
        "JSON" in (m["content"] if isinstance(m.get("content"), str) else json.dumps(m.get("content")))
        for m in messages
        if m.get("role") in ("system", "user")
    )


def reply_for(request: dict) -> Reply:
    """A deterministic reply: tool calls while tools are offered and none were answered yet;
    a JSON object (a move, a time, a verdict) when the prompt asks for JSON; otherwise text that
    exercises the usual parsers (think, answer tags, a four-digit guess, a link number, boxed,
    yes/no)."""
    messages = conversation(request)
    digest = int(hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest(), 16)
    tools = request.get("tools") or []
    if tools and not any(m.get("role") == "tool" for m in messages):
        calls = []
        for k, tool in enumerate(tools[: 1 + digest % len(tools)]):
            function = tool.get("function", tool)
            params = function.get("parameters", {}).get("properties", {})
            args = {
                p: (1 if s.get("type") in ("integer", "number") else "x") for p, s in params.items()
            }
            calls.append(Reply.tool_call(function["name"], args, call_id=f"call_{k}"))
        return Reply(content=None, tool_calls=calls)
    if _asks_for_json(messages):
        row, column = digest % 10, digest % 16
        return Reply(
            content=json.dumps(
                {
                    "reasoning": f"step {digest % 7}",
                    "thinking": f"step {digest % 7}",
                    "accept": digest % 2 == 0,
                    "action": {"r1": row, "c1": column, "r2": row, "c2": column + 1},
                    "valid": True,
                    "hours": digest % 12,
                    "minutes": digest % 60,
                    "seconds": 0,
                }
            )
        )
    last = next((m.get("content") for m in reversed(messages) if m.get("role") == "user"), "")
    text = last if isinstance(last, str) else json.dumps(last)
    word = ("yes", "no", "A", "B", "C")[digest % 5]
    guess = "".join(str((digest >> (3 * k)) % 6) for k in range(4))
    return Reply(
        content=f"<think>step {digest % 7}</think>\n<answer>{text[:24][::-1]}</answer>\n"
        f"<guess>{guess}</guess> <link>{1 + digest % 3}</link> "
        f"<reversed_text>{text[::-1][:40]}</reversed_text> "
        f"\\boxed{{{digest % 9}}} {word}"
    )


def find_module(root: Path, name: str) -> Path | None:
    """``environments/NAME/NAME.py``, or the package ``environments/NAME/NAME/``."""
    for candidate in (
        root / "environments" / name / f"{name}.py",
        root / "environments" / name / name / "__init__.py",
    ):
        if candidate.exists():
            return candidate
    return None


def resolve(value, places: dict[str, str]):
    """An option value with its ``{url}``-style placeholders filled in (in lists too)."""
    if isinstance(value, list):
        return [resolve(v, places) for v in value]
    if isinstance(value, str):
        for place, filled in places.items():
            value = value.replace(place, filled)
    return value


# --- this SDK's side: a scratch virtualenv, each environment installed into it ---------------


def _uv() -> str:
    from verifiers.installs.uv_config import uv_binary

    found = uv_binary()
    if found is None:
        raise SystemExit("compare.py needs uv (pip install uv) to make the scratch virtualenv")
    return found


def _editable(direct_url: str | None) -> bool:
    """Whether a distribution's ``direct_url.json`` text says it is an editable install."""
    try:
        info = json.loads(direct_url or "{}")
    except ValueError:
        return False
    return isinstance(info, dict) and bool((info.get("dir_info") or {}).get("editable"))


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def make_ours_venv(venv: Path) -> Path:
    """The scratch virtualenv's python, made when missing (see the module docstring)."""
    python = venv / "bin" / "python"
    if python.exists():
        return python
    uv = _uv()
    site = Path(sysconfig.get_paths()["purelib"])
    subprocess.run([uv, "venv", "-q", str(venv), "--python", sys.executable], check=True)
    # a view of this interpreter's packages: no verifiers, no editable installs (this
    # repository's own environments are named as upstream's: reverse-text, tool-test, ...)
    view = venv / "main-packages"
    view.mkdir()
    skip = {"verifiers"}
    for entry in site.iterdir():
        if entry.suffix == ".dist-info" and _editable(_read(entry / "direct_url.json")):
            skip.add(entry.name)
    for entry in sorted(site.iterdir()):
        name = entry.name
        if (
            name in skip
            or name.startswith(("verifiers-", "_editable_impl_", "__editable__", "__pycache__"))
            or name.endswith(".pth")
        ):
            continue
        (view / name).symlink_to(entry)
    ours_site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    (ours_site / "classic-compare-main-packages.pth").write_text(f"{view}\n")
    from importlib import metadata

    pins = sorted(
        f"{d.metadata['Name']}=={d.version}"
        for d in metadata.distributions(path=[str(site)])
        if d.metadata["Name"]
        and d.metadata["Name"].lower() != "verifiers"
        and not _editable(d.read_text("direct_url.json"))
    )
    (venv / "constraints.txt").write_text("\n".join(pins) + "\n")
    subprocess.run(
        [uv, "pip", "install", "-q", "--python", str(python), "-c", str(venv / "constraints.txt"), "uv"],
        check=True,
    )
    subprocess.run(
        [uv, "pip", "install", "-q", "--python", str(python), "--no-deps", "-e", str(HERE.parents[1])],
        check=True,
    )
    return python


def own_requirements(env_dir: Path) -> list[str]:
    """The environment's dependencies other than verifiers (its pyproject.toml)."""
    from packaging.requirements import Requirement

    project = tomllib.loads((env_dir / "pyproject.toml").read_text()).get("project", {})
    return [
        line
        for line in project.get("dependencies", [])
        if Requirement(line).name.lower().replace("_", "-") != "verifiers"
    ]


def install_ours(python: Path, env_dir: Path) -> str | None:
    """Install the environment (its dependencies, then itself with vf-install); why not, if so."""
    venv = python.parent.parent
    requirements = own_requirements(env_dir)
    if requirements:
        deps = subprocess.run(
            [_uv(), "pip", "install", "-q", "--python", str(python), "-c", str(venv / "constraints.txt"), *requirements],
            capture_output=True,
            text=True,
        )
        if deps.returncode != 0:
            return "installing its dependencies failed: " + (deps.stderr.strip().splitlines() or ["?"])[-1][:200]
    done = subprocess.run(
        [str(venv / "bin" / "vf-install"), "-q", str(env_dir)], capture_output=True, text=True
    )
    if done.returncode != 0:
        return "vf-install failed: " + " ".join(done.stderr.split())[:300]
    return None


# --- running both sides ---------------------------------------------------------------------


def sdk_version(python: str) -> str:
    """The verifiers version ``python`` has installed."""
    done = subprocess.run(
        [python, "-c", "import importlib.metadata as m; print(m.version('verifiers'))"],
        capture_output=True,
        text=True,
    )
    return done.stdout.strip() or "?"


def run(python: str, spec: dict, worker: str, ours: bool) -> tuple[dict | str, dict]:
    """The worker's result (or why it failed) and, for this SDK, what it loaded."""
    env = dict(
        os.environ,
        PYTHONPATH=str(HERE),
        OPENAI_API_KEY="compare",
        JUDGE_API_KEY="compare",
        OPENAI_BASE_URL=spec["url"],  # judges built without a client find the scripted server
    )
    env.pop("VF_API_VERSION", None)  # the release comes from the environment's package only
    result = subprocess.run(
        [python, str(HERE / worker), json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        cwd=HERE,
    )
    lines = result.stdout.splitlines()
    sdk = next((line[4:] for line in lines if line.startswith("SDK ")), "")
    loaded = next((json.loads(line[7:]) for line in lines if line.startswith("LOADED ")), {})
    if not ours and sdk and Path(sdk).resolve().is_relative_to(HERE.parents[1]):
        return f"{python} imported this SDK ({sdk}), not the classic one", loaded
    for line in lines:
        if line.startswith("RESULT "):
            value = json.loads(line[len("RESULT ") :])
            value = value if isinstance(value, dict) else {"rows": value, "state_keys": None}
            return value, loaded
    return (result.stderr.strip().splitlines() or ["no output"])[-1][:200], loaded


def comparable(rows: list[dict], keys: set[str] | None = None) -> list[tuple]:
    return sorted(
        (
            r["example_id"],
            round(r["reward"], 9),
            json.dumps(
                {k: round(v, 9) for k, v in r["metrics"].items() if keys is None or k in keys},
                sort_keys=True,
            ),
            r["turns"],
        )
        for r in rows
    )


def metrics_cell(ours: list[dict], classic: list[dict]) -> str:
    """``same``, or what differs: metrics only one side has (``+`` ours, ``-`` the classic's),
    metrics whose values differ, turns."""
    if comparable(ours) == comparable(classic):
        return "same"
    our_keys = {k for r in ours for k in r["metrics"]}
    their_keys = {k for r in classic for k in r["metrics"]}
    parts = [f"+{k}" for k in sorted(our_keys - their_keys)]
    parts += [f"-{k}" for k in sorted(their_keys - our_keys)]

    def column(rows, key):
        return sorted((r["example_id"], round(r["metrics"][key], 9)) for r in rows if key in r["metrics"])

    parts += [f"{k} values" for k in sorted(our_keys & their_keys) if column(ours, k) != column(classic, k)]
    if sorted((r["example_id"], r["turns"]) for r in ours) != sorted(
        (r["example_id"], r["turns"]) for r in classic
    ):
        parts.append("turns")
    if len(ours) != len(classic):
        parts.append(f"{len(ours)} vs {len(classic)} rollouts")
    return "DIFFER: " + ", ".join(parts)


def known_for(options: dict, version: str) -> str:
    """The recorded explanation of this entry's differences against real verifiers ``version``."""
    known = options.get("known", "")
    if isinstance(known, dict):
        return known.get(version, known.get("*", ""))
    return known


COLUMNS = (
    "environment",
    "here as",
    "real",
    "rollouts",
    "rewards",
    "metrics+turns",
    "state keys",
    "requests",
    "note",
)


def compare_one(
    name: str, path: Path, options: dict, args, server, places: dict[str, str]
) -> tuple[list[str], str]:
    """One environment's table row and its outcome: ``identical``, ``explained``, ``skipped``,
    ``unexplained``, or (the real SDK does not run it) ``classic fails`` when explained and
    ``classic fails, unexplained`` when not."""
    real = options.get("classic") or args.default_version
    if options.get("skip"):
        return [name, "-", real, "-", "-", "-", "-", "-", f"skipped: {options['skip']}"], "skipped"
    if real not in args.pythons:
        note = f"needs a --classic-python with verifiers {real}"
        return [name, "-", real, "-", "-", "-", "-", "-", note], "unexplained"
    env_dir = path.parent.parent if path.name == "__init__.py" else path.parent
    places = {**places, "{url}": server.base_url, "{env_dir}": str(env_dir)}
    args_ = {k: resolve(v, places) for k, v in options.get("args", {}).items()}
    module = options.get("module", name)
    if options.get("prepare"):  # build the files it reads (the same for both SDKs)
        import community_data

        getattr(community_data, options["prepare"])(env_dir)
    spec = {"module": module, "path": str(path), "url": server.base_url, "args": args_}
    if options.get("judge"):
        spec["args"].update(judge_base_url=server.base_url, judge_model="compare-judge")
    failed = install_ours(args.ours_python, env_dir)
    if failed:
        return [name, "-", real, "-", "-", "-", "-", "-", f"ours: {failed}"], "unexplained"
    worker = "worker.py" if args.set == "0.1.8" else "worker_typed.py"
    outcome, loaded = {}, {}
    for label, python in (("ours", str(args.ours_python)), ("classic", args.pythons[real])):
        server.requests.clear()
        side_spec = {**spec, "id": module} if label == "ours" else spec
        result, seen = run(python, side_spec, worker, ours=label == "ours")
        if label == "ours":
            loaded = seen
        requests = sorted(json.dumps(r, sort_keys=True) for r in server.requests)
        outcome[label] = (result, requests)
    if args.details:
        args.details.mkdir(parents=True, exist_ok=True)
        for label, (result, requests) in outcome.items():
            (args.details / f"{name}.{label}.json").write_text(
                json.dumps(
                    {"result": result, "loaded": loaded if label == "ours" else None,
                     "requests": [json.loads(r) for r in requests]},
                    indent=1,
                )
            )
    here = loaded.get("release", "-")
    file = loaded.get("file")
    if file and not Path(file).resolve().is_relative_to(env_dir.resolve()):
        note = f"ours loaded {file}, not the package installed from {env_dir}"
        return [name, here, real, "-", "-", "-", "-", "-", note], "unexplained"
    (ours, our_requests), (classic, classic_requests) = outcome["ours"], outcome["classic"]
    known = known_for(options, real)
    if isinstance(ours, str) and isinstance(classic, str) and ours.startswith(classic[:120]):
        # the same refusal on both sides (this SDK may add a line saying what to do next)
        reason = classic.split(". ")[0]
        row = [name, here, real, "-", "-", "-", "-", "-", f"both fail: {reason}. {known}"]
        return row, "explained" if known else "unexplained"
    if isinstance(ours, str) or isinstance(classic, str):
        note = f"ours: {ours if isinstance(ours, str) else 'ok'} | classic: {classic if isinstance(classic, str) else 'ok'}. {known}"
        row = [name, here, real, "-", "-", "-", "-", "-", note]
        if isinstance(ours, str) or not known:
            return row, "unexplained" if not isinstance(classic, str) else "classic fails, unexplained"
        return row, "classic fails"
    same_rewards = sorted(round(r["reward"], 9) for r in ours["rows"]) == sorted(
        round(r["reward"], 9) for r in classic["rows"]
    )
    metrics = metrics_cell(ours["rows"], classic["rows"])
    same_keys = ours.get("state_keys") == classic.get("state_keys")
    same_requests = our_requests == classic_requests
    identical = same_rewards and metrics == "same" and same_keys and same_requests
    keys_cell = "same" if same_keys else (
        "DIFFER: " + ", ".join(
            [f"+{k}" for k in sorted(set(ours["state_keys"] or []) - set(classic["state_keys"] or []))]
            + [f"-{k}" for k in sorted(set(classic["state_keys"] or []) - set(ours["state_keys"] or []))]
        )
    )
    row = [
        name,
        here,
        real,
        str(len(ours["rows"])),
        "same" if same_rewards else "DIFFER",
        metrics,
        keys_cell if args.set != "0.1.8" else "-",
        "same" if same_requests else f"DIFFER ({len(our_requests)} vs {len(classic_requests)})",
        "" if identical else (known or "unexplained difference"),
    ]
    return row, "identical" if identical else "explained" if known else "unexplained"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", choices=("0.1.8", "0.3.1"), default="0.1.8")
    parser.add_argument("--anchor", required=True, type=Path)
    parser.add_argument("--classic-python", required=True, action="append")
    parser.add_argument("--ours-venv", type=Path, help="the scratch virtualenv for this SDK's side")
    parser.add_argument("--community", type=Path, help="a checkout of community environments")
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--details", type=Path, help="write each side's rollouts and requests here")
    parser.add_argument("--markdown", type=Path, help="also write the table here, as Markdown")
    args = parser.parse_args()
    args.pythons = {}
    for python in args.classic_python:
        args.pythons.setdefault(sdk_version(python), python)
    args.default_version = sdk_version(args.classic_python[0])
    venv = args.ours_venv or Path(tempfile.gettempdir()) / f"classic-compare-ours-{args.set}"
    args.ours_python = make_ours_venv(venv.absolute())
    catalog = RELEASE_0_1_8 if args.set == "0.1.8" else RELEASE_0_3_1
    entries = [(name, args.anchor, options) for name, options in catalog.items()]
    if args.community:
        from community import COMMUNITY

        entries += [(name, args.community, options) for name, options in COMMUNITY.items()]
    title = (
        f"upstream environments (set {args.set}): this SDK, installed and loaded by id, vs real "
        f"verifiers {' / '.join(args.pythons)}"
    )
    table = Table(title=title)
    for column in COLUMNS:
        table.add_column(column)
    rows: list[list[str]] = []
    outcomes: list[str] = []
    from community_data import skyrl_db_root
    from fhir_stand_in import FhirStandIn

    from verifiers.testing import ModelServer

    with ModelServer(reply_for) as server, FhirStandIn() as fhir:
        places = {"{fhir}": fhir.base_url, "{skyrl_db}": str(skyrl_db_root())}
        for name, root, options in entries:
            if args.only and name not in args.only:
                continue
            path = find_module(root, options.get("module", name))
            if path is None:
                row, outcome = [name, "-", "-", "-", "-", "-", "-", "-", f"not in {root}"], "unexplained"
            else:
                row, outcome = compare_one(name, path, options, args, server, places)
            rows.append(row)
            outcomes.append(outcome)
            table.add_row(*row)
    Console(width=240).print(table)
    ran = [o for o in outcomes if o in ("identical", "explained", "unexplained")]
    fails = [o for o in outcomes if o.startswith("classic fails")]
    print(
        f"{ran.count('identical')} identical and {ran.count('explained')} with explained "
        f"differences, of {len(ran)} the real SDK runs ({ran.count('unexplained')} unexplained); "
        f"the real SDK fails on {len(fails)} ({fails.count('classic fails, unexplained')} "
        f"unexplained); {outcomes.count('skipped')} skipped"
    )
    if args.markdown:
        cells = [list(COLUMNS), ["---"] * len(COLUMNS)] + [
            [c.replace("|", "\\|") for c in row] for row in rows
        ]
        args.markdown.write_text("".join("| " + " | ".join(r) + " |\n" for r in cells))
    return 1 if any(o.endswith("unexplained") for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
