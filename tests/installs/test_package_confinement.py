"""A package installs only its own names: every route by which an installed package could run code
at interpreter start, or take over this SDK, its commands, another distribution or another
environment's id, tried where packages are judged: at upload (a real hub on loopback), and at
install (real uv, the real ``prime env install`` and ``vf-install``, a hostile default index on
disk). Every refusal leaves the target untouched and is followed by the install that must work.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import tomllib
import uuid
import zipfile
from pathlib import Path

import httpx
import pytest

from hub_client.client import HubClient
from hub_server import Hub
from hub_server.process import start_hub
from verifiers.installs.confinement import SDK_MODULES, sdk_commands

REPO = Path(__file__).resolve().parents[2]
PY = f"python{sys.version_info[0]}.{sys.version_info[1]}"
SITE = f"lib/{PY}/site-packages"  # a virtualenv's site-packages, relative to its prefix
SITE64 = f"lib64/{PY}/site-packages"  # the same directory through the virtualenv's lib64 link


def wheel(
    directory: Path,
    name: str,
    version: str = "1.0.0",
    files: dict[str, str | bytes] | None = None,
    requires: tuple[str, ...] = (),
    entry_points: str = "",
    package: bool = True,
) -> Path:
    """A wheel with a correct RECORD: ``files`` beside the module ``<name>`` (a package with
    ``load_environment`` unless ``package`` is False)."""
    dist = name.replace("-", "_").replace(".", "_")
    info = f"{dist}-{version}.dist-info"
    members: dict[str, str | bytes] = {}
    if package:
        members[f"{dist}/__init__.py"] = "def load_environment(**kwargs):\n    return 'loaded'\n"
    members.update(files or {})
    members[f"{info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        + "".join(f"Requires-Dist: {r}\n" for r in requires)
    )
    members[f"{info}/WHEEL"] = "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    if entry_points:
        members[f"{info}/entry_points.txt"] = entry_points
    record = []
    path = directory / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, content in members.items():
            data = content.encode() if isinstance(content, str) else content
            archive.writestr(member, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append(f"{member},sha256={digest.decode()},{len(data)}")
        archive.writestr(f"{info}/RECORD", "\n".join([*record, f"{info}/RECORD,,"]) + "\n")
    return path


# --- at upload: the hub judges the environment's wheel --------------------------------------------

D = "route_env-1.0.0.data"
UPLOAD_ROUTES = {
    # code at every interpreter start
    "pth-top-level": ({"evil.pth": "import os\n"}, "", "pth_file"),
    "pth-uppercase": ({"EVIL.PTH": "import os\n"}, "", "pth_file"),
    "pth-platlib": ({f"{D}/platlib/evil.pth": "import os\n"}, "", "pth_file"),
    "pth-through-data": ({f"{D}/data/{SITE}/evil.pth": "import os\n"}, "", "data_scheme"),
    "sitecustomize": ({"sitecustomize.py": "print('owned')\n"}, "", "startup_module"),
    "usercustomize-package": ({"usercustomize/__init__.py": ""}, "", "startup_module"),
    "sitecustomize-sourceless": ({"sitecustomize.pyc": b"\x00" * 16}, "", "startup_module"),
    "sitecustomize-extension": (
        {"sitecustomize.cpython-311-x86_64-linux-gnu.so": b"\x7fELF"},
        "",
        "startup_module",
    ),
    "sitecustomize-purelib": ({f"{D}/purelib/sitecustomize.py": ""}, "", "startup_module"),
    "bytecode-cache": ({"__pycache__/six.cpython-311.pyc": b"\x00" * 16}, "", "startup_module"),
    # another's import names, whatever the file
    "sdk-sourceless": ({"verifiers.pyc": b"\x00" * 16}, "", "foreign_module"),
    "sdk-extension": ({"verifiers.abi3.so": b"\x7fELF"}, "", "foreign_module"),
    "sdk-protocol-package": ({"hub_protocol/__init__.py": ""}, "", "foreign_module"),
    "sdk-in-another-case": ({"Verifiers/__init__.py": ""}, "", "foreign_module"),
    "namespace-package": ({"shared_ns/mod.py": ""}, "", "namespace_package"),
    # discovery: a second metadata directory, anywhere, any case
    "dist-info-top-level": (
        {"planted-9.dist-info/METADATA": "Name: planted\n"},
        "",
        "extra_metadata",
    ),
    "dist-info-nested": ({"route_env/inner-9.dist-info/METADATA": "x"}, "", "extra_metadata"),
    "dist-info-purelib": (
        {f"{D}/purelib/planted-9.dist-info/entry_points.txt": "x"},
        "",
        "extra_metadata",
    ),
    "dist-info-uppercase": ({"route_env/PLANTED-9.DIST-INFO/METADATA": "x"}, "", "extra_metadata"),
    "egg-info": ({"planted.egg-info/PKG-INFO": "Name: planted\n"}, "", "extra_metadata"),
    "egg-link": ({"planted.egg-link": "/tmp\n"}, "", "extra_metadata"),
    "egg": ({"planted.egg/EGG-INFO/PKG-INFO": "Name: planted\n"}, "", "extra_metadata"),
    # data schemes an environment has no use for
    "data-scripts": ({f"{D}/scripts/vf-eval": "#!python\nprint('owned')\n"}, "", "foreign_command"),
    "data-headers": ({f"{D}/headers/x.h": "int x;\n"}, "", "data_scheme"),
    "data-data": ({f"{D}/data/share/x.txt": "x\n"}, "", "data_scheme"),
    "data-unknown-scheme": ({f"{D}/evil/x": "x\n"}, "", "data_scheme"),
    # entry points and commands
    "console-script-sdk-command": (
        {},
        "[console_scripts]\nvf-eval = route_env:main\n",
        "foreign_entry_point",
    ),
    "gui-script-prime": ({}, "[gui_scripts]\nprime = route_env:main\n", "foreign_entry_point"),
    "console-script-interpreter": (
        {},
        "[console_scripts]\npython3 = route_env:main\n",
        "foreign_entry_point",
    ),
    "console-script-not-its-own": (
        {},
        "[console_scripts]\nls = route_env:main\n",
        "foreign_entry_point",
    ),
    "auto-loaded-group": ({}, "[pytest11]\nroute = route_env\n", "foreign_entry_point"),
    "another-environments-id": (
        {},
        "[verifiers.environments]\nreverse-text = route_env:load_environment\n",
        "foreign_entry_point",
    ),
}


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    data = tmp_path_factory.mktemp("hub-confine")
    admin = Hub(data).create_user("root", is_admin=True)
    with start_hub(data) as server:
        yield {"url": server.url, "admin": admin}


def new_user(hub) -> tuple[str, str]:
    name = f"u{uuid.uuid4().hex[:10]}"
    return name, HubClient(hub["url"], hub["admin"]).create_user(name).token


def publish(hub, token: str, owner: str, path: Path) -> httpx.Response:
    name = path.name.split("-")[0].replace("_", "-")
    return httpx.post(
        f"{hub['url']}/api/v1/environments/{owner}/{name}/versions",
        files={"wheel": (path.name, path.read_bytes())},
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )


@pytest.mark.parametrize("route", sorted(UPLOAD_ROUTES))
def test_an_upload_that_reaches_outside_itself_is_refused(hub, tmp_path, route):
    files, entry_points, code = UPLOAD_ROUTES[route]
    owner, token = new_user(hub)
    hostile = wheel(tmp_path, "route-env", files=files, entry_points=entry_points)
    refused = publish(hub, token, owner, hostile)
    assert refused.status_code == 400 and refused.json()["error"]["code"] == code, refused.text
    clean = wheel(
        tmp_path,
        "route-env",
        "1.0.1",
        entry_points="[verifiers.environments]\nroute-env = route_env:load_environment\n"
        "[console_scripts]\nroute-env-cli = route_env:main\n",
    )
    assert publish(hub, token, owner, clean).status_code == 201


def test_the_sdks_modules_and_commands_are_read_from_its_one_declaration():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert SDK_MODULES == set(project["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"])
    assert sdk_commands() == set(project["project"]["scripts"])


# --- at install: every wheel the resolver picks, against the target ----------------------------------


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> Path:
    """A fresh virtualenv with this SDK (editable, as setup makes it) whose dependencies come
    from the test's own site-packages, an environment, a .pth that imports a module nobody has
    yet, and a link out of its prefix (``share/vf-elsewhere``)."""
    root = tmp_path_factory.mktemp("target")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    assert (root / "lib64").is_symlink()  # as venv makes it on 64-bit Linux
    (root / "share").mkdir()
    (root / "share" / "vf-elsewhere").symlink_to(tmp_path_factory.mktemp("elsewhere"))
    site = root / SITE
    import sysconfig

    (site / "outer_site.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    (site / "hook.pth").write_text("import os; 0 and __import__('vf_missing_hook')\n")
    from verifiers.installs.uv_config import uv_binary

    subprocess.run(
        [
            uv_binary(),
            "pip",
            "install",
            "-q",
            "--python",
            str(root / "bin" / "python"),
            "--no-deps",
            "-e",
            str(REPO),
        ],
        check=True,
    )
    resident = wheel(root, "resident-env")  # an environment installed before the attacks
    subprocess.run(
        [
            uv_binary(),
            "pip",
            "install",
            "-q",
            "--python",
            str(root / "bin" / "python"),
            str(resident),
        ],
        check=True,
    )
    return root


def serve(index: Path, path: Path) -> None:
    """Publish a file on the default index."""
    project = path.name.split("-")[0].replace("_", "-").lower()
    folder = index / "simple" / project
    folder.mkdir(parents=True, exist_ok=True)
    (index / "files").mkdir(exist_ok=True)
    (index / "files" / path.name).write_bytes(path.read_bytes())
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    links = (folder / "links.txt").read_text() if (folder / "links.txt").exists() else ""
    links += f'<a href="../../files/{path.name}#sha256={digest}">{path.name}</a>\n'
    (folder / "links.txt").write_text(links)
    (folder / "index.html").write_text(f"<html><body>\n{links}</body></html>\n")


def snapshot(root: Path) -> set[str]:
    """Every path under ``root``, but the install lock's file (made by the first install, like
    uv's own ``.lock``: bookkeeping, not something installed)."""
    from verifiers.installs.confined import INSTALL_LOCK

    return {str(p.relative_to(root)) for p in root.rglob("*")} - {INSTALL_LOCK}


