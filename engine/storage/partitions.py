"""Hive-style partition directories (``col=value``) for partitioned stores.

Values are written as text (Arrow's cast to string), with the characters Hive escapes written as
``%XX``; a null or empty value is Hive's default partition. Rows are split with Arrow kernels
(a dictionary code per row, a stable sort, slices), never a Python loop over rows.

>>> partition_dir(["day", "city"], ["2024-01-02", "a/b"])
'day=2024-01-02/city=a%2Fb'
>>> [(p.path, p.table.num_rows) for p in split_partitions(pa.table({"k": ["x", None, "x"], "v": [1, 2, 3]}), ["k"])]
[('k=__HIVE_DEFAULT_PARTITION__', 1), ('k=x', 2)]
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import StorageError

DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
_ESCAPED = re.compile(r"[\x00-\x1f\"#%'*/:=?\\\x7f{\[\]^]")
_SEPARATOR = "\x00"


@dataclass(frozen=True)
class Partition:
    """The rows of one partition (partition columns dropped) and its directory (``""``: none)."""

    path: str
    table: pa.Table


def escape_partition_value(value: str) -> str:
    """``value`` safe as one path component, Hive's way.

    >>> escape_partition_value("50%: a/b")
    '50%25%3A a%2Fb'
    """
    return _ESCAPED.sub(lambda m: f"%{ord(m.group()):02X}", value)


def parse_partition_dir(name: str) -> tuple[str, str | None] | None:
    """``(column, value)`` of a Hive-style directory name ``column=value`` (escapes undone; the
    default partition is a null value), or None for any other directory name.

    >>> parse_partition_dir("city=a%2Fb"), parse_partition_dir("k=__HIVE_DEFAULT_PARTITION__")
    (('city', 'a/b'), ('k', None))
    >>> parse_partition_dir("2024"), parse_partition_dir("=x")
    (None, None)
    """
    column, equals, value = name.partition("=")
    if not equals or not column or column.startswith((".", "_")):
        return None
    text = _unescape(value)
    return _unescape(column), None if text == DEFAULT_PARTITION else text


def _unescape(text: str) -> str:
    return re.sub(r"%([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), text)


def partition_dir(columns: Sequence[str], values: Sequence[Any]) -> str:
    """The directory of one partition: ``col=value`` per column, joined by ``/``."""
    parts = []
    for column, value in zip(columns, values, strict=True):
        text = DEFAULT_PARTITION if value is None or value == "" else _text(value)
        parts.append(f"{escape_partition_value(column)}={escape_partition_value(text)}")
    return "/".join(parts)


def split_partitions(table: pa.Table, columns: Sequence[str], prefix: str = "") -> list[Partition]:
    """``table``'s rows grouped by the values of ``columns`` (input order kept inside a group),
    sorted by directory; each directory is put under ``prefix``."""
    if not columns:
        return [Partition(prefix, table)]
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise StorageError(
            f"partitionBy names {', '.join(repr(c) for c in missing)}, not among the columns "
            f"stored ({', '.join(table.column_names)})"
        )
    keys = []
    for column in columns:
        values = table.column(column)
        if pa.types.is_nested(values.type):
            raise StorageError(f"cannot partition by '{column}': it is {values.type}, not a scalar")
        text = pc.fill_null(pc.cast(values, pa.string()), DEFAULT_PARTITION)
        keys.append(pc.if_else(pc.equal(text, ""), DEFAULT_PARTITION, text))
    joined = pc.binary_join_element_wise(*keys, _SEPARATOR)
    encoded = pc.dictionary_encode(joined).combine_chunks()
    codes = encoded.indices
    order = pc.sort_indices(codes)  # stable, so rows keep their order inside a partition
    rows = table.drop_columns(list(columns)).take(order)
    counts = np.bincount(codes.to_numpy(zero_copy_only=False), minlength=len(encoded.dictionary))
    partitions = []
    offset = 0
    for code, count in enumerate(counts.tolist()):
        values = encoded.dictionary[code].as_py().split(_SEPARATOR)
        directory = partition_dir(columns, values)
        path = f"{prefix}/{directory}" if prefix else directory
        partitions.append(Partition(path, rows.slice(offset, count)))
        offset += count
    return sorted(partitions, key=lambda p: p.path)


def static_prefix(values: Mapping[str, Any]) -> str:
    """The directory of caller-given partition values (in their order)."""
    return partition_dir(list(values), list(values.values()))


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, pa.Scalar):
        return _text(value.as_py())
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)
