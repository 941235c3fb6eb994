"""The Spark side of the ops: each op compiles its operator to a DataFrame; a store op writes.

Per run and per plan, the ``drill`` resource keeps one :class:`~engine.exec.spark.executor.
SparkPlanRun` per slice (the engine's compiler, storage engines, parameters and row-count
observations), so the ops of a plan share them the way the engine's own Spark executor does:

* a non-store op compiles its operator with ``SparkCompiler.compile(op, inputs)`` and passes the
  DataFrame (counting its rows with a ``DataFrame.observe``, unless its count is derived: the
  engine's rule, :meth:`~engine.exec.spark.metrics.OperatorMetrics.track`) to the ops that read
  it, in memory: nothing runs on Spark yet;
* a store op compiles its store, which writes: that is the Spark job. The rows each operator saw
  are read from the observations afterwards, without another pass.

This module is the only place the Dagster layer touches the Spark compiler.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from drill_dagster.errors import DrillFailure
from drill_dagster.execution import StoreWrites, absolute_plan
from drill_dagster.metadata import WrittenStore
from drill_dagster.partitions import RunSlice
from drill_dagster.plans import DrillPlan, DrillStore
from engine.errors import DrillError, ExecutionError
from engine.exec.spark.metrics import limit_inputs, store_counted
from engine.plan import Operator, Store
from engine.run import apply_params, build_engines, check_paths


def plan_runs(plan: DrillPlan, slices: Sequence[RunSlice], drill: Any) -> list[Any]:
    """The Spark runs of ``plan`` in this Dagster run, one per slice (made on first use)."""
    from engine.exec.spark.executor import SparkPlanRun

    cache = drill.run_state()
    key = (plan.name, tuple(tuple(sorted(s.params.items())) for s in slices))
    if key not in cache:
        spark = drill.spark_session()
        runs = []
        for slice_ in slices:
            with _named(plan, slice_, None):
                logical = apply_params(absolute_plan(plan), slice_.params)
                engines = build_engines(logical, base_dir=None, classpath=drill.classpath)
                check_paths(logical, engines)
                runs.append(SparkPlanRun(logical, spark, engines=engines, params=slice_.params))
        cache[key] = runs
    return cache[key]


def compile_step(
    plan: DrillPlan,
    operator: Operator,
    slices: Sequence[RunSlice],
    inputs: Sequence[Any],
    drill: Any,
) -> Any:
    """The op of a non-store operator: its DataFrame per slice, observed, not yet run."""
    from drill_dagster.assets import SliceValues

    cache = drill.compiled_frames()
    key = _frames_key(plan, slices, operator.id)
    if key in cache:
        return cache[key]
    frames = []
    for index, (slice_, run) in enumerate(zip(slices, plan_runs(plan, slices, drill))):
        op = run.plan.operator(operator.id)  # parameters substituted for this slice
        with _named(plan, slice_, op):
            frame = run.compiler.compile(op, [value.values[index] for value in inputs])
        tracked = run.metrics.track(
            op,
            frame,
            before_limit=limit_inputs(run.plan.query),
            unchanged=op.id in run.compiler.unchanged,
            counted_by=store_counted(run.plan.topological_order(), frames=run.ctx.frame_passes),
        )
        frames.append(tracked)
    cache[key] = SliceValues(tuple(slices), tuple(frames))
    return cache[key]


def frames_of(plan: DrillPlan, op_id: str, slices: Sequence[RunSlice], drill: Any) -> Any:
    """The DataFrames of operator ``op_id``, compiled again from the plan with every operator it
    reads from (once per run): for an input that is not in memory (:mod:`drill_dagster.handoff`).
    """
    cache = drill.compiled_frames()
    key = _frames_key(plan, slices, op_id)
    if key not in cache:
        needed = plan.ancestors(op_id)
        for operator in plan.logical.topological_order():
            if operator.id in needed and _frames_key(plan, slices, operator.id) not in cache:
                inputs = [cache[_frames_key(plan, slices, ref)] for ref in operator.input_ids()]
                compile_step(plan, operator, slices, inputs, drill)
    return cache[key]


def _frames_key(plan: DrillPlan, slices: Sequence[RunSlice], op_id: str) -> tuple[Any, ...]:
    return (plan.name, tuple(tuple(sorted(s.params.items())) for s in slices), op_id)


def store_step(
    plan: DrillPlan,
    store: DrillStore,
    slices: Sequence[RunSlice],
    inputs: Sequence[Any],
    drill: Any,
) -> StoreWrites:
    """Write the store's DataFrame for every slice; what it wrote and the operators' row counts."""
    writes = StoreWrites(store)
    (upstream,) = inputs
    for index, (slice_, run) in enumerate(zip(slices, plan_runs(plan, slices, drill))):
        op = run.plan.operator(store.id)
        assert isinstance(op, Store)
        with _named(plan, slice_, op):
            run.compiler.compile(op, [upstream.values[index]])
        result = run.ctx.store_results[store.id]
        run.metrics.stored(store.id, result.row_count)
        metrics = run.metrics.collect()
        writes.written.append((slice_, WrittenStore.of(result)))
        writes.add_metrics(metrics)
    return writes


@contextmanager
def _named(plan: DrillPlan, slice_: RunSlice, op: Operator | None) -> Iterator[None]:
    """Failures as a :class:`DrillFailure` naming the plan file, the partition and the operator."""
    from engine.errors import DataError
    from engine.exec.spark.data_errors import locate
    from engine.exec.spark.spark_errors import translate_spark_error

    where = str(plan.path) + (f" ({slice_.label})" if slice_.partition_keys else "")
    try:
        yield
    except Exception as err:
        error = err if isinstance(err, DrillError) else translate_spark_error(err)
        if error is None:
            raise
        if isinstance(error, DataError) and op is not None:
            # A value an expression could not take: the operator of that expression, if one.
            error, op = locate(error, plan.logical, op.id) or (error, op)
        raise DrillFailure.from_error(_with_operator(error, op), where=where) from None


def _with_operator(error: DrillError, op: Operator | None) -> DrillError:
    if op is None or isinstance(error, ExecutionError):
        return error
    return ExecutionError(error.message, operator_id=op.id, operator_kind=op.op, hint=error.hint)
