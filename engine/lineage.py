"""Column lineage: for each store, which scanned columns each output column is computed from.

Lineage is derived from the plan alone, by following field references through every operator:
a scan puts the records it reads under its ``ref``; project, transform, segment, the aggregates and
flatten write new fields computed from the fields their expressions read; join and union merge
records; filter, order and limit pass them through. A column read from a scan is named by its path
in the scanned records (``user.id``; list indexes are left out), ``""`` standing for a whole record.

>>> from engine.plan import parse_plan
>>> plan = parse_plan({"storage": {"fs": {"type": "fs", "root": "/d"}}, "query": [
...     {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "e", "selection": {"path": "ev"}},
...     {"@id": 2, "op": "transform", "input": 1, "transforms": [
...         {"ref": "e.total", "expr": "e.price * e.qty"}]},
...     {"@id": 3, "op": "project", "input": 2, "projections": [
...         {"ref": "output.user", "expr": "upper(e.user.name)"},
...         {"ref": "output.total", "expr": "e.total"}]},
...     {"@id": 4, "op": "store", "input": 3, "storageengine": "fs", "target": {"path": "out"}}]})
>>> lineage = column_lineage(plan)["4"]
>>> lineage.columns()
['user', 'total']
>>> sorted(str(c) for c in lineage.sources_of("total"))
['1:price', '1:qty']
>>> [str(c) for c in lineage.sources_of("user")]
['1:user.name']
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from engine.expr import Expr, FieldRef, field_refs, parse_field_ref
from engine.plan import (
    CollapsingAggregate,
    Constant,
    Filter,
    Flatten,
    Join,
    Limit,
    LogicalPlan,
    Operator,
    Order,
    Project,
    RunningAggregate,
    Scan,
    Segment,
    Store,
    Transform,
    Union,
    WindowFrame,
)
from engine.plan.expressions import parse_cached

Path = tuple[str, ...]


@dataclass(frozen=True, order=True)
class SourceColumn:
    """A column of the records a scan reads: the scan's operator id and the column's dotted path
    (``""``: the whole record).

    >>> str(SourceColumn("1", "user.id")), str(SourceColumn("1", ""))
    ('1:user.id', '1:*')
    """

    scan_id: str
    column: str

    def __str__(self) -> str:
        return f"{self.scan_id}:{self.column or '*'}"


@dataclass(frozen=True)
class Shape:
    """What is known of a value: the columns it is computed from (``sources``), the scanned values it
    passes through unchanged (``origins``: scan id and path) and its known ``members`` (a map)."""

    sources: frozenset[SourceColumn] = frozenset()
    origins: frozenset[tuple[str, Path]] = frozenset()
    members: Mapping[str, Shape] = field(default_factory=dict)

    @property
    def is_open(self) -> bool:
        """True when the value may have members the plan does not name (a scanned record)."""
        return bool(self.origins or self.sources)

    def everything(self) -> frozenset[SourceColumn]:
        """Every column the value as a whole is computed from."""
        found = set(self.sources)
        found.update(SourceColumn(scan, ".".join(path)) for scan, path in self.origins)
        for child in self.members.values():
            found.update(child.everything())
        return frozenset(found)

    def member(self, name: str) -> Shape:
        """The shape of member ``name`` (of a scanned map: that column of the scan)."""
        if name in self.members:
            return self.members[name]
        return Shape(
            sources=self.sources,
            origins=frozenset((scan, (*path, name)) for scan, path in self.origins),
        )

    def at(self, path: Sequence[str | int]) -> Shape:
        """The shape at a field path; a list index keeps the list's lineage."""
        shape = self
        for segment in path:
            if isinstance(segment, str):
                shape = shape.member(segment)
        return shape

    def write(self, path: Sequence[str], value: Shape) -> Shape:
        """This shape with ``value`` written at ``path`` (intermediate maps created)."""
        if not path:
            return value
        name, rest = path[0], path[1:]
        return Shape(
            self.sources,
            self.origins,
            {**self.members, name: self.member(name).write(rest, value) if rest else value},
        )

    def remove(self, path: Sequence[str]) -> Shape:
        """This shape without the member at ``path`` (when the plan named it)."""
        if not path or path[0] not in self.members:
            return self
        name, rest = path[0], path[1:]
        members = dict(self.members)
        if rest:
            members[name] = members[name].remove(rest)
        else:
            del members[name]
        return Shape(self.sources, self.origins, members)

    def merge(self, other: Shape) -> Shape:
        """A value that may come from either shape (union, join's deep merge)."""
        names = list(dict.fromkeys([*self.members, *other.members]))
        return Shape(
            self.sources | other.sources,
            self.origins | other.origins,
            {name: self.member(name).merge(other.member(name)) for name in names},
        )


EMPTY = Shape()


