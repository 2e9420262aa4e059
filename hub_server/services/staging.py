"""Staged pushes: Prime's official CLI declares each file, PUTs its bytes to an upload URL the
hub hands out, and finalizes. Nothing staged is visible: the last finalize hands the staged wheel
and source archive to ``publishing.publish_version``, the native push's own service (the same
checks, one transaction; the source archive is kept for ``env pull``).

Staged bytes live in a staging area of their own (a sibling directory of the blob store, or a
sibling prefix in its bucket), never in the content-addressed blob store, so collecting an
abandoned push can never remove a published blob. They are written without fsync (they are
nobody's until the last finalize, which checks them against their declared sha256 again and
stores what it publishes durably, as a native push does). A file of at most ``INLINE_MAX``
bytes (a typical environment's wheel and source archive) is kept in its row instead, written
in the transaction that marks it uploaded and gone with the row: on S3 that saves a PUT, a GET
and a DELETE per file, most of what a staged push cost the hub beyond a native one. An upload URL is a capability: a
``secrets.token_urlsafe`` token (kept only as its sha256), single-use, valid for
``PRIME_HUB_UPLOAD_URL_TTL`` seconds (15 minutes by default), bound to the declared size and
sha256; a push left unfinished is collected once it expires (twice that). What one user holds
staged is bounded, as evaluations are: ``MAX_OPEN_PUSHES`` unexpired pushes and
``MAX_STAGED_BYTES`` declared across them (a publish token could otherwise fill the disk at the
rate of its requests, 100 MiB a push, kept half an hour).
"""

from __future__ import annotations

import hashlib
import io
import re
import secrets
from contextlib import ExitStack
from datetime import timedelta
from typing import Any, BinaryIO

from hub_server.background.upload_pool import Upload
from hub_server.db.blobs import file_sha256
from hub_server.db.clock import now
from hub_server.errors import HubError
from hub_server.services import publishing
from hub_server.services.auth import Principal
from hub_server.services.hub import Hub
from hub_server.settings import MAX_FILE

SHA256 = re.compile(r"[0-9a-f]{64}")
MAX_OPEN_PUSHES = 20  # staged pushes one user may have open (unpublished and unexpired)
MAX_STAGED_BYTES = 10 * MAX_FILE  # bytes one user may have declared across them
INLINE_MAX = 256 * 1024  # a staged file this small is kept in its row, not the staging area


def url_ttl(hub: Hub) -> timedelta:
    return timedelta(seconds=hub.settings.upload_url_ttl)


def push_ttl(hub: Hub) -> timedelta:
    return 2 * url_ttl(hub)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


# --- the staged push's records ------------------------------------------------------------------------
def collect(hub: Hub) -> None:
    """Forget expired pushes and drop their staged bytes (an abandoned push leaves nothing)."""
    stamp = now()
    with hub.database.read() as db:  # the usual case, nothing expired: no write transaction
        expired = db.execute(
            "SELECT 1 FROM staged_pushes WHERE expires_at < ? LIMIT 1", (stamp,)
        ).fetchone()
    if expired is None:
        return
    with hub.database.transaction() as db:
        rows = db.execute(
            "SELECT f.id FROM staged_files f JOIN staged_pushes p ON p.id = f.push_id "
            "WHERE p.expires_at < ? AND f.data IS NULL",
            (stamp,),
        ).fetchall()
        db.execute(
            "DELETE FROM staged_files WHERE push_id IN "
            "(SELECT id FROM staged_pushes WHERE expires_at < ?)",
            (stamp,),
        )
        db.execute("DELETE FROM staged_pushes WHERE expires_at < ?", (stamp,))
    hub.staging.delete(*(row["id"] for row in rows))


def open_push(hub: Hub, user: Principal, owner: str, name: str, visibility: str | None) -> str:
    push_id = secrets.token_urlsafe(24)
    with hub.database.transaction() as db:
        _lock_user(hub, db, user.user_id)
        count = db.execute(
            "SELECT COUNT(*) AS n FROM staged_pushes WHERE user_id=? AND expires_at >= ? "
            "AND published IS NULL",
            (user.user_id, now()),
        ).fetchone()["n"]
        if count >= MAX_OPEN_PUSHES:
            raise HubError(
                429,
                "too_many_open_pushes",
                f"you have {count} pushes open (limit {MAX_OPEN_PUSHES}): finish them, or wait "
                f"for them to expire ({int(push_ttl(hub).total_seconds() // 60)} minutes after "
                "they began)",
            )
        db.execute(
            "INSERT INTO staged_pushes (id, user_id, owner, name, visibility, created_at, "
            "expires_at) VALUES (?,?,?,?,?,?,?)",
            (push_id, user.user_id, owner, name, visibility, now(), now(push_ttl(hub))),
        )
    return push_id


