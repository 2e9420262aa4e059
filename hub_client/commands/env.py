"""``prime env``: scaffold, push, install, find, yank, pull and delete environments."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from packaging.version import Version
from rich.table import Table

from hub_client.client import HubAPIError
from hub_client.commands.usage import (
    UsageError,
    client,
    console,
    emit_json,
    err,
    locked_hub,
    spec_of,
)
from hub_client.install import (
    EnvSpec,
    InstallError,
    install,
    install_locked,
    pull,
    read_lock,
    uninstall,
)
from hub_client.settings import (
    EnvDeleteSettings,
    EnvInitSettings,
    EnvInstallSettings,
    EnvListSettings,
    EnvPullSettings,
    EnvPushSettings,
    EnvSearchSettings,
    EnvShowSettings,
    EnvUninstallSettings,
    EnvYankSettings,
)
from hub_client.terminal import safe
from hub_client.versions import bump, read_project, set_version
from verifiers.installs.build_scratch import build_env
from verifiers.installs.uv_config import uv_command
from verifiers.processes.own_dir import require_writable_file

# --- environments --------------------------------------------------------------------------------------


def cmd_env_init(args: EnvInitSettings) -> int:
    from verifiers.cli.scaffold import ScaffoldError, scaffold

    try:
        root = scaffold(args.name, args.path, multi_file=args.multi_file, v1=args.v1)
    except ScaffoldError as exc:
        raise UsageError(str(exc)) from exc
    console.print(f"created {root}; publish with: prime env push --path {root}")
    return 0


def build(path: Path, out: Path) -> tuple[Path, Path]:
    from hub_client.install import uv_binary

    result = subprocess.run(
        uv_command(uv_binary(), "build", "--out-dir", str(out), str(path)),
        capture_output=True,
        text=True,
        env=build_env(out),  # the backend's temporary files go with ``out``
    )
    if result.returncode != 0:
        raise InstallError(f"uv build failed:\n{result.stderr.strip()[-2000:]}")
    wheels, sdists = sorted(out.glob("*.whl")), sorted(out.glob("*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        raise InstallError(
            f"uv build made {len(wheels)} wheels and {len(sdists)} sdists; expected one of each"
        )
    return wheels[0], sdists[0]


def cmd_env_push(args: EnvPushSettings) -> int:
    path = Path(args.path)
    if not (path / "pyproject.toml").exists():
        raise UsageError(f"{path} has no pyproject.toml; pass --path to an environment package")
    hub = client(login_required=True)
    owner = args.owner or hub.me().user
    try:
        project = read_project(path)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    name = project["name"].lower().replace("_", "-")
    version = project["version"]
    if args.bump:
        version = bump(version, args.bump)
        set_version(path, version)
        console.print(f"bumped {name} to {version} in {path / 'pyproject.toml'}")
    try:
        hub.version(owner, name, version)
        raise InstallError(
            f"{owner}/{name} {version} is already published (versions are immutable); push with --bump patch (or minor, rc, post)"
        )
    except HubAPIError as exc:
        if exc.code not in ("environment_not_found", "version_not_found"):
            raise
    readme = (path / "README.md").read_text() if (path / "README.md").exists() else None
    from verifiers.cli.scaffold import TEMPLATE_PLACEHOLDER

    if readme and TEMPLATE_PLACEHOLDER in readme:
        err.print(
            "[yellow]warning:[/yellow] README.md is still the vf-init template; the hub shows it "
            "as the environment's page: describe the task, its data and its rubric"
        )
    with tempfile.TemporaryDirectory() as tmp:
        wheel, sdist = build(path, Path(tmp))
        info = hub.publish(
            owner,
            name,
            wheel,
            sdist,
            visibility=args.visibility,
            readme=readme,
            description=project.get("description"),
            tags=args.tag,
        )
    console.print(
        f"published [bold]{owner}/{name} {info.version}[/bold] ({', '.join(f.filename for f in info.files)})"
    )
    console.print(f"install with: prime env install {owner}/{name}@{info.version}")
    return 0


def cmd_env_install(args: EnvInstallSettings) -> int:
    from verifiers.installs.sdk_guard import sdk_problem

    lock = Path(args.lock_file)
    require_writable_file(lock, "--lock-file")  # rewritten after the install
    if args.locked and args.specs:
        raise UsageError(
            "--locked installs exactly what the lock file says; do not name environments too"
        )
    if not args.locked and not args.specs:
        raise UsageError("name at least one environment: prime env install owner/name[@version]")
    specs = [spec_of(s) for s in args.specs]
    problem = sdk_problem(args.python or sys.executable)  # environments need this SDK there
    if problem:
        raise UsageError(problem)
    if args.locked:
        entries = install_locked(locked_hub(lock), lock, args.python)
    else:
        entries = install(client(), specs, lock, args.python)
    for entry in entries:
        console.print(
            f"installed {entry.owner}/{entry.name} {entry.version} ({entry.filename}, sha256 {entry.sha256[:12]}…)"
        )
    if not args.locked:
        console.print(f"pinned in {lock}")
    return 0


def cmd_env_uninstall(args: EnvUninstallSettings) -> int:
    spec = spec_of(args.spec)
    lock = Path(args.lock_file)
    require_writable_file(lock, "--lock-file")  # rewritten after the install
    installed = next(
        (e for e in read_lock(lock) if (e.owner, e.name) == (spec.owner, spec.name)), None
    )
    if (
        installed is not None
        and spec.version
        and Version(installed.version) != Version(spec.version)
    ):
        raise UsageError(
            f"{spec.owner}/{spec.name} {installed.version} is installed, not {spec.version}; "
            f"uninstall it by name: prime env uninstall {spec.owner}/{spec.name}"
        )
    uninstall(spec, lock, args.python)
    version = installed.version if installed else spec.version
    console.print(
        f"uninstalled {safe(spec.owner)}/{safe(spec.name)} {safe(version or '')}".rstrip()
    )
    return 0


def cmd_env_pull(args: EnvPullSettings) -> int:
    from verifiers.processes.own_dir import require_own_dir

    target = Path(args.dir)
    require_own_dir(target, "--dir")  # the package's own new directory goes under it
    root, skipped = pull(client(), spec_of(args.spec), target)
    if skipped:
        err.print(f"not extracted (dotfiles are never written): {safe(', '.join(skipped))}")
    console.print(f"extracted to {safe(root)}")
    return 0


def _table(items, title: str) -> Table:
    table = Table(title=title)
    for col in ("environment", "latest", "visibility", "tags", "description"):
        table.add_column(col)
    for e in items:
        table.add_row(
            safe(f"{e.owner}/{e.name}"),
            safe(e.latest_version or "-"),
            e.visibility,
            safe(", ".join(e.tags)),
            safe((e.description or "")[:60]),
        )
    return table


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def cmd_env_list(args: EnvListSettings) -> int:
    page = client().list_environments(
        q=args.query if isinstance(args, EnvSearchSettings) else None,
        owner=args.owner,
        tag=args.tag,
        sort=args.sort,
        page=args.page,
    )
    if args.output == "json":
        return emit_json(page)
    console.print(_table(page.items, f"{plural(page.total, 'environment')} (page {page.page})"))
    return 0


def cmd_env_info(args: EnvShowSettings) -> int:
    spec = EnvSpec.parse(args.spec)
    hub = client()
    if spec.version:  # a version was named: show that version
        version = hub.version(spec.owner, spec.name, spec.version)
        if args.output == "json":
            return emit_json(version)
        console.print(f"[bold]{safe(spec.owner)}/{safe(spec.name)} {safe(version.version)}[/bold]")
        console.print(safe(f"uploaded {version.created_at}; content hash {version.content_hash}"))
        if version.yanked:
            console.print(safe(f"yanked: {version.yanked_reason or 'no reason given'}"))
        for f in version.files:
            console.print(safe(f"  {f.filename}  sha256 {f.sha256}  ({f.size} bytes)"))
        console.print(f"install with: prime env install {safe(spec)}")
        return 0
    info = hub.environment(spec.owner, spec.name)
    if args.output == "json":
        return emit_json(info)
    console.print(
        f"[bold]{safe(info.owner)}/{safe(info.name)}[/bold] ({info.visibility}) — {safe(info.description or '')}"
    )
    console.print(
        safe(
            f"versions: {', '.join(info.versions) or '-'}; latest: {info.latest_version or '-'}; index: {info.index_url}"
        )
    )
    if info.readme:
        console.print(safe(info.readme))
    return 0


def cmd_env_versions(args: EnvShowSettings) -> int:
    spec = EnvSpec.parse(args.spec)
    table = Table(title=f"{spec.owner}/{spec.name}")
    for col in ("version", "uploaded", "yanked", "files", "content hash"):
        table.add_column(col)
    versions = client().versions(spec.owner, spec.name)
    if args.output == "json":
        return emit_json(versions)
    for v in versions:
        table.add_row(
            safe(v.version),
            safe(v.created_at),
            safe((v.yanked_reason or "yes") if v.yanked else ""),
            safe(", ".join(f.filename for f in v.files)),
            safe(v.content_hash),  # whole: the table wraps to the terminal instead
        )
    console.print(table)
    return 0


def cmd_env_yank(args: EnvYankSettings) -> int:
    spec = EnvSpec.parse(args.spec)
    if not spec.version:
        raise UsageError("name the version to yank: prime env yank owner/name@1.2.3")
    client().yank(spec.owner, spec.name, spec.version, args.reason, undo=args.undo)
    console.print(f"{'un-yanked' if args.undo else 'yanked'} {spec}")
    return 0


def cmd_env_delete(args: EnvDeleteSettings) -> int:
    spec = spec_of(args.spec)
    what = (
        f"version {spec.version} of {spec.owner}/{spec.name}"
        if spec.version
        else (f"{spec.owner}/{spec.name} and every version of it")
    )
    if not args.yes:
        raise UsageError(f"this deletes {what}; confirm with --yes")
    hub = client(login_required=True)
    if spec.version:
        hub.delete_version(spec.owner, spec.name, spec.version)
    else:
        hub.delete(spec.owner, spec.name)
    console.print(f"deleted {safe(what)}")
    return 0
