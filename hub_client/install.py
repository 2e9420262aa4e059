"""Installing environments from the hub, hash-pinned, with a lock file another machine replays.

``prime env install owner/name@1.2.0`` asks the API for the exact wheel and its sha256, then runs
``uv pip install`` with that pin against the environment's own simple index (searched first, so a
same-named package elsewhere is never used for it). What was installed is recorded in
``environments.lock``; ``--locked`` installs exactly those files again and fails if the hub's
hash differs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from hub_client.client import HubAPIError, HubClient
from hub_protocol.wire import VersionInfo
from verifiers.installs import interpreter
from verifiers.installs.provenance import local_install
from verifiers.installs.sdk_guard import (
    installed_sdk_requirement,
    keep_sdk_args,
    kept_sdk_line,
    sdk_requirement,
    sdk_version,
)
from verifiers.installs.target import ask
from verifiers.installs.uv_config import uv_command
from verifiers.loading.env_id import EnvId, EnvIdError

LOCK_VERSION = 1


class InstallError(Exception):
    pass


@dataclass(frozen=True)
class EnvSpec(EnvId):
    """An ``owner/name[@version]`` to install (the grammar of ``verifiers.loading.env_id``): the hub's
    ids always have an owner."""

    owner: str

    @classmethod
    def parse(cls, text: str, *, require_owner: bool = True) -> EnvSpec:
        if not require_owner:
            raise ValueError("an EnvSpec always has an owner; use verifiers.loading.env_id.EnvId")
        try:
            parsed = EnvId.parse(text, require_owner=True)
        except EnvIdError as exc:
            raise InstallError(str(exc)) from None
        assert parsed.owner is not None  # require_owner=True
        return cls(parsed.owner, parsed.name, parsed.version)


@dataclass
class LockEntry:
    owner: str
    name: str
    version: str
    distribution: str
    filename: str
    sha256: str
    # the environment's own ``verifiers`` requirement, satisfied by this SDK (never installed)
    verifiers_requirement: str | None = None
    sdk_version: str | None = None


def read_lock(path: Path) -> list[LockEntry]:
    if not path.exists():
        return []
    data = json.loads(path.read_text())
    if data.get("lock_version") != LOCK_VERSION:
        raise InstallError(
            f"{path} has lock_version {data.get('lock_version')}, expected {LOCK_VERSION}"
        )
    return [LockEntry(**entry) for entry in data["environments"]]


def write_lock(path: Path, entries: list[LockEntry], hub_url: str | None = None) -> None:
    previous = json.loads(path.read_text()).get("hub") if path.exists() else None
    body = {
        "lock_version": LOCK_VERSION,
        "hub": hub_url or previous,  # which hub the pins came from
        "environments": [asdict(e) for e in sorted(entries, key=lambda e: (e.owner, e.name))],
    }
    from verifiers.processes.own_dir import write_own_file

    write_own_file(path, json.dumps(body, indent=2) + "\n")  # never through a planted link


def index_url(hub_url: str, owner: str, name: str, token: str | None) -> str:
    parts = urlsplit(f"{hub_url.rstrip('/')}/simple/{owner}/{name}/")
    if (
        token
    ):  # installers send index credentials as basic auth; the hub reads the password as the token
        parts = parts._replace(netloc=f"__token__:{token}@{parts.netloc}")
    return urlunsplit(parts)


def redact(text: str, token: str | None) -> str:
    return text.replace(token, "****") if token else text


def uv_binary() -> str:
    from verifiers.installs.uv_config import uv_binary as find

    found = find()
    if not found:
        raise InstallError("uv is needed to install environments: pip install uv")
    return found


def pip_install(
    hub: HubClient, wheel_pins: list[tuple[str, VersionInfo, str, str]], python: str
) -> None:
    """Install each ``dist==version --hash=sha256:...`` from its environment's index, confined
    (``verifiers.installs.confined``): every wheel the resolver picks, the environment's and its
    dependencies', is checked before anything is installed."""
    from verifiers.installs.confined import ConfinementError, InstallFailed, Requested
    from verifiers.installs.confined import install as confined_install

    with tempfile.TemporaryDirectory() as tmp:
        requirements = Path(tmp) / "requirements.txt"
        requirements.write_text(
            "".join(
                f"{dist}=={info.version} --hash=sha256:{sha}\n" for dist, info, sha, _ in wheel_pins
            )
        )
        # The indexes carry the token, so they go in the environment (readable only by this
        # user), never on the command line (readable by every local user through ps).
        indexes = " ".join(
            index_url(hub.url, info.owner, info.name, hub.token) for _, info, _, _ in wheel_pins
        )
        requested = [
            Requested(
                dist, {canonicalize_name(info.name), f"{info.owner}/{canonicalize_name(info.name)}"}
            )
            for dist, info, _, _ in wheel_pins
        ]
        try:
            confined_install(
                uv_binary(),
                python,
                ["-r", str(requirements)],
                requested,
                resolve_args=[
                    "--reinstall-package",
                    *[d for d, *_ in wheel_pins],
                    *keep_sdk_args(tmp),
                ],
                env={**os.environ, "UV_EXTRA_INDEX_URL": indexes},
            )
        except InstallFailed as exc:
            raise InstallError(f"uv pip install failed:\n{redact(str(exc), hub.token)}") from None
        except ConfinementError as exc:
            raise InstallError(redact(str(exc), hub.token)) from None


