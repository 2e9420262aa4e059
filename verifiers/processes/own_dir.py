"""Directories and files a command writes into a path the user named must be the user's own: not a
link, not another user's, not writable by anyone, under directories nobody else can change (every
command that writes where the user says checks with this: SECURITY.md, "Output directories")."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from verifiers.errors import UsageError

TRUSTED_DIRS_ENV = "VF_TRUSTED_DIRS"
"""Directories, separated by ``os.pathsep``, whose owners the user trusts (as git's
``safe.directory``): a path at or under one may be another user's (a team's shared project
directory; as root, a checkout mounted into a container). Links and directories anyone may change
are refused there too."""

TRUST_HINT = f"(or, if you trust its owner, add it to {TRUSTED_DIRS_ENV})"


SECOND_NAME = (
    "has more than one name (a hard link: where fs.protected_hardlinks is 0, another user may "
    "link a file of yours into a shared directory)"
)


def _trusted(uid: int) -> bool:
    """Root can change anything anyway; anyone else's directory is theirs to swap entries in."""
    return uid in (os.geteuid(), 0)


def _trusted_place(path: Path) -> bool:
    """``path`` is at or under a directory named in ``VF_TRUSTED_DIRS`` (as written or
    resolved)."""
    roots: set[Path] = set()
    for entry in os.environ.get(TRUSTED_DIRS_ENV, "").split(os.pathsep):
        if entry and os.path.isabs(entry):
            roots |= {Path(os.path.abspath(entry)), Path(os.path.realpath(entry))}
    return any(path == root or root in path.parents for root in roots)


def _owned_elsewhere(uid: int, path: Path) -> bool:
    """The owner ``uid`` of ``path`` could swap what is under it and is not trusted."""
    return not _trusted(uid) and not _trusted_place(path)


def foreign_above_problem(path: Path) -> str | None:
    """Why a directory above ``path`` makes it someone else's to change: one owned by another
    user (they may rename ``path`` away and put a link in its place), or one anyone may write
    without the sticky bit (anyone may). Checked along the path as written and as resolved, so
    a link on the way counts by its owner and where it leads."""
    for chain in (Path(os.path.abspath(path)), Path(os.path.realpath(path))):
        for above in reversed(chain.parents):
            try:
                info = above.lstat()
            except OSError:
                continue  # not there (yet): whatever makes it will be checked as the leaf
            if _owned_elsewhere(info.st_uid, above):
                return (
                    f"{above} (above {path}) belongs to uid {info.st_uid}: they could swap what "
                    f"is under it; choose a path of your own {TRUST_HINT}"
                )
            sticky = info.st_mode & stat.S_ISVTX
            if not stat.S_ISLNK(info.st_mode) and info.st_mode & stat.S_IWOTH and not sticky:
                return (
                    f"{above} (above {path}) may be changed by anyone (mode "
                    f"{oct(info.st_mode & 0o7777)}, no sticky bit); choose a path of your own"
                )
    return None


def foreign_dir_problem(out: Path, flag: str = "--output-dir") -> str | None:
    """Why a command may not write into the directory ``out``: a directory another user made
    first (in /tmp, say), one others may change, or one under a directory they may change; its
    files would be theirs to plant (a link where config.json or results.jsonl goes, a checkpoint
    --resume then runs). None when it is the user's own. ``flag`` is the command's name for it,
    said in the message."""
    problem = foreign_above_problem(out)  # first: the cause, when the leaf is theirs to swap
    if problem:
        return problem
    try:
        info = out.lstat()
    except OSError as exc:
        return f"cannot use {out} as the output dir: {exc}"
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        return f"{out} is not a directory of its own (a link or a file); choose another {flag}"
    if info.st_uid != os.geteuid() and not _trusted_place(Path(os.path.abspath(out))):
        return (
            f"{out} belongs to uid {info.st_uid}, not to you: what it holds is theirs to plant; "
            f"choose an {flag} of your own {TRUST_HINT}"
        )
    if info.st_mode & stat.S_IWOTH:
        return f"{out} may be changed by anyone (mode {oct(info.st_mode & 0o777)}); chmod o-w it"
    return None


def own_dir(out: Path, flag: str, mode: int = 0o777) -> str | None:
    """``out`` made when missing (with ``mode`` and the umask: 0o700 for what nobody else may
    read), then :func:`foreign_dir_problem`'s verdict."""
    problem = foreign_above_problem(out)  # before anything is made under another's directory
    if problem:
        return problem
    try:
        out.mkdir(mode=mode, parents=True, exist_ok=True)
    except OSError as exc:
        return f"cannot use {out} as the output dir ({flag}): {exc}"
    return foreign_dir_problem(out, flag)


