"""Reading a provided or defined schema: a list of ``{name, type, mode}``, a pa.Schema or a dict.

A plan writes a provided schema as the selection's ``schema``: ``[{name: "id", type: "BIGINT"},
{name: "tags", type: "VARCHAR", mode: "REPEATED"}]``. ``type`` is any name Drill accepts
(``INTEGER``, ``DOUBLE``, ``VARCHAR(20)``, ...; see :func:`engine.types.type_from_name`); a MAP takes
its members in ``fields`` and a LIST its element type in ``element``. ``mode`` is ``OPTIONAL``
(the default), ``REQUIRED`` or ``REPEATED``.

>>> s = parse_schema([{"name": "id", "type": "bigint", "mode": "required"},
...                   {"name": "m", "type": "MAP", "fields": [{"name": "x", "type": "double"}]}])
>>> {name: str(t) for name, t in s.items()}
{'id': 'BIGINT', 'm': 'MAP<x: FLOAT8>'}
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from engine.errors import PlanError, PlanIssue
from engine.scan.projection import name_key
from engine.types import DataMode, MajorType, MinorType, from_arrow_field, type_from_name

SchemaSpec = pa.Schema | Mapping[str, "MajorType | str"] | Sequence[Mapping[str, Any]] | None

# `VARCHAR(20)` and `DECIMAL(10, 2)`: the width does not change the Drill type we keep.
_TYPE_NAME = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\([\d\s,]*\))?\s*")


def parse_type_name(name: str, *, column: str, where: str) -> MinorType:
    """The minor type a schema names; an unknown name is a :class:`PlanError` naming it."""
    match = _TYPE_NAME.fullmatch(name) if isinstance(name, str) else None
    minor = type_from_name(match[1]) if match else None
    if minor is None:
        raise PlanError(PlanIssue(f"unknown type {name!r} for column {column!r}", path=where))
    return minor


def _parse_mode(mode: Any, *, column: str, where: str) -> DataMode:
    try:
        return DataMode(str(mode).upper())
    except ValueError:
        choices = ", ".join(m.value for m in DataMode)
        raise PlanError(
            PlanIssue(f"unknown mode {mode!r} for column {column!r} (use {choices})", path=where)
        ) from None


def _parse_column(spec: Mapping[str, Any], *, where: str) -> tuple[str, MajorType]:
    if not isinstance(spec, Mapping) or not isinstance(spec.get("name"), str):
        raise PlanError(PlanIssue(f"a column needs a string `name`, got {spec!r}", path=where))
    name = spec["name"]
    if "type" not in spec:
        raise PlanError(PlanIssue(f"column {name!r} needs a `type`", path=where))
    mode = _parse_mode(spec.get("mode", "OPTIONAL"), column=name, where=where)
    minor = parse_type_name(spec["type"], column=name, where=where)
    if minor == MinorType.MAP:
        fields = _parse_columns(spec.get("fields", []), where=f"{where}.fields")
        return name, MajorType.map(fields, mode)
    if minor == MinorType.LIST:
        if not isinstance(spec.get("element"), Mapping):
            raise PlanError(PlanIssue(f"LIST column {name!r} needs an `element` type", path=where))
        element = _parse_column({"name": "element", **spec["element"]}, where=f"{where}.element")
        return name, MajorType.list_of(element[1], mode)
    return name, MajorType(minor, mode)


def _parse_columns(specs: Sequence[Mapping[str, Any]], *, where: str) -> dict[str, MajorType]:
    columns: dict[str, MajorType] = {}
    seen: set[str] = set()
    for i, spec in enumerate(specs):
        name, typ = _parse_column(spec, where=f"{where}[{i}]")
        if name_key(name) in seen:
            raise PlanError(PlanIssue(f"column {name!r} appears twice", path=f"{where}[{i}]"))
        seen.add(name_key(name))
        columns[name] = typ
    return columns


def parse_schema(spec: SchemaSpec, *, where: str = "schema") -> dict[str, MajorType]:
    """The columns of a provided or defined schema, in order, with their Drill types.

    ``where`` names the schema in error messages (``"provided schema"``, ``"defined schema"``).
    """
    if spec is None:
        return {}
    if isinstance(spec, pa.Schema):
        return _unique([(f.name, _from_arrow(f, where=where)) for f in spec], where=where)
    if isinstance(spec, Mapping):
        pairs = [
            (name, t if isinstance(t, MajorType) else _scalar(t, column=name, where=where))
            for name, t in spec.items()
        ]
        return _unique(pairs, where=where)
    if isinstance(spec, Sequence) and not isinstance(spec, str):
        return _parse_columns(spec, where=where)
    raise PlanError(
        PlanIssue(f"a schema is a list of {{name, type, mode}}, got {spec!r}", path=where)
    )


def _from_arrow(f: pa.Field, *, where: str) -> MajorType:
    try:
        return from_arrow_field(f)
    except TypeError as exc:
        raise PlanError(PlanIssue(f"column {f.name!r}: {exc}", path=where)) from None


def _scalar(name: str, *, column: str, where: str) -> MajorType:
    return MajorType(parse_type_name(name, column=column, where=where))


def _unique(pairs: list[tuple[str, MajorType]], *, where: str) -> dict[str, MajorType]:
    keys = [name_key(n) for n, _ in pairs]
    for i, key in enumerate(keys):
        if key in keys[:i]:
            raise PlanError(PlanIssue(f"column {pairs[i][0]!r} appears twice", path=where))
    return dict(pairs)
