"""Run a logical plan on Spark: ``run_spark(plan, *, engines, params, spark=None) -> RunResult``.

One DataFrame per operator, built in topological order by :class:`SparkCompiler` (an operator read
by several others is simply one DataFrame used several times); a run's scans are built side by
side in threads of their own (:func:`build_apart`). Each operator's DataFrame counts its
rows with ``DataFrame.observe`` (:mod:`engine.exec.spark.metrics`), but for the operators whose
count is derived (one-to-one operators, those whose records all reach a store) or known (a
parquet scan reading every row of its files, from their footers; a parquet store, from the
footers of the files it wrote); an operator whose records all reach one grouping aggregate is
counted by it, any other scan observes its rows as read. Segments and windowframes whose
readers group or frame their input themselves are not built (``compiler.fused_operators``), nor
the group numbers no one reads (``compiler.unnumbered_segments``). The stores are the actions:
each writes its input when it is compiled; an operator that no one reads and that is not a store
is collected into ``RunResult.outputs``. Failures become
:class:`~engine.errors.ExecutionError` naming the operator: the one being compiled, or the store
(or output) whose Spark job failed, but a file that fails to be read (gone, unreadable,
malformed) names the scan that reads it.

The session is the given one, else the one already running in the process, else one created from
:class:`SparkConfig` defaults and stopped at the end of the run (only a session this run started is
stopped). The engine changes no setting of a session it did not create.
"""

from __future__ import annotations

import functools
import re
import threading
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.utils import is_remote

from engine.errors import DrillError, ExecutionError
from engine.exec.local.executor import referenced_members
from engine.exec.result import RunResult, collect_result
from engine.exec.spark.bad_records import file_of_value
from engine.exec.spark.compiler import (
    SparkCompiler,
    SparkRunContext,
    frame_collapses,
    fused_operators,
    nullable_everywhere,
    one_reader,
    paired_scans,
    read_through,
    store_inputs,
    store_read_limits,
    store_read_orders,
    store_sorted_orders,
    top_n_orders,
    unnumbered_segments,
)
from engine.exec.spark.compiler_join import related_joins
from engine.exec.spark.compiler_order import (
    TEMP_PREFIX,
    scans_ordered_by_keys,
    sequence_order,
    tie_free_orders,
    total_orders,
    unordered_outputs,
)
from engine.exec.spark.data_errors import DataError, locate
from engine.exec.spark.metrics import (
    ONE_TO_ONE,
    OperatorMetrics,
    aggregate_counted,
    limit_inputs,
    sampled_again,
    scan_observed,
    store_counted,
    without_skip_counts,
)
from engine.exec.spark.names import SEQ_COLUMN
from engine.exec.spark.one_task_sort import one_task_sort_limit, one_task_sorts
from engine.exec.spark.py4j_round_trips import fewer_round_trips
from engine.exec.spark.row_markers import row_markers
from engine.exec.spark.settings import PY4J_SHORTCUTS, enabled
from engine.exec.spark.spark_errors import translate_spark_error
from engine.exec.spark.unions import collect_arrow
from engine.exec.spark.unread_member import without_unread
from engine.plan import LogicalPlan
from engine.plan.operators import Operator, Store, WindowFrame
from engine.planner.rules.filter_pushdown import remaining_conditions
from engine.scan.framework import FILE_COLUMNS
from engine.storage.engines import ConsoleEngine, QueueEngine


def run_spark(
    plan: LogicalPlan,
    *,
    engines: Mapping[str, Any],
    params: Mapping[str, Any],
    spark: Any = None,
    optimize: bool = True,
) -> RunResult:
    """Run ``plan`` on ``spark`` (when None, the running session, else a new local one stopped
    afterwards); the planner's rules rewrite it first unless ``optimize`` is False."""
    own_session = spark is None
    if own_session:
        from engine.exec.spark.session import session_for_run

        spark, own_session = session_for_run()
    try:
        return SparkPlanRun(plan, spark, engines=engines, params=params, optimize=optimize).run()
    finally:
        if own_session:
            spark.stop()