def require_own_dir(out: Path, flag: str, mode: int = 0o777) -> None:
    """:func:`own_dir`, its problem raised as the command's ``UsageError`` (exit 2)."""
    problem = own_dir(out, flag, mode)
    if problem:
        raise UsageError(problem)


def require_writable_file(path: Path, flag: str) -> None:
    """:func:`foreign_file_problem`, raised as the command's ``UsageError`` (exit 2)."""
    problem = foreign_file_problem(path, flag)
    if problem:
        raise UsageError(problem)


def foreign_file_problem(path: Path, flag: str) -> str | None:
    """Why a command may not write the file ``path``: it is a link or not a regular file, it is
    another user's (planted where the command writes), or its directory is one others may
    change (a directory anyone may write is fine with the sticky bit: nobody else may rename
    or remove the user's entries there). None when the file may be written."""
    parent = path.parent
    try:
        above = parent.stat()
    except OSError as exc:
        return f"cannot write {path} ({flag}): {exc}"
    if not stat.S_ISDIR(above.st_mode):
        return f"cannot write {path} ({flag}): {parent} is not a directory"
    if _owned_elsewhere(above.st_uid, Path(os.path.abspath(parent))):
        return (
            f"{parent} belongs to uid {above.st_uid}: they could swap {path.name} there; "
            f"choose a {flag} of your own {TRUST_HINT}"
        )
    if above.st_mode & stat.S_IWOTH and not above.st_mode & stat.S_ISVTX:
        return (
            f"{parent} may be changed by anyone (mode {oct(above.st_mode & 0o7777)}); chmod o-w it"
        )
    try:
        info = path.lstat()
    except FileNotFoundError:
        return foreign_above_problem(path)
    except OSError as exc:
        return f"cannot write {path} ({flag}): {exc}"
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISREG(info.st_mode):
        return f"{path} is a link or not a regular file: not written through; choose another {flag}"
    if info.st_uid != os.geteuid() and not _trusted_place(Path(os.path.abspath(path))):
        return (
            f"{path} belongs to uid {info.st_uid}, not to you: not overwritten; "
            f"choose a {flag} of your own {TRUST_HINT}"
        )
    if info.st_nlink > 1:
        return f"{path} {SECOND_NAME}; choose another {flag}"
    return foreign_above_problem(path)


def write_own_file(path: Path, text: str, mode: int = 0o666) -> None:
    """Write ``text`` to ``path`` (UTF-8) without following a link there and without truncating a
    file that is not the user's: what :func:`foreign_file_problem` judged, held at the write
    (a link or a file planted after the check is refused, ``PermissionError``/``OSError``)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(path, flags, mode)  # O_NONBLOCK: a FIFO with no reader fails, never waits
    try:
        info = os.fstat(fd)
        theirs = info.st_uid != os.geteuid() and not _trusted_place(Path(os.path.abspath(path)))
        if not stat.S_ISREG(info.st_mode) or theirs:
            raise PermissionError(
                f"{path} is not a file of your own (uid {info.st_uid}): not written"
            )
        if info.st_nlink > 1:
            raise PermissionError(f"{path} {SECOND_NAME}: not written")
        os.set_blocking(fd, True)
        os.ftruncate(fd, 0)
        data = text.encode("utf-8")
        while data:
            data = data[os.write(fd, data) :]
    finally:
        os.close(fd)


def foreign_entry_problem(root: Path, flag: str) -> str | None:
    """Why what is already under the directory ``root`` may not be read back or written through
    (a run dir a command continues in): an entry that is a link, a FIFO, a socket or a device,
    another user's file or directory, or a file with a second name. A run dir copied from
    elsewhere (a colleague's tarball keeps its links and FIFOs) had ``vf-sft --resume`` write its
    ``config.json`` through a link into a file of the user's choosing by whoever made it, and a
    FIFO for ``metrics.jsonl`` held the resume forever. None when every entry is the user's own
    regular file or directory."""
    for top, dirs, files in os.walk(root):  # links are listed, never followed
        for name in (*dirs, *files):
            path = Path(top) / name
            try:
                info = path.lstat()
            except FileNotFoundError:
                continue
            except OSError as exc:
                return f"cannot read {path} ({flag}): {exc}"
            if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
                return (
                    f"{path} is a link or not a regular file or directory: nothing in {root} is "
                    f"read or written through one; remove it, or choose another {flag}"
                )
            if info.st_uid != os.geteuid() and not _trusted_place(Path(os.path.abspath(path))):
                return (
                    f"{path} belongs to uid {info.st_uid}, not to you: not read or overwritten; "
                    f"choose a {flag} of your own {TRUST_HINT}"
                )
            if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
                return f"{path} {SECOND_NAME}; not written through: choose another {flag}"
    return None