def prefix_of(python: str) -> str:
    return interpreter.prefix_of(python) or sys.prefix


def record_provenance(entries: list[LockEntry], python: str, hub_url: str) -> None:
    """Remember which owner each installed distribution came from (``verifiers.installs.provenance``)."""
    from verifiers.installs.provenance import write_record

    prefix = prefix_of(python)
    for e in entries:
        record = {"owner": e.owner, "name": e.name, "version": e.version, "hub": hub_url}
        write_record(e.distribution, record, prefix)


def sdk_requirement_of(python: str, distribution: str) -> str | None:
    """The installed environment's own ``verifiers`` requirement, read in its Python."""
    if python == sys.executable:
        return installed_sdk_requirement(distribution)
    script = (
        "import json; from importlib import metadata; "
        "print(json.dumps(metadata.requires(sys.argv[1]) or []))"
    )
    result = ask(python, script, distribution)
    try:
        return sdk_requirement(json.loads(result.stdout))
    except json.JSONDecodeError:
        return None


def note_sdk_requirements(entries: list[LockEntry], python: str) -> list[str]:
    """Fill each entry's ``verifiers`` requirement; the one-line notes to print."""
    lines = []
    for entry in entries:
        entry.verifiers_requirement = sdk_requirement_of(python, entry.distribution)
        entry.sdk_version = sdk_version() if entry.verifiers_requirement else None
        line = kept_sdk_line(f"{entry.owner}/{entry.name}", entry.verifiers_requirement)
        if line:
            lines.append(line)
    return lines


def choose_wheel(info: VersionInfo) -> tuple[str, str]:
    wheels = [f for f in info.files if f.kind == "wheel"]
    if not wheels:
        raise InstallError(f"{info.owner}/{info.name} {info.version} has no wheel to install")
    return wheels[0].filename, wheels[0].sha256


def distribution_of(filename: str) -> str:
    """The wheel's distribution, PEP 503-normalized (``foo.bar`` and ``foo_bar`` are ``foo-bar``)."""
    try:
        return canonicalize_name(parse_wheel_filename(filename)[0])
    except InvalidWheelFilename as exc:
        raise InstallError(f"{filename!r} is not a wheel filename: {exc}") from None