class SparkPlanRun:
    """One run of ``plan``: its physical plan, its compiler, its DataFrames and its metrics.

    The plan is planned first (:func:`engine.planner.optimize` with the storage engines'
    statistics, then :func:`engine.planner.physical.to_physical`): scans get their pushed
    projections and filters, broadcast-hash-joins their broadcast hint, and a failure names the
    fragment of the physical plan where its operator runs.
    """

    def __init__(
        self,
        plan: LogicalPlan,
        spark: Any,
        *,
        engines: Mapping[str, Any],
        params: Mapping[str, Any],
        optimize: bool = True,
    ) -> None:
        from engine.planner import Statistics
        from engine.planner import optimize as optimize_plan
        from engine.planner.physical import to_physical

        if enabled(spark, PY4J_SHORTCUTS):  # an opt-in: it patches py4j for the process
            fewer_round_trips()
        self.plan = plan
        stats = Statistics.from_engines(plan, engines)
        self.planned = optimize_plan(plan, stats) if optimize else plan
        self.physical = to_physical(self.planned, stats)
        owners = {op: f.id for f in self.physical.fragments() for op in f.operators}
        self.fragments = {
            op.id: owners[self.physical.implementing(op.id)[-1].id]
            for op in self.planned.topological_order()
        }
        scans = referenced_members(self.planned)
        self.ctx = SparkRunContext(
            engines=dict(engines),
            params=dict(params),
            file_columns={
                op_id: sorted(n for n in names if n in FILE_COLUMNS)
                for op_id, names in scans.items()
            },
            broadcast={
                str(pop.logical_id): pop.props["build"]
                for pop in self.physical.graph
                if pop.pop == "broadcast-hash-join"
            },
            remaining=remaining_conditions(self.planned),
        )
        sinks = {
            op.id
            for op in self.planned.query
            if isinstance(op, Store)
            and isinstance(engines.get(op.storage_engine), ConsoleEngine | QueueEngine)
        }
        self.ctx.unordered = unordered_outputs(self.planned.topological_order(), sinks)
        self.ctx.total = total_orders(self.planned.topological_order())
        joins = {op.id for op in self.planned.query if op.op == "join"}
        self.ctx.unrelated = (
            joins
            - related_joins(plan.topological_order())
            - related_joins(self.planned.topological_order())
        )
        self.ctx.tie_free = {
            scan: order for order, scan in tie_free_orders(self.planned.topological_order()).items()
        }
        # The same order reads the scan in both plans (the Dagster ops compile the plan as given).
        given = scans_ordered_by_keys(plan.topological_order())
        self.ctx.ordered_by_keys = {
            scan: keys
            for scan, keys in scans_ordered_by_keys(self.planned.topological_order()).items()
            if given.get(scan) == keys
        }
        # Fused in both: the Dagster ops compile the plan as given, the executor as planned.
        self.ctx.fused = fused_operators(plan) & fused_operators(self.planned)
        self.ctx.unnumbered = unnumbered_segments(plan, self.ctx.fused) & unnumbered_segments(
            self.planned, self.ctx.fused
        )
        self.ctx.frame_passes = frame_collapses(self.planned, self.ctx.fused)
        self.ctx.store_inputs = store_inputs(plan) & store_inputs(self.planned)
        self.ctx.top_n_orders = top_n_orders(plan) & top_n_orders(self.planned)
        self.ctx.store_sorted = store_sorted_orders(plan) & store_sorted_orders(self.planned)
        self.ctx.store_read = store_read_limits(plan) & store_read_limits(self.planned)
        self.ctx.one_reader = one_reader(plan) & one_reader(self.planned)
        self.ctx.store_read_orders = store_read_orders(plan) & store_read_orders(self.planned)
        # The Dagster ops compile the plan as given, the executor as planned: either's limits.
        self.ctx.cut_by_limit = limit_inputs(plan.query) | limit_inputs(self.planned.query)
        self.ctx.read_by_limit = {
            op.input for op in [*plan.query, *self.planned.query] if op.op == "limit" and op.input
        }
        self.ctx.read_through = read_through(plan, self.ctx) & read_through(self.planned, self.ctx)
        self.ctx.paired = paired_scans(plan) | paired_scans(self.planned)
        self.compiler = SparkCompiler(spark, self.ctx)
        # operator id -> the scans it reads from, in each plan that has it
        self._scans_above: dict[str, list[set[str]]] = {}
        for p in (self.planned, plan):
            for op in p.query:
                scans = {a for a in p.ancestors(op) if p.operator(a).op == "scan"}
                self._scans_above.setdefault(op.id, []).append(scans)
        stores = {op.id for p in (self.planned, plan) for op in p.query if op.op == "store"}
        self.ctx.one_task_sorts = one_task_sorts(
            stores, self._scans_above, stats, one_task_sort_limit(spark)
        )
        # The same numbers each time the same plan runs (see row_markers.RowMarkers).
        self._marker_keys = {op_id: i for i, op_id in enumerate(sorted(self._scans_above))}
        self._sampled_again = set().union(
            *(
                sampled_again(
                    p.topological_order(),
                    top_n=self.ctx.top_n_orders,
                    sinks=sinks,
                    one_task=self.ctx.one_task_sorts,
                    store_sorted=self.ctx.store_sorted,
                )
                for p in (self.planned, plan)
            )
        )
        self.metrics = OperatorMetrics(
            read=self.ctx.read_rows,
            files=self.ctx.files_read,
            markers=row_markers(spark),
            marker_key=self._marker_key,
        )
        self.compiler.frame_counters = self.metrics.count_frames(
            [
                op.id
                for op in self.planned.query
                if op.id in self.ctx.fused and op.op == "windowframe"
            ]
        )
        self.frames: dict[str, DataFrame] = {}

    def run(self) -> RunResult:
        try:
            return self._run()
        finally:
            self.metrics.close()  # the run's row-count markers are read

    def _run(self) -> RunResult:
        order = self.planned.topological_order()
        readers = Counter(ref for op in order for ref in op.input_ids())
        roots = [op for op in order if readers[op.id] == 0]
        before_limit = limit_inputs(order)
        counted_by = store_counted(order, frames=self.ctx.frame_passes)
        # Scans whose records all reach one aggregate: it counts them per group, and a grouping
        # aggregate its groups in the same observation (the Dagster ops, which compile the plan
        # as given, observe every scan as it is read).
        counts, observed = _aggregate_counts(self.planned, self.ctx.frame_passes, self.ctx.fused)
        self.metrics.count_later(counts.values())
        self.compiler.input_counters = {
            aggregate: functools.partial(
                self.metrics.count_at_aggregate, counted, aggregate, groups=aggregate in observed
            )
            for aggregate, counted in counts.items()
        }
        outputs: dict[str, pa.Table] = {}
        scans = [op for op in order if op.op == "scan"]
        for op in scans:
            if (
                scan_observed(op.id, before_limit=before_limit, counted_by=counted_by)
                and op.id not in counts.values()
            ):
                self.compiler.scan_observers[op.id] = functools.partial(self.metrics.observe, op.id)
        built = build_apart(scans, self.compiler.compile, spark=self.compiler.spark)
        for op in order:
            inputs = [self.frames[ref] for ref in op.input_ids()]
            with _failures_named(op, self.fragments.get(op.id), self._culprit_of):
                frame = (
                    built[op.id].result() if op.id in built else self.compiler.compile(op, inputs)
                )
            if isinstance(op, Store):
                continue
            if isinstance(op, WindowFrame) and op.id in self.ctx.fused:
                self.frames[op.id] = frame  # never run: its reader aggregates over its input
                continue
            self.frames[op.id] = self.metrics.track(
                op,
                frame,
                before_limit=before_limit,
                unchanged=op.id in self.compiler.unchanged,
                counted_by=counted_by,
            )
        for op in roots:
            if not isinstance(op, Store):
                with _failures_named(op, self.fragments.get(op.id), self._culprit_of):
                    frame = self.compiler.flushed(op.id, self.frames[op.id])
                    outputs[op.id] = collect_records(frame)
        for store_id, written in self.ctx.store_results.items():
            self.metrics.stored(store_id, written.row_count)
        metrics = self.metrics.collect()
        return collect_result(
            self.plan,
            self.ctx.engines,
            self.ctx.store_results,
            metrics,
            outputs,
            self.ctx.sink_records,
        )

    def _marker_key(self, operator_id: str) -> int | None:
        """The run's number for a marker counting operator ``operator_id``'s rows
        (:mod:`row_markers`), or None where a marker may not count them. It may where no
        limit reads it (Spark pushes a limit below an observation, not below a filter: what
        either counts there is what Spark happened to read), no global sort may read its stage
        twice (:func:`sampled_again`), and some scan it reads from reads files (Spark
        evaluates a filter over local rows while planning, the marker with it)."""
        if operator_id in self.ctx.cut_by_limit or operator_id in self._sampled_again:
            return None
        above = self._scans_above.get(operator_id) or [set()]
        if not all(scans & self.ctx.reading_scans for scans in above):
            return None
        return self._marker_keys[operator_id]

    def _culprit_of(
        self, error: DrillError, ran: Operator
    ) -> tuple[DrillError, Operator, int | None] | None:
        """The operator responsible for ``error``, raised by the job of the store (or output)
        ``ran``: the scan that reads the file it names, or the one operator feeding ``ran``
        whose expression can raise a value error (:func:`~engine.exec.spark.data_errors.locate`,
        which says it at that expression); with its fragment."""
        if isinstance(error, DataError):
            located = locate(error, self.planned, ran.id)
            if located is None:
                return None
            said, op = located
            return self._read_from(said, op), op, self.fragments.get(op.id)
        file = getattr(error, "file", None)
        if not file:
            return None
        scans = self.ctx.scan_files.get(file) or self.ctx.scan_files.get(_LINE.sub("", file))
        if not scans:
            return None
        # Of the scans reading it, the first in the plan (scans are built in threads of their own).
        scan = next(op for op in self.planned.topological_order() if op.id in scans)
        return error, scan, self.fragments.get(scan.id)

    def _read_from(self, error: DataError, op: Operator) -> DataError:
        """``error`` naming the file its value was read from, where Spark can say it
        (:mod:`~engine.exec.spark.bad_records`: a query run only now that the run failed)."""
        refs = op.input_ids()
        frame = self.frames.get(refs[0]) if len(refs) == 1 else None
        if frame is None:
            return error
        file = file_of_value(
            error, frame, lambda expr, df: self.compiler.column_over(expr, refs[0], df)
        )
        return error.read_from(file) if file else error

    def compile_frames(self) -> dict[str, DataFrame]:
        """Each root's DataFrame (a store's input), compiled but not run: for ``explain``."""
        order = self.planned.topological_order()
        readers = Counter(ref for op in order for ref in op.input_ids())
        frames: dict[str, DataFrame] = {}
        for op in order:
            label = op.op if op.has_generated_id else f"{op.op} {op.id}"
            with _failures_named(op, self.fragments.get(op.id)):
                if isinstance(op, Store):
                    input_id = op.input or ""
                    frames[label] = self.compiler.materialized(input_id, self.frames[input_id])
                    continue
                inputs = [self.frames[ref] for ref in op.input_ids()]
                self.frames[op.id] = without_skip_counts(self.compiler.compile(op, inputs))
            if readers[op.id] == 0:
                frames[label] = self.frames[op.id]
        self.metrics.close()  # nothing runs: no counts to read
        return frames


