"""Archives an installer would read differently, or not at all, are refused at upload with a
code (third attack pass: F7, F11): zips whose two lists of members disagree or that carry
another archive, names with control characters, a member twice or a file that is also a
directory, metadata installers cannot parse, sdists whose top directory is not the package's.
Whatever a broken archive makes the decoders raise is a coded 400, never a 500. A real hub
process on loopback, on both storage backends; the legitimate upload works after each."""

from __future__ import annotations

import functools
import io
import random
import struct
import subprocess
import sys
import tarfile
import threading
import zipfile
import zlib
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from support.hubs import error_code as code
from support.hubs import package, publish, serving, user, zipped
from support.hubs import run_prime as prime

from hub_protocol.archives import UnsafeArchiveError, extract_sdist, inspect_sdist, inspect_wheel


@pytest.fixture(scope="module")
def hub(tmp_path_factory, hub_backend):
    with serving(tmp_path_factory, hub_backend) as running:
        yield running


# --- archives as a hostile uploader makes them --------------------------------------------------


def headers_naming(data: bytes, name: bytes) -> list[int]:
    """Offsets of the flags field of every local and central header that names ``name``."""
    found, start = [], 0
    while (at := data.find(name, start)) >= 0:
        if data[at - 30 : at - 26] == b"PK\x03\x04":
            found.append(at - 30 + 6)
        elif data[at - 46 : at - 42] == b"PK\x01\x02":
            found.append(at - 46 + 8)
        start = at + 1
    return found


def with_flags(data: bytes, name: bytes, bits: int) -> bytes:
    out = bytearray(data)
    for offset in headers_naming(data, name):
        (flags,) = struct.unpack_from("<H", out, offset)
        struct.pack_into("<H", out, offset, flags | bits)
    return bytes(out)


def renamed(data: bytes, old: bytes, new: bytes, local_only: bool = False) -> bytes:
    """``old`` member name spelled ``new`` (same length) in its local header, or in both lists."""
    assert len(old) == len(new)
    return data.replace(old, new, 1 if local_only else -1)


def corrupted_deflate(data: bytes, member: str) -> bytes:
    info = zipfile.ZipFile(io.BytesIO(data)).getinfo(member)
    start = info.header_offset + 30 + len(info.orig_filename) + len(info.extra)
    out = bytearray(data)
    for offset in range(start + 2, start + min(info.compress_size, 12)):
        out[offset] ^= 0xFF
    return bytes(out)


def bzip2_member() -> bytes:
    data = package()[1]
    buf = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(buf, "w") as out:
        for info in source.infolist():
            method = zipfile.ZIP_BZIP2 if info.filename.endswith("__init__.py") else 0
            out.writestr(info.filename, source.read(info), method)
    return buf.getvalue()


def with_extra(data: bytes, member: str, field: int, payload: bytes) -> bytes:
    """``data`` with ``member`` carrying the extra field ``field`` in both of its headers."""
    buf = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(buf, "w") as out:
        for info in source.infolist():
            if info.filename == member:
                info.extra = struct.pack("<2H", field, len(payload)) + payload
            out.writestr(info, source.read(info))
    return buf.getvalue()


NOTICE = "arc_env-1.0.0.dist-info/licenses/NOTICE"


def renamed_by_unicode_path(new_name: bytes) -> bytes:
    """A wheel whose NOTICE (all Python's zipfile reads) carries Info-ZIP's Unicode Path field
    naming ``new_name``, which uv and ``unzip`` use as the member's name instead."""
    data = package(members=((NOTICE, b"import os\n"),))[1]
    crc = struct.pack("<I", zlib.crc32(NOTICE.encode()))
    return with_extra(data, NOTICE, 0x7075, b"\x01" + crc + new_name)


