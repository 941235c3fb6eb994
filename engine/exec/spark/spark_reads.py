"""Spark's reads of files, kept per session and reused while the files stay as they were.

In a classic session, ``spark.read.parquet(...)`` lists the files in the JVM and analyses the
new relation before it returns: 20-40 ms a read here, about a tenth of compiling a TPC-H query
(q02 reads four tables twice). A pipeline process runs the same plans again and again over the
same files, and a plan may read one table twice. A read is a DataFrame, immutable, so the same
read serves every scan that asks for it, in the run and in later runs, as long as its key holds:
the format, the reader's options and schema, and every file with its size, times and inode (a
file rewritten, added or removed makes another key). Spark's catalog keeps the listing of a
table the same way.

A read holds its listing in the JVM, so what a session keeps is bounded: its most recent reads,
at most :data:`KEPT_READS` of them and :data:`KEPT_FILES` files in all (a read of more files is
not kept). A session's reads go when the session object does.

>>> file_identity(__file__)[1] > 0
True
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from pyspark.sql import DataFrame

KEPT_READS = 128
"""How many reads a session keeps (least recently used first out)."""

KEPT_FILES = 100_000
"""How many files the reads a session keeps may list in all."""

_READS: weakref.WeakKeyDictionary[Any, OrderedDict[Hashable, DataFrame]] = (
    weakref.WeakKeyDictionary()
)
_LOCK = threading.Lock()  # a run builds its scans in threads of their own


def file_identity(path: str | os.PathLike[str]) -> tuple[str, int, int, int, int]:
    """``(path, size, modification and change times in ns, inode)`` of the file at ``path``:
    what changes when it is rewritten or replaced (the change time even where a writer sets the
    modification time back)."""
    stat = os.stat(path)
    return str(path), stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino


def reused_read(
    spark: Any,
    files: Sequence[str | os.PathLike[str]],
    how: Hashable,
    read: Callable[[], DataFrame],
) -> DataFrame:
    """``read()``, the read of ``files`` by ``spark`` described by ``how`` (format, options,
    schema: what else the reader is given; the files are part of the key), or the same read
    made before while every file is as it was then.

    Example (with a SparkSession and a parquet file)::

        def read():
            return spark.read.schema(schema).parquet(path)

        first = reused_read(spark, [path], ("parquet", schema.json()), read)
        reused_read(spark, [path], ("parquet", schema.json()), read) is first  # True
    """
    try:
        key = (how, tuple(file_identity(f) for f in files))
    except OSError:  # a file gone since it was listed: the read itself says so
        return read()
    with _LOCK:
        reads = _READS.get(spark)
        found = reads.get(key) if reads is not None else None
        if found is not None:
            reads.move_to_end(key)
            return found
    made = read()
    if len(files) > KEPT_FILES:
        return made
    with _LOCK:
        reads = _READS.setdefault(spark, OrderedDict())
        reads[key] = made
        listed = sum(len(identities) for _, identities in reads)
        while len(reads) > KEPT_READS or listed > KEPT_FILES:
            (_, oldest), _ = reads.popitem(last=False)
            listed -= len(oldest)
    return made
