"""Record sinks: where the ``console`` and ``queue`` storage engines put what a store receives.

>>> import io
>>> out = io.StringIO()
>>> ConsoleSink(out).write([{"a": 1}, {"a": None}])
2
>>> print(out.getvalue(), end="")
{"a": 1}
{"a": null}
>>> queue = QueueSink()
>>> queue.write_table(pa.table({"a": [1, 2]}))
2
>>> queue.records()
[{'a': 1}, {'a': 2}]
"""

from __future__ import annotations

import sys
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any, TextIO

import pyarrow as pa

from engine.storage.formats.json import to_json_line

PIPES = ("STD_OUT", "STD_ERR")


class Sink(ABC):
    """Receives records (plain Python values) in order; ``location`` names it in results."""

    location: str

    @abstractmethod
    def write(self, records: Iterable[Any]) -> int:
        """Take ``records``; return how many there were."""

    def write_table(self, table: pa.Table | pa.RecordBatch) -> int:
        """Take the rows of an Arrow table or batch as records."""
        batches = table.to_batches() if isinstance(table, pa.Table) else [table]
        return sum(self.write(batch.to_pylist()) for batch in batches)


class ConsoleSink(Sink):
    """Prints each record as one line of JSON on ``stream`` (standard output when None, looked
    up at write time so redirections made later still apply)."""

    def __init__(self, stream: TextIO | None = None, *, pipe: str = "STD_OUT") -> None:
        self._stream = stream
        self.pipe = pipe
        self.location = f"console:{pipe}"

    @property
    def stream(self) -> TextIO:
        if self._stream is not None:
            return self._stream
        return sys.stderr if self.pipe == "STD_ERR" else sys.stdout

    def write(self, records: Iterable[Any]) -> int:
        count = 0
        stream = self.stream
        for record in records:
            stream.write(to_json_line(record))
            stream.write("\n")
            count += 1
        stream.flush()
        return count


class QueueSink(Sink):
    """Keeps records for the caller (``RunResult.records()``); safe to fill from several threads."""

    def __init__(self, number: int = 0, *, engine_name: str = "queue") -> None:
        self.number = number
        self.location = f"queue:{engine_name}#{number}"
        self._records: list[Any] = []
        self._lock = threading.Lock()

    def write(self, records: Iterable[Any]) -> int:
        batch = list(records)
        with self._lock:
            self._records.extend(batch)
        return len(batch)

    def records(self) -> list[Any]:
        """A copy of the records received so far, in arrival order."""
        with self._lock:
            return list(self._records)

    def clear(self) -> None:
        with self._lock:
            self._records.clear()