CLEAN = package()[1]
INIT = b"arc_env/__init__.py"
NOT_UTF8 = b"arc_env/__init__\xff\xfe\xfd"  # as long as INIT: the rest of the zip stays put
WHEEL_TRICKS = {
    # the local header names another member than the central directory (a .pth, a traversal)
    "local-header-name": (renamed(CLEAN, INIT, b"zzzzzzzzzzzzzzz.pth", True), "invalid_archive"),
    "local-header-escape": (renamed(CLEAN, INIT, b"../../../../../../x", True), "invalid_archive"),
    "second-zip-prepended": (zipped([("zz.pth", b"import os\n")]) + CLEAN, "invalid_archive"),
    "trailing-data": (CLEAN + b"\0" * 64, "invalid_archive"),
    "a-zip-appended": (CLEAN + zipped([("zz.pth", b"import os\n")]), "invalid_archive"),
    "bzip2-member": (bzip2_member(), "invalid_archive"),
    "encrypted-member": (with_flags(CLEAN, INIT, 0x1), "invalid_archive"),
    "corrupt-deflate": (
        corrupted_deflate(package(compression=zipfile.ZIP_DEFLATED)[1], INIT.decode()),
        "invalid_archive",
    ),
    "name-not-utf8": (
        with_flags(renamed(CLEAN, INIT, NOT_UTF8), NOT_UTF8, 0x800),
        "invalid_archive",
    ),
    "newline-in-name": (package(members=(("arc_env/a\nb.py", b""),))[1], "unsafe_path"),
    "nul-in-name": (renamed(CLEAN, INIT, b"arc_env/_\x00init__.py"), "unsafe_path"),
    "bidi-override-in-name": (package(members=(("arc_env/\u202eyp.py", b""),))[1], "unsafe_path"),
    "file-and-directory": (
        package(members=(("arc_env/x", b"file"), ("arc_env/x/y.py", b"")))[1],
        "duplicate_member",
    ),
    "file-and-directory-entry": (
        package(members=(("arc_env/sub", b"file"), ("arc_env/sub/", b"")))[1],
        "duplicate_member",
    ),
    "same-path-spelled-twice": (
        package(members=(("arc_env/a.py", b"1"), ("arc_env//a.py", b"2")))[1],
        "duplicate_member",
    ),
    # a second name that Python ignores and uv installs under (a fourth attack pass)
    "unicode-path-extra": (renamed_by_unicode_path(b"zz_evil.pth"), "invalid_archive"),
    # a Unix mode and link target that Python ignores
    "asi-unix-extra": (
        with_extra(
            CLEAN, INIT.decode(), 0x756E, b"\0" * 4 + struct.pack("<H", 0o120777) + b"\0" * 8
        ),
        "invalid_archive",
    ),
}


@pytest.mark.parametrize("trick", sorted(WHEEL_TRICKS))
def test_a_wheel_installers_would_read_otherwise_is_refused_with_a_code(hub, trick):
    data, expected = WHEEL_TRICKS[trick]
    owner, token = user(hub)
    refused = publish(hub, token, owner, "arc-env", ("arc_env-1.0.0-py3-none-any.whl", data))
    assert refused.status_code == 400 and code(refused) == expected, refused.text
    assert publish(hub, token, owner, "arc-env", package()).status_code == 201


ENTRY_POINTS = "arc_env-1.0.0.dist-info/entry_points.txt"
METADATA_TRICKS = {
    "index-url": (
        {"metadata": "Requires-Dist: six --index-url http://127.0.0.1:1/\n"},
        "invalid_metadata",
    ),
    "bare-option": (
        {"metadata": "Requires-Dist: --index-url http://127.0.0.1:1/\n"},
        "invalid_metadata",
    ),
    "comment": ({"metadata": "Requires-Dist: six # a comment\n"}, "invalid_metadata"),
    "python": ({"metadata": "Requires-Python: >=3.11 or so\n"}, "invalid_metadata"),
    "name-twice": ({"metadata": "Name: other-env\n"}, "invalid_metadata"),
    "long-version": ({"version": "1." + "9" * 90}, "invalid_version"),
    "huge-version": ({"version": "1.18446744073709551616"}, "invalid_version"),
    "3000-digit-version": ({"version": "1." + "9" * 3000}, "invalid_filename"),
    "entry-point-code": (
        {"members": ((ENTRY_POINTS, b"[console_scripts]\narc-env = os; import evil\n"),)},
        "invalid_metadata",
    ),
    "entry-point-nul": (
        {"members": ((ENTRY_POINTS, b"[console_scripts]\narc-env = arc_env:ma\x00in\n"),)},
        "invalid_metadata",
    ),
}


