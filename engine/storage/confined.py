"""Directories opened below a storage root without following a symbolic link out of it.

A check of a path and the write that follows cannot disagree when the write goes through a
directory *opened* by the check: :func:`open_below` walks from the root one component at a time
(``os.open(name, O_DIRECTORY | O_NOFOLLOW, dir_fd=parent)``), so a directory swapped for a
symbolic link after the check is met as a link, not followed. A link met on the way is resolved
by hand and followed only while it stays below the root; anything else is a
:class:`~engine.errors.RootEscapeError`.

The opened directory is reached by path through ``/proc/<pid>/fd/<fd>`` (:attr:`ConfinedDir.path`):
a path whose first step is the open directory itself, whatever happens to the names above it,
and which another process of the same user (Spark's JVM) can write through as well. Where
``/proc`` is missing the path is the directory's checked location, a best effort.

>>> import tempfile
>>> root = Path(tempfile.mkdtemp())
>>> with open_below(root, ("a", "b"), create=True) as opened:
...     (opened.path / "x.txt").write_text("hi")
2
>>> (root / "a" / "b" / "x.txt").read_text()
'hi'
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import uuid
from collections.abc import Sequence
from pathlib import Path

from engine.errors import RootEscapeError, StorageError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
MAX_LINK_HOPS = 40


def fd_path(fd: int) -> Path | None:
    """A path reaching the directory open as ``fd`` itself, for this process and others of the
    same user (Spark's JVM): ``/proc/<pid>/fd/<fd>``; None without ``/proc``."""
    proc = Path(f"/proc/{os.getpid()}/fd")
    return proc / str(fd) if proc.is_dir() else None


class ConfinedDir:
    """A directory opened below a root: its descriptor, its location below the root (links
    resolved) and a :attr:`path` that reaches exactly this directory."""

    def __init__(self, fd: int, root: Path, rel: tuple[str, ...]) -> None:
        self.fd = fd
        self.root = root
        self.rel = rel

    @property
    def location(self) -> Path:
        """Where the directory sits below the root (for messages)."""
        return self.root.joinpath(*self.rel)

    @property
    def path(self) -> Path:
        """A path to this very directory: ``/proc/<pid>/fd/<fd>`` (see the module docstring)."""
        return fd_path(self.fd) or self.location

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> ConfinedDir:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def open_below(
    root: Path,
    parts: Sequence[str],
    *,
    create: bool = False,
    what: str = "path",
) -> ConfinedDir:
    """The directory ``root/parts`` opened without leaving ``root`` (created with ``create``).

    ``root`` itself is trusted (it may be a link, and is created if missing with ``create``); below it, a link is followed only to a place
    below the root, never by the kernel. ``what`` names the path in messages.
    """
    root = Path(os.path.abspath(root))
    real_root = os.path.realpath(root)
    try:
        if create:
            os.makedirs(root, exist_ok=True)  # the root is trusted: made as configured
        root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as err:
        raise StorageError(f"cannot open the storage root {root}: {err.strerror}") from err
    fds = [root_fd]
    names: list[str] = []
    pending = list(parts)
    hops = 0
    try:
        while pending:
            name = pending.pop(0)
            if name in ("", "."):
                continue
            if name == "..":
                if not names:
                    raise _escape(what, root, None)
                os.close(fds.pop())
                names.pop()
                continue
            try:
                fd = os.open(name, _DIR_FLAGS, dir_fd=fds[-1])
            except FileNotFoundError:
                if not create:
                    raise StorageError(
                        f"{what}: {root.joinpath(*names, name)} does not exist"
                    ) from None
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, dir_fd=fds[-1])
                pending.insert(0, name)  # open it (a link planted meanwhile is met as a link)
                continue
            except OSError as err:
                if err.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise StorageError(
                        f"cannot open {root.joinpath(*names, name)} for the {what}: {err.strerror}"
                    ) from err
                link = _link_text(name, fds[-1])
                if link is None:
                    raise StorageError(
                        f"{what}: {root.joinpath(*names, name)} is a file, not a directory"
                    ) from None
                hops += 1
                if hops > MAX_LINK_HOPS:
                    raise StorageError(
                        f"{what}: too many symbolic links at {root.joinpath(*names, name)}"
                    ) from None
                if link.startswith("/"):
                    below = _below(posixpath.normpath(link), (str(root), real_root))
                    if below is None:
                        raise _escape(what, root, root.joinpath(*names, name)) from None
                    for extra in fds[1:]:
                        os.close(extra)
                    del fds[1:]
                    names.clear()
                    pending[:0] = below
                else:
                    # relative: resolved from the link's directory; ".." may climb (not past root)
                    pending[:0] = [p for p in link.split("/") if p]
                    _check_climb(pending, len(names), what, root, root.joinpath(*names, name))
                continue
            fds.append(fd)
            names.append(name)
        opened = ConfinedDir(fds.pop(), root, tuple(names))
        return opened
    finally:
        for fd in fds:
            os.close(fd)


def write_file_below(root: Path, rel: str, data: bytes, *, what: str = "file") -> None:
    """Write ``data`` to ``root/rel`` atomically (a new file renamed over the old one), with
    every directory opened by :func:`open_below` and the file never opened through a link."""
    *parents, name = [p for p in rel.split("/") if p]
    with open_below(root, parents, create=True, what=what) as directory:
        staged = f".{name}.{uuid.uuid4().hex}.tmp"
        fd = os.open(
            staged,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o666,
            dir_fd=directory.fd,
        )
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(staged, name, src_dir_fd=directory.fd, dst_dir_fd=directory.fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(staged, dir_fd=directory.fd)
            raise


def _link_text(name: str, dir_fd: int) -> str | None:
    try:
        return os.readlink(name, dir_fd=dir_fd)
    except OSError:
        return None


def _below(path: str, roots: Sequence[str]) -> list[str] | None:
    for root in roots:
        if path == root:
            return []
        if path.startswith(root.rstrip("/") + "/"):
            return [p for p in path[len(root) :].split("/") if p]
    return None


def _check_climb(pending: list[str], depth: int, what: str, root: Path, link: Path) -> None:
    """A relative link's ``..`` steps must not climb above the root."""
    for name in pending:
        if name == "..":
            depth -= 1
            if depth < 0:
                raise _escape(what, root, link)
        elif name not in ("", "."):
            depth += 1


def _escape(what: str, root: Path, link: Path | None) -> RootEscapeError:
    through = f" through the symbolic link {link}" if link is not None else ""
    return RootEscapeError(
        f"{what} escapes the storage root ({root}){through}",
        hint="symlinks inside a storage root must point inside it",
    )
