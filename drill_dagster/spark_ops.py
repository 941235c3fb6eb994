"""The Spark side of the ops: each op compiles its operator to a DataFrame; a store op writes.

Per run and per plan, the ``drill`` resource keeps one :class:`~engine.exec.spark.executor.
SparkPlanRun` per slice (the engine's compiler, storage engines, parameters and row-count
observations), so the ops of a plan share them the way the engine's own Spark executor does:

* every op compiles the operator of the same id in the plan the planner made of it
  (``SparkPlanRun.planned``: the one plan ``run_plan`` runs too, with its pushdowns) with
  ``SparkPlanRun.build``, which compiles once per run whatever it reads from: the op's inputs
  order the steps, the DataFrames come from the run (so an input that is not in memory, after a
  re-execution or in another process, costs nothing more: :mod:`drill_dagster.handoff`);
* a non-store op passes its DataFrame on (counting its rows the engine's way,
  :meth:`~engine.exec.spark.metrics.OperatorMetrics.track`): nothing runs on Spark yet; an
  operator the planner removed passes on the DataFrame of the operator standing in for it;
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
from engine.plan import Operator, Store
from engine.run import apply_params, build_engines, check_paths

PLANNER = "drill/planner"
"""Output metadata of an op: what the planner did to its operator in the run."""
ROW_COUNT = "dagster/row_count"


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
    plan: DrillPlan, operator: Operator, slices: Sequence[RunSlice], drill: Any
) -> Any:
    """The op of a non-store operator: per slice, the DataFrame of the planned operator of the
    same id (compiled once per run with every operator it reads from, counting its rows, not yet
    run); for an operator the planner removed, the DataFrame of the one standing in for it
    (:func:`engine.planner.changes.stand_in`: it passed that one's records through); None for
    one a semi (anti) join skips (``SparkPlanRun.skipped_by``), which nothing runs."""
    from drill_dagster.assets import SliceValues
    from engine.planner.changes import stand_in

    frames = []
    for slice_, run in zip(slices, plan_runs(plan, slices, drill)):
        op_id = stand_in(run.plan, run.planned, operator.id)
        if run.skipped_by(op_id) is not None:  # a semi (anti) join reads the records below
            frames.append(None)
            continue
        with _named(plan, slice_, run.planned.operator(op_id)):
            frames.append(run.build(op_id))
    return SliceValues(tuple(slices), tuple(frames))


def step_metadata(
    plan: DrillPlan, operator: Operator, slices: Sequence[RunSlice], drill: Any
) -> dict[str, Any]:
    """The output metadata of a non-store op, what is known once it compiled (nothing has run):
    what the planner did to its operator in this run (``drill/planner``: with the data's
    statistics, so a filter pushed into a scan shows here), and its rows over the slices
    (``dagster/row_count``) where they are known without running anything: a scan that reads
    every row of its parquet files counts them from their footers, and so does every operator
    that passes on one record per record of such a scan."""
    from engine.planner.changes import planner_notes, stand_in

    metadata: dict[str, Any] = {}
    runs = plan_runs(plan, slices, drill)
    cache = drill.run_state()
    key = ("notes", plan.name, tuple(tuple(sorted(s.params.items())) for s in slices))
    if key not in cache:
        cache[key] = planner_notes(runs[0].plan, runs[0].planned)
    note = cache[key].get(operator.id)
    join = runs[0].skipped_by(stand_in(runs[0].plan, runs[0].planned, operator.id))
    if join is not None:
        skipped = f"not run: join {join} reads the records below it as a semi or anti join"
        note = f"{note}; {skipped}" if note else skipped
    if note:
        metadata[PLANNER] = note
    rows = []
    for run in runs:
        counted = run.row_counts().get(stand_in(run.plan, run.planned, operator.id), {})
        rows.append(counted.get("rows"))
    if rows and all(isinstance(n, int) for n in rows):
        metadata[ROW_COUNT] = sum(rows)
    return metadata


def store_step(
    plan: DrillPlan, store: DrillStore, slices: Sequence[RunSlice], drill: Any
) -> StoreWrites:
    """Write the store's DataFrame for every slice; what it wrote and the operators' row counts
    (the planned plan's; an operator the planner removed counts its stand-in's rows)."""
    from engine.planner.changes import written_counts

    writes = StoreWrites(store)
    for slice_, run in zip(slices, plan_runs(plan, slices, drill)):
        op = run.planned.operator(store.id)
        assert isinstance(op, Store)
        with _named(plan, slice_, op):
            run.build(store.id)
        result = run.findings.store_results[store.id]
        writes.written.append((slice_, WrittenStore.of(result)))
        writes.add_metrics(written_counts(run.plan, run.planned, run.row_counts()))
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
