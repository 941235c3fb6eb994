"""The local collapsingaggregate and runningaggregate operators.

collapsingaggregate reduces every run of equal ``within`` values (every segment) to one record that
holds only the carryovers and the aggregations. Carryovers come from the run's last record, or with a
``target`` from its last record whose target is boolean true; a run without such a record emits
nothing. Without ``within`` the whole input is one run, and, like SQL's global aggregate, an empty
input still gives one record (counts 0, other aggregates null) unless there is a target.

runningaggregate emits every record with the running aggregations written at their refs; they restart
where the ``within`` value changes. It streams: the running values at the end of a batch carry over
into the next one.

An aggregation may wrap aggregates in scalar functions (``sum(a) / count(a)``): the aggregates are
computed per run, then the scalar part is evaluated over their results.

>>> import pyarrow as pa
>>> from engine.exec.protocol import BatchSource, FragmentExecutor
>>> from engine.plan.operators import CollapsingAggregate
>>> op = CollapsingAggregate.model_validate({"@id": 2, "op": "collapsingaggregate", "within": "g",
...     "carryovers": ["g"], "aggregations": [{"ref": "n", "expr": "count(1)"}]})
>>> source = BatchSource("1", [pa.record_batch({"g": [1, 1, 2]})])
>>> FragmentExecutor(create_collapsing(op, [source], ExecContext())).run().to_pylist()
[{'g': 1, 'n': 2}, {'g': 2, 'n': 1}]
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from engine.errors import AggregationError
from engine.exec.local.aggregate_functions import (
    RunSplitter,
    aggregate_empty,
    aggregate_runs,
    continue_running,
    run_starts,
    running,
)
from engine.exec.local.buffering import BatchBuffer, rechunk, to_batch
from engine.exec.local.partial_aggregate import PartialAggregates, combinable
from engine.exec.local.registry import ExecContext, creator
from engine.exec.protocol import BatchOperator, GeneratorOperator
from engine.expr import (
    Call,
    Expr,
    FunctionKind,
    coercion,
    field_refs,
    parse_expression,
    parse_field_ref,
)
from engine.expr.arrow import decimals
from engine.expr.arrow.evaluate import evaluate
from engine.expr.arrow.trees import build_batch, get_path, set_path
from engine.expr.rewrite import map_calls, split_calls
from engine.plan.operators import CollapsingAggregate, RunningAggregate
from engine.types import from_arrow

Path = tuple[str, ...]

# Columns holding aggregate results while the scalar part of an aggregation is evaluated; the NUL
# byte keeps them apart from any field of the data.
_AGGREGATE_COLUMN = "\x00aggregate"
_RUNNING_COLUMN = "\x00running"


def output_path(name: str, what: str) -> Path:
    """The path of a field the operator writes; array indexes cannot be written."""
    path = parse_field_ref(name).path
    if any(isinstance(step, int) for step in path):
        raise AggregationError(f"{what} '{name}' cannot be written: it indexes into an array")
    return tuple(str(step) for step in path)


@dataclass(frozen=True)
class _Aggregation:
    """One ``{ref, expr}``: where it goes, its scalar part, and the aggregate calls it uses."""

    ref: Path
    scalar: Expr
    calls: tuple[Call, ...]
    prefix: str


def _split(ref: str, expr: Expr, kind: FunctionKind, prefix: str) -> _Aggregation:
    scalar, calls = split_calls(expr, kind, prefix)
    return _Aggregation(output_path(ref, "aggregation ref"), scalar, tuple(calls), prefix)


def _argument(call: Call, batch: pa.RecordBatch) -> pa.Array:
    if not call.args:
        return pa.nulls(batch.num_rows)
    return evaluate(call.args[0], batch)


def _emit(batch: pa.RecordBatch, batch_rows: int) -> Iterator[pa.RecordBatch]:
    if batch.num_rows:
        yield from rechunk(pa.Table.from_batches([batch]), batch_rows)


class CollapsingAggregateOperator(GeneratorOperator):
    """Collapses each run of ``within`` into one record of carryovers and aggregations."""

    kind = "collapsingaggregate"

    def __init__(self, op: CollapsingAggregate, upstream: BatchOperator, ctx: ExecContext) -> None:
        super().__init__(op.id, [upstream])
        self.ctx = ctx
        self.within = parse_field_ref(op.within).path if op.within else None
        self.target = parse_field_ref(op.target).path if op.target else None
        self.carryovers = [output_path(name, "carryover") for name in op.carryovers]
        self.aggregations = [
            _split(
                a.ref, parse_expression(a.expr), FunctionKind.AGGREGATE, f"{_AGGREGATE_COLUMN}{i}_"
            )
            for i, a in enumerate(op.aggregations)
        ]

    def generate(self) -> Iterator[pa.RecordBatch]:
        buffer = BatchBuffer(self.operator_id, self.kind, max_bytes=self.ctx.max_buffered_bytes)
        splitter = RunSplitter(self.within, buffer)
        # One run of the whole input whose result reads only its aggregates keeps their
        # partial results past a chunk of input (see partial_aggregate)
        partials = PartialAggregates(self.operator_id, max_bytes=self.ctx.max_buffered_bytes)
        streams = self._global_partials()
        for batch in self.drain():
            complete = splitter.add(batch)
            if complete is not None:
                yield from _emit(self.collapse(complete), self.ctx.batch_rows)
            if streams and buffer.nbytes >= partials.chunk_bytes:
                streams = self._add_chunk(partials, buffer)
        if not partials.empty:
            if buffer.num_rows:
                self._add_chunk(partials, buffer)
            _, results = partials.result()
            yield self._output(_null_row(pa.schema([])), results)
            return
        rest = splitter.finish()
        if rest is not None:
            yield from _emit(self.collapse(rest), self.ctx.batch_rows)
        elif self.within is None and self.target is None:
            yield self.collapse_nothing(splitter.schema)

    def collapse(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """One record per complete run of ``batch`` (a run without a true target gives none)."""
        n = batch.num_rows
        if self.within is not None:
            starts = run_starts(get_path(batch, self.within))
        else:
            starts = np.zeros(n, dtype=bool)
            starts[:1] = True
        firsts = np.flatnonzero(starts)
        if self.target is None:
            chosen = np.append(firsts[1:] - 1, n - 1)
        else:
            candidates = np.where(_is_true(get_path(batch, self.target)), np.arange(n), -1)
            chosen = np.maximum.reduceat(candidates, firsts) if n else firsts
        kept = np.flatnonzero(chosen >= 0)
        rows = batch.take(pa.array(chosen[kept], pa.int64()))
        results = self._aggregates(batch, starts)
        return self._output(rows, [r.take(pa.array(kept, pa.int64())) for r in results])

    def collapse_nothing(self, schema: pa.Schema | None) -> pa.RecordBatch:
        """The one record of an empty input without ``within``: counts 0, the rest null."""
        empty = (schema or pa.schema([])).empty_table()
        calls = [
            (c.name, _argument(c, to_batch(empty))) for a in self.aggregations for c in a.calls
        ]
        return self._output(_null_row(empty.schema), aggregate_empty(calls))

    def _aggregates(self, batch: pa.RecordBatch, starts: np.ndarray) -> list[pa.Array]:
        calls = self._calls(batch)
        return aggregate_runs(calls, starts) if calls else []

    def _calls(self, batch: pa.RecordBatch) -> list[tuple[str, pa.Array]]:
        return [(c.name, _argument(c, batch)) for a in self.aggregations for c in a.calls]

    def _add_chunk(self, partials: PartialAggregates, buffer: BatchBuffer) -> bool:
        """Aggregate what ``buffer`` holds into ``partials`` (and empty it); False (the buffer
        kept) where the first chunk's counted values are floats: the input is then buffered."""
        batch = buffer.batch()
        calls = self._calls(batch)
        if not partials.takes([], calls):
            return False
        buffer.clear()
        partials.add([], calls, batch.num_rows)
        return True

    def _global_partials(self) -> bool:
        """Whether this aggregate of the whole input may keep partial results: no target, no
        carryovers, aggregations reading only their aggregates, all of which combine."""
        return (
            self.within is None
            and self.target is None
            and not self.carryovers
            and combinable(c for a in self.aggregations for c in a.calls)
            and reads_only_aggregates(self.aggregations)
        )

    def _output(self, rows: pa.RecordBatch, results: list[pa.Array]) -> pa.RecordBatch:
        """Carryovers from ``rows`` and aggregations over ``results`` (one per call, in order)."""
        context = rows
        index = 0
        for aggregation in self.aggregations:
            for i in range(len(aggregation.calls)):
                context = context.append_column(f"{aggregation.prefix}{i}", results[index])
                index += 1
        columns = [(path, get_path(rows, path)) for path in self.carryovers]
        columns += [(a.ref, evaluate(a.scalar, context)) for a in self.aggregations]
        return build_batch(rows.num_rows, columns)


