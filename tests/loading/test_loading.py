"""load_environment: entry points first, module names second, versions checked, clear errors."""

import re
import sys
import textwrap

import pytest

import verifiers as vf
from verifiers.errors import EnvironmentNotFoundError
from verifiers.loading.loader import parse_env_id

ENV_SOURCE = textwrap.dedent(
    """
    import verifiers as vf

    def load_environment(n: int = 2, tag: str = "{tag}"):
        env = vf.SingleTurnEnv(dataset=[{{"question": str(i)}} for i in range(n)])
        env.tag = tag
        return env
    """
)


def install_fake_dist(root, dist, module, version, tag, entry_point_name=None):
    """A real installed distribution on sys.path: a module plus its .dist-info with entry points."""
    (root / f"{module}.py").write_text(ENV_SOURCE.format(tag=tag))
    info = root / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "top_level.txt").write_text(module + "\n")
    (info / "RECORD").write_text(f"{module}.py,,\n")
    if entry_point_name:
        (info / "entry_points.txt").write_text(
            f"[verifiers.environments]\n{entry_point_name} = {module}:load_environment\n"
        )


@pytest.fixture
def site(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [m for m in sys.modules if m.startswith(("vf_test_", "alice__", "bob__"))]:
        del sys.modules[name]


def test_parse_env_id():
    assert parse_env_id("alice/word-game@1.2.0") == parse_env_id("alice/word-game@1.2.0")
    parsed = parse_env_id("alice/word-game@1.2.0")
    assert (parsed.owner, parsed.name, parsed.version, parsed.module_name) == (
        "alice",
        "word-game",
        "1.2.0",
        "word_game",
    )
    assert parse_env_id("word-game@latest").version is None
    with pytest.raises(EnvironmentNotFoundError, match="not an environment id"):
        parse_env_id("a/b/c")


def test_loads_by_entry_point_with_args_and_records_provenance(site):
    install_fake_dist(
        site, "vf-test-ep", "vf_test_ep_mod", "0.3.1", "ep", entry_point_name="vf-test-ep"
    )
    env = vf.load_environment("vf-test-ep", n=3)
    assert env.tag == "ep" and len(env.dataset) == 3
    assert env.env_id == "vf-test-ep" and env.env_args == {"n": 3}
    assert env.env_version == "0.3.1" and env.env_content_hash.startswith("sha256:")


def test_falls_back_to_module_name_with_dashes(site):
    install_fake_dist(site, "vf-test-mod", "vf_test_mod", "1.0.0", "mod")
    assert vf.load_environment("vf-test-mod").tag == "mod"


def test_owner_prefixed_entry_point_wins_and_owners_do_not_collide(site):
    install_fake_dist(
        site, "alice--game", "alice__game", "0.1.0", "alice", entry_point_name="alice/game"
    )
    install_fake_dist(site, "bob--game", "bob__game", "0.2.0", "bob", entry_point_name="bob/game")
    assert vf.load_environment("alice/game").tag == "alice"
    assert vf.load_environment("bob/game").tag == "bob"
    assert vf.load_environment("bob/game@0.2.0").env_version == "0.2.0"


def test_version_mismatch_is_explained(site):
    install_fake_dist(
        site, "vf-test-ver", "vf_test_ver", "0.1.1", "v", entry_point_name="vf-test-ver"
    )
    with pytest.raises(
        EnvironmentNotFoundError,
        match=r"vf-test-ver 0.1.1 is installed but vf-test-ver@0.1.0 was requested",
    ) as refused:
        vf.load_environment("vf-test-ver@0.1.0")
    # the hint is a command prime takes: hub installs name an owner
    hint = re.search(r"`prime env install ([^`]+)`", str(refused.value)).group(1)
    assert hint == "OWNER/vf-test-ver@0.1.0"


def test_not_found_names_everything_tried(site):
    with pytest.raises(EnvironmentNotFoundError) as excinfo:
        vf.load_environment("carol/nothing-here")
    message = str(excinfo.value)
    for tried in (
        "entry point 'carol/nothing-here'",
        "entry point 'nothing-here'",
        "module 'carol__nothing_here'",
        "module 'nothing_here'",
        "vf-install nothing-here",
    ):
        assert tried in message


def test_missing_dependency_inside_environment_is_not_hidden(site):
    (site / "vf_test_broken.py").write_text("import some_dependency_that_is_missing\n")
    with pytest.raises(ModuleNotFoundError, match="some_dependency_that_is_missing"):
        vf.load_environment("vf-test-broken")


def test_bad_env_args_list_what_is_accepted(site):
    install_fake_dist(site, "vf-test-args", "vf_test_args", "1.0.0", "a")
    with pytest.raises(TypeError, match=r"rejected arguments \['bogus'\].*it accepts: n, tag"):
        vf.load_environment("vf-test-args", bogus=1)


def test_import_is_light():
    import subprocess

    code = "import sys, verifiers; print(sorted(m for m in ('datasets', 'openai', 'torch', 'math_verify', 'aiohttp') if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "[]"


def test_an_editable_install_reports_the_version_its_code_has(tmp_path):
    """After `prime env push --bump patch` the pyproject says 0.1.1 before any reinstall; the
    version an evaluation records is that one, not the stale installed metadata."""
    import shutil
    import subprocess
    import sys

    from verifiers.loading.loader import editable_source

    source = editable_source("reverse-text")
    assert source is not None and (source / "pyproject.toml").exists()
    copy = tmp_path / "pyproject.toml"
    shutil.copy(source / "pyproject.toml", copy)
    try:
        text = (source / "pyproject.toml").read_text()
        installed = subprocess.run(
            [
                sys.executable,
                "-c",
                "import importlib.metadata as m; print(m.version('reverse-text'))",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        bumped = text.replace(f'version = "{installed}"', 'version = "9.9.9"', 1)
        assert bumped != text
        (source / "pyproject.toml").write_text(bumped)
        env = vf.load_environment("reverse-text")
        assert env.env_version == "9.9.9"
    finally:
        shutil.copy(copy, source / "pyproject.toml")


def test_owner_name_loads_that_owners_package_or_says_whose_is_installed(tmp_path, monkeypatch):
    """`vf-eval bob/x` must not run alice's x: the owner is checked against what `prime env
    install` recorded; a local install answers to its bare name only."""
    import sys

    from verifiers.installs.provenance import write_record

    monkeypatch.setattr(sys, "prefix", str(tmp_path))  # records of a throwaway prefix
    with pytest.raises(
        EnvironmentNotFoundError, match=r"not from a hub owner.*load it as 'reverse-text'"
    ):
        vf.load_environment("alice/reverse-text")
    write_record(
        "reverse-text",
        {"owner": "alice", "name": "reverse-text", "version": "0.1.0"},
        str(tmp_path),
    )
    assert vf.load_environment("alice/reverse-text").env_id == "alice/reverse-text"
    with pytest.raises(
        EnvironmentNotFoundError, match="installed here is alice/reverse-text, not bob/reverse-text"
    ):
        vf.load_environment("bob/reverse-text")
    assert vf.load_environment("reverse-text")  # the bare name still loads whatever is installed


def test_a_distribution_installed_after_its_module_was_looked_up_is_seen(site):
    """The distribution a module came from is looked up once while nothing on the import path
    changes (a worker pool's template looks it up for the workers it forks); an install made
    after that lookup is seen by the next."""
    from verifiers.loading.loader import locate_environment

    (site / "vf_test_late.py").write_text(ENV_SOURCE.format(tag="late"))
    assert locate_environment("vf-test-late")[1].dist_name is None
    assert locate_environment("vf-test-late")[1].dist_name is None
    (site / "vf_test_late.py").unlink()
    install_fake_dist(site, "vf-test-late", "vf_test_late", "1.0", "late")
    assert locate_environment("vf-test-late")[1].dist_name == "vf-test-late"