@dataclass(frozen=True)
class StoreLineage:
    """The lineage of one store's output record.

    ``columns()`` are the top-level columns the plan names; ``is_open`` says whether the record may
    hold more (a scanned record stored as is). ``sources_of`` answers for any column, named or not.
    """

    store_id: str
    shape: Shape

    @property
    def is_open(self) -> bool:
        return self.shape.is_open

    def columns(self) -> list[str]:
        """The top-level columns the plan writes, in the order it writes them."""
        return list(self.shape.members)

    def sources_of(self, *path: str) -> frozenset[SourceColumn]:
        """The scanned columns the output column at ``path`` is computed from."""
        return self.shape.at(path).everything()

    def by_column(self, columns: Iterable[str] | None = None) -> dict[str, frozenset[SourceColumn]]:
        """``sources_of`` for each of ``columns`` (default: :meth:`columns`)."""
        return {name: self.sources_of(name) for name in (columns or self.columns())}


def column_lineage(plan: LogicalPlan) -> dict[str, StoreLineage]:
    """The lineage of every store of ``plan``, by store operator id."""
    shapes = operator_shapes(plan)
    return {
        op.id: StoreLineage(op.id, shapes.get(op.id, EMPTY))
        for op in plan.sinks()
        if isinstance(op, Store)
    }


# Built once: a union written inside isinstance() is built again at every call.
_PASSING = Filter | Order | Limit | Store  # records pass through as they are
_MERGING = Join | Union


def operator_shapes(plan: LogicalPlan) -> dict[str, Shape]:
    """The shape of every operator's output records, by operator id."""
    shapes: dict[str, Shape] = {}
    for op in plan.topological_order():
        inputs = [shapes.get(ref, EMPTY) for ref in op.input_ids()]
        shapes[op.id] = _shape_of(op, inputs)
    return shapes


def _shape_of(op: Operator, inputs: list[Shape]) -> Shape:
    source = inputs[0] if inputs else EMPTY
    if isinstance(op, Scan):
        scanned = Shape(origins=frozenset({(op.id, ())}))
        return scanned if op.ref is None else EMPTY.write(_name_path(op.ref), scanned)
    if isinstance(op, Constant):
        return _constant_shape(op.content)
    if isinstance(op, _PASSING):
        return source
    if isinstance(op, _MERGING):
        merged = EMPTY
        for shape in inputs:
            merged = merged.merge(shape)
        return merged
    if isinstance(op, Transform):
        for named in op.transforms:
            source = source.write(_name_path(named.ref), _value(source, named.parsed))
        return source
    if isinstance(op, Project):
        output = EMPTY
        for projection in op.projections:
            value = _value(source, projection.parsed)
            path = _name_path(projection.ref)[1:]  # every ref starts with `output`
            output = output.merge(value) if not path else output.write(path, value)
        return output
    if isinstance(op, Segment):
        key = Shape(sources=_sources(source, [parse_cached(text) for text in op.exprs]))
        return source.write(_name_path(op.ref), key)
    if isinstance(op, WindowFrame):
        source = source.write(_name_path(op.segment_ref), EMPTY)
        return source.write(_name_path(op.position_ref), EMPTY)
    if isinstance(op, CollapsingAggregate):
        output = EMPTY
        for name in op.carryovers:
            path = _name_path(name)
            output = output.write(path, source.at(path))
        for named in op.aggregations:
            output = output.write(_name_path(named.ref), _value(source, named.parsed))
        return output
    if isinstance(op, RunningAggregate):
        for named in op.aggregations:
            source = source.write(_name_path(named.ref), _value(source, named.parsed))
        return source
    if isinstance(op, Flatten):
        expr = parse_cached(op.expr)
        element = _value(source, expr)
        if op.drop and isinstance(expr, FieldRef):
            source = source.remove([s for s in expr.path if isinstance(s, str)])
        return source.write(_name_path(op.ref), element)
    raise NotImplementedError(f"column lineage of a {op.op!r} operator")


def _value(record: Shape, expr: Expr) -> Shape:
    """The shape of an expression's value: a plain field keeps its structure."""
    if isinstance(expr, FieldRef):
        return record.at(expr.path)
    return Shape(sources=_sources(record, [expr]))


def _sources(record: Shape, exprs: Iterable[Expr]) -> frozenset[SourceColumn]:
    found: set[SourceColumn] = set()
    for expr in exprs:
        for ref in field_refs(expr):
            found.update(record.at(ref.path).everything())
    return frozenset(found)


def _name_path(name: str) -> Path:
    return tuple(s for s in parse_field_ref(name).path if isinstance(s, str))


def _constant_shape(content: Iterable[object]) -> Shape:
    shape = EMPTY
    for record in content:
        if isinstance(record, dict):
            shape = shape.merge(_literal_shape(record))
    return shape


def _literal_shape(value: dict[str, object]) -> Shape:
    return Shape(
        members={
            str(k): _literal_shape(v) if isinstance(v, dict) else EMPTY for k, v in value.items()
        }
    )