_LINE = re.compile(r"(:\d+){1,2}$")  # a file named with its line (and column)

SCAN_THREADS = 4
"""How many scans of a run build their DataFrames at once (:func:`build_apart`)."""

SCAN_THREAD_PREFIX = "drill-scan"
"""The name of the threads that build scans (``drill-scan_0``, ...)."""

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def build_apart(
    scans: Sequence[Operator],
    build: Callable[[Operator, list[DataFrame]], DataFrame],
    *,
    spark: Any = None,
) -> dict[str, Future[DataFrame]]:
    """``{scan id: its DataFrame, being built}``: a run's scans, each ``build(scan, [])`` in a
    thread of the process's scan pool while the run's thread goes on. Building a scan reads no
    other operator's DataFrame and is mostly waiting: its files listed, their footers read,
    Spark resolving its reader and analysing its selects in the JVM (q3's three scans, warm:
    258 ms to build the run's DataFrames one scan after the other, 231 ms side by side). Empty
    for fewer than two scans, built in the run's thread as every other operator. ``spark``, a
    classic session, is made the active one of the JVM thread serving each build (PySpark asks
    the JVM for it, three calls each time a type is parsed, when a thread has none).

    >>> build_apart([], lambda op, inputs: None)
    {}
    """
    if len(scans) < 2 or SCAN_THREADS < 2:
        return {}
    global _pool
    with _pool_lock:
        if _pool is None:  # one pool for the process: its threads keep their py4j connections
            _pool = ThreadPoolExecutor(SCAN_THREADS, thread_name_prefix=SCAN_THREAD_PREFIX)
    session = None if spark is None or is_remote() else spark._jsparkSession

    def built(op: Operator) -> DataFrame:
        if session is not None:
            spark._jvm.SparkSession.setActiveSession(session)
        return build(op, [])

    return {op.id: _pool.submit(built, op) for op in scans}


