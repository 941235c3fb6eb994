"""Atomic replacement of a store target: stage a new version, then swap one symlink.

A target ``<parent>/<name>`` written by a store is a symbolic link to a version directory beside
it, ``<parent>/.<name>.v-<id>``. A write:

1. takes an exclusive lock (``.<name>.lock``; a second writer waits, then fails clearly);
2. cleans what a killed writer left (see below);
3. fills ``.<name>.staging-<id>``: hard links to the files of the current version it keeps (an
   append keeps all; a partitioned overwrite keeps the partitions it does not write), then the new
   files; every file and directory is fsynced;
4. renames the staging directory to ``.<name>.v-<id>`` and atomically replaces ``<name>`` with a
   link to it (``rename(2)`` of a new symlink over the old one), then fsyncs the parent;
5. deletes the previous version.

Readers open ``<name>`` and see either the old version or the new one, complete. Hidden names
(``.``) keep staging and old versions out of every listing.

Crash windows: killed before step 4's swap, the old version stays current and the next write
deletes the leftovers; killed after it, the new version is current and the next write deletes the
old one. The one window where the target is briefly absent is the *first* overwrite of a target
that is a plain directory or file (written by something else): it is renamed to
``.<name>.legacy-<id>`` and the link takes its place; a crash between those two renames leaves no
``<name>``, and the next write (or :func:`recover`) renames the legacy copy back. Hard links need a
filesystem that supports them; elsewhere the kept files are copied.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import shutil
import stat
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa

from engine.errors import RootEscapeError, StorageError
from engine.storage.confined import fd_path

LOCK_POLL_SECONDS = 0.05


class VersionedTarget:
    """The directory layout of one store target; see the module docstring.

    >>> t = VersionedTarget(Path("/data/out/sales"))
    >>> t.version_path("ab12").name
    '.sales.v-ab12'
    """

    def __init__(self, path: Path, *, shown: Path | None = None) -> None:
        self.path = path
        self.shown = shown or path  # how messages name it (``path`` may run through a /proc fd)
        self.parent = path.parent
        self.name = path.name
        self._version = re.compile(rf"^\.{re.escape(self.name)}\.v-([0-9a-f]{{32}})$")
        self._leftover = re.compile(
            rf"^\.{re.escape(self.name)}\.(v|staging|link|legacy)-([0-9a-f]{{32}})$"
        )

    def version_path(self, version: str) -> Path:
        return self.parent / f".{self.name}.v-{version}"

    def staging_path(self, version: str) -> Path:
        return self.parent / f".{self.name}.staging-{version}"

    def exists(self) -> bool:
        return os.path.lexists(self.path)

    def current_version(self) -> str | None:
        """The version the target links to, if it is one of ours."""
        if not self.path.is_symlink():
            return None
        match = self._version.match(os.readlink(self.path))
        return match.group(1) if match else None

    def current_data(self) -> Path | None:
        """The directory holding the current files (None: no target, or a plain file)."""
        if not self.exists():
            return None
        current = self.current_version()
        if current is not None:  # beside the target: no path resolved again from the top
            return self.version_path(current)
        real = Path(os.path.realpath(self.path))
        return real if real.is_dir() else None

    def leftovers(self) -> Iterator[tuple[str, Path]]:
        """``(kind, path)`` of every version, staging dir, link and legacy copy beside the target."""
        with contextlib.suppress(FileNotFoundError):
            for entry in os.scandir(self.parent):
                match = self._leftover.match(entry.name)
                if match:
                    yield match.group(1), Path(entry.path)


def recover(target: VersionedTarget) -> None:
    """Undo what a killed writer left: roll back a half-done legacy swap, delete the rest.
    Call it holding the target's lock."""
    current = target.current_version()
    for kind, leftover in sorted(target.leftovers()):
        if kind == "legacy" and not target.exists():
            os.rename(leftover, target.path)
            fsync_dir(target.parent)
        elif kind == "v" and leftover == target.version_path(current or ""):
            continue
        else:
            remove(leftover)


@contextlib.contextmanager
def target_lock(target: VersionedTarget, *, timeout: float) -> Iterator[None]:
    """Hold the target's exclusive lock; a StorageError if another writer holds it too long.
    The lock file is never opened through a symbolic link."""
    target.parent.mkdir(parents=True, exist_ok=True)
    lock_path = target.parent / f".{target.name}.lock"
    with open(_open_no_link(lock_path, target.shown.parent), "a+b") as handle:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise StorageError(
                        f"store target {target.shown} is being written by another run "
                        f"(waited {timeout:g} s for its lock)",
                        hint="run the stores one after the other, or retry when the other finishes",
                    ) from None
                time.sleep(LOCK_POLL_SECONDS)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


