"""Builds this project runs give the build backend a ``TMPDIR`` inside their own scratch
directory: a backend writes its wheel to a temporary file first, and a build stopped midway
left that file in the shared temporary directory (found by the hub benchmark's stop test)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from verifiers.cli.install import build_wheel
from verifiers.installs.uv_config import uv_binary

BACKEND = textwrap.dedent("""
    import os, tempfile, zipfile

    def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
        with open(os.environ["RECORD"], "w") as f:
            f.write(tempfile.gettempdir())
        name = "probe-0.1-py3-none-any.whl"
        with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as z:
            z.writestr("probe-0.1.dist-info/METADATA", "Metadata-Version: 2.1\\nName: probe\\nVersion: 0.1\\n")
            z.writestr("probe-0.1.dist-info/WHEEL", "Wheel-Version: 1.0\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n")
            z.writestr("probe-0.1.dist-info/RECORD", "")
        return name

    def get_requires_for_build_wheel(config_settings=None):
        return []
""")


def test_a_build_backends_temporary_files_go_in_the_builds_own_directory(tmp_path, monkeypatch):
    project, out = tmp_path / "probe", tmp_path / "out"
    project.mkdir()
    out.mkdir()
    (project / "backend.py").write_text(BACKEND)
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'
        '[project]\nname = "probe"\nversion = "0.1"\n'
    )
    record = tmp_path / "tmpdir"
    monkeypatch.setenv("RECORD", str(record))
    uv = uv_binary()
    assert uv is not None
    wheel = build_wheel(uv, project, out)
    assert wheel.name == "probe-0.1-py3-none-any.whl"
    assert Path(record.read_text()).parent == out  # $TMPDIR was inside the build's own dir
