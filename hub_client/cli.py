"""prime: publish, find and install environments on an Environments Hub; run a hub.

    prime hub serve [--data-dir ~/.prime-hub]      prime hub create-user NAME [--admin]
    prime login [--url URL]  (token from a prompt or stdin)   prime env init NAME
    prime env push [--path DIR] [--bump patch]     prime env install owner/name[@version] [--locked]
    prime env list | search | info | versions | yank | pull | uninstall | delete
    prime eval push RUN_DIR

Configuration: ~/.config/prime/config.toml (0600); PRIME_HUB_URL and PRIME_API_KEY override it.
Exit codes: 0 ok, 1 the hub or the installer refused (the message says why), 2 bad usage.
"""

from __future__ import annotations

import argparse
import getpass
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from packaging.version import Version
from rich.console import Console
from rich.table import Table

from hub_client.client import HubAPIError, HubClient
from hub_client.config import load_config, save_config
from hub_client.install import (
    EnvSpec,
    InstallError,
    install,
    install_locked,
    pull,
    read_lock,
    uninstall,
)
from hub_client.terminal import safe
from hub_client.versions import BUMPS, bump, read_project, set_version

console = Console()
err = Console(stderr=True)


class UsageError(Exception):
    pass


def client(login_required: bool = False) -> HubClient:
    config = load_config()
    if login_required and not config.token:
        raise UsageError(
            "you are not logged in: run `prime login --url http://HUB:8787` (or set PRIME_API_KEY)"
        )
    return HubClient(config.url, config.token)


def spec_of(text: str, what: str = "environment") -> EnvSpec:
    """``owner/name[@version]`` as typed, or a usage error (exit 2) saying the form."""
    try:
        return EnvSpec.parse(text)
    except InstallError as exc:
        raise UsageError(f"{exc} (the {what} to act on)") from None


def locked_hub(lock: Path) -> HubClient:
    """The hub the lock file's pins came from, with the login's token only if it is that hub."""
    config = load_config()
    try:
        recorded = json.loads(lock.read_text()).get("hub") if lock.exists() else None
    except (json.JSONDecodeError, AttributeError):
        recorded = None
    if not recorded or recorded.rstrip("/") == config.url.rstrip("/"):
        return HubClient(config.url, config.token)
    return HubClient(recorded, None)  # never send this hub's token to another one


# --- hub -----------------------------------------------------------------------------------------------


def hub_settings(args: argparse.Namespace, public_url: str | None = None):
    from hub_server import HubSettings

    return HubSettings(
        data_dir=Path(args.data_dir).expanduser(),
        db=args.db,
        blobs=args.blobs,
        s3_endpoint=args.s3_endpoint,
        public_url=public_url,
        trusted_proxies=getattr(args, "trusted_proxy", None) or [],
        sdk_wheel=getattr(args, "sdk_wheel", None),
        build_sdk=not getattr(args, "no_sdk", False),
    )