class Commit:
    """One staged write of a target: fill :attr:`staging`, then :meth:`commit` (or it is
    discarded). Use inside :func:`target_lock`, after :func:`recover`."""

    def __init__(self, target: VersionedTarget) -> None:
        self.target = target
        self.version = uuid.uuid4().hex
        self.staging = target.staging_path(self.version)
        self.committed = False
        # What the store wrote, for the metadata repository (engine.metadata): set by the store.
        self.schema: pa.Schema | None = None
        self.metadata_file: Path | None = None
        self.metadata_root: Path | None = None  # the engine root ``metadata_file`` lies under
        self._staging_fd = -1

    def __enter__(self) -> Commit:
        named = self.target.staging_path(self.version)
        named.mkdir()
        # Writers reach staging through its descriptor: a link swapped in for it is not followed.
        self._staging_fd = os.open(named, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        self.staging = fd_path(self._staging_fd) or named
        return self

    def __exit__(self, exc_type: object, *_: object) -> None:
        if not self.committed:
            remove(self.target.staging_path(self.version))
        if self._staging_fd >= 0:
            os.close(self._staging_fd)
            self._staging_fd = -1

    def carry_over(self, keep: Callable[[str], bool]) -> list[str]:
        """Link into staging each current file whose relative path ``keep`` accepts."""
        source = self.target.current_data()
        if source is None:
            return []
        kept = []
        for directory, subdirs, files in os.walk(source):
            subdirs.sort()
            rel_dir = os.path.relpath(directory, source)
            for name in sorted(files):
                rel = name if rel_dir == "." else f"{rel_dir}/{name}"
                if not keep(rel):
                    continue
                destination = self.staging / rel
                destination.parent.mkdir(parents=True, exist_ok=True)
                try:
                    # a link planted in a version is carried as a link, never as what it names
                    os.link(os.path.join(directory, name), destination, follow_symlinks=False)
                except OSError:
                    shutil.copy2(os.path.join(directory, name), destination, follow_symlinks=False)
                kept.append(rel)
        return kept

    def commit(self) -> None:
        """Make the staged version the target's, atomically; then drop the previous one.

        Everything that can fail about the new version (its files' durability, its metadata) is
        done before the swap, so a failure leaves the previous version current. After the swap the
        new version is live: a failure then (dropping the previous version) is a StorageError
        that says so, never the "previous version is unchanged" of a failed write.
        """
        for directory, _, files in os.walk(self.staging):
            for name in files:
                fsync_file(Path(directory, name))
            fsync_dir(Path(directory))
        target = self.target
        if self.metadata_file is not None:  # the storage engine informs the metadata repository
            from engine.storage.version_file import write_version_metadata

            # Written first: a reader ignores metadata whose version is not the current one.
            write_version_metadata(
                self.staging,
                self.metadata_file,
                version=self.version,
                schema=self.schema,
                root=self.metadata_root,
            )
        previous = target.current_version()
        foreign = target.exists() and previous is None and not target.path.is_symlink()
        version_path = target.version_path(self.version)
        staged = target.staging_path(self.version)
        if not _same_directory(staged, self._staging_fd):
            raise StorageError(
                f"the staged version of store target {target.shown} was replaced while it was "
                "written (by another process?); nothing was committed"
            )
        os.rename(staged, version_path)
        link = target.parent / f".{target.name}.link-{self.version}"
        os.symlink(version_path.name, link)
        legacy = target.parent / f".{target.name}.legacy-{self.version}"
        if foreign:
            os.rename(target.path, legacy)  # the window described in the module docstring
        os.replace(link, target.path)
        self.committed = True
        try:
            fsync_dir(target.parent)
            if previous is not None:
                remove(target.version_path(previous))
            if foreign:
                remove(legacy)
        except OSError as err:
            raise StorageError(
                f"store target {target.path} now holds the new version {self.version} (committed "
                f"and live), but cleaning up after it failed: {err}",
                hint="the data is written; the next write of this target deletes what is left "
                "of the previous version",
            ) from err


def _same_directory(path: Path, fd: int) -> bool:
    if fd < 0:
        return True
    try:
        entry = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    mine = os.fstat(fd)
    return stat.S_ISDIR(entry.st_mode) and (entry.st_dev, entry.st_ino) == (
        mine.st_dev,
        mine.st_ino,
    )


def _open_no_link(path: Path, shown_dir: Path) -> int:
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise RootEscapeError(
                f"the lock file {shown_dir / path.name} is a symbolic link; a store does not "
                "follow links among its own files",
                hint="remove the link",
            ) from None
        raise


def remove(path: Path) -> None:
    """Delete a file, link or directory tree; already gone is fine."""
    with contextlib.suppress(FileNotFoundError):
        if path.is_symlink() or not path.is_dir():
            path.unlink()
        else:
            shutil.rmtree(path)


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
