"""Storage engines: where scans read files and where stores write them.

* :mod:`~engine.storage.paths`: paths under an engine root, checked (no escapes), and selections
  expanded into :class:`InputFile` lists (directories, globs, ``dirN`` parts).
* :mod:`~engine.storage.engines`: ``fs``, ``classpath``, ``console``, ``queue``, and
  :func:`create_engine`.
* :mod:`~engine.storage.catalog`: ``catalog``, tables of the Spark session's catalog by name.
* :mod:`~engine.storage.formats`: readers for json, csv, text, parquet (records or Arrow).
* :mod:`~engine.storage.store`: :func:`write_store`, atomic (:mod:`~engine.storage.commit`).
* :mod:`~engine.storage.sinks`: :class:`ConsoleSink`, :class:`QueueSink`.
* :mod:`~engine.storage.jdbc`: the ``jdbc`` engine, tables of a PostgreSQL database.
"""

from __future__ import annotations

from engine.storage.engines import (
    ENGINE_TYPES,
    Capabilities,
    ClasspathEngine,
    ConsoleEngine,
    FsEngine,
    QueueEngine,
    Selection,
    Statistics,
    StorageEngine,
    create_engine,
)
from engine.storage.formats import FormatReader, ReaderOptions, open_reader
from engine.storage.paths import InputFile, list_selection, resolve_under_root
from engine.storage.sinks import ConsoleSink, QueueSink, Sink
from engine.storage.store import StoreResult, StoreTarget, write_store

__all__ = [
    "ENGINE_TYPES",
    "Capabilities",
    "ClasspathEngine",
    "ConsoleEngine",
    "ConsoleSink",
    "FormatReader",
    "FsEngine",
    "InputFile",
    "QueueEngine",
    "QueueSink",
    "ReaderOptions",
    "Selection",
    "Sink",
    "Statistics",
    "StorageEngine",
    "StoreResult",
    "StoreTarget",
    "create_engine",
    "list_selection",
    "open_reader",
    "resolve_under_root",
    "write_store",
]