def prime_install(
    hub, token, spec: str, target: Path, index: Path, tmp_path: Path, **extra_env: str
):
    env = {
        **os.environ,
        "PRIME_HUB_URL": hub["url"],
        "PRIME_API_KEY": token,
        "PRIME_CONFIG_DIR": str(tmp_path / ".prime"),
        "UV_DEFAULT_INDEX": (index / "simple").as_uri(),
        **extra_env,
    }
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "hub_client.cli",
            "env",
            "install",
            spec,
            "--python",
            str(target / "bin" / "python"),
            "--lock-file",
            str(tmp_path / "e.lock"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )


DEP = "{dist}-1.0.0.data"
DEPENDENCY_ROUTES = {
    "sdk-package": ({"verifiers/__init__.py": "print('owned')\n"}, "", "foreign_module"),
    "sdk-sourceless-module": ({"verifiers.pyc": b"\x00" * 16}, "", "foreign_module"),
    "sdk-extension-module": ({"hub_client.abi3.so": b"\x7fELF"}, "", "foreign_module"),
    "pth": ({"{dist}.pth": "import os\n"}, "", "pth_file"),
    "pth-through-data": ({f"{DEP}/data/{SITE}/zz_route.pth": "import os\n"}, "", "pth_file"),
    # a virtualenv's lib64 links to lib: these land in site-packages too
    "pth-through-lib64": ({f"{DEP}/data/{SITE64}/zz_route.pth": "import os\n"}, "", "pth_file"),
    "sdk-through-lib64": ({f"{DEP}/data/{SITE64}/verifiers.py": ""}, "", "foreign_module"),
    "dist-info-through-lib64": (
        {f"{DEP}/data/{SITE64}/planted-9.dist-info/METADATA": "Name: planted\nVersion: 9\n"},
        "",
        "extra_metadata",
    ),
    "data-through-a-link-out-of-the-prefix": (
        {f"{DEP}/data/share/vf-elsewhere/planted.txt": "x\n"},
        "",
        "outside_prefix",
    ),
    "sitecustomize": ({"sitecustomize.py": "print('owned')\n"}, "", "startup_module"),
    "usercustomize-through-purelib": (
        {f"{DEP}/purelib/usercustomize.py": ""},
        "",
        "startup_module",
    ),
    "module-a-pth-imports": ({"vf_missing_hook.py": "print('owned')\n"}, "", "startup_module"),
    "bytecode-cache": ({"__pycache__/six.cpython-311.pyc": b"\x00" * 16}, "", "startup_module"),
    "console-script-sdk-command": (
        {},
        "[console_scripts]\nvf-eval = {dist}:main\n",
        "foreign_command",
    ),
    "gui-script-sdk-command": ({}, "[gui_scripts]\nvf-init = {dist}:main\n", "foreign_command"),
    "data-script-sdk-command": (
        {f"{DEP}/scripts/prime": "#!python\nprint('owned')\n"},
        "",
        "foreign_command",
    ),
    "data-into-bin": (
        {f"{DEP}/data/bin/vf-eval": "#!/bin/sh\necho owned\n"},
        "",
        "foreign_command",
    ),
    "script-shadowing-a-system-command": (
        {},
        "[console_scripts]\nls = {dist}:main\n",
        "foreign_command",
    ),
    "dist-info-through-purelib": (
        {
            f"{DEP}/purelib/planted-9.dist-info/METADATA": "Metadata-Version: 2.1\nName: planted\nVersion: 9\n",
            f"{DEP}/purelib/planted-9.dist-info/entry_points.txt": "[verifiers.environments]\nreverse-text = {dist}:load_environment\n",
        },
        "",
        "extra_metadata",
    ),
    "egg-info": (
        {"planted.egg-info/PKG-INFO": "Name: planted\nVersion: 9\n"},
        "",
        "extra_metadata",
    ),
    "nested-dist-info": ({"{dist}/inner-9.dist-info/METADATA": "x"}, "", "extra_metadata"),
    "another-environments-id": (
        {},
        "[verifiers.environments]\nreverse-text = {dist}:load_environment\n",
        "foreign_entry_point",
    ),
    "another-distributions-module": ({"six.py": "print('owned')\n"}, "", "foreign_module"),
    "another-environments-module": ({"resident_env/__init__.py": ""}, "", "foreign_module"),
    # data files other programs of the target read as their configuration or code
    "pip-config": (
        {f"{DEP}/data/pip.conf": "[global]\nindex-url = http://127.0.0.1:9/\n"},
        "",
        "data_location",
    ),
    "ipython-config": (
        {f"{DEP}/data/etc/ipython/ipython_config.py": "print('owned')\n"},
        "",
        "data_location",
    ),
    "jupyter-kernel": (
        {f"{DEP}/data/share/jupyter/kernels/python3/kernel.json": '{"argv": ["sh", "-c", "id"]}'},
        "",
        "data_location",
    ),
    "overwrites-the-virtualenvs-config": (
        {f"{DEP}/data/pyvenv.cfg": "home = /tmp\n"},
        "",
        "foreign_file",
    ),
}


