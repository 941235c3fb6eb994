"""Local filter, project and transform: record-at-a-time operators over Arrow batches.

- **filter** keeps the records whose condition is true (false, null and missing drop it); when the
  condition reads through arrays, records are pruned as seed 000's Appendix A says
  (:mod:`engine.exec.local.nested_filter`). Empty results are not passed on, except a first empty
  batch so that the schema still reaches downstream.
- **project** keeps only the projected values, each written at its ``ref`` with ``output.``
  stripped; ``ref: "output"`` merges a map into the record (a non-map value there is written as a
  field named ``output``); later projections override earlier ones where they overlap (maps merge
  member by member); a projected missing value is null.
- **transform** keeps the record and writes each ``ref`` in order, so a later transform reads the
  earlier ones' results. Writing over an existing value *overwrites* it; the reference interpreter
  failed instead (its collision mode FAIL), which turns routine relabelling (``ref: "x", expr:
  "x + 1"``) into an error, so this engine follows SQL's ``SELECT ..., expr AS x`` instead.

Expressions are parsed once, when the operator is built; the batch schema is only looked at when
batches arrive (a nested filter is planned again on every schema change).

>>> import pyarrow as pa
>>> from engine.exec.protocol import BatchSource, FragmentExecutor
>>> from engine.plan.operators import Filter
>>> source = BatchSource("1", [pa.record_batch({"a": [1, 5]})])
>>> FragmentExecutor(FilterOperator(Filter(id="2", expr="a > 3"), source)).run().to_pylist()
[{'a': 5}]
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa

from engine.exec.local.nested_filter import NestedFilter
from engine.exec.local.registry import ExecContext, creator
from engine.exec.local.union_filter import UnionFilter, filter_for_schema
from engine.exec.protocol import BatchOperator, SingleInputOperator
from engine.expr import Expr, parse_expression, parse_field_ref
from engine.expr.arrow.evaluate import evaluate
from engine.expr.arrow.trees import build_batch, set_path
from engine.plan.operators import Filter, Project, Transform

OUTPUT = "output"


class FilterOperator(SingleInputOperator):
    """Keeps the records where ``op.expr`` is true (Appendix A pruning through arrays)."""

    kind = "filter"

    def __init__(self, op: Filter, upstream: BatchOperator) -> None:
        super().__init__(op.id, upstream)
        self.expr: Expr = parse_expression(op.expr)
        self._filter: NestedFilter | UnionFilter | None = None
        self._emitted = False

    def setup(self, schema: pa.Schema) -> None:
        self._filter = filter_for_schema(self.expr, schema)

    def process(self, batch: pa.RecordBatch) -> Iterable[pa.RecordBatch]:
        assert self._filter is not None
        kept = self._filter.apply(batch)
        if kept.num_rows == 0 and self._emitted:
            return []
        self._emitted = True
        return [kept]


class ProjectOperator(SingleInputOperator):
    """Builds new records from ``op.projections`` (``output.`` stripped from every ``ref``)."""

    kind = "project"

    def __init__(self, op: Project, upstream: BatchOperator) -> None:
        super().__init__(op.id, upstream)
        self.projections: list[tuple[tuple[str | int, ...], Expr]] = [
            (output_path(p.ref), parse_expression(p.expr)) for p in op.projections
        ]

    def process(self, batch: pa.RecordBatch) -> Iterable[pa.RecordBatch]:
        columns = []
        for path, expr in self.projections:
            values = evaluate(expr, batch)
            if not path and not (pa.types.is_struct(values.type) or pa.types.is_null(values.type)):
                path = (OUTPUT,)  # a plain value cannot be the record: keep it under its ref
            columns.append((path, values))
        return [build_batch(batch.num_rows, columns)]


def output_path(ref: str) -> tuple[str | int, ...]:
    """The path a project ``ref`` writes in the output record: ``output.a.b`` -> ``("a", "b")``.

    >>> output_path("output.a.b"), output_path("output")
    (('a', 'b'), ())
    """
    path = parse_field_ref(ref).path
    if path[0] == OUTPUT:
        return path[1:]
    return path  # the plan validator rejects these; tolerate a hand-built model


class TransformOperator(SingleInputOperator):
    """Writes each ``op.transforms[i].expr`` at its ``ref``, in order, keeping the record."""

    kind = "transform"

    def __init__(self, op: Transform, upstream: BatchOperator) -> None:
        super().__init__(op.id, upstream)
        self.transforms: list[tuple[tuple[str | int, ...], Expr]] = [
            (parse_field_ref(t.ref).path, parse_expression(t.expr)) for t in op.transforms
        ]

    def process(self, batch: pa.RecordBatch) -> Iterable[pa.RecordBatch]:
        for path, expr in self.transforms:
            batch = set_path(batch, path, evaluate(expr, batch))
        return [batch]


@creator("filter")
def create_filter(op: Filter, inputs: list[BatchOperator], ctx: ExecContext) -> BatchOperator:
    return FilterOperator(op, inputs[0])


@creator("project")
def create_project(op: Project, inputs: list[BatchOperator], ctx: ExecContext) -> BatchOperator:
    return ProjectOperator(op, inputs[0])


@creator("transform")
def create_transform(op: Transform, inputs: list[BatchOperator], ctx: ExecContext) -> BatchOperator:
    return TransformOperator(op, inputs[0])