def _lock_user(hub: Hub, db: Any, user_id: int) -> None:
    """One user's stagings counted one at a time (SQLite's write transactions already are)."""
    if hub.database.dialect == "postgresql":
        db.execute("SELECT pg_advisory_xact_lock(hashtext(?))", (f"staged-pushes:{user_id}",))


def push_of(hub: Hub, user: Principal, push_id: str) -> Any:
    """The caller's own unexpired push, re-checked as a native push is (scope and namespace);
    anyone else's, or an expired one, answers as one that never existed."""
    user.require("publish")
    with hub.database.read() as db:
        push = db.execute(
            "SELECT * FROM staged_pushes WHERE id=? AND user_id=? AND expires_at >= ?",
            (push_id, user.user_id, now()),
        ).fetchone()
    if push is None:
        raise HubError(404, "push_not_found", f"no staged push {push_id[:64]!r}: resolve again")
    hub.auth.require_publisher(user, push["owner"], f"publish to the {push['owner']!r} namespace")
    return push


def declare(
    hub: Hub, push: Any, kind: str, filename: str, sha256: str, size: int | None
) -> tuple[str, str | None]:
    """Stage one file of a push: (its id, the upload token, None where these very bytes are
    already staged). Declaring again replaces what was staged of that kind."""
    if not publishing.SAFE_FILENAME.fullmatch(filename) or not filename.endswith(
        ".whl" if kind == "wheel" else ".tar.gz"
    ):
        raise HubError(400, "invalid_filename", f"{filename[:100]!r} is not a {kind} filename")
    if not SHA256.fullmatch(sha256):
        raise HubError(400, "invalid_sha256", "sha256 must be 64 lowercase hex digits")
    if size is not None and size <= 0:
        raise HubError(400, "invalid_size", f"{filename}: a declared size must be positive")
    if size is not None and size > MAX_FILE:
        raise HubError(413, "file_too_large", f"{filename} is over {MAX_FILE // (1024 * 1024)} MiB")
    token = secrets.token_urlsafe(32)
    staged_id = secrets.token_urlsafe(18)
    dropped: list[str] = []
    with hub.database.transaction() as db:
        _lock_user(hub, db, push["user_id"])
        held = db.execute(
            "SELECT COALESCE(SUM(COALESCE(f.size, ?)), 0) AS n FROM staged_files f "
            "JOIN staged_pushes p ON p.id = f.push_id WHERE p.user_id=? AND p.expires_at >= ? "
            "AND NOT (f.push_id=? AND f.kind=?)",
            (MAX_FILE, push["user_id"], now(), push["id"], kind),
        ).fetchone()["n"]
        if held + (size or MAX_FILE) > MAX_STAGED_BYTES:
            raise HubError(
                429,
                "too_much_staged",
                f"your open pushes already hold {held} bytes (limit {MAX_STAGED_BYTES}): finish "
                "or abandon them (they expire), then push again",
            )
        for row in db.execute(
            "SELECT * FROM staged_files WHERE push_id=? AND kind=?", (push["id"], kind)
        ).fetchall():
            same = (row["filename"], row["sha256"], row["size"]) == (filename, sha256, size)
            if same and row["state"] in ("uploaded", "finalized"):
                return row["id"], None  # a retried declare: these bytes are already here
            if row["data"] is None:  # (one kept in its row goes with it)
                dropped.append(row["id"])
            db.execute("DELETE FROM staged_files WHERE id=?", (row["id"],))
        db.execute(
            "INSERT INTO staged_files (id, push_id, kind, filename, sha256, size, upload_hash, "
            "state, expires_at) VALUES (?,?,?,?,?,?,?,?,?)",
            (
                staged_id,
                push["id"],
                kind,
                filename,
                sha256,
                size,
                token_hash(token),
                "declared",
                now(url_ttl(hub)),
            ),
        )
    hub.staging.delete(*dropped)
    return staged_id, token


def claim(hub: Hub, token: str) -> Any:
    """Use up an upload URL: the staged file it was made for, once, before it expires, with
    the ``user_id`` of the push that declared it (whose upload it is)."""
    with hub.database.transaction() as db:
        row = db.execute(
            "UPDATE staged_files SET upload_hash=NULL, state='receiving' "
            "WHERE upload_hash=? AND state='declared' AND expires_at >= ? RETURNING *",
            (token_hash(token), now()),
        ).fetchone()
        if row is None:
            raise HubError(
                404, "upload_url_invalid", "this upload URL is unknown, used or expired: push again"
            )
        pusher = db.execute(
            "SELECT user_id FROM staged_pushes WHERE id=?", (row["push_id"],)
        ).fetchone()
    return {**dict(row), "user_id": pusher["user_id"]}


