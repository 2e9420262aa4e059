"""``prime eval push`` and ``prime data``: results and datasets attached to a version."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.table import Table

from hub_client.commands.usage import UsageError, client, console, emit_json
from hub_client.install import (
    EnvSpec,
)
from hub_client.settings import DataListSettings, DataPushSettings, EvalPushSettings
from hub_client.terminal import safe


def attach_spec(
    given: str | None, named: set[tuple[Any, Any]], source: str, what: str
) -> tuple[EnvSpec, str]:
    """Where to attach: ``--env``, else the one owner/name@version the source names (the spec and
    its exact version)."""
    if given:
        spec = EnvSpec.parse(given)
    else:
        ((env_id, version),) = named if len(named) == 1 else {("", None)}
        if "/" not in (env_id or "") or not version:
            raise UsageError(
                f"{source} does not name one owner/name@version; pass --env owner/name@version"
            )
        spec = EnvSpec.parse(f"{env_id}@{version}")
    if not spec.version:
        raise UsageError(f"{what} attach to an exact version: --env owner/name@1.2.3")
    return spec, spec.version


def cmd_eval_push(args: EvalPushSettings) -> int:
    run = Path(args.run_dir)
    meta_file, results_file = run / "metadata.json", run / "results.jsonl"
    if not meta_file.exists() or not results_file.exists():
        raise UsageError(f"{run} is not a vf-eval run directory (metadata.json and results.jsonl)")
    meta = json.loads(meta_file.read_text())
    named = {(meta.get("env_id"), meta.get("env_version"))}
    spec, version = attach_spec(args.env, named, "the run", "eval results")
    info = client(login_required=True).push_eval(
        spec.owner, spec.name, version, meta_file.read_bytes(), results_file.read_bytes()
    )
    console.print(
        f"uploaded eval #{info.id} ({info.num_rollouts} rollouts, model {safe(info.model)}) "
        f"to {safe(spec)}"
    )
    return 0


def cmd_data_push(args: DataPushSettings) -> int:
    folder = Path(args.dataset_dir)
    card_file, data_file = folder / "vf_data.json", folder / "data.parquet"
    if not card_file.exists() or not data_file.exists():
        raise UsageError(f"{folder} is not a vf-data dataset (vf_data.json and data.parquet)")
    card = json.loads(card_file.read_text())
    named = {(s.get("env_id"), s.get("env_version")) for s in card.get("sources", [])}
    spec, version = attach_spec(args.env, named, "the dataset", "datasets")
    info = client(login_required=True).push_dataset(
        spec.owner, spec.name, version, card_file.read_bytes(), data_file.read_bytes()
    )
    console.print(
        f"uploaded dataset #{info.id} ({info.rows} rows) to {safe(spec)}: {safe(info.url)}"
    )
    return 0


def cmd_data_list(args: DataListSettings) -> int:
    spec = EnvSpec.parse(args.spec)
    items = client().datasets(spec.owner, spec.name, spec.version or "latest")
    if args.output == "json":
        return emit_json(items)
    table = Table(title=f"datasets of {spec}")
    for column in ("id", "rows", "filter", "models", "uploaded"):
        table.add_column(column)
    for d in items:
        table.add_row(
            str(d.id), str(d.rows), safe(d.filter), safe(", ".join(d.models)), d.created_at
        )
    console.print(table)
    return 0