def _aggregate_counts(
    plan: LogicalPlan, frames: Mapping[str, str], fused: Collection[str]
) -> tuple[dict[str, str], set[str]]:
    """:func:`~engine.exec.spark.metrics.aggregate_counted` for ``plan``, and the operators it
    would observe (what ``OperatorMetrics.track`` observes; among them the grouping aggregates
    that count their groups with the input they count), given its filters whose whole
    condition their scans apply."""
    ops = plan.topological_order()
    by_id = {op.id: op for op in ops}
    before_limit, counted_by = limit_inputs(ops), store_counted(ops, frames=frames)
    passes_all = {
        filter_id
        for filter_id, rest in remaining_conditions(plan).items()
        if rest.condition is None
        and all(getattr(by_id.get(i), "pushed_filter", None) == text for i, text in rest.scans)
    }
    observed = {
        op.id
        for op in ops
        if op.id not in before_limit
        and op.id not in counted_by
        and op.op not in ONE_TO_ONE
        and op.op != "store"
        and op.id not in passes_all
        and op.id not in fused  # counted by the aggregate over its frames (count_frames)
        and not (op.op == "collapsingaggregate" and op.within is None and op.target is None)
    }
    return aggregate_counted(ops, passes_all=passes_all, observed=observed), observed


def collect_records(df: DataFrame) -> pa.Table:
    """``df``'s records in sequence order as an Arrow table (the sequence column and any other
    temporary column of the compiler dropped)."""
    if SEQ_COLUMN in df.columns:
        df = df.orderBy(*sequence_order(df, SEQ_COLUMN))
    df = df.drop(*[name for name in df.columns if name.startswith(TEMP_PREFIX)])
    return collect_arrow(nullable_everywhere(without_unread(df)))


