"""Paths under a storage engine's root: safe resolution, and expansion of a selection into files.

A plan names files *relative to an engine root*. A leading ``/`` means the root itself (the upstream
plans write ``"/donuts.json"``), so a path can never name a place outside the root by being absolute.
Rejected, before anything is read or written, with a :class:`~engine.errors.StorageError`:

* a ``..`` that climbs above the root (``"../x"``, ``"a/../../x"``);
* a ``file://`` URL whose path lies outside the root (``file:///etc/passwd`` under root ``/data``);
* a URL with any other scheme (``s3://``, ``http://``, ``hdfs://``): only local roots are configured;
* a path whose real location (symlinks followed) leaves the root, and, while listing, any file or
  directory reached through a symlink that points out of the root. A selection's glob is checked
  up to its literal prefix (what it matches, while listing); a store target is checked whole.

The root's own path is a name: ``[``, ``*`` and ``?`` in it are characters, never a pattern.

Expansion (:func:`list_selection`) follows Spark's conventions:

* a file is itself (even when its name is hidden: naming it is explicit);
* a directory is read recursively, in sorted order, skipping hidden entries: names starting with
  ``.``, and names starting with ``_`` unless they hold ``=`` (partition dirs like ``_y=1`` stay);
* a glob (``*``, ``?``, ``[...]``, ``**`` for any depth) is matched below its literal prefix; a
  matched directory contributes all its files;
* every file carries the directories between the *selection root* (the directory named, or the
  glob's literal prefix) and itself: the ``dir0``, ``dir1``, ... partition values.

Outcomes at the edges: an **empty directory** (or one holding only hidden files) is an empty
selection: no files, no records, no error, as in Drill. A **glob that matches nothing** and a
**missing path** are errors naming the path and the root, since both are most often typos.

>>> resolve_under_root(Path("/data"), "/donuts.json")
PosixPath('/data/donuts.json')
>>> resolve_under_root(Path("/data"), "../x", engine_name="fs1", role="target path")
Traceback (most recent call last):
...
engine.errors.StorageError: target path '../x' escapes the root of storage engine 'fs1' (/data)
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from engine.errors import RootEscapeError, StorageError

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
_GLOB_CHARS = re.compile(r"[*?\[]")


@dataclass(frozen=True)
class InputFile:
    """One file of a selection.

    ``path`` is where the file sits as the plan sees it (under the root, symlinks kept: use it for
    the ``filename``/``filepath``/``fqn`` columns); ``real_path`` is what to open (symlinks
    resolved, so a scan planned before a store's commit keeps reading the version it listed);
    ``dirs`` are the directories between the selection root and the file (``dir0``, ``dir1``, ...).

    >>> InputFile.of("/tmp/a.json").dirs
    ()
    """

    path: Path
    real_path: Path
    dirs: tuple[str, ...]
    size: int

    @staticmethod
    def of(path: str | Path, *, dirs: tuple[str, ...] = ()) -> InputFile:
        """An input file for a plain path (size read if the file exists), for callers and tests."""
        p = Path(path)
        size = p.stat().st_size if p.exists() else 0
        return InputFile(p, Path(os.path.realpath(p)), dirs, size)


def parse_root(root: str | Path, *, engine_name: str | None = None) -> Path:
    """The directory a ``root`` setting names: a plain path, or a ``file:`` URL.

    ``file:///`` is the filesystem root. Other URL schemes are rejected: this engine reads local
    files only. A relative root is taken relative to the current directory.

    >>> parse_root("file:///")
    PosixPath('/')
    >>> parse_root("file:///data/in")
    PosixPath('/data/in')
    >>> parse_root("s3://bucket/x", engine_name="fs1")
    Traceback (most recent call last):
    ...
    engine.errors.StorageError: root 's3://bucket/x' of storage engine 'fs1' uses the URL scheme 's3'; only local directories are supported (a path or file:///...)
    """
    text = str(root)
    match = _SCHEME.match(text)
    if match and len(match.group(1)) > 1:  # one letter would be a Windows drive, not a scheme
        scheme = match.group(1).lower()
        if scheme != "file":
            raise StorageError(
                f"root '{text}' of {_engine_words(engine_name)} uses the URL scheme '{scheme}'; "
                "only local directories are supported (a path or file:///...)"
            )
        text = _file_url_path(text, what=f"root of {_engine_words(engine_name)}")
    if "\x00" in text:
        raise StorageError(f"root of {_engine_words(engine_name)} contains a NUL character")
    return Path(os.path.abspath(text)) if text else Path.cwd()


def resolve_under_root(
    root: Path,
    path: str,
    *,
    engine_name: str | None = None,
    role: str = "path",
    literal: bool = False,
) -> Path:
    """``path`` as a location under ``root``, or a :class:`StorageError` if it would leave it.

    ``role`` names the path in messages ("selection path", "target path"). The result keeps the
    symlinks that stay inside the root (it is the path the plan names); glob characters are kept.
    A selection's glob is checked up to its literal prefix (what it matches is checked while
    listing); a ``literal`` path (a store target, whose ``*`` is a name) is checked whole.

    >>> resolve_under_root(Path("/data"), "a/b/../c.json")
    PosixPath('/data/a/c.json')
    >>> resolve_under_root(Path("/data"), "file:///data/x.json")
    PosixPath('/data/x.json')
    >>> resolve_under_root(Path("/data"), "http://example.com/x.json", engine_name="fs1")
    Traceback (most recent call last):
    ...
    engine.errors.StorageError: path 'http://example.com/x.json' uses the URL scheme 'http', which storage engine 'fs1' (/data) does not serve; give a path relative to its root
    """
    root = Path(os.path.abspath(root))
    where = f"{_engine_words(engine_name)} ({root})"
    if not isinstance(path, str):
        raise StorageError(f"{role} must be a string, not {type(path).__name__}")
    if "\x00" in path:
        raise StorageError(f"{role} {path!r} contains a NUL character")
    match = _SCHEME.match(path)
    if match and len(match.group(1)) > 1:
        scheme = match.group(1).lower()
        if scheme != "file":
            raise StorageError(
                f"{role} '{path}' uses the URL scheme '{scheme}', which {where} does not serve; "
                "give a path relative to its root"
            )
        absolute = Path(posixpath.normpath(_file_url_path(path, what=f"{role} '{path}'")))
        if not is_within(absolute, root):
            raise StorageError(f"{role} '{path}' escapes the root of {where}")
        candidate = absolute
    else:
        relative = posixpath.normpath(path.lstrip("/") or ".")
        if relative == ".." or relative.startswith("../"):
            raise StorageError(f"{role} '{path}' escapes the root of {where}")
        candidate = root if relative == "." else root / relative
    # Glob characters in the root are the root's own name; in a target they are literal too.
    checked = candidate if literal else root / literal_prefix(candidate.relative_to(root))
    try:
        real_root = Path(os.path.realpath(root))
        real_checked = Path(os.path.realpath(checked))
    except OSError as error:  # a directory on the way was moved or removed while it was read
        raise StorageError(
            f"{role} '{path}' could not be resolved under {where}: {error.strerror}",
            hint="something changed the directory while the plan ran; run it again",
        ) from None
    if not is_within(real_checked, real_root):
        raise StorageError(
            f"{role} '{path}' escapes the root of {where} through a symbolic link",
            hint="symlinks inside a storage root must point inside it",
        )
    return candidate


def has_glob(path: str | Path) -> bool:
    """Whether a path holds glob characters (``*``, ``?``, ``[``).

    >>> has_glob("/logs/*.json"), has_glob("/logs/a.json")
    (True, False)
    """
    return bool(_GLOB_CHARS.search(str(path)))


def is_hidden(name: str) -> bool:
    """Spark's rule for files and directories a listing skips.

    >>> [is_hidden(n) for n in (".crc", "_SUCCESS", "_y=2024", "a.json", "x._COPYING_")]
    [True, True, False, False, True]
    """
    return (
        name.startswith(".")
        or (name.startswith("_") and "=" not in name)
        or name.endswith("._COPYING_")
    )


def list_selection(
    root: Path,
    path: str,
    *,
    engine_name: str | None = None,
    role: str = "selection path",
) -> list[InputFile]:
    """The files a selection path names under ``root``, sorted, hidden entries skipped.

    Raises :class:`StorageError` for an escaping path, a missing path, or a glob matching nothing;
    an empty directory gives ``[]``.
    """
    target = resolve_under_root(root, path, engine_name=engine_name, role=role)
    real_root = Path(os.path.realpath(root))
    where = f"{_engine_words(engine_name)} ({Path(os.path.abspath(root))})"
    below = target.relative_to(Path(os.path.abspath(root)))
    if has_glob(below):
        base = Path(os.path.abspath(root)) / literal_prefix(below)
        if not base.is_dir():
            raise StorageError(
                f"{role} '{path}' matches no files: directory {base} does not exist in {where}"
            )
        pattern = target.relative_to(base).as_posix()
        files = list(_walk_glob(base, real_root, pattern, role=role, path=path))
        if not files:
            raise StorageError(f"{role} '{path}' matches no files in {where}")
        return sorted(files, key=lambda f: (*f.dirs, f.path.name))
    if not os.path.lexists(target):
        raise StorageError(f"{role} '{path}' does not exist in {where}")
    real = Path(os.path.realpath(target))
    if real.is_dir():
        files = list(_walk(target, real, (), real_root, None, set(), role=role, path=path))
        return sorted(files, key=lambda f: (*f.dirs, f.path.name))
    if real.is_file():
        return [InputFile(target, real, (), real.stat().st_size)]
    if not real.exists():
        raise StorageError(f"{role} '{path}' is a broken symbolic link in {where}")
    raise StorageError(f"{role} '{path}' is not a regular file or a directory in {where}")


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A regular expression for a ``/``-separated glob: ``*`` and ``?`` stay in one directory,
    ``**`` spans any number of them (also none).

    >>> bool(glob_regex("**/*.json").fullmatch("a.json")), bool(glob_regex("*.json").fullmatch("a/b.json"))
    (True, False)
    """
    out: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:[^/]*/)*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif ch == "*":
            out.append("[^/]*")
            i += 1
        elif ch == "?":
            out.append("[^/]")
            i += 1
        elif ch == "[":
            end = pattern.find("]", i + 2)
            if end < 0:
                out.append(re.escape(ch))
                i += 1
                continue
            body = pattern[i + 1 : end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(ch))
            i += 1
    return re.compile("".join(out))


def is_within(path: Path, root: Path) -> bool:
    """Whether ``path`` is ``root`` or below it (lexically; resolve symlinks first)."""
    return path == root or root in path.parents


def literal_prefix(path: Path) -> Path:
    """The part of ``path`` before its first component holding a glob character (give the
    part below a root: the root's own name may hold such characters).

    >>> literal_prefix(Path("/logs/2024-*/x.json"))
    PosixPath('/logs')
    >>> literal_prefix(Path("2024-*/x.json"))
    PosixPath('.')
    """
    literal: list[str] = []
    for part in path.parts:
        if has_glob(part):
            break
        literal.append(part)
    return Path(*literal) if literal else Path(path.anchor or ".")


# ---------------------------------------------------------------- internals


def _engine_words(engine_name: str | None) -> str:
    return f"storage engine '{engine_name}'" if engine_name else "the storage engine"


def _file_url_path(url: str, *, what: str) -> str:
    parts = urlsplit(url)
    if parts.netloc not in ("", "localhost"):
        raise StorageError(f"{what} names the host '{parts.netloc}'; only local files are served")
    return unquote(parts.path) or "/"


def _walk_glob(
    base: Path, real_root: Path, pattern: str, *, role: str, path: str
) -> Iterator[InputFile]:
    regex = glob_regex(pattern)
    depth = None if "**" in pattern else pattern.count("/") + 1
    real_base = Path(os.path.realpath(base))
    covered: tuple[str, ...] | None = None  # a matched directory, whose files are all taken
    for entry, real, rel, is_dir in _entries(
        base, real_base, (), real_root, depth, set(), role, path
    ):
        if covered is not None and rel[: len(covered)] == covered:
            continue
        if not regex.fullmatch("/".join(rel)):
            continue
        if is_dir:
            covered = rel
            yield from _walk(entry, real, rel, real_root, None, set(), role=role, path=path)
        else:
            yield InputFile(entry, real, rel[:-1], real.stat().st_size)


def _walk(
    directory: Path,
    real_dir: Path,
    rel: tuple[str, ...],
    real_root: Path,
    depth: int | None,
    seen: set[Path],
    *,
    role: str,
    path: str,
) -> Iterator[InputFile]:
    for entry, real, entry_rel, is_dir in _entries(
        directory, real_dir, rel, real_root, depth, seen, role, path
    ):
        if not is_dir:
            yield InputFile(entry, real, entry_rel[:-1], real.stat().st_size)


def _entries(
    directory: Path,
    real_dir: Path,
    rel: tuple[str, ...],
    real_root: Path,
    depth: int | None,
    seen: set[Path],
    role: str,
    path: str,
) -> Iterator[tuple[Path, Path, tuple[str, ...], bool]]:
    """Every non-hidden entry below ``directory`` (dirs before their contents), up to ``depth``."""
    if real_dir in seen:  # a symlink cycle
        return
    seen.add(real_dir)
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError as err:
        raise StorageError(f"cannot list {directory}: {err.strerror}") from err
    for entry in entries:
        if is_hidden(entry.name):
            continue
        logical = directory / entry.name
        if entry.is_symlink():
            real = Path(os.path.realpath(logical))
            if not is_within(real, real_root):
                raise RootEscapeError(
                    f"{role} '{path}' reaches {logical}, a symbolic link that leaves the storage "
                    f"root ({real_root})",
                    hint="symlinks inside a storage root must point inside it",
                )
        else:
            real = real_dir / entry.name
        entry_rel = (*rel, entry.name)
        if real.is_dir():
            yield logical, real, entry_rel, True
            if depth is None or len(entry_rel) < depth:
                yield from _entries(logical, real, entry_rel, real_root, depth, seen, role, path)
        elif real.is_file():
            yield logical, real, entry_rel, False
