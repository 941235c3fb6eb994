"""The store-target keys every storage engine reads alike: ``mode`` and ``partitionBy``.

>>> store_mode({"mode": "Append"}, "store target")
'append'
>>> target_partition_by({"partitionBy": "day"}, "store target")
['day']
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.errors import StorageError

MODES = ("overwrite", "append", "error")
"""What a store does where its target already holds data."""


def store_mode(target: Mapping[str, Any], where: str) -> str:
    """The target's ``mode`` (default ``overwrite``), lower-cased; ``where`` names the target."""
    mode = str(target.get("mode", "overwrite")).lower()
    if mode not in MODES:
        raise StorageError(f"{where}: mode must be one of {', '.join(MODES)}, not {mode!r}")
    return mode


def target_partition_by(target: Mapping[str, Any], where: str) -> list[Any]:
    """The target's ``partitionBy`` (or ``partition_by``) as a list: one name is a list of one.
    Whether each entry is a name the engine accepts is the engine's check."""
    columns = target.get("partitionBy", target.get("partition_by", ()))
    if isinstance(columns, str):
        return [columns]
    if not isinstance(columns, list | tuple):
        raise StorageError(f"{where}: partitionBy must be a list of column names")
    return list(columns)