# After a refusal the next, clean install of the same environment works: checked once per
# refusal code (the first route of each), since what it could trip over (the lock file, prime's
# install records, uv's cache) is shared by every route; each route checks the target unchanged.
FOLLOW_UP = {code: route for route, (_, _, code) in sorted(DEPENDENCY_ROUTES.items(), reverse=True)}


def fill(text: str | bytes, dist: str) -> str | bytes:
    return text.replace("{dist}", dist) if isinstance(text, str) else text


@pytest.mark.slow
@pytest.mark.parametrize("route", sorted(DEPENDENCY_ROUTES))
def test_a_dependency_that_reaches_outside_itself_is_refused_at_install(
    hub, target, tmp_path, route
):
    """The environment is clean; the dependency uv picks for it from the user's default index
    is not. Nothing of either is installed; the next install (a clean dependency) works."""
    files, entry_points, code = DEPENDENCY_ROUTES[route]
    slug = route.replace("-", "_")
    dep, dist = f"vfdep-{slug}", f"vfdep_{slug}"
    index = tmp_path / "index"
    owner, token = new_user(hub)
    filled = {fill(k, dist): fill(v, dist) for k, v in files.items()}
    serve(index, wheel(tmp_path, dep, files=filled, entry_points=fill(entry_points, dist)))
    env = f"env-{route}"
    assert publish(hub, token, owner, wheel(tmp_path, env, requires=(dep,))).status_code == 201
    before = snapshot(target)
    result = prime_install(hub, token, f"{owner}/{env}@1.0.0", target, index, tmp_path)
    assert result.returncode != 0 and f"[{code}]" in result.stderr, result.stderr[-3000:]
    assert "nothing was installed" in result.stderr
    assert snapshot(target) == before
    if FOLLOW_UP[code] != route:
        return
    clean = tmp_path / "clean"
    clean.mkdir()
    serve(index, wheel(clean, dep, "1.0.1", files={}))
    fixed = wheel(clean, env, "1.0.1", requires=(f"{dep}>=1.0.1",))
    assert publish(hub, token, owner, fixed).status_code == 201
    ok = prime_install(hub, token, f"{owner}/{env}@1.0.1", target, index, tmp_path)
    assert ok.returncode == 0, ok.stderr[-3000:]
    loaded = subprocess.run(
        [
            str(target / "bin" / "python"),
            "-c",
            f"import {dist}, env_{slug} as e; print(e.load_environment())",
        ],
        capture_output=True,
        text=True,
    )
    assert loaded.stdout.strip() == "loaded", loaded.stderr


