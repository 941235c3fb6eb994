"""The column types a store will write, from the plan alone, where they are known.

Types flow from a scan's provided ``schema`` (``"selection": {"schema": [...]}``) through the
operators whose output types follow from their expressions (:func:`engine.expr.infer.infer_type`):
filter, order, limit and store pass records on; transform and project compute fields; join merges
records. A project names every column, so the store's columns are known when each of them has a
type. Anything else is unknown, and then nothing is said (no guess): a scan of schemaless JSON
read as is, a column whose type comes from data (a field the provided schema does not list), an
aggregate, a union, a flatten, a store whose format keeps its own types (only parquet is
described).

>>> from engine.plan import parse_plan
>>> plan = parse_plan({"storage": {"fs": {"type": "fs", "root": "/d"}}, "query": [
...     {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "e", "selection": {
...         "path": "ev", "format": "json", "schema": [{"name": "price", "type": "DOUBLE"}]}},
...     {"@id": 2, "op": "project", "input": 1, "projections": [
...         {"ref": "output.total", "expr": "e.price * 2"},
...         {"ref": "output.label", "expr": "'x'"}]},
...     {"@id": 3, "op": "store", "input": 2, "storageengine": "fs",
...      "target": {"path": "out", "format": "parquet"}}]})
>>> {name: str(t) for name, t in store_types(plan, "3").items()}
{'total': 'FLOAT8', 'label': 'VARCHAR'}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa
from dagster import TableSchema

from drill_dagster.metadata import column_schema
from drill_dagster.plans import DrillStore
from engine.expr import parse_field_ref
from engine.expr.infer import infer_type
from engine.plan import (
    Filter,
    Join,
    Limit,
    LogicalPlan,
    Operator,
    Order,
    Project,
    Scan,
    Store,
    Transform,
)
from engine.scan.tracker_hints import parse_schema
from engine.types import MajorType, MinorType
from engine.types.arrow import to_arrow_field

Path = tuple[str | int, ...]
DESCRIBED_FORMATS = frozenset({"parquet"})  # formats that write the records' own types


@dataclass(frozen=True)
class _Record:
    """What is known of an operator's records: the types of some fields, and whether the records
    may hold other fields too (``open``)."""

    fields: Mapping[Path, MajorType]
    open: bool


def definition_column_schema(store: DrillStore) -> TableSchema | None:
    """``dagster/column_schema`` of a store before it runs, or None where a type is not known."""
    if store.format not in DESCRIBED_FORMATS or store.partition_by:
        return None  # partition columns go to directory names: the files' columns differ
    if not store.plan.outline.declares_schema:
        return None  # every scanned type comes from data (most plans): no need to parse
    types = store_types(store.plan.logical, store.id)
    if types is None:
        return None
    return column_schema(pa.schema([to_arrow_field(name, t) for name, t in types.items()]))


def store_types(plan: LogicalPlan, store_id: str) -> dict[str, MajorType] | None:
    """The columns (in order) and types operator ``store_id`` writes, or None when not known."""
    if not any(isinstance(op, Scan) and "schema" in (op.selection or {}) for op in plan.query):
        return None  # every scanned type comes from data: nothing to walk (most plans)
    records: dict[str, _Record | None] = {}
    for op in plan.topological_order():
        inputs = [records.get(ref) for ref in op.input_ids()]
        try:
            records[op.id] = None if None in inputs else _record_of(op, inputs)  # type: ignore[arg-type]
        except Exception:  # a type the expressions cannot settle: not known, not an error here
            records[op.id] = None
        if op.id == store_id:
            break
    record = records.get(store_id)
    if record is None or record.open or not all(len(p) == 1 for p in record.fields):
        return None
    if not all(_settled(t) for t in record.fields.values()):
        return None
    return {str(path[0]): t for path, t in record.fields.items()}


# Built once: a union written inside isinstance() is built again at every call.
_PASSING = Filter | Order | Limit | Store


def _record_of(op: Operator, inputs: list[_Record]) -> _Record | None:
    if isinstance(op, Scan):
        provided = parse_schema((op.selection or {}).get("schema"), where="provided schema")
        if op.ref is None:
            return _Record({(name,): t for name, t in provided.items()}, open=True)
        ref = _path(op.ref)
        return _Record({ref: MajorType.map(provided)} if provided else {}, open=True)
    if isinstance(op, _PASSING):
        return inputs[0]
    if isinstance(op, Join):
        merged: dict[Path, MajorType] = {}
        for record in inputs:
            merged.update(record.fields)
        return _Record(merged, open=any(r.open for r in inputs))
    if isinstance(op, Transform):
        record = inputs[0]
        fields = dict(record.fields)
        for named in op.transforms:
            fields[_path(named.ref)] = infer_type(named.parsed, _lookup(record))
        return _Record(fields, record.open)
    if isinstance(op, Project):
        record = inputs[0]
        fields = {}
        for projection in op.projections:
            path = _path(projection.ref)[1:]  # every ref starts with `output`
            if len(path) != 1:  # the whole record, or a nested member: not described
                return None
            fields[path] = infer_type(projection.parsed, _lookup(record))
        return _Record(fields, open=False)
    return None


def _lookup(record: _Record):  # type: ignore[no-untyped-def]
    return record.fields.get


def _path(ref: str) -> Path:
    return tuple(parse_field_ref(ref).path)


def _settled(t: MajorType) -> bool:
    """A type known all the way down (no late member, no untyped list)."""
    if t.minor is MinorType.NULL:
        return False
    if t.minor is MinorType.LIST:
        return t.element is not None and _settled(t.element)
    return all(_settled(member) for _, member in t.fields)
