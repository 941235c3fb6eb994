"""Scans this process resolved already: a scan of files unchanged since resolves without reading
them again.

Resolving a JSON or CSV scan reads records on the driver (a sample, or every record of a small
selection) to find the schema; the result depends only on the request and the files' bytes. A
file is known by its path, size and modification time, as Spark's own file index and the parquet
footer cache know it. Modification times are coarse (a file rewritten within the same tick with the
same size looks unchanged), so a resolution is remembered only when every file was last modified
at least :data:`SETTLED_SECONDS` before it was read: git's rule for "racily clean" files. Fresh
files are read every time.

>>> scans = ResolvedScans(clock=lambda: 1e12)
>>> scans.get("request", [], lambda: "resolved")
'resolved'
>>> scans.get("request", [], lambda: "resolved again")
'resolved'
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Generic, TypeVar

T = TypeVar("T")

SETTLED_SECONDS = 2.0
"""How long before its resolution a file must have last changed for the resolution to be kept."""


class ResolvedScans(Generic[T]):
    """The last ``capacity`` resolutions, by request and by each file's path, size and
    modification time. Thread-safe; a resolution that raises is not remembered."""

    def __init__(self, capacity: int = 256, clock: Callable[[], float] = time.time) -> None:
        self._capacity = capacity
        self._clock = clock
        self._known: OrderedDict[tuple[str, tuple[tuple[str, int, int], ...]], T] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, request: str, files: Sequence[Path], resolve: Callable[[], T]) -> T:
        """The resolution of ``request`` over ``files``: remembered, or ``resolve()`` now."""
        stats = _stats(files)
        key = (request, tuple(stats)) if stats is not None else None
        if key is not None:
            with self._lock:
                if key in self._known:
                    self._known.move_to_end(key)
                    return self._known[key]
        started = self._clock()
        resolved = resolve()
        if key is not None and all(
            mtime_ns <= (started - SETTLED_SECONDS) * 1e9 for _, _, mtime_ns in key[1]
        ):
            with self._lock:
                self._known[key] = resolved
                while len(self._known) > self._capacity:
                    self._known.popitem(last=False)
        return resolved

    def clear(self) -> None:
        with self._lock:
            self._known.clear()


def _stats(files: Sequence[Path]) -> list[tuple[str, int, int]] | None:
    """Each file's path, size and modification time; None if one cannot be read (the resolution
    reports it)."""
    stats = []
    for path in files:
        try:
            stat = os.stat(path)
        except OSError:
            return None
        stats.append((str(path), stat.st_size, stat.st_mtime_ns))
    return stats