def reads_only_aggregates(aggregations: list[_Aggregation]) -> bool:
    """Whether every aggregation's scalar part reads nothing but its aggregates' results (no
    field of a record: ``sum(a) / count(a)``, not ``sum(a) + b``)."""
    return all(
        str(ref.path[0]).startswith(a.prefix) for a in aggregations for ref in field_refs(a.scalar)
    )


def _is_true(values: pa.Array) -> np.ndarray:
    """Where ``values`` is boolean true (any other value, or null, is not)."""
    if not pa.types.is_boolean(values.type):
        return np.zeros(len(values), dtype=bool)
    return values.fill_null(False).to_numpy(zero_copy_only=False)


def _null_row(schema: pa.Schema) -> pa.RecordBatch:
    """One record whose every field is null (a batch needs a column to have a row)."""
    if not len(schema):
        return pa.record_batch([pa.nulls(1)], names=["\x00row"])
    return pa.RecordBatch.from_arrays([pa.nulls(1, f.type) for f in schema], schema=schema)


class RunningAggregateOperator(GeneratorOperator):
    """Writes running aggregations at their refs on every record, restarting at ``within`` changes."""

    kind = "runningaggregate"

    def __init__(self, op: RunningAggregate, upstream: BatchOperator, ctx: ExecContext) -> None:
        super().__init__(op.id, [upstream])
        self.ctx = ctx
        self.within = parse_field_ref(op.within).path if op.within else None
        self.aggregations = [
            _split(
                a.ref,
                map_calls(parse_expression(a.expr), _average_as_ratio),
                FunctionKind.RUNNING,
                f"{_RUNNING_COLUMN}{i}_",
            )
            for i, a in enumerate(op.aggregations)
        ]
        # A plain avg(x) of a DECIMAL has avg's DECIMAL type, not its ratio's (sum / count).
        self._plain_average = [_is_average(parse_expression(a.expr)) for a in op.aggregations]
        # The within value of the last record and each call's running value there.
        self._last_key: pa.Array | None = None
        self._carry: list[list[pa.Scalar]] | None = None

    def generate(self) -> Iterator[pa.RecordBatch]:
        for batch in self.drain():
            out = self.append(batch)
            if out.num_rows == 0:
                yield out
            else:
                yield from rechunk(pa.Table.from_batches([out]), self.ctx.batch_rows)

    def append(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch`` with the running aggregations written, continuing the previous batch's run."""
        n = batch.num_rows
        if self.within is not None:
            keys = get_path(batch, self.within)
            starts = run_starts(keys)
        else:
            keys = None
            starts = np.zeros(n, dtype=bool)
            starts[:1] = True
        continues = self._carry is not None and (
            keys is None or self._last_key is None or _same_first(self._last_key, keys)
        )
        later = np.flatnonzero(starts[1:])
        head = int(later[0]) + 1 if len(later) else n  # rows continuing the previous run
        carry: list[list[pa.Scalar]] = []
        out = batch
        for a, aggregation in enumerate(self.aggregations):
            context = out
            carry.append([])
            argument_types = []
            for c, call in enumerate(aggregation.calls):
                argument = _argument(call, out)
                argument_types.append(argument.type)
                values = running(call.name, argument, starts)
                if continues and self._carry is not None and n:
                    before = self._carry[a][c]
                    values = _concat(
                        continue_running(call.name, values[:head], before), values[head:]
                    )
                if n:
                    carry[a].append(values[n - 1])
                context = context.append_column(f"{aggregation.prefix}{c}", values)
            result = evaluate(aggregation.scalar, context)
            if self._plain_average[a] and pa.types.is_decimal(argument_types[0]):
                result = _decimal_average(result, argument_types[0])
            out = set_path(out, aggregation.ref, result)
        if n:
            self._carry = carry
            self._last_key = keys.slice(n - 1, 1) if keys is not None else None
        return out


def _same_first(last_key: pa.Array, keys: pa.Array) -> bool:
    return last_key.to_pylist() == keys.slice(0, 1).to_pylist()


def _concat(head: pa.Array, tail: pa.Array) -> pa.Array:
    """``head`` then ``tail``, under a common type when a schema change made them differ."""
    if not head.type.equals(tail.type):
        try:
            common = (
                pa.unify_schemas(
                    [pa.schema([("v", head.type)]), pa.schema([("v", tail.type)])],
                    promote_options="permissive",
                )
                .field("v")
                .type
            )
            head, tail = head.cast(common), tail.cast(common)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as err:
            raise AggregationError(
                f"running values changed type from {head.type} to {tail.type} between batches"
            ) from err
    return pa.concat_arrays([head, tail])


def _is_average(expr: Expr) -> bool:
    return isinstance(expr, Call) and expr.name == "avg"


def _decimal_average(ratio: pa.Array, argument: pa.DataType) -> pa.Array:
    """A running average of decimals as avg's type (:func:`engine.expr.coercion.avg_type`)."""
    target = coercion.avg_type(from_arrow(argument))
    try:
        return decimals.fit(ratio, target, "avg")
    except decimals.DecimalError as err:
        raise AggregationError(f"avg(): {err}") from err


def _average_as_ratio(call: Call) -> Expr:
    """A running ``avg(x)`` is ``sum(x) / count(x)`` (divide gives FLOAT8)."""
    if call.name != "avg":
        return call
    return Call("divide", (Call("sum", call.args), Call("count", call.args)), call.position)


@creator("collapsingaggregate")
def create_collapsing(
    op: CollapsingAggregate, inputs: list[BatchOperator], ctx: ExecContext
) -> BatchOperator:
    return CollapsingAggregateOperator(op, inputs[0], ctx)


@creator("runningaggregate")
def create_running(
    op: RunningAggregate, inputs: list[BatchOperator], ctx: ExecContext
) -> BatchOperator:
    return RunningAggregateOperator(op, inputs[0], ctx)