Blame = Callable[[DrillError, Operator], "tuple[DrillError, Operator, int | None] | None"]


@contextmanager
def _failures_named(
    op: Operator, fragment: int | None, blame: Blame = lambda error, op: None
) -> Iterator[None]:
    """Turns what fails inside the block into an ExecutionError naming ``op``, or the operator
    (and fragment) ``blame`` finds responsible for it (saying the error as it knows it)."""
    try:
        yield
    except ExecutionError:
        raise
    except DrillError as error:
        said, culprit, where = blame(error, op) or (error, op, fragment)
        raise _named(said.message, culprit, where, hint=said.hint) from error
    except Exception as error:
        translated = translate_spark_error(error)
        if translated is not None:
            said, culprit, where = blame(translated, op) or (translated, op, fragment)
            raise _named(said.message, culprit, where, hint=said.hint) from error
        raise _named(_first_line(error), op, fragment) from error


def _named(
    message: str, op: Operator, fragment: int | None, *, hint: str | None = None
) -> ExecutionError:
    return ExecutionError(
        message, operator_id=op.id, operator_kind=op.op, fragment=fragment, hint=hint
    )


def _first_line(error: BaseException) -> str:
    """The gist of a Spark or Python failure: its first line (Spark appends the JVM stack)."""
    text = str(error).strip()
    first = text.splitlines()[0] if text else ""
    module = type(error).__module__
    if module.startswith(("pyspark", "py4j")):
        return first or type(error).__name__
    return f"{type(error).__name__}: {first}" if first else type(error).__name__
