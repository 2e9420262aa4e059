"""Evals pushed by Prime's official CLI (``prime eval push``, prime-evals 0.2.4): create, sample
batches, finalize.

The client sends a run's ``metadata.json`` at create (its ``avg_*`` keys split off as
``metrics``), its ``results.jsonl`` rows as JSON batches of up to 25 MB (four at a time, in any
order), then a finalize. It never names a version: the run's ``metadata.env_version`` does.
The create checks the run as the native attach does (``attaching.check_run_matches``), so a
mismatch fails before a sample is sent; each batch's rows pass the native row checks as they
arrive; the finalize reassembles ``metadata.json`` and ``results.jsonl`` and attaches them
through ``attaching.store_eval``, the native attach's own service (one judge, one transaction).

A run without this project's run fields (``env_content_hash``, ``run_id``; upstream vf-eval
writes neither) is refused at create with a ``detail`` that says why: every eval this hub shows
is tied to the bytes of the version it ran, and none is kept "unverified".
"""

from __future__ import annotations

import io
import json
import secrets
import shutil
import tempfile
from typing import Any

from hub_server.background.upload_pool import Upload
from hub_server.db.clock import now
from hub_server.db.rows import EnvironmentRow, PlacedEvalRow, StagedEvalRow, VersionRow
from hub_server.errors import HubError
from hub_server.services import attaching, staging
from hub_server.services.auth import Principal
from hub_server.services.hub import Hub
from hub_server.settings import MAX_FILE

MAX_BATCH = 25 * 1024 * 1024 + 64 * 1024  # the client's 25 MB batches, and their envelope
MAX_EVAL_BYTES = MAX_FILE  # all of one eval's samples: what a native results.jsonl may be
MAX_OPEN_EVALS = 20  # evaluations one user may have created and not finalized
RUN_FIELDS = ("env_version", "env_content_hash", "run_id")


def collect(hub: Hub) -> None:
    """Forget expired open evals and drop their batches' bytes (abandoned, they leave nothing)."""
    hub.staging.delete(*hub.staged_evals.collect())


def _environment(hub: Hub, user: Principal | None, env_id: Any) -> EnvironmentRow:
    text = str(env_id)
    env = (
        hub.catalog.environment_by_id(int(text))
        if text.isascii() and text.isdigit() and len(text) < 19
        else None
    )
    if env is None or not hub.auth.can_read(user, env):
        raise HubError(404, "environment_not_found", f"no environment with id {text[:40]!r}")
    return env


def run_metadata(metadata: dict[str, Any], metrics: dict[str, Any] | None) -> dict[str, Any]:
    """``metadata.json`` as the run wrote it: the client split its ``avg_*`` keys off as
    ``metrics``; they go back."""
    meta = dict(metadata)
    for key, value in (metrics or {}).items():
        meta.setdefault(f"avg_{key}", value)
    return meta


def open_eval(
    hub: Hub,
    user: Principal,
    environments: list[dict[str, Any]],
    metadata: dict[str, Any],
    is_public: bool | None,
) -> tuple[str, EnvironmentRow, VersionRow]:
    """Check a run before any sample is sent and open its eval: (its id, environment, version)."""
    if len(environments) != 1 or "id" not in environments[0]:
        raise HubError(
            400,
            "environment_required",
            "this hub attaches an evaluation to one environment's version: push it with "
            "--env OWNER/NAME (a training run id alone names no version)",
        )
    env = _environment(hub, user, environments[0]["id"])
    hub.auth.require_publisher(user, env.owner, f"attach evals to {env.owner}/{env.name}")
    missing = [field for field in RUN_FIELDS if not metadata.get(field)]
    if missing:
        raise HubError(
            400,
            "unverified_run",
            f"metadata.json has no {', '.join(missing)}: this hub attaches only runs of this "
            "project's vf-eval, which records the version it ran, that version's content hash "
            "and a run id (upstream vf-eval records neither hash nor id, so nothing ties its "
            f"numbers to {env.owner}/{env.name}'s published code). Install the version with "
            "this project's prime (prime env install OWNER/NAME@VERSION), run its vf-eval, and "
            "push that run",
        )
    v = hub.version(env, str(metadata["env_version"]))
    if is_public and env.visibility != "public":
        raise HubError(
            400,
            "invalid_visibility",
            f"an eval is visible to whoever can read its environment, and {env.owner}/{env.name} "
            "is private: push without --public",
        )
    text = json.dumps(metadata).encode()
    meta = attaching.read_metadata(io.BytesIO(text))  # the native checks, before any sample
    attaching.check_run_matches(meta, env, v)
    collect(hub)
    staged_id = secrets.token_urlsafe(24)
    expires = now(staging.push_ttl(hub))
    hub.staged_evals.open(
        staged_id, user.user_id, env.id, v.id, text.decode(), expires, MAX_OPEN_EVALS
    )
    return staged_id, env, v