@pytest.mark.slow
def test_a_dependency_that_must_be_built_never_runs_its_build_code(hub, target, tmp_path):
    """An sdist-only dependency would run its setup.py at install: it is not built at all."""
    index = tmp_path / "index"
    marker = tmp_path / "setup-py-ran"
    root = tmp_path / "vfdep_sdist-1.0.0"
    root.mkdir()
    (root / "setup.py").write_text(
        f"open({str(marker)!r}, 'w').write('ran')\nfrom setuptools import setup\n"
        "setup(name='vfdep-sdist', version='1.0.0')\n"
    )
    (root / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: vfdep-sdist\nVersion: 1.0.0\n")
    import tarfile

    sdist = tmp_path / "vfdep_sdist-1.0.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as archive:
        archive.add(root, arcname=root.name)
    serve(index, sdist)
    owner, token = new_user(hub)
    assert (
        publish(
            hub, token, owner, wheel(tmp_path, "sdist-env", requires=("vfdep-sdist",))
        ).status_code
        == 201
    )
    before = snapshot(target)
    result = prime_install(hub, token, f"{owner}/sdist-env@1.0.0", target, index, tmp_path)
    assert result.returncode != 0 and not marker.exists(), result.stderr[-2000:]
    assert "vfdep-sdist" in result.stderr and snapshot(target) == before


@pytest.mark.slow
def test_two_dependencies_cannot_share_a_module_or_a_namespace_portion(hub, target, tmp_path):
    index = tmp_path / "index"
    owner, token = new_user(hub)
    for name, files in (
        ("vfdep-one", {"vfshared.py": "x = 1\n", "vfns/one/__init__.py": ""}),
        ("vfdep-two", {"vfshared.py": "x = 2\n", "vfns/two/__init__.py": ""}),
    ):
        serve(index, wheel(tmp_path, name, files=files))
    env = wheel(tmp_path, "pair-env", requires=("vfdep-one", "vfdep-two"))
    assert publish(hub, token, owner, env).status_code == 201
    before = snapshot(target)
    result = prime_install(hub, token, f"{owner}/pair-env@1.0.0", target, index, tmp_path)
    assert (
        result.returncode != 0 and "both install" in result.stderr and "vfshared" in result.stderr
    ), result.stderr
    assert snapshot(target) == before
    # portions of one namespace are fine side by side, but one may not stand in for another's
    serve(index, wheel(tmp_path, "vfdep-two", "2.0.0", files={"vfns/two/__init__.py": ""}))
    serve(index, wheel(tmp_path, "vfdep-one", "2.0.0", files={"vfns/one/__init__.py": ""}))
    env = wheel(tmp_path, "pair-env", "2.0.0", requires=("vfdep-one>=2", "vfdep-two>=2"))
    assert publish(hub, token, owner, env).status_code == 201
    ok = prime_install(hub, token, f"{owner}/pair-env@2.0.0", target, index, tmp_path)
    assert ok.returncode == 0, ok.stderr[-2000:]
    serve(index, wheel(tmp_path, "vfdep-three", files={"vfns/one.py": "print('owned')\n"}))
    env = wheel(tmp_path, "trio-env", requires=("vfdep-three",))
    assert publish(hub, token, owner, env).status_code == 201
    result = prime_install(hub, token, f"{owner}/trio-env@1.0.0", target, index, tmp_path)
    assert (
        result.returncode != 0 and "vfns" in result.stderr and "[foreign_module]" in result.stderr
    )


@pytest.mark.slow
def test_a_name_that_differs_only_by_normalization_never_installs_over_another_owners(
    hub, target, tmp_path
):
    index = tmp_path / "index"
    index.mkdir()
    alice, alice_token = new_user(hub)
    mallory, mallory_token = new_user(hub)
    assert publish(hub, alice_token, alice, wheel(tmp_path, "foo-bar")).status_code == 201
    (tmp_path / "spoof").mkdir()
    spoof = wheel(tmp_path / "spoof", "foo.bar", "9.0.0")
    resp = httpx.post(
        f"{hub['url']}/api/v1/environments/{mallory}/foo.bar/versions",
        files={"wheel": ("foo.bar-9.0.0-py3-none-any.whl", spoof.read_bytes())},
        headers={"Authorization": f"Bearer {mallory_token}"},
    )
    assert resp.status_code == 201, resp.text
    assert (
        prime_install(
            hub, alice_token, f"{alice}/foo-bar@1.0.0", target, index, tmp_path
        ).returncode
        == 0
    )
    other = tmp_path / "other"
    other.mkdir()
    result = prime_install(hub, mallory_token, f"{mallory}/foo.bar@9.0.0", target, index, other)
    assert result.returncode != 0 and f"{alice}/foo-bar" in result.stderr, result.stderr
    version = subprocess.run(
        [
            str(target / "bin" / "python"),
            "-c",
            "import importlib.metadata as m; print(m.version('foo-bar'))",
        ],
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert version == "1.0.0"  # alice's, untouched
    assert publish(hub, alice_token, alice, wheel(tmp_path, "foo-bar", "1.1.0")).status_code == 201
    assert (
        prime_install(
            hub, alice_token, f"{alice}/foo-bar@1.1.0", target, index, tmp_path
        ).returncode
        == 0
    )


@pytest.mark.slow
def test_a_file_at_an_entry_of_sys_path_is_refused(hub, target, tmp_path):
    """A Python that is not a virtualenv has ``PREFIX/lib/python3XY.zip`` on its path before it
    exists, ahead of everything: a dependency that creates it runs its sitecustomize at every
    start. Modelled here by a path entry that does not exist yet (PYTHONPATH)."""
    index = tmp_path / "index"
    entry = target / "lib" / "vf_route.zip"
    owner, token = new_user(hub)
    for files, code in (
        (
            {"vfdep_zip-1.0.0.data/data/lib/vf_route.zip": b"PK\x05\x06" + b"\x00" * 18},
            "import_root",
        ),
        (
            {"vfdep_zip-1.0.0.data/data/lib/vf_route.zip/sitecustomize.py": "x = 1\n"},
            "startup_module",
        ),
    ):
        case = tmp_path / code
        case.mkdir()
        serve(index, wheel(case, "vfdep-zip", files=files))
        env = wheel(case, f"zip-{code.replace('_', '-')}", requires=("vfdep-zip",))
        assert publish(hub, token, owner, env).status_code == 201
        before = snapshot(target)
        result = prime_install(
            hub,
            token,
            f"{owner}/{env.name.split('-')[0].replace('_', '-')}@1.0.0",
            target,
            index,
            case,
            PYTHONPATH=str(entry),
        )
        assert result.returncode != 0 and f"[{code}]" in result.stderr, result.stderr[-2000:]
        assert snapshot(target) == before and not entry.exists()
        shutil.rmtree(index)


@pytest.mark.slow
def test_a_dependency_never_replaces_an_installed_environment(hub, target, tmp_path):
    """A dependency named like an installed environment (a hub environment another owner
    published, or one installed by id) would change what that id loads while the install
    records still name the environment: refused, whatever index serves it."""
    from verifiers.installs.uv_config import uv_binary

    index = tmp_path / "index"
    alice, alice_token = new_user(hub)
    mallory, mallory_token = new_user(hub)
    words = wheel(tmp_path, "word-tools", entry_points="")
    assert publish(hub, alice_token, alice, words).status_code == 201
    installed = prime_install(
        hub, alice_token, f"{alice}/word-tools@1.0.0", target, index, tmp_path
    )
    assert installed.returncode == 0, installed.stderr[-2000:]
    by_id = wheel(
        tmp_path,
        "id-env",
        entry_points="[verifiers.environments]\nid-env = id_env:load_environment\n",
    )
    python = str(target / "bin" / "python")
    subprocess.run(
        [uv_binary(), "pip", "install", "-q", "--python", python, str(by_id)], check=True
    )
    (tmp_path / "evil").mkdir()
    for name, installed_as in (
        ("word-tools", f"the hub environment {alice}/word-tools 1.0.0"),
        ("id-env", "the environment id-env 1.0.0"),
    ):
        serve(index, wheel(tmp_path / "evil", name, "9.0.0"))
        env = wheel(tmp_path, f"grab-{name}", requires=(f"{name}>=9",))
        assert publish(hub, mallory_token, mallory, env).status_code == 201
        before = snapshot(target)
        other = tmp_path / name
        other.mkdir()
        result = prime_install(
            hub, mallory_token, f"{mallory}/grab-{name}@1.0.0", target, index, other
        )
        assert result.returncode != 0 and "[foreign_environment]" in result.stderr, result.stderr[
            -2000:
        ]
        assert installed_as in result.stderr and snapshot(target) == before
    loaded = subprocess.run(
        [
            python,
            "-c",
            "import importlib.metadata as m; print(m.version('word-tools'), m.version('id-env'))",
        ],
        capture_output=True,
        text=True,
    )
    assert loaded.stdout.split() == ["1.0.0", "1.0.0"]


# --- at install: the environment's own wheel, whoever served it ---------------------------------------

OWN_ROUTES = {
    "namespace-package": (
        {"own_env/__init__.py": "", "shared_ns/x.py": ""},
        "",
        "namespace_package",
    ),
    "pth": ({"own_env/__init__.py": "", "own.pth": "import os\n"}, "", "pth_file"),
    "data-scheme": (
        {"own_env/__init__.py": "", "own_env-1.0.0.data/data/share/x": "x"},
        "",
        "data_scheme",
    ),
    "command-not-its-own": (
        {"own_env/__init__.py": ""},
        "[console_scripts]\nhttp = own_env:main\n",
        "foreign_command",
    ),
    "auto-loaded-group": (
        {"own_env/__init__.py": ""},
        "[pytest11]\nown = own_env\n",
        "foreign_entry_point",
    ),
    "entry-point-into-another-module": (
        {"own_env/__init__.py": ""},
        "[verifiers.environments]\nown-env = reverse_text:load_environment\n",
        "foreign_entry_point",
    ),
}


@pytest.mark.parametrize("route", sorted(OWN_ROUTES))
def test_the_client_holds_the_environments_own_wheel_to_the_rules_whatever_the_hub_checked(
    target, tmp_path, route
):
    """A hub that did not check (an old or a compromised one) serves the wheel: the installer
    judges it itself, and the clean wheel installs next."""
    from verifiers.installs.confined import ConfinementError, Requested, install
    from verifiers.installs.uv_config import uv_binary

    files, entry_points, code = OWN_ROUTES[route]
    hostile = wheel(tmp_path, "own-env", files=files, entry_points=entry_points, package=False)
    python = str(target / "bin" / "python")
    ask = [Requested("own-env", {"own-env", "alice/own-env"})]
    before = snapshot(target)
    with pytest.raises(ConfinementError) as refused:
        install(uv_binary(), python, [str(hostile)], ask)
    assert code in {p.code for p in refused.value.problems}, refused.value
    assert snapshot(target) == before
    clean = tmp_path / "clean"
    clean.mkdir()
    good = wheel(
        clean,
        "own-env",
        entry_points="[verifiers.environments]\nalice/own-env = own_env:load_environment\n",
    )
    assert install(uv_binary(), python, [str(good)], ask) == [("own-env", "1.0.0")]
    subprocess.run(
        [uv_binary(), "pip", "uninstall", "-q", "--python", python, "own-env"], check=True
    )


def local_project(
    tmp_path: Path, name: str, extra_toml: str = "", files: dict[str, str] | None = None
) -> Path:
    module = name.replace("-", "_")
    root = tmp_path / module
    (root / module).mkdir(parents=True)
    (root / module / "__init__.py").write_text(
        "def load_environment(**kwargs):\n    return 'loaded'\n"
    )
    for rel, text in (files or {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "pyproject.toml").write_text(
        textwrap.dedent(f"""\
        [build-system]
        requires = ["hatchling"]
        build-backend = "hatchling.build"

        [project]
        name = "{name}"
        version = "0.1.0"

        [project.entry-points."verifiers.environments"]
        {name} = "{module}:load_environment"

        [tool.hatch.build.targets.wheel]
        packages = ["{module}"]
        """)
        + extra_toml
    )
    return root


LOCAL_ROUTES = {
    # an editable install puts the project directory on sys.path: what it holds is checked
    "editable-root-holds-the-sdk": (
        {"verifiers/__init__.py": "print('owned')\n"},
        "",
        [],
        "foreign_module",
    ),
    "editable-root-holds-sitecustomize": (
        {"sitecustomize.py": "print('owned')\n"},
        "",
        [],
        "startup_module",
    ),
    "editable-root-holds-a-dist-info": (
        {
            "zzfake-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: zzfake\nVersion: 1.0\n",
            "zzfake-1.0.dist-info/entry_points.txt": "[verifiers.environments]\nreverse-text = pulled_env:load_environment\n",
        },
        "",
        [],
        "extra_metadata",
    ),
    "editable-root-holds-an-egg-info": (
        {"zzegg.egg-info/PKG-INFO": "Metadata-Version: 2.1\nName: zzegg\nVersion: 1.0\n"},
        "",
        [],
        "extra_metadata",
    ),
    "shared-script-named-like-the-sdk": (
        {"bin/vf-eval": "#!/bin/sh\necho owned\n"},
        '\n[tool.hatch.build.targets.wheel.shared-scripts]\n"bin/vf-eval" = "vf-eval"\n',
        ["--no-editable"],
        "foreign_command",
    ),
    "force-included-startup-module": (
        {"hook/sitecustomize.py": "print('owned')\n"},
        '\n[tool.hatch.build.targets.wheel.force-include]\n"hook/sitecustomize.py" = "sitecustomize.py"\n',
        ["--no-editable"],
        "startup_module",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("route", sorted(LOCAL_ROUTES))
def test_vf_install_of_a_pulled_project_is_confined_too(target, tmp_path, route):
    files, toml, flags, code = LOCAL_ROUTES[route]
    project = local_project(tmp_path, "pulled-env", toml, files)
    python = str(target / "bin" / "python")
    before = snapshot(target)
    refused = subprocess.run(
        [python, "-m", "verifiers.cli.install", str(project), *flags],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert refused.returncode != 0 and f"[{code}]" in refused.stderr, refused.stderr[-2000:]
    assert snapshot(target) == before
    clean = local_project(tmp_path / "clean", "pulled-env")
    ok = subprocess.run(
        [python, "-m", "verifiers.cli.install", str(clean), *flags],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ok.returncode == 0, ok.stderr[-2000:]
    loaded = subprocess.run(
        [python, "-c", "import verifiers as vf, pulled_env; print(pulled_env.load_environment())"],
        capture_output=True,
        text=True,
    )
    assert loaded.stdout.strip() == "loaded", loaded.stderr


def test_a_stage_that_a_killed_install_left_is_removed_by_the_next(target, tmp_path):
    """SIGKILL runs no cleanup and reaches only the install's own process: an install killed
    while its uv stages leaves the stage in the target's prefix, and an orphaned uv would go on
    writing into it. Its uv dies with it, and the next install into that Python, started at
    once, removes the stage."""
    from verifiers.installs.confined import STAGE_PREFIX

    python = str(target / "bin" / "python")
    blobs = {f"killed_env/blob{i}.bin": "x" * 2**20 for i in range(24)}  # time to be caught
    project = local_project(tmp_path, "killed-env", files=blobs)
    killed = subprocess.Popen(
        [python, "-m", "verifiers.cli.install", str(project)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120

    def staging_uv() -> bool:
        return any(
            "--prefix " + str(stage) in cmdline
            for stage in target.glob(f"{STAGE_PREFIX}*")
            for cmdline in command_lines()
        )

    while not staging_uv():
        assert killed.poll() is None and time.monotonic() < deadline, "no install to kill"
        time.sleep(0.002)
    killed.kill()
    killed.wait()
    (stage,) = target.glob(f"{STAGE_PREFIX}*")
    clean = local_project(tmp_path / "clean", "later-env")
    ok = subprocess.run(
        [python, "-m", "verifiers.cli.install", str(clean)], capture_output=True, text=True
    )
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert not any(str(stage) in cmdline for cmdline in command_lines())  # the orphan had ended
    assert list(target.glob(f"{STAGE_PREFIX}*")) == []


@pytest.mark.skipif(
    os.geteuid() != 0 or not Path("/usr/bin/python3").exists(),
    reason="needs root to run a process as another user, and a Python that user can run",
)
def test_another_user_who_can_only_read_a_prefix_cannot_hold_its_installs():
    """Any user who can read a file or directory can flock it: the install lock is a file
    others cannot open, so another user holding every lock they can take delays no install."""
    import tempfile
    import threading

    from verifiers.installs.confined import _install_lock

    prefix = Path(tempfile.mkdtemp(dir="/tmp"))  # readable by all, as a virtualenv is
    prefix.chmod(0o755)
    holds_what_it_can = textwrap.dedent(f"""
        import fcntl, os, time
        fd = os.open({str(prefix)!r}, os.O_RDONLY | os.O_DIRECTORY)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            lock = os.open({str(prefix / ".vf-install.lock")!r}, os.O_RDONLY)
            fcntl.flock(lock, fcntl.LOCK_EX)
            print("holds the install lock", flush=True)
        except OSError:  # not allowed to open it
            print("holds the directory only", flush=True)
        time.sleep(60)
    """)
    try:
        with _install_lock(prefix):  # the lock file exists, as after any install
            pass
        reader = subprocess.Popen(
            ["/usr/bin/python3", "-c", holds_what_it_can],  # this venv's may be unreadable
            stdout=subprocess.PIPE,
            text=True,
            user=65534,
            group=65534,
        )
        try:
            assert reader.stdout is not None
            assert reader.stdout.readline() == "holds the directory only\n"
            took = threading.Event()

            def install() -> None:
                with _install_lock(prefix):
                    took.set()

            threading.Thread(target=install, daemon=True).start()
            assert took.wait(30), "an install waited on another user's lock"
        finally:
            reader.kill()
            reader.wait()
    finally:
        shutil.rmtree(prefix)


def command_lines() -> list[str]:
    lines = []
    for entry in Path("/proc").iterdir():
        try:
            lines.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except (OSError, ValueError):
            pass
    return lines


@pytest.mark.skipif(os.getuid() != 0, reason="plants a file as another user (uid 65534)")
def test_a_uv_toml_another_user_planted_above_the_working_directory_changes_nothing(
    hub, target, tmp_path
):
    """uv reads ``uv.toml`` from every ancestor of its working directory: another user's, in a
    shared sticky directory above it, added their ``find-links`` page with a higher version of
    the environment's dependency (their code then ran as the installing user on import)."""
    index, theirs = tmp_path / "index", tmp_path / "theirs"
    theirs.mkdir()
    owner, token = new_user(hub)
    serve(index, wheel(tmp_path, "vfdep-cfg", files={"vfdep_cfg/who.py": "WHO = 'index'\n"}))
    wheel(theirs, "vfdep-cfg", "9.9.9", files={"vfdep_cfg/who.py": "WHO = 'planted'\n"})
    theirs.chmod(0o755)
    assert (
        publish(hub, token, owner, wheel(tmp_path, "env-cfg", requires=("vfdep-cfg",))).status_code
        == 201
    )
    shared = Path(tempfile.mkdtemp(prefix="vf-shared-", dir="/tmp"))
    shared.chmod(0o1777)  # as /tmp: another user may add entries
    planted = (
        f'find-links = ["{theirs}"]\n[pip]\nverify-hashes = false\nfind-links = ["{theirs}"]\n'
    )
    subprocess.run(
        ["sh", "-c", f"cat > {shared / 'uv.toml'}"],
        input=planted,
        text=True,
        check=True,
        user=65534,
        group=65534,
    )
    work = shared / "work"
    work.mkdir()
    try:
        result = prime_install(hub, token, f"{owner}/env-cfg@1.0.0", target, index, work)
    finally:
        shutil.rmtree(shared)
    assert result.returncode == 0, result.stderr[-3000:]
    who = subprocess.run(
        [str(target / "bin" / "python"), "-c", "from vfdep_cfg.who import WHO; print(WHO)"],
        capture_output=True,
        text=True,
    )
    assert who.stdout.strip() == "index", who.stderr
