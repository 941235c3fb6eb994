"""Plan outlines kept on disk, so that loading unchanged plan files does not parse them.

A code location is loaded by every run worker, every ``dagster dev`` reload and every
``dg check defs``; parsing, validating and planning each plan file is most of what loading a
thousand plans costs. The outline of each plan file (:mod:`drill_dagster.outline`) is kept in one
JSON file per plans directory, under the file's name with the SHA-256 of its bytes: an entry is
used only for the same bytes, read by the same code (the file is dropped whole when any module
of ``engine`` or ``drill_dagster``, Python or pydantic changes). What depends on more than the
file (``drill_project.yaml``, the roots a code location allows, other plans) is worked out again
at every load.

Where: ``$DRILL_DAGSTER_CACHE_DIR``, else ``$XDG_CACHE_HOME/drill-dagster``, else
``~/.cache/drill-dagster``; ``DRILL_DAGSTER_CACHE_DIR=off`` turns it off. A cache that cannot be
read or written is not used, and nothing else changes: it only saves time.

>>> import tempfile, pathlib
>>> cache = OutlineCache.for_plans(pathlib.Path(tempfile.mkdtemp()), root=pathlib.Path(tempfile.mkdtemp()))
>>> cache.get("a.json", "0" * 64) is None
True
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

from drill_dagster.outline import PlanOutline

CACHE_DIR_ENV = "DRILL_DAGSTER_CACHE_DIR"
KEPT_DIRECTORIES = 64
"""How many plans directories' outlines are kept: the least recently written go first."""
_FORMAT = 1


def cache_root() -> Path | None:
    """The directory outlines are kept in (None: turned off)."""
    configured = os.environ.get(CACHE_DIR_ENV)
    if configured is not None:
        return None if configured.strip().lower() in ("", "off", "0", "false") else Path(configured)
    base = os.environ.get("XDG_CACHE_HOME")
    if not base:
        try:
            base = str(Path.home() / ".cache")
        except RuntimeError:  # no home directory to be found: nothing kept
            return None
    return Path(base) / "drill-dagster"


def file_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class OutlineCache:
    """The outlines of one plans directory's files: :meth:`get` one, :meth:`put` new ones,
    :meth:`save` them (only the files given since the cache was read are kept)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._stored: dict[str, Any] = {}
        self._kept: dict[str, Any] = {}
        self._changed = False
        if path is not None:
            self._stored = _read(path)

    @classmethod
    def for_plans(cls, plans_dir: Path, *, root: Path | None = None) -> OutlineCache:
        """The cache of ``plans_dir`` (an absolute path) under ``root`` (default:
        :func:`cache_root`)."""
        root = root if root is not None else cache_root()
        if root is None:
            return cls(None)
        name = hashlib.sha256(str(plans_dir).encode()).hexdigest()[:24]
        return cls(root / "outlines" / f"{name}.json")

    def get(self, file_name: str, digest: str) -> PlanOutline | None:
        """The outline of ``file_name`` when its bytes had this digest, else None."""
        entry = self._stored.get(file_name)
        if entry is None:
            return None
        try:
            if entry[0] != digest:
                return None
            outline = PlanOutline.from_json(entry[1])
        except (AttributeError, IndexError, KeyError, TypeError, ValueError):
            return None  # not what this code writes: parse instead
        self._kept[file_name] = entry
        return outline

    def put(self, file_name: str, digest: str, outline: PlanOutline) -> None:
        self._kept[file_name] = [digest, outline.to_json()]
        self._changed = True

    def save(self) -> None:
        """Write the outlines gotten or put since the cache was read, if any was put or one
        stored is no longer asked for; atomically (a reader sees the old file or the new)."""
        if self.path is None or not (self._changed or self._kept.keys() != self._stored.keys()):
            return
        document = {"format": _FORMAT, "code": _code_fingerprint(), "plans": self._kept}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, temporary = tempfile.mkstemp(dir=self.path.parent, suffix=".tmp")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    json.dump(document, out, separators=(",", ":"))
                os.replace(temporary, self.path)
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise
            _prune(self.path.parent)
        except OSError:  # a read-only home, a full disk: the next load parses again
            return


def _prune(directory: Path) -> None:
    """Keep the outlines of the :data:`KEPT_DIRECTORIES` most recently written directories."""
    files = list(directory.glob("*.json"))
    if len(files) <= KEPT_DIRECTORIES:
        return
    files.sort(key=lambda f: f.stat().st_mtime_ns, reverse=True)
    for stale in files[KEPT_DIRECTORIES:]:
        stale.unlink(missing_ok=True)


def _read(path: Path) -> dict[str, Any]:
    try:
        with path.open(encoding="utf-8") as stored:
            document = json.load(stored)
    except (OSError, ValueError):
        return {}
    if (
        not isinstance(document, dict)
        or document.get("format") != _FORMAT
        or document.get("code") != _code_fingerprint()
        or not isinstance(document.get("plans"), dict)
    ):
        return {}
    return document["plans"]


@lru_cache(maxsize=1)
def _code_fingerprint() -> str:
    """What the outlines' code is: Python's and pydantic's versions and every module of
    ``engine`` and ``drill_dagster`` (name, size and modification time)."""
    import pydantic

    import drill_dagster
    import engine

    digest = hashlib.sha256(f"{sys.version}\n{pydantic.VERSION}\n".encode())
    for package in (engine, drill_dagster):
        base = Path(package.__file__).parent
        for module in sorted(base.rglob("*.py")):
            stat = module.stat()
            digest.update(
                f"{module.relative_to(base)} {stat.st_size} {stat.st_mtime_ns}\n".encode()
            )
    return digest.hexdigest()