def own_open_eval(hub: Hub, user: Principal, staged_id: str) -> StagedEvalRow:
    """The caller's own staged eval, with the publisher check a native attach passes; anyone
    else's answers as one that does not exist."""
    user.require("publish")
    row = hub.staged_evals.get(staged_id, user.user_id)
    if row is None:
        raise HubError(404, "evaluation_not_found", f"no evaluation {staged_id[:64]!r}")
    env = _environment(hub, user, row.env_id)
    hub.auth.require_publisher(user, env.owner, f"attach evals to {env.owner}/{env.name}")
    return row


def store_batch(hub: Hub, user: Principal, staged_id: str, body: Upload) -> int:
    """One ``{"samples": [...]}`` batch: its rows checked as a results.jsonl's are, kept as
    JSON lines in the staging area, within the eval's size bound. In an upload worker; returns
    the number of samples."""
    row = own_open_eval(hub, user, staged_id)
    if row.eval_id is not None:
        raise HubError(409, "evaluation_finalized", "this evaluation is finalized: create another")
    body.file.seek(0)
    try:
        sent = json.load(body.file)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise HubError(400, "invalid_samples", f"the body is not JSON: {exc}") from None
    except RecursionError:
        raise HubError(400, "invalid_json", "the input nests too deeply to read") from None
    samples = sent.get("samples") if isinstance(sent, dict) else None
    if not isinstance(samples, list) or not all(isinstance(s, dict) for s in samples):
        raise HubError(400, "invalid_samples", "samples must be a list of objects")
    with tempfile.SpooledTemporaryFile(max_size=1024 * 1024) as lines:
        for sample in samples:
            lines.write(json.dumps(sample).encode() + b"\n")
        attaching.summarize_results(lines)  # type: ignore[arg-type]  # the rows' checks, now rather than at finalize
        lines.seek(0, io.SEEK_END)
        size = lines.tell()
        batch_id = secrets.token_urlsafe(18)
        hub.staged_evals.reserve_batch(
            staged_id, user.user_id, batch_id, size, MAX_EVAL_BYTES, now(staging.push_ttl(hub))
        )
        try:
            hub.staging.put(batch_id, lines)  # type: ignore[arg-type]
        except BaseException:
            hub.staged_evals.drop_batch(batch_id)
            raise
    if not hub.staged_evals.batch_stored(batch_id):  # finalized or collected meanwhile
        hub.staging.delete(batch_id)
        raise HubError(409, "evaluation_finalized", "this evaluation was finalized or expired")
    return len(samples)


def finalize(hub: Hub, user: Principal, staged_id: str) -> int:
    """Attach the eval through the native attach's service; again, the same answer. In an
    upload worker; returns the eval's id."""
    row = own_open_eval(hub, user, staged_id)
    if row.eval_id is not None:
        return row.eval_id
    batches = hub.staged_evals.batches(staged_id)
    if not all(b["stored"] for b in batches):
        raise HubError(409, "samples_pending", "a batch of samples is still being received")
    env = _environment(hub, user, row.env_id)
    v = next((v for v in hub.catalog.versions(env.id) if v.id == row.version_id), None)
    if v is None:
        raise HubError(
            404,
            "version_not_found",
            f"the version this run evaluated is gone from {env.owner}/{env.name}",
        )
    with tempfile.SpooledTemporaryFile(max_size=1024 * 1024) as results:
        for batch in batches:
            with hub.staging.open(batch["id"]) as part:
                shutil.copyfileobj(part, results, 1024 * 1024)
        metadata = Upload("metadata.json", io.BytesIO(row.metadata.encode()))
        attached = attaching.store_eval(
            hub,
            user,
            env,
            v,
            metadata,
            Upload("results.jsonl", results),  # type: ignore[arg-type]
        )
    hub.staging.delete(*hub.staged_evals.finish(staged_id, attached.id))
    return attached.id


def readable(hub: Hub, user: Principal | None, public_id: str) -> PlacedEvalRow:
    """An attached eval by its id or alias, for whoever may read its environment."""
    row = hub.staged_evals.placed(public_id) if len(public_id) <= 64 else None
    env = hub.catalog.environment_by_id(row.env_id) if row is not None else None
    if row is None or env is None or not hub.auth.can_read(user, env):
        raise HubError(404, "evaluation_not_found", f"no evaluation {public_id[:64]!r}")
    return row


def run_of(hub: Hub, row: PlacedEvalRow) -> dict[str, Any]:
    """The eval's ``metadata.json`` (checked at its attach; at most 1 MiB)."""
    meta = json.loads(hub.blobs.get(row.metadata_blob))
    return meta if isinstance(meta, dict) else {}


def samples_of(hub: Hub, row: PlacedEvalRow, skip: int, limit: int) -> list[dict[str, Any]]:
    """Rows ``skip`` to ``skip + limit`` of the eval's ``results.jsonl``."""
    out: list[dict[str, Any]] = []
    index = 0
    for line in io.BytesIO(hub.blobs.get(row.results_blob)):
        if not line.strip():
            continue
        if index >= skip + limit:
            break
        if index >= skip:
            out.append(json.loads(line))
        index += 1
    return out


def summary_of(row: PlacedEvalRow) -> dict[str, Any]:
    """The eval's summary (recomputed from its rows at its attach)."""
    try:
        summary = json.loads(row.summary)
    except ValueError:
        return {}
    return summary if isinstance(summary, dict) else {}
