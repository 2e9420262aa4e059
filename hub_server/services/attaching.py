"""Checking what attaches to a version: eval runs (``vf-eval``) and datasets (``vf-data``).

Nothing an uploader says about its numbers is taken on trust: ``results.jsonl`` is read line by
line from its spooled file (memory stays flat whatever its size), every row must carry a finite
numeric reward, and the summary shown on the hub is recomputed from the rows, never copied from
``metadata.json``. A dataset's Parquet file is checked by a decode in a child process under a
memory limit (forked from the hub's fork server, ``forks``), so a small file that decodes to
gigabytes is refused before it is kept, and never costs the hub its memory.
"""

from __future__ import annotations

import json
import math
import resource
import shutil
import tempfile
from typing import Any, BinaryIO

from hub_server.background import forks
from hub_server.background.upload_pool import Upload
from hub_server.db.attachments import NewEval
from hub_server.db.blobs import file_sha256
from hub_server.db.rows import EnvironmentRow, EvalRow, VersionRow
from hub_server.errors import HubError
from hub_server.services.auth import Principal
from hub_server.services.hub import Hub
from hub_server.services.names import check_text
from verifiers.results.records import SummaryAccumulator
from verifiers.results.report import histogram

MAX_METADATA = 1024 * 1024
MAX_EVALS_PER_VERSION = 200
MAX_ROWS = 1_000_000
MAX_DATASET_DECODED = 512 * 1024 * 1024
MAX_LINE = 16 * 1024 * 1024
BATCH_BYTES = 16 * 1024 * 1024  # decoded bytes per step of a dataset's check


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise HubError(400, "invalid_eval", f"{where} is {value!r}, not a finite number")
    return float(value)


def read_metadata(file: BinaryIO) -> dict[str, Any]:
    file.seek(0)
    raw = file.read(MAX_METADATA + 1)
    if len(raw) > MAX_METADATA:
        raise HubError(413, "file_too_large", "metadata.json is limited to 1 MiB")
    try:
        meta = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise HubError(400, "invalid_eval", f"metadata.json is not valid JSON: {exc}") from None
    if not isinstance(meta, dict) or "summary" not in meta:
        raise HubError(
            400, "invalid_eval", "metadata.json is not a vf-eval metadata file (no summary)"
        )
    model = meta.get("model")
    if model is not None and (not isinstance(model, str) or len(model) > 200):
        raise HubError(400, "invalid_eval", "metadata.json's model must be a name (a string)")
    check_text(model, "metadata.json's model")
    return meta


def summarize_results(file: BinaryIO) -> tuple[dict[str, Any], int, dict[str, Any]]:
    """(summary, rows, reward histogram) recomputed from ``results.jsonl``, line by line."""
    file.seek(0)
    totals = SummaryAccumulator()
    rewards = []
    for number, line in enumerate(iter(lambda: file.readline(MAX_LINE + 1), b""), start=1):
        if len(line) > MAX_LINE:
            raise HubError(413, "invalid_eval", f"results.jsonl line {number} is over 16 MiB")
        if not line.strip():
            continue
        if number > MAX_ROWS:
            raise HubError(413, "invalid_eval", f"results.jsonl is limited to {MAX_ROWS} rows")
        try:
            row = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
            raise HubError(400, "invalid_eval", f"results.jsonl line {number}: {exc}") from None
        if not isinstance(row, dict):
            raise HubError(400, "invalid_eval", f"results.jsonl line {number} is not an object")
        where = f"results.jsonl line {number}"
        reward = _number(row.get("reward"), f"{where}: reward")
        metrics = row.get("metrics") or {}
        if not isinstance(metrics, dict):
            raise HubError(400, "invalid_eval", f"{where}: metrics is not an object")
        clean = {
            "reward": reward,
            "example_id": int(_number(row.get("example_id", 0), f"{where}: example_id")),
            "metrics": {str(k): _number(v, f"{where}: metric {k!r}") for k, v in metrics.items()},
            "error": row.get("error") if isinstance(row.get("error"), dict) else None,
        }
        totals.add(clean)
        rewards.append(reward)
    summary = totals.summary().model_dump()
    return summary, len(rewards), histogram(rewards)


