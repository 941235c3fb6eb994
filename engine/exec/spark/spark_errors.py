"""The DrillError behind a failed Spark job (:func:`translate_spark_error`), rebuilt from
Spark's error text: a data source task's note, the file Spark's reader failed on (read again by
the Drill reader to find the line and column), or a value an expression could not take.
"""

from __future__ import annotations

import contextlib
import re
from urllib.parse import unquote, urlsplit

from engine.errors import DrillError, SchemaConflictError, StorageError
from engine.exec.spark.data_errors import data_error
from engine.exec.spark.datasource import ERROR_NOTE, decode_error, read_file
from engine.exec.spark.native_scan import read_natively
from engine.scan.framework import PartitionLayout

# ---------------------------------------------------------------- errors

_NOTE = re.compile(re.escape(ERROR_NOTE) + r"(\{.*\})")
# "... reading file <uri>. SQLSTATE", or "... reading file <uri>. File does not exist. ..."
_READ_FILE = re.compile(r"Encountered error while reading file (\S+?)\.?(?:\s|$)", re.M)
_PSQL = re.compile(r"org\.postgresql\.util\.PSQLException: ([^\n]*)")
_PY_ERROR = re.compile(r"^engine\.errors\.(\w+): (.*)$", re.M)
_CONFLICT = re.compile(r"^(?:(.*): )?column '(.*)' changed type from (.+) to (.+)$")
_CAUSE = re.compile(r"^Caused by: [\w.$]+: (.*)$", re.M)
_ERROR_CLASS = re.compile(r"\[([A-Z_]+(?:\.[A-Z_]+)*)\] ([^\n]*)")


def translate_spark_error(exc: BaseException) -> DrillError | None:
    """The engine error behind a Spark failure, or None when it is not one of ours.

    Finds, in this order: the note a Drill data source task attached to its DrillError; a file
    Spark's own reader failed on (read again by the Drill reader, which names line and column);
    the text of an engine error raised in a Python worker; a value an expression could not take
    (:mod:`~engine.exec.spark.data_errors`).

    >>> text = "Traceback ...\\nengine.errors.StorageError: /d/a.json:3:1: malformed JSON\\n"
    >>> str(translate_spark_error(RuntimeError(text)))
    '/d/a.json:3:1: malformed JSON'
    >>> translate_spark_error(RuntimeError("boom")) is None
    True
    """
    if isinstance(exc, DrillError):
        return exc
    text = error_text(exc)
    note = _NOTE.search(text)
    if note:
        decoded = decode_error(note.group(1))
        if decoded is not None:
            return decoded
    failed = _READ_FILE.search(text)
    if failed:
        return _explain_read_failure(failed.group(1), text)
    raised = _PY_ERROR.search(text)
    if raised:
        return _rebuild(raised.group(1), raised.group(2))
    database = _PSQL.search(text)
    if database:  # a jdbc engine's read or write the database refused (no credentials in it)
        return StorageError(f"PostgreSQL refused a read or write of a jdbc engine: {database[1]}")
    return data_error(text)


def error_text(exc: BaseException) -> str:
    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        parts.append(str(current))
        for attribute in ("desc", "stackTrace", "_stackTrace"):
            value = getattr(current, attribute, None)
            if isinstance(value, str):
                parts.append(value)
        java = getattr(current, "java_exception", None)
        if java is not None:
            with contextlib.suppress(Exception):
                parts.append(str(java.toString()))
        current = current.__cause__ or current.__context__
    return "\n".join(parts)


def _rebuild(kind: str, message: str) -> DrillError:
    if kind == "SchemaConflictError":
        match = _CONFLICT.match(message)
        if match:
            file, name, old, new = match.groups()
            return SchemaConflictError(column=name, old_type=old, new_type=new, file=file)
    if kind == "StorageError":
        return StorageError(message)
    return DrillError(message)


def _explain_read_failure(uri: str, text: str) -> DrillError:
    path = unquote(urlsplit(uri).path) if ":" in uri else uri
    reason = spark_reason(text)
    known = read_natively(path)
    if known is None:
        return StorageError(f"Spark could not read the file: {reason}", file=path)
    resolved, file = known
    layout = PartitionLayout.of(resolved.files)
    try:
        for _ in read_file(resolved.request, file, resolved.spark_schema, layout=layout):
            pass
    except DrillError as err:
        return err
    except Exception:  # the Drill reader cannot say more: Spark's reason is the error
        return StorageError(f"Spark could not read the file: {reason}", file=str(file.path))
    return StorageError(
        f"Spark's {resolved.format} reader failed where the Drill reader does not: {reason}",
        file=str(file.path),
        hint="report this; meanwhile `onError: skip` in the selection has the Drill reader read "
        "these files (it skips nothing when nothing is malformed), or run with the local executor",
    )


def spark_reason(text: str) -> str:
    """The innermost Spark error message in ``text`` (the most specific one)."""
    causes = _CAUSE.findall(text)
    for cause in reversed(causes):
        if "FAILED_READ_FILE" not in cause:
            return cause.strip()
    classes = _ERROR_CLASS.findall(text)
    for name, message in reversed(classes):
        if not name.startswith("FAILED_READ_FILE"):
            return f"[{name}] {message.strip()}"
    first = text.strip().splitlines()
    return first[0] if first else "unknown error"
