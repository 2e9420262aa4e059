"""Installing an environment that pins another ``verifiers`` keeps this SDK (fresh virtualenv).

Each case builds a real environment package whose dependency would replace this SDK (PyPI's
``verifiers`` is a different project) and installs it with ``vf-install`` into a fresh virtualenv
that has this SDK installed; afterwards ``verifiers`` must still be this checkout.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

PINS = {
    "exact-old-pin": ('dependencies = ["verifiers==0.1.5"]', ""),
    "pypi-v1-range": ('dependencies = ["verifiers>=0.3.0"]', ""),
    "git-source": (
        'dependencies = ["verifiers"]',
        '[tool.uv.sources]\nverifiers = { git = "https://github.com/PrimeIntellect-ai/verifiers" }\n',
    ),
}


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A fresh virtualenv with this SDK installed (editable, as setup does); its dependencies
    are the test environment's own, so nothing is downloaded."""
    root = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(site) / "outer_site.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    from verifiers.installs.uv_config import uv_binary

    subprocess.run(
        [
            uv_binary(),
            "pip",
            "install",
            "-q",
            "--python",
            str(python),
            "--no-deps",
            "-e",
            str(REPO),
        ],
        check=True,
    )
    return python


def environment_package(tmp_path: Path, case: str) -> Path:
    dependencies, sources = PINS[case]
    name = f"pinned-{case}"
    module = name.replace("-", "_")
    directory = tmp_path / module
    (directory / module).mkdir(parents=True)
    (directory / "pyproject.toml").write_text(
        textwrap.dedent(f"""\
        [build-system]
        requires = ["hatchling"]
        build-backend = "hatchling.build"

        [project]
        name = "{name}"
        version = "0.1.0"
        {dependencies}

        [tool.hatch.build.targets.wheel]
        packages = ["{module}"]
        """)
        + sources
    )
    (directory / module / "__init__.py").write_text(
        "def load_environment(**kw):\n    return None\n"
    )
    return directory


@pytest.mark.parametrize("case", sorted(PINS))
def test_vf_install_keeps_this_sdk_whatever_the_environment_pins(venv, tmp_path, case):
    package = environment_package(tmp_path, case)
    result = subprocess.run(
        [str(venv), "-m", "verifiers.cli.install", str(package)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "is satisfied by this SDK" in result.stdout
    probe = subprocess.run(
        [
            str(venv),
            "-c",
            "import verifiers, importlib.metadata as m; print(verifiers.__file__); "
            "print(m.version('verifiers')); import verifiers.installs.sdk_guard",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    location, version = probe.stdout.split()
    assert Path(location).resolve().is_relative_to(REPO)
    import verifiers

    assert version == verifiers.__version__


def test_prime_env_install_refuses_a_python_without_this_sdk(tmp_path):
    """A target Python with no verifiers, or with another project of that name (PyPI's), is
    refused before anything installs, naming what it found and how to get this SDK."""
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    foreign = tmp_path / "foreign"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(foreign)], check=True)
    site = subprocess.run(
        [
            str(foreign / "bin" / "python"),
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(site) / "verifiers").mkdir()
    (Path(site) / "verifiers" / "__init__.py").write_text(
        "__version__ = '0.4.0'  # another project\n"
    )
    cases = [(bare, "has no verifiers installed"), (foreign, "is not this SDK")]
    # run from this checkout too: its ./verifiers answered for the target's SDK, and a Python
    # without one got an environment it could not import
    for (python, message), cwd in itertools.product(cases, (tmp_path, REPO)):
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "hub_client.cli",
                "env",
                "install",
                "alice/x",
                "--python",
                str(python / "bin" / "python"),
            ],
            capture_output=True,
            text=True,
            cwd=cwd,
            env={
                "PATH": "/usr/bin:/bin",
                "HOME": str(tmp_path),
                "PRIME_HUB_URL": "http://127.0.0.1:9",
            },
        )
        out = result.stdout + result.stderr
        assert result.returncode == 2 and message in out, (cwd, out)
        assert "/sdk/" in out and "Traceback" not in out  # says how to get this SDK


def test_a_target_python_is_asked_about_itself_not_about_the_callers_directory(
    tmp_path, monkeypatch
):
    """What a target Python has is read without the caller's working directory on its path: a
    project's own modules there looked installed in the target, as if an environment that
    ships one would overwrite it."""
    from verifiers.installs.target import ask, probe

    (tmp_path / "zz_only_in_cwd.py").write_text("")
    monkeypatch.chdir(tmp_path)
    assert "zz_only_in_cwd" not in probe(sys.executable).names
    found = ask(sys.executable, "import importlib.util as u; print(u.find_spec('zz_only_in_cwd'))")
    assert found.stdout.strip() == "None", found


@pytest.mark.parametrize("extra", ["mcp", "ray", "hub-postgres", "hub-s3"])
def test_a_missing_extras_hint_installs_its_packages_not_pypis_verifiers(extra):
    """``pip install 'verifiers[mcp]'`` would install PyPI's verifiers over this SDK."""
    from packaging.requirements import Requirement

    from verifiers.installs.extras import install_hint

    hint = install_hint(extra, "unused")
    assert hint.startswith("pip install ") and "verifiers" not in hint
    names = {Requirement(p.strip("'")).name for p in hint.split()[2:]}
    assert {"mcp": "mcp", "ray": "ray", "hub-postgres": "psycopg", "hub-s3": "boto3"}[
        extra
    ] in names


def test_no_message_of_the_packages_tells_users_to_install_an_extra_of_pypis_verifiers():
    """Every hint goes through ``install_hint``: a literal ``verifiers[...]`` install in a
    message would replace this SDK with upstream's (a helper's new MCP warning had one)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    found = [
        f"{path.relative_to(root)}:{n}"
        for package in ("verifiers", "hub_server", "hub_client", "hub_protocol")
        for path in sorted((root / package).rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"install\s+['\"]?verifiers\[", line) and "would install" not in line
    ]
    assert found == []