def store_eval(
    hub: Hub, user: Principal, env: EnvironmentRow, v: VersionRow, metadata: Upload, results: Upload
) -> EvalRow:
    """Attach a run to a version, after the checks every eval passes, whichever client sent it
    (``prime eval push`` of this project, or Prime's official CLI at its finalize): the run
    must be this version's (``check_run_matches``), and its numbers are recomputed from its rows.
    In an upload worker."""
    meta = read_metadata(metadata.file)
    run_id = check_run_matches(meta, env, v)
    summary, rows, reward_histogram = summarize_results(results.file)
    with hub.leased_blobs() as blobs:  # each leased before it is written: see blob_leases
        new = NewEval(
            version_id=v.id,
            uploaded_by=user.name,
            model=meta.get("model"),
            summary=summary,
            num_rollouts=rows,
            metadata_blob=blobs.put_file(metadata.file, file_sha256(metadata.file)),
            results_blob=blobs.put_file(results.file, file_sha256(results.file)),
            run_id=run_id,
            histogram=reward_histogram,
        )
        return hub.attachments.add_eval(new, MAX_EVALS_PER_VERSION, blobs.give_back)


PROBE_TIMEOUT_S = 120


def check_parquet(file: BinaryIO, declared_rows: int) -> str:
    """The file's sha256 once a decode of it, in a child process with a memory limit, agrees
    it is what its card says and stays under the decoded-size budget. A decode bomb (a small
    file that expands to gigabytes, by compression, dictionaries or repetition) fails there,
    never in the hub process."""
    file.seek(0)
    if file.read(4) != b"PAR1":
        raise HubError(400, "invalid_dataset", "data.parquet is not a Parquet file")
    with tempfile.NamedTemporaryFile(suffix=".parquet") as copy:
        file.seek(0)
        shutil.copyfileobj(file, copy)
        copy.flush()
        outcome = _decode_in_a_child(copy.name, MAX_DATASET_DECODED)
    if outcome[0] == "memory":
        raise HubError(413, "dataset_too_large", _too_large(MAX_DATASET_DECODED))
    if outcome[0] == "error":
        raise HubError(400, "invalid_dataset", f"data.parquet does not decode: {outcome[1]}")
    _, rows, decoded = outcome
    if decoded > MAX_DATASET_DECODED:
        raise HubError(413, "dataset_too_large", _too_large(decoded))
    if rows != declared_rows:
        raise HubError(
            400, "invalid_dataset", f"the card says {declared_rows} rows; data.parquet has {rows}"
        )
    return file_sha256(file)


def _decode_in_a_child(path: str, limit: int) -> tuple[Any, ...]:
    """``("ok", rows, decoded bytes)``, ``("memory",)`` or ``("error", detail)``: what a child
    forked from the hub's fork server found, under an address-space limit."""
    forking = forks.context()
    reader, writer = forking.Pipe(duplex=False)
    child = forking.Process(target=_decode, args=(path, limit, writer), name="parquet-decode")
    child.start()
    writer.close()
    try:
        if not reader.poll(PROBE_TIMEOUT_S):
            return ("error", f"no answer within {PROBE_TIMEOUT_S} s")
        return reader.recv()
    except EOFError:  # the child died without a word
        child.join(5)
        if child.exitcode is not None and child.exitcode < 0:  # aborted (bad_alloc) or killed
            return ("memory",)
        return ("error", f"the decoder exited with code {child.exitcode}")
    finally:
        reader.close()
        if child.is_alive():
            child.kill()
        child.join()


def _decode(path: str, limit: int, reply: Any) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (limit * 2 + 512 * 2**20,) * 2)
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq

        parquet = pq.ParquetFile(path)
        plain = pa.schema([f.with_type(_plain(f.type)) for f in parquet.schema_arrow])
        nested = [f for f in plain if _holds_a_dictionary(f.type)]
        if nested:  # e.g. in a list view, whose rows may all share one value: no cast undoes it
            detail = f"column {nested[0].name!r} nests a dictionary encoding in {nested[0].type}"
            reply.send(("error", detail[:300]))
            return
        reply.send(("ok", parquet.metadata.num_rows, _decoded_size(parquet, plain, limit)))
    except MemoryError:  # pyarrow's ArrowMemoryError is one
        reply.send(("memory",))
    except Exception as exc:  # any decoder error is the file's: said in the 400
        reply.send(("error", f"{type(exc).__name__}: {exc}"[:300]))