@pytest.mark.parametrize("trick", sorted(METADATA_TRICKS))
def test_metadata_installers_cannot_parse_is_refused(hub, trick):
    """uv refuses the whole METADATA (which the hub serves as PEP 658 metadata) when a line
    does not parse, keeps each number of a version in 64 bits, and writes a launcher for each
    console script from its object reference."""
    made, expected = METADATA_TRICKS[trick]
    owner, token = user(hub)
    refused = publish(hub, token, owner, "arc-env", package(**made))
    assert refused.status_code == 400 and code(refused) == expected, refused.text
    fine = package(
        metadata='Requires-Dist: six>=1; python_version > "3"\nRequires-Python: >=3.11\n',
        members=((ENTRY_POINTS, b"[console_scripts]\narc-env = arc_env.cli:main [cli]\n"),),
    )
    assert publish(hub, token, owner, "arc-env", fine).status_code == 201


def test_uv_installs_a_member_under_the_name_its_unicode_path_field_gives(tmp_path):
    """Why the hub refuses the field: the member Python's zipfile reads as a licence file, uv
    installs from an index (streaming the local headers) as a ``.pth``, code run at every start
    of the interpreter. Before the fix such a wheel published, and the official client's plain
    ``uv pip install`` from the hub's index ran it."""
    from uv import find_uv_bin

    served = tmp_path / "index"
    served.mkdir()
    wheel = served / "arc_env-1.0.0-py3-none-any.whl"
    wheel.write_bytes(renamed_by_unicode_path(b"zz_evil.pth"))
    assert NOTICE in zipfile.ZipFile(wheel).namelist()
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(served))
    with ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        links = f"http://127.0.0.1:{server.server_address[1]}/"
        into = ["--python", sys.executable, "--target", str(tmp_path / "site")]
        source = ["--no-config", "--no-cache", "--no-index", "--no-deps", "--find-links", links]
        installed = subprocess.run(
            [find_uv_bin(), "pip", "install", *source, *into, "arc-env"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        server.shutdown()
    assert installed.returncode == 0, installed.stderr
    assert (tmp_path / "site" / "zz_evil.pth").read_bytes() == b"import os\n"
    with pytest.raises(UnsafeArchiveError, match="Unicode Path") as refused:
        inspect_wheel(wheel.read_bytes())
    assert refused.value.code == "invalid_archive"


def test_wheels_other_zip_writers_make_still_publish(hub):
    """What the layout check must not refuse: data descriptors (a zip written to a stream),
    zip64 extra fields, an archive comment."""

    class Stream(io.RawIOBase):
        def __init__(self) -> None:
            self.data = bytearray()

        def writable(self) -> bool:
            return True

        def write(self, chunk) -> int:
            self.data += chunk
            return len(chunk)

    owner, token = user(hub)
    _, plain = package(compression=zipfile.ZIP_DEFLATED)
    stream = Stream()
    with zipfile.ZipFile(io.BytesIO(plain)) as source:
        with zipfile.ZipFile(stream, "w", zipfile.ZIP_DEFLATED) as out:
            out.comment = b"built by a streaming writer"
            for info in source.infolist():
                with out.open(info.filename, "w", force_zip64=True) as member:
                    member.write(source.read(info))
    streamed = bytes(stream.data)
    assert zipfile.ZipFile(io.BytesIO(streamed)).infolist()[0].flag_bits & 0x8  # descriptors
    resp = publish(hub, token, owner, "arc-env", ("arc_env-1.0.0-py3-none-any.whl", streamed))
    assert resp.status_code == 201, resp.text


def fuzzed(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(out))
        roll = rng.random()
        if roll < 0.6:
            out[at] = rng.randrange(256)
        elif roll < 0.8:
            del out[at : at + rng.randint(1, 30)]
        else:
            out[at:at] = rng.randbytes(rng.randint(1, 30))
    return bytes(out)


def test_every_corruption_of_a_package_is_a_coded_refusal():
    """Bytes changed, cut or inserted anywhere in a wheel or an sdist: the checks accept the
    archive or refuse it with a code; no decoder's own exception gets out (the hub would
    answer it with a 500)."""
    rng = random.Random(20)
    wheel = package(compression=zipfile.ZIP_DEFLATED)[1]
    sdist = sdist_bytes([("arc_env-1.0.0/PKG-INFO", PKG_INFO), ("arc_env-1.0.0/a.py", b"x" * 300)])
    for inspect, data in ((inspect_wheel, wheel), (inspect_sdist, sdist)):
        for _ in range(1500):
            try:
                inspect(fuzzed(data, rng))
            except UnsafeArchiveError:
                pass


# --- sdists ----------------------------------------------------------------------------------------

PKG_INFO = b"Metadata-Version: 2.1\nName: arc-env\nVersion: 1.0.0\n"


def sdist_bytes(members: list[tuple[str, bytes | None]]) -> bytes:
    """A tar.gz of ``members``, in order (``None``: a directory)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def rooted(root: str, *members: tuple[str, bytes | None]) -> bytes:
    return sdist_bytes([(f"{root}/PKG-INFO", PKG_INFO), *((f"{root}/{n}", d) for n, d in members)])


ROOT = "arc_env-1.0.0"
SDIST_TRICKS = {
    "another-packages-directory": (rooted("aa_clean-1.0.0"), "metadata_mismatch"),
    "a-directory-of-its-choice": (rooted("bin", ("conftest.py", b"")), "metadata_mismatch"),
    "unnormalized-name": (rooted("arc-env-1.0.0"), "metadata_mismatch"),
    "two-top-directories": (
        sdist_bytes([(f"{ROOT}/PKG-INFO", PKG_INFO), ("other/x.py", b"")]),
        "unsafe_path",
    ),
    "a-member-beside-the-directory": (
        sdist_bytes([(f"{ROOT}/PKG-INFO", PKG_INFO), ("setup.py", b"")]),
        "unsafe_path",
    ),
    "duplicate-member": (
        rooted(ROOT, ("pyproject.toml", b"[project]\n"), ("pyproject.toml", b"abc")),
        "duplicate_member",
    ),
    "duplicate-after-normalization": (
        rooted(ROOT, ("a.py", b"1"), ("./a.py", b"2")),
        "duplicate_member",
    ),
    "file-and-directory": (rooted(ROOT, ("x", b"f"), ("x/y.py", b"")), "duplicate_member"),
    "newline-in-name": (rooted(ROOT, ("a\nb.py", b"")), "unsafe_path"),
}


@pytest.mark.parametrize("trick", sorted(SDIST_TRICKS))
def test_an_sdist_holds_its_one_top_directory_named_as_uv_builds_it(hub, trick, tmp_path):
    """``prime env pull`` extracts into the sdist's top directory: it must be
    ``<normalized name>-<version>/`` and hold every member once, or the pull would land
    elsewhere (posing as another package's source) or fail half-way."""
    data, expected = SDIST_TRICKS[trick]
    owner, token = user(hub)
    sdist = ("arc_env-1.0.0.tar.gz", data)
    refused = publish(hub, token, owner, "arc-env", package(), sdist)
    assert refused.status_code == 400 and code(refused) == expected, refused.text
    with pytest.raises(UnsafeArchiveError):  # and a pull of one an older hub kept
        extract_sdist(data, tmp_path)
    assert list(tmp_path.iterdir()) == []
    assert publish(hub, token, owner, "arc-env", package(), GOOD_SDIST).status_code == 201


GOOD_SDIST = ("arc_env-1.0.0.tar.gz", rooted(ROOT, ("arc_env/__init__.py", b"x = 1\n")))


def test_a_pull_lands_in_the_packages_own_directory(hub, tmp_path):
    owner, token = user(hub)
    assert publish(hub, token, owner, "arc-env", package(), GOOD_SDIST).status_code == 201
    pulled = prime(hub, token, "env", "pull", f"{owner}/arc-env@1.0.0", "-d", "out", cwd=tmp_path)
    assert pulled.returncode == 0, pulled.stderr
    assert sorted(p.name for p in Path(tmp_path, "out").iterdir()) == [ROOT]


def test_a_pull_that_fails_midway_leaves_nothing_behind(tmp_path):
    """A write that fails while extracting (here the file-size limit; elsewhere a full disk, or
    names that collide on a case-insensitive filesystem) is a coded refusal, and the target
    holds no half-extracted directory."""
    big = rooted(ROOT, ("arc_env/__init__.py", b"x = 1\n"), ("arc_env/data.txt", b"y" * 65536))
    script = (
        "import resource, signal, sys\n"
        "from pathlib import Path\n"
        "from hub_protocol.archives import UnsafeArchiveError, extract_sdist\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
        "try:\n"
        "    extract_sdist(sys.stdin.buffer.read(), Path(sys.argv[1]))\n"
        "except UnsafeArchiveError as exc:\n"
        "    print(exc.code)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)], input=big, capture_output=True, check=True
    )
    assert out.stdout.decode().strip() == "extract_failed", out.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_pull_ended_by_sigterm_or_ctrl_c_leaves_nothing_behind(hub, tmp_path):
    """prime ends on SIGTERM as on Ctrl-C: the pull's hidden staging directory is removed on
    the way out, and it says it was interrupted (no traceback). SIGKILL runs no cleanup: what
    it leaves, the next pull into that directory removes (and never a live pull's)."""
    import os
    import signal
    import time

    owner, token = user(hub)
    payload = [(f"arc_env/blob{i}.bin", os.urandom(4 * 2**20)) for i in range(6)]
    sdist = ("arc_env-1.0.0.tar.gz", rooted(ROOT, ("arc_env/__init__.py", b""), *payload))
    assert publish(hub, token, owner, "arc-env", package(), sdist).status_code == 201
    env = {**os.environ, "PRIME_HUB_URL": hub["url"], "PRIME_API_KEY": token}
    env["PRIME_CONFIG_DIR"] = str(tmp_path / ".prime")
    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGKILL):
        out = tmp_path / f"out-{number}"
        out.mkdir()
        command = ["env", "pull", f"{owner}/arc-env@1.0.0", "-d", str(out)]
        pull = subprocess.Popen(
            [sys.executable, "-m", "hub_client.cli", *command],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while not any(out.glob(f".{ROOT}-*/{ROOT}/arc_env/blob0.bin")):  # 5 more to write
            assert pull.poll() is None and time.monotonic() < deadline, "no pull to interrupt"
            time.sleep(0.002)
        pull.send_signal(number)
        _, stderr = pull.communicate(timeout=60)
        if number != signal.SIGKILL:
            assert pull.returncode == 130 and "interrupted" in stderr and "Traceback" not in stderr
            assert list(out.iterdir()) == [], stderr
    (abandoned,) = out.iterdir()  # SIGKILL's leftover
    from verifiers.processes.leftovers import machine_key

    assert abandoned.name.startswith(f".{ROOT}-{machine_key()}-{pull.pid}.")
    live = out / f".{ROOT}-{machine_key()}-{os.getpid()}.abcdefgh"  # a pull still running
    elsewhere = out / f".{ROOT}-0123456789ab-{pull.pid}.abcdefgh"  # another machine's
    live.mkdir()
    elsewhere.mkdir()
    again = subprocess.run([sys.executable, "-m", "hub_client.cli", *command], env=env)
    assert again.returncode == 0
    assert sorted(out.iterdir()) == sorted([live, elsewhere, out / ROOT])


def test_the_hubs_answer_to_a_broken_upload_is_never_a_500(hub):
    """The fuzzed archives through the hub: each is a coded 4xx or a publish."""
    owner, token = user(hub)
    rng = random.Random(7)
    version = 0
    with httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=60) as client:
        for _ in range(30):
            version += 1
            name, data = package(version=f"1.0.{version}", compression=zipfile.ZIP_DEFLATED)
            resp = client.post(
                f"{hub['url']}/api/v1/environments/{owner}/arc-env/versions",
                files={"wheel": (name, fuzzed(data, rng))},
            )
            assert resp.status_code < 500, resp.text
            assert resp.status_code == 201 or resp.json()["error"]["code"]