def received(hub: Hub, staged: Any, file: Any) -> None:
    """The PUT's bytes, already checked against the declared size and sha256 (None: refused):
    kept in the row when small (``INLINE_MAX``), else in the staging area."""
    if file is None:
        with hub.database.transaction() as db:
            db.execute("DELETE FROM staged_files WHERE id=?", (staged["id"],))
        return
    inline = None
    if file.seek(0, io.SEEK_END) <= INLINE_MAX:
        file.seek(0)
        inline = file.read()
    else:
        hub.staging.put(staged["id"], file)
    with hub.database.transaction() as db:
        row = db.execute(
            "UPDATE staged_files SET state='uploaded', data=? WHERE id=? AND state='receiving' "
            "RETURNING id",
            (inline, staged["id"]),
        ).fetchone()
    if row is None and inline is None:  # declared again, or collected, while its bytes came
        hub.staging.delete(staged["id"])
    if row is None:
        raise HubError(409, "upload_superseded", "this upload was replaced or expired: push again")


def finalize_file(hub: Hub, push: Any, staged_id: str, kind: str) -> Any:
    with hub.database.transaction() as db:
        row = db.execute(
            "UPDATE staged_files SET state='finalized' WHERE id=? AND push_id=? AND kind=? "
            "AND state IN ('uploaded', 'finalized') RETURNING id",
            (staged_id, push["id"], kind),
        ).fetchone()
    if row is None:
        raise HubError(
            409,
            "upload_missing",
            f"the {kind} {staged_id[:64]!r} of this push has not been uploaded",
        )
    return row


def finalized_push(hub: Hub, user: Principal, push_id: str, staged_id: str) -> Any:
    """The last finalize's checks and its source archive's state change, in one thread hop: the
    caller's push (``push_of``), with its archive finalized unless the push is published."""
    push = push_of(hub, user, push_id)
    if push["published"] is None:
        finalize_file(hub, push, staged_id, "source")
    return push


def latest_version(hub: Hub, owner: str, name: str) -> str | None:
    env = hub.catalog.environment(owner, name)
    return env.latest_version if env is not None else None


def publish_push(hub: Hub, user: Principal, push: dict[str, Any]) -> str | None:
    """The last finalize: the staged wheel and source archive through the native push's service
    (its checks and its one transaction; the archive is kept for ``env pull``), then the push's
    staged bytes go. In an upload worker; returns the environment's latest version after it
    (what the finalize answers), read there rather than by another hop in the hub."""
    with hub.database.read() as db:
        staged = {
            row["kind"]: row
            for row in db.execute(
                "SELECT * FROM staged_files WHERE push_id=? AND state='finalized'", (push["id"],)
            ).fetchall()
        }
    wheel, source = staged.get("wheel"), staged.get("source")
    if wheel is None:
        raise HubError(409, "upload_missing", "this push has no finalized wheel")
    with ExitStack() as files:
        wheel_file = staged_bytes(hub, files, wheel)
        source_upload = None
        if source is not None:
            source_upload = Upload(source["filename"], staged_bytes(hub, files, source))
        form = publishing.PublishForm(push["visibility"], None, None, [])
        ids = publishing.publish_version(
            hub,
            user,
            push["owner"],
            push["name"],
            Upload(wheel["filename"], wheel_file),
            None,
            form,
            source=source_upload,
        )
    forget(hub, push["id"], published=str(ids[1]))
    return latest_version(hub, push["owner"], push["name"])


def staged_bytes(hub: Hub, files: ExitStack, staged: Any) -> Any:
    """A staged file, open, still the bytes its PUT was checked against: the staging area is
    written without fsync (its bytes are not yet anyone's), so a crash may leave a staged file
    short or empty; the publish then refuses it rather than judge other bytes (those kept in
    the row are checked the same way)."""
    file: BinaryIO = (
        files.enter_context(io.BytesIO(staged["data"]))
        if staged["data"] is not None
        else files.enter_context(hub.staging.open(staged["id"]))
    )
    if file_sha256(file) != staged["sha256"]:
        raise HubError(
            409,
            "upload_missing",
            f"the staged {staged['kind']} {staged['filename']!r} was lost: push again",
        )
    return file


def forget(hub: Hub, push_id: str, published: str | None = None) -> None:
    with hub.database.transaction() as db:
        rows = db.execute(
            "SELECT id FROM staged_files WHERE push_id=? AND data IS NULL", (push_id,)
        ).fetchall()
        db.execute("DELETE FROM staged_files WHERE push_id=?", (push_id,))
        if published is not None:
            db.execute("UPDATE staged_pushes SET published=? WHERE id=?", (published, push_id))
    hub.staging.delete(*(row["id"] for row in rows))  # one request on S3, not one a file
