"""File paths as Spark's readers take them: which paths a read of the files of a scan gives
Spark (:func:`spark_read_paths`, :func:`spark_read_root`: one listing of a directory rather than
a status call per file), which names it reads literally, and the name Spark reports for a file
(:func:`spark_input_file_name`, :func:`spark_file_uri`), by which a row finds its file.
"""

from __future__ import annotations

import os
import string
import unicodedata
from collections.abc import Sequence
from pathlib import Path

from engine.storage.paths import InputFile, has_glob

# java.net.URI leaves these as they are in a path: unreserved, punct, '/' and '@'.
_URI_KEPT = frozenset(string.ascii_letters + string.digits + "-_.!~*'()" + ",;:$&+=" + "/@")
# Non-ASCII characters it quotes: controls and spaces (Character.isISOControl, isSpaceChar).
_URI_QUOTED = frozenset({"Cc", "Zs", "Zl", "Zp"})


def spark_input_file_name(path: Path | str) -> str:
    """What Spark's ``input_file_name()`` gives for the rows of a local file: its
    :func:`spark_file_uri` with an empty authority.

    >>> spark_input_file_name("/data/a b.parquet")
    'file:///data/a%20b.parquet'
    """
    return "file://" + spark_file_uri(path).removeprefix("file:")


def spark_file_uri(path: Path | str) -> str:
    """The URI Spark's readers report for a local file (``_metadata.file_path``): Hadoop's
    ``Path.toUri``, i.e. ``java.net.URI`` quoting, UTF-8 ``%XX``.

    >>> spark_file_uri("/data/day=1/a b+c/ü.json")
    'file:/data/day=1/a%20b+c/ü.json'
    """
    quoted = []
    for ch in str(path):
        if ch in _URI_KEPT or (ord(ch) > 127 and unicodedata.category(ch) not in _URI_QUOTED):
            quoted.append(ch)
        else:
            quoted.extend(f"%{byte:02X}" for byte in ch.encode("utf-8"))
    return "file:" + "".join(quoted)


def spark_read_paths(files: Sequence[InputFile]) -> list[str]:
    """The paths to give Spark's reader for ``files``: a directory instead of its files where
    they are all that Spark lists in it (regular files, no subdirectory). Spark checks a path
    given by name on its own (a file status each: 14 JSON files take 42 ms to open, their 7
    directories 18 ms); a directory is one listing. Like the footers' row counts, this trusts
    the listing: a file added between this check and Spark's listing is read (a scan that
    numbers its rows fails on it, as on any file it did not list)."""
    chosen: dict[Path, set[str]] = {}
    for file in files:
        chosen.setdefault(file.real_path.parent, set()).add(file.real_path.name)
    paths = []
    for directory, names in chosen.items():
        if len(names) > 1 and _spark_lists(directory) == names:
            paths.append(str(directory))
        else:
            paths.extend(str(directory / name) for name in sorted(names))
    return paths


def spark_read_root(files: Sequence[InputFile]) -> Path | None:
    """The directory to give Spark's reader, listing it recursively, for ``files`` in more than
    one directory: the deepest holding them all, where every file Spark lists below it is one of
    them. Spark checks each path it is given on its own; one root is one listing (the 7 day
    directories of the benchmark's events: 29 ms to open, their root 13 ms). None where below it
    lies anything else Spark would read or might (another file, a directory holding none of
    ``files``, a symbolic link): the reader is then given :func:`spark_read_paths`. Like the
    footers' row counts, this trusts the listing: a file added since is read (a scan that numbers
    its rows fails on it, as on any file it did not list)."""
    wanted = {f.real_path for f in files}
    parents = {path.parent for path in wanted}
    if len(parents) < 2:
        return None
    root = Path(os.path.commonpath(parents))
    ancestors = {a for parent in parents for a in (parent, *parent.parents)}
    found: set[Path] = set()
    pending = [root]
    while pending:
        try:
            with os.scandir(pending.pop()) as entries:
                for entry in entries:
                    path = Path(entry.path)
                    if _spark_skips(entry.name):
                        continue
                    if entry.is_dir(follow_symlinks=False) and path in ancestors:
                        pending.append(path)
                    elif entry.is_file(follow_symlinks=False) and path in wanted:
                        found.add(path)
                    else:
                        return None
        except OSError:
            return None
    return root if found == wanted else None


def _spark_lists(directory: Path) -> set[str] | None:
    """The names Spark's file listing keeps in ``directory``, None if it holds anything but
    regular files there (a subdirectory, a symbolic link)."""
    names = set()
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                if _spark_skips(entry.name):
                    continue
                if not entry.is_file(follow_symlinks=False):
                    return None
                names.add(entry.name)
    except OSError:
        return None
    return names


def _spark_skips(name: str) -> bool:
    """Whether Spark's file listing leaves ``name`` out (``HadoopFSUtils.shouldFilterOutPathName``:
    hidden and underscore names but partition directories and parquet summaries, files being
    copied)."""
    excluded = (
        (name.startswith("_") and "=" not in name)
        or name.startswith(".")
        or name.endswith("._COPYING_")
    )
    return excluded and not name.startswith(("_common_metadata", "_metadata"))


def spark_readable_path(path: Path) -> bool:
    """Whether Spark reads ``path`` as it is: no glob characters, no ':' (Hadoop takes it for
    a scheme), valid UTF-8."""
    text = str(path)
    if has_glob(text) or any(ch in text for ch in "{}\\:"):
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