def port_problem(host: str, port: int) -> str | None:
    """Why the hub cannot listen there, found before anything is opened or built."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            return f"cannot listen on {host}:{port} ({exc.strerror}); pick another --port"
    return None


def cmd_hub_serve(args: argparse.Namespace) -> int:
    from hub_server import create_app
    from hub_server.server import serve

    problem = port_problem(args.host, args.port)
    if problem:
        raise UsageError(problem)
    wildcard = args.host in ("0.0.0.0", "::", "")
    public_url = args.public_url or (None if wildcard else f"http://{args.host}:{args.port}")
    settings = hub_settings(args, public_url)
    app = create_app(settings)
    where = settings.db or str(settings.data_dir)
    err.print(
        f"hub on http://{args.host}:{args.port} (metadata: {where}; files: {settings.blobs or settings.data_dir / 'files'})"
    )
    if public_url:
        err.print(
            f"this SDK for other machines: {public_url}/sdk/ (the pip command to install exactly it)"
        )
    else:
        err.print(
            "links are path-absolute; pass --public-url https://HUB for the /sdk/ install line"
        )
    serve(app, args.host, args.port, settings.read_timeout, settings.trusted_proxies)
    return 0


def cmd_hub_create_user(args: argparse.Namespace) -> int:
    from hub_server import Hub

    hub = Hub(hub_settings(args))
    try:
        print(hub.create_user(args.name, args.admin))
    finally:
        hub.close()
    return 0


# --- account -------------------------------------------------------------------------------------------


def cmd_login(args: argparse.Namespace) -> int:
    config = load_config()
    url = args.url or config.url
    if args.token:
        err.print(
            "[yellow]warning:[/yellow] --token puts the token on the command line, where every "
            "local user can read it (ps); pipe it in or type it at the prompt instead"
        )
    token = args.token or (
        sys.stdin.readline().strip()
        if not sys.stdin.isatty()
        else getpass.getpass("API token: ").strip()
    )
    me = HubClient(url, token).me()
    path = save_config(url, token)
    console.print(
        f"logged in to {url} as [bold]{me.user}[/bold] (scopes: {', '.join(me.scopes)}); saved to {path}"
    )
    return 0


def cmd_token_create(args: argparse.Namespace) -> int:
    created = client().create_token(args.name, args.scope or ["read"], args.expires_in_days)
    err.print(
        f"token {created.id} ({', '.join(created.scopes)}; expires {created.expires_at or 'never'}); "
        "it is shown once:"
    )
    print(created.token)
    return 0


def cmd_token_list(_: argparse.Namespace) -> int:
    table = Table(title="tokens")
    for col in ("id", "name", "scopes", "created", "expires", "revoked"):
        table.add_column(col)
    for t in client().list_tokens():
        table.add_row(
            str(t.id),
            safe(t.name),
            ", ".join(t.scopes),
            safe(t.created_at),
            safe(t.expires_at or "never"),
            "yes" if t.revoked else "",
        )
    console.print(table)
    return 0


def cmd_token_revoke(args: argparse.Namespace) -> int:
    client().revoke_token(args.id)
    console.print(f"revoked token {args.id}")
    return 0


def cmd_whoami(_: argparse.Namespace) -> int:
    me = client().me()
    console.print(f"{me.user} (owners: {', '.join(me.owners)}; scopes: {', '.join(me.scopes)})")
    return 0


# --- environments --------------------------------------------------------------------------------------


def cmd_env_init(args: argparse.Namespace) -> int:
    from verifiers.scaffold import ScaffoldError, scaffold

    try:
        root = scaffold(args.name, args.path, multi_file=args.multi_file)
    except ScaffoldError as exc:
        raise UsageError(str(exc)) from exc
    console.print(f"created {root}; publish with: prime env push --path {root}")
    return 0


def build(path: Path, out: Path) -> tuple[Path, Path]:
    from hub_client.install import uv_binary

    result = subprocess.run(
        [uv_binary(), "build", "--out-dir", str(out), str(path)], capture_output=True, text=True
    )
    if result.returncode != 0:
        raise InstallError(f"uv build failed:\n{result.stderr.strip()[-2000:]}")
    wheels, sdists = sorted(out.glob("*.whl")), sorted(out.glob("*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        raise InstallError(
            f"uv build made {len(wheels)} wheels and {len(sdists)} sdists; expected one of each"
        )
    return wheels[0], sdists[0]


def cmd_env_push(args: argparse.Namespace) -> int:
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
    from verifiers.scaffold import TEMPLATE_PLACEHOLDER

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


def cmd_env_install(args: argparse.Namespace) -> int:
    from verifiers.sdk_guard import sdk_problem

    lock = Path(args.lock_file)
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


def cmd_env_uninstall(args: argparse.Namespace) -> int:
    spec = spec_of(args.spec)
    lock = Path(args.lock_file)
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


def cmd_env_pull(args: argparse.Namespace) -> int:
    root, skipped = pull(client(), spec_of(args.spec), Path(args.dir))
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


def emit_json(model: Any) -> int:
    """``--output json``: the wire models, as the API returns them."""
    data = [m.model_dump() for m in model] if isinstance(model, list) else model.model_dump()
    print(json.dumps(data, indent=2))
    return 0


def cmd_env_list(args: argparse.Namespace) -> int:
    page = client().list_environments(
        q=getattr(args, "query", None),
        owner=args.owner,
        tag=args.tag,
        sort=args.sort,
        page=args.page,
    )
    if args.output == "json":
        return emit_json(page)
    console.print(_table(page.items, f"{plural(page.total, 'environment')} (page {page.page})"))
    return 0


def cmd_env_info(args: argparse.Namespace) -> int:
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


def cmd_env_versions(args: argparse.Namespace) -> int:
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


def cmd_env_yank(args: argparse.Namespace) -> int:
    spec = EnvSpec.parse(args.spec)
    if not spec.version:
        raise UsageError("name the version to yank: prime env yank owner/name@1.2.3")
    client().yank(spec.owner, spec.name, spec.version, args.reason, undo=args.undo)
    console.print(f"{'un-yanked' if args.undo else 'yanked'} {spec}")
    return 0


def cmd_env_delete(args: argparse.Namespace) -> int:
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


def attach_spec(given: str | None, named: set[tuple[Any, Any]], source: str, what: str) -> EnvSpec:
    """Where to attach: ``--env``, else the one owner/name@version the source names."""
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
    return spec


def cmd_eval_push(args: argparse.Namespace) -> int:
    run = Path(args.run_dir)
    meta_file, results_file = run / "metadata.json", run / "results.jsonl"
    if not meta_file.exists() or not results_file.exists():
        raise UsageError(f"{run} is not a vf-eval run directory (metadata.json and results.jsonl)")
    meta = json.loads(meta_file.read_text())
    named = {(meta.get("env_id"), meta.get("env_version"))}
    spec = attach_spec(args.env, named, "the run", "eval results")
    info = client(login_required=True).push_eval(
        spec.owner, spec.name, spec.version, meta_file.read_bytes(), results_file.read_bytes()
    )
    console.print(
        f"uploaded eval #{info.id} ({info.num_rollouts} rollouts, model {safe(info.model)}) "
        f"to {safe(spec)}"
    )
    return 0


def cmd_data_push(args: argparse.Namespace) -> int:
    folder = Path(args.dataset_dir)
    card_file, data_file = folder / "vf_data.json", folder / "data.parquet"
    if not card_file.exists() or not data_file.exists():
        raise UsageError(f"{folder} is not a vf-data dataset (vf_data.json and data.parquet)")
    card = json.loads(card_file.read_text())
    named = {(s.get("env_id"), s.get("env_version")) for s in card.get("sources", [])}
    spec = attach_spec(args.env, named, "the dataset", "datasets")
    info = client(login_required=True).push_dataset(
        spec.owner, spec.name, spec.version, card_file.read_bytes(), data_file.read_bytes()
    )
    console.print(
        f"uploaded dataset #{info.id} ({info.rows} rows) to {safe(spec)}: {safe(info.url)}"
    )
    return 0


def cmd_data_list(args: argparse.Namespace) -> int:
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


# --- parser --------------------------------------------------------------------------------------------


def storage_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", default="~/.prime-hub")
    parser.add_argument(
        "--db", default=None, help="postgresql://USER@HOST:PORT/DB (default: SQLite in --data-dir)"
    )
    parser.add_argument(
        "--blobs", default=None, help="s3://BUCKET/PREFIX (default: files in --data-dir)"
    )
    parser.add_argument(
        "--s3-endpoint", default=None, help="the S3 API endpoint (MinIO, R2; default: AWS)"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="prime", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    top = parser.add_subparsers(dest="group", required=True)

    hub = top.add_parser("hub", help="run a hub").add_subparsers(dest="command", required=True)
    serve = hub.add_parser("serve", help="start the hub server")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8787)
    storage_flags(serve)
    serve.add_argument(
        "--public-url",
        default=None,
        help="the hub's own URL for absolute links and the /sdk/ install line (default: "
        "http://HOST:PORT; never taken from a request's Host header)",
    )
    serve.add_argument(
        "--trusted-proxy",
        action="append",
        default=[],
        metavar="ADDRESS",
        help="a TLS proxy whose X-Forwarded-Proto/For are believed (repeatable)",
    )
    sdk_source = serve.add_mutually_exclusive_group()
    sdk_source.add_argument(
        "--sdk-wheel",
        default=None,
        help="the SDK wheel to serve at /sdk/ (default: built at start from this checkout's "
        "tracked files)",
    )
    sdk_source.add_argument("--no-sdk", action="store_true", help="serve no SDK wheel")
    serve.set_defaults(func=cmd_hub_serve)
    create = hub.add_parser(
        "create-user", help="create a user in a hub's storage and print its token"
    )
    create.add_argument("name")
    create.add_argument("--admin", action="store_true")
    storage_flags(create)
    create.set_defaults(func=cmd_hub_create_user)

    login = top.add_parser("login", help="store a hub URL and token")
    login.add_argument("--url")
    # kept for scripts, not advertised: argv is readable by every local user (ps)
    login.add_argument("--token", help=argparse.SUPPRESS)
    login.set_defaults(func=cmd_login)
    top.add_parser("whoami", help="show the current user").set_defaults(func=cmd_whoami)
    tokens = top.add_parser("token", help="API tokens").add_subparsers(
        dest="command", required=True
    )
    tc = tokens.add_parser("create", help="create a token (printed once)")
    tc.add_argument("name")
    tc.add_argument("--scope", action="append", choices=["read", "publish", "admin"])
    tc.add_argument("--expires-in-days", type=int, default=None)
    tc.set_defaults(func=cmd_token_create)
    tokens.add_parser("list", help="your tokens (never their secrets)").set_defaults(
        func=cmd_token_list
    )
    tr = tokens.add_parser("revoke", help="revoke a token by id")
    tr.add_argument("id", type=int)
    tr.set_defaults(func=cmd_token_revoke)

    env = top.add_parser("env", help="environments").add_subparsers(dest="command", required=True)
    init = env.add_parser("init", help="scaffold an environment (same as vf-init)")
    init.add_argument("name")
    init.add_argument("-p", "--path", default="./environments")
    init.add_argument("--multi-file", action="store_true")
    init.set_defaults(func=cmd_env_init)
    push = env.add_parser("push", help="build with uv and publish a version")
    push.add_argument("--path", default=".")
    push.add_argument("--owner", help="namespace (default: you; a team you belong to)")
    push.add_argument(
        "--visibility",
        choices=["public", "private"],
        default=None,
        help="a new environment is public unless given; an existing one keeps its visibility",
    )
    push.add_argument("--bump", choices=BUMPS, help="raise [project].version first")
    push.add_argument("--tag", action="append", default=[])
    push.set_defaults(func=cmd_env_push)
    inst = env.add_parser("install", help="install pinned environments")
    inst.add_argument("specs", nargs="*", metavar="owner/name[@version]")
    inst.add_argument(
        "--locked", action="store_true", help="install exactly what the lock file records"
    )
    inst.add_argument("--lock-file", default="environments.lock")
    inst.add_argument(
        "--python", default=None, help="the interpreter to install into (default: this one)"
    )
    inst.set_defaults(func=cmd_env_install)
    un = env.add_parser("uninstall")
    un.add_argument("spec")
    un.add_argument("--lock-file", default="environments.lock")
    un.add_argument("--python", default=None)
    un.set_defaults(func=cmd_env_uninstall)
    pl = env.add_parser("pull", help="download and extract the source")
    pl.add_argument("spec")
    pl.add_argument("-d", "--dir", default=".")
    pl.set_defaults(func=cmd_env_pull)
    for command, helptext in (("list", "list environments"), ("search", "search environments")):
        sub = env.add_parser(command, help=helptext)
        if command == "search":
            sub.add_argument("query")
        sub.add_argument("--owner")
        sub.add_argument("--tag")
        sub.add_argument(
            "--sort", default="updated", choices=["updated", "created", "name", "downloads"]
        )
        sub.add_argument("--page", type=int, default=1)
        sub.add_argument("--output", choices=["table", "json"], default="table")
        sub.set_defaults(func=cmd_env_list)
    for command, func in (("info", cmd_env_info), ("versions", cmd_env_versions)):
        sub = env.add_parser(command)
        sub.add_argument("spec")
        sub.add_argument("--output", choices=["table", "json"], default="table")
        sub.set_defaults(func=func)
    yank = env.add_parser("yank", help="mark a version as yanked (PEP 592)")
    yank.add_argument("spec", metavar="owner/name@version")
    yank.add_argument("--reason")
    yank.add_argument(
        "--undo", action="store_true", help="un-yank: make the version installable again"
    )
    yank.set_defaults(func=cmd_env_yank)
    delete = env.add_parser(
        "delete", help="delete one version (owner/name@version) or an environment with all of them"
    )
    delete.add_argument("spec")
    delete.add_argument("--yes", action="store_true")
    delete.set_defaults(func=cmd_env_delete)

    data = top.add_parser("data", help="datasets made from rollouts (vf-data)").add_subparsers(
        dest="command", required=True
    )
    dp = data.add_parser("push", help="attach a vf-data dataset to the version it came from")
    dp.add_argument("dataset_dir")
    dp.add_argument("--env", help="owner/name@version (default: the one its runs name)")
    dp.set_defaults(func=cmd_data_push)
    dl = data.add_parser("list", help="datasets attached to a version")
    dl.add_argument("spec", help="owner/name[@version]")
    dl.add_argument("--output", choices=("table", "json"), default="table")
    dl.set_defaults(func=cmd_data_list)
    ev = top.add_parser("eval", help="eval results").add_subparsers(dest="command", required=True)
    evp = ev.add_parser("push", help="attach a vf-eval run to an environment version")
    evp.add_argument("run_dir")
    evp.add_argument("--env", help="owner/name@version (default: from the run's metadata)")
    evp.set_defaults(func=cmd_eval_push)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except UsageError as exc:
        err.print(f"[red]prime:[/red] {safe(exc)}", soft_wrap=True, highlight=False)
        return 2
    except (HubAPIError, InstallError) as exc:
        err.print(f"[red]prime:[/red] {safe(exc)}", soft_wrap=True, highlight=False)
        return 1


if __name__ == "__main__":
    sys.exit(main())