def _decoded_size(parquet: Any, plain: Any, limit: int) -> int:
    """The bytes the rows take as their readers get them, counted until past ``limit``, in
    batches of about ``BATCH_BYTES`` (rows per batch from the size of the first rows): a decode
    reuses the same memory, whatever one row holds. Rows far larger than the first ones make a
    larger batch, bounded by the address-space limit."""
    first = next(parquet.iter_batches(batch_size=16), None)
    if first is None:
        return 0
    per_row = max(1, _read_size(first, plain) // max(1, first.num_rows))
    decoded = 0
    for batch in parquet.iter_batches(batch_size=max(1, min(65_536, BATCH_BYTES // per_row))):
        decoded += _read_size(batch, plain)
        if decoded > limit:
            break
    return decoded


def _read_size(batch: Any, plain: Any) -> int:
    """A batch's size once read: a dictionary column is as large as its values repeated, since
    whoever reads the rows (datasets, pandas, a training loop) gets them expanded."""
    import pyarrow as pa

    table = pa.Table.from_batches([batch])
    return int((table if table.schema == plain else table.cast(plain)).nbytes)


def _plain(kind: Any) -> Any:
    """An Arrow type with dictionary encodings replaced by their values, at the top and inside
    lists, maps and structs (``_holds_a_dictionary`` finds any other)."""
    import pyarrow as pa

    if pa.types.is_dictionary(kind):
        return _plain(kind.value_type)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        make = pa.list_ if pa.types.is_list(kind) else pa.large_list
        return make(kind.value_field.with_type(_plain(kind.value_type)))
    if pa.types.is_fixed_size_list(kind):
        return pa.list_(kind.value_field.with_type(_plain(kind.value_type)), kind.list_size)
    if pa.types.is_map(kind):
        return pa.map_(_plain(kind.key_type), _plain(kind.item_type))
    if pa.types.is_struct(kind):
        return pa.struct([field.with_type(_plain(field.type)) for field in kind])
    return kind


def _holds_a_dictionary(kind: Any) -> bool:
    """Whether a dictionary encoding is left anywhere in ``kind`` (in a nesting ``_plain`` does
    not rebuild): such a file is refused, not measured smaller than it reads."""
    import pyarrow as pa

    return pa.types.is_dictionary(kind) or any(
        _holds_a_dictionary(kind.field(i).type) for i in range(kind.num_fields)
    )


def _too_large(size: int) -> str:
    return (
        f"data.parquet decodes to over {size // (1024 * 1024)} MiB (limit "
        f"{MAX_DATASET_DECODED // (1024 * 1024)} MiB): split the dataset"
    )


def check_run_matches(meta: dict[str, Any], env: EnvironmentRow, version: VersionRow) -> str:
    """A run attaches only to the version whose code it ran: its environment id, version and
    content hash (``verifiers.installs.content_hash``) must be that version's. Returns its run id."""
    where = f"{env.owner}/{env.name} {version.version}"
    env_id = str(meta.get("env_id") or "")
    if env_id not in (f"{env.owner}/{env.name}", env.name, env.distribution):
        raise HubError(
            409,
            "eval_mismatch",
            f"the run evaluated {env_id or 'an unnamed environment'}, not {where}",
        )
    if meta.get("env_version") != version.version:
        raise HubError(
            409,
            "eval_mismatch",
            f"the run used version {meta.get('env_version')}, not {where}: attach it to that "
            "version (--env owner/name@version)",
        )
    if meta.get("env_content_hash") != version.content_hash:
        raise HubError(
            409,
            "eval_mismatch",
            f"the run's code (content hash {meta.get('env_content_hash')}) is not {where}'s "
            f"({version.content_hash}): evaluate the published version (prime env install "
            f"{env.owner}/{env.name}@{version.version}) and push that run",
        )
    run_id = meta.get("run_id")
    if not isinstance(run_id, str) or not run_id or len(run_id) > 200:
        raise HubError(
            400, "invalid_eval", "metadata.json has no run_id (made by an older vf-eval)"
        )
    check_text(run_id, "metadata.json's run_id")
    return run_id