def install(
    hub: HubClient, specs: list[EnvSpec], lock_path: Path, python: str | None = None
) -> list[LockEntry]:
    python = python or sys.executable
    entries = read_lock(lock_path)
    from verifiers.installs.provenance import read_records

    installed_from = read_records(prefix_of(python))  # what this Python has, whatever the lock says
    pins, new_entries = [], []
    for spec in specs:
        info = hub.version(spec.owner, spec.name, spec.version or "latest")
        if info.yanked and spec.version is None:
            raise InstallError(f"the latest version of {spec} is yanked")
        if info.yanked:  # an exact pin still installs (PEP 592), but not silently
            print(
                f"warning: {spec} is yanked ({info.yanked_reason or 'no reason given'}); "
                "installing it because it was pinned exactly",
                file=sys.stderr,
            )
        filename, sha = choose_wheel(info)
        dist = distribution_of(filename)
        clash: list[tuple[str | None, str | None]] = [
            (e.owner, e.name)
            for e in entries
            if canonicalize_name(e.distribution) == dist
            and (e.owner, e.name) != (spec.owner, spec.name)
        ]
        record = installed_from.get(dist)
        if record and (record.get("owner"), record.get("name")) != (spec.owner, spec.name):
            clash.append((record.get("owner"), record.get("name")))
        local = local_install(dist, python) if record is None else None
        if local is not None:
            raise InstallError(
                f"{dist} is installed here locally ({local}; vf-install or pip), not from the "
                f"hub: installing {spec.owner}/{spec.name} would replace it. Remove it first "
                f"(uv pip uninstall --python {python} {dist}), or install into another virtualenv"
            )
        if clash:
            owner, name = clash[0]
            raise InstallError(
                f"{spec.owner}/{spec.name} and {owner}/{name} both install the distribution {dist!r}; "
                f"uninstall {owner}/{name} first (prime env uninstall) or use a separate virtualenv"
            )
        pins.append((dist, info, sha, filename))
        new_entries.append(LockEntry(spec.owner, spec.name, info.version, dist, filename, sha))
    pip_install(hub, pins, python)
    record_provenance(new_entries, python, hub.url)
    for line in note_sdk_requirements(new_entries, python):
        print(line, file=sys.stderr)
    keep = [e for e in entries if (e.owner, e.name) not in {(n.owner, n.name) for n in new_entries}]
    write_lock(lock_path, keep + new_entries, hub.url)
    return new_entries


def install_locked(hub: HubClient, lock_path: Path, python: str | None = None) -> list[LockEntry]:
    entries = read_lock(lock_path)
    if not entries:
        raise InstallError(f"{lock_path} is missing or empty: nothing to install")
    pins = []
    for entry in entries:
        info = hub.version(entry.owner, entry.name, entry.version)
        published = {f.filename: f.sha256 for f in info.files}
        if published.get(entry.filename) != entry.sha256:
            raise InstallError(
                f"{entry.owner}/{entry.name} {entry.version}: {entry.filename} on the hub has sha256 "
                f"{published.get(entry.filename)} but the lock says {entry.sha256}; refusing to install"
            )
        pins.append((entry.distribution, info, entry.sha256, entry.filename))
    pip_install(hub, pins, python or sys.executable)
    record_provenance(entries, python or sys.executable, hub.url)
    for line in note_sdk_requirements(entries, python or sys.executable):
        print(line, file=sys.stderr)
    write_lock(lock_path, entries, hub.url)
    return entries


def uninstall(spec: EnvSpec, lock_path: Path, python: str | None = None) -> None:
    entries = read_lock(lock_path)
    match = [e for e in entries if (e.owner, e.name) == (spec.owner, spec.name)]
    if not match:
        raise InstallError(f"{spec.owner}/{spec.name} is not in {lock_path}")
    result = subprocess.run(
        uv_command(
            uv_binary(),
            "pip",
            "uninstall",
            "--python",
            python or sys.executable,
            match[0].distribution,
        ),
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise InstallError(f"uv pip uninstall failed: {result.stderr.strip()[-500:]}")
    from verifiers.installs.provenance import write_record

    write_record(match[0].distribution, None, prefix_of(python or sys.executable))
    write_lock(lock_path, [e for e in entries if e not in match])


def pull(hub: HubClient, spec: EnvSpec, target: Path) -> tuple[Path, list[str]]:
    """Download the sdist (or, for a version pushed by Prime's official CLI, its source
    archive), verify its sha256, extract it safely into ``target/<name>-<version>``."""
    import hashlib

    from hub_protocol.archives import UnsafeArchiveError, extract_sdist, extract_source

    info = hub.version(spec.owner, spec.name, spec.version or "latest")
    sources = [f for f in info.files if f.kind == "sdist"] or [
        f for f in info.files if f.kind == "source"
    ]
    if not sources:
        raise InstallError(f"{spec} has no source distribution to pull")
    source = sources[0]
    data = hub.download(source.url)
    if hashlib.sha256(data).hexdigest() != source.sha256:
        raise InstallError(f"{source.filename}: downloaded bytes do not match the published sha256")
    target.mkdir(parents=True, exist_ok=True)
    try:
        if source.kind == "sdist":
            return extract_sdist(data, target)
        return extract_source(data, target, info.name, info.version)
    except UnsafeArchiveError as exc:
        raise InstallError(f"refusing to extract {source.filename}: {exc}") from None


__all__ = [
    "EnvSpec",
    "HubAPIError",
    "InstallError",
    "LockEntry",
    "install",
    "install_locked",
    "pull",
    "read_lock",
    "uninstall",
]
