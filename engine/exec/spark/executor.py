"""Run a logical plan on Spark: ``run_spark(plan, *, engines, params, spark=None) -> RunResult``.

One DataFrame per operator, built in topological order by :class:`SparkCompiler` (an operator read
by several others is simply one DataFrame used several times); a run's scans are built side by
side in threads of their own (:func:`build_apart`). Each operator's DataFrame counts its
rows with ``DataFrame.observe`` (:mod:`engine.exec.spark.metrics`), but for the operators whose
count is derived (one-to-one operators, those whose records all reach a store) or known (a
parquet scan reading every row of its files, from their footers; a parquet store, from the
footers of the files it wrote); an operator whose records all reach one grouping aggregate is
counted by it, any other scan observes its rows as read. Segments and windowframes whose
readers group or frame their input themselves are not built (the planner's property
``fused``), nor the group numbers no one reads (``unnumbered``). The stores are the actions:
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
from engine.exec.spark.compiler import SparkCompiler, SparkRunContext
from engine.exec.spark.compiler_order import TEMP_PREFIX, sequence_order
from engine.exec.spark.compiler_visit_sources import nullable_everywhere
from engine.exec.spark.data_errors import DataError, locate
from engine.exec.spark.metrics import (
    ONE_TO_ONE,
    OperatorMetrics,
    RowCounting,
    aggregate_counted,
    sampled_again,
    scan_observed,
    store_counted,
    without_skip_counts,
)
from engine.exec.spark.names import SEQ_COLUMN
from engine.exec.spark.one_task_sort import one_task_sort_limit
from engine.exec.spark.py4j_round_trips import fewer_round_trips
from engine.exec.spark.row_markers import row_markers
from engine.exec.spark.run_findings import RunFindings
from engine.exec.spark.settings import PY4J_SHORTCUTS, ROW_COUNTS, choice, enabled
from engine.exec.spark.spark_errors import translate_spark_error
from engine.exec.spark.unions import collect_arrow
from engine.exec.spark.unread_member import without_unread
from engine.plan import LogicalPlan
from engine.plan.operators import Join, Operator, Store, WindowFrame
from engine.planner.properties import ids_where, plan_properties
from engine.planner.properties.decisions import limit_inputs
from engine.planner.properties.semi_joins import SEMI_JOIN_PARAM, reading_rows
from engine.planner.rewrite import consumers
from engine.planner.rules.filter_pushdown import Remaining, remaining_conditions
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
    own_session = False
    if spark is None:
        from engine.exec.spark.catalog_tables import keep_derby_log
        from engine.exec.spark.session import session_for_run
        from engine.storage.catalog import session_settings

        settings = session_settings(engines)  # a catalog engine's metastore, for a new session
        spark, own_session = session_for_run(settings)
        if own_session:
            keep_derby_log(spark, settings)
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
    fragment of the physical plan where its operator runs. Every analysis of the run reads the
    planned plan, the one thing either way of running it compiles: :meth:`run` builds it whole,
    a caller running it piecewise (the Dagster ops) builds one operator at a time with
    :meth:`build` and reads the counts with :meth:`row_counts`.

    What a caller may read: ``planned`` (the plan the run compiles), ``physical`` (its physical
    plan), ``properties`` (the planner's decisions per operator,
    :func:`engine.planner.properties.plan_properties`), ``frames`` (each operator's DataFrame
    once built) and :meth:`dataframe`.
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
        from engine.planner.physical import PlannerOptions, to_physical

        if enabled(spark, PY4J_SHORTCUTS):  # an opt-in: it patches py4j for the process
            fewer_round_trips()
        self.plan = plan
        stats = Statistics.from_engines(plan, engines)
        self.planned = optimize_plan(plan, stats) if optimize else plan
        semi = params.get(SEMI_JOIN_PARAM, True)
        self.physical = to_physical(self.planned, stats, PlannerOptions(semi_joins=semi))
        owners = {op: f.id for f in self.physical.fragments() for op in f.operators}
        implementing = {pop.logical_id: pop.id for pop in self.physical.graph}
        self.fragments = {
            op.id: owners[implementing[op.id]]
            for op in self.planned.topological_order()
            if op.id in implementing  # not an operator a semi join skips
        }
        scans = referenced_members(self.planned)
        sinks = {
            op.id
            for op in self.planned.query
            if isinstance(op, Store)
            and isinstance(engines.get(op.storage_engine), ConsoleEngine | QueueEngine)
        }
        order = self.planned.topological_order()
        self.properties = plan_properties(
            self.planned,
            sinks,
            stats,
            one_task_sort_limit(spark),
            semi=semi,
        )
        props = self.properties
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
            remaining=applied_conditions(self.planned),
            properties=props,
        )
        self.findings = RunFindings()
        # operator id -> the scans it reads from
        self._scans_above = {
            op.id: {a for a in self.planned.ancestors(op) if self.planned.operator(a).op == "scan"}
            for op in order
        }
        # The same numbers each time the same plan runs (see row_markers.RowMarkers).
        self._marker_keys = {op_id: i for i, op_id in enumerate(sorted(self._scans_above))}
        self._sampled_again = sampled_again(
            order,
            top_n=ids_where(props, lambda p: p.top_n),
            sinks=sinks,
            one_task=ids_where(props, lambda p: p.one_task_sort),
            store_sorted=ids_where(props, lambda p: p.store_sorted),
        )
        every_operator = choice(spark, ROW_COUNTS) == "operators"
        self.metrics = OperatorMetrics(
            read=self.findings.read_rows,
            files=self.findings.files_read,
            markers=row_markers(spark) if every_operator else None,
            marker_key=self._marker_key,
            every_operator=every_operator,
        )
        self.frames: dict[str, DataFrame] = {}
        self._built: set[str] = set()
        self._before_limit = limit_inputs(order)
        self._frame_passes = {
            i: p.frame_collapsed_by for i, p in props.items() if p.frame_collapsed_by
        }
        self._counted_by = store_counted(order, frames=self._frame_passes)
        self.compiler = SparkCompiler(spark, self.ctx, self.findings, self._row_counting())

    def _row_counting(self) -> RowCounting:
        """How the run counts each operator's rows, beyond what ``metrics.track`` decides for
        each: scans whose records all reach one aggregate are counted by it per group (a
        grouping aggregate counts its groups in the same observation); the other scans that
        must count where they read observe their rows as read; a fused windowframe, never
        built, is counted by the first aggregate over its frames."""
        counted_by = _frames_counted_by(self.planned, ids_where(self.properties, lambda p: p.fused))
        counters = self.metrics.count_frames(list(counted_by))
        frames = {
            aggregate: counters[frame]
            for frame, aggregate in counted_by.items()
            if frame in counters
        }
        counts, observed = _aggregate_counts(
            [self._as_run(op) for op in self.planned.topological_order() if not self._skipped(op)],
            self.ctx.remaining,
            self._frame_passes,
            ids_where(self.properties, lambda p: p.fused),
        )
        self.metrics.count_later(counts.values())
        aggregates = {
            aggregate: functools.partial(
                self.metrics.count_at_aggregate, counted, aggregate, groups=aggregate in observed
            )
            for aggregate, counted in counts.items()
        }
        scans = {
            op.id: functools.partial(self.metrics.observe, op.id)
            for op in self.planned.query
            if op.op == "scan"
            and scan_observed(op.id, before_limit=self._before_limit, counted_by=self._counted_by)
            and op.id not in counts.values()
        }
        return RowCounting(scans=scans, aggregates=aggregates, frames=frames)

    def run(self) -> RunResult:
        try:
            return self._run()
        finally:
            self.metrics.close()  # the run's row-count markers are read

    def build(self, op_id: str) -> DataFrame | None:
        """Operator ``op_id`` of the planned plan compiled (with every operator it reads from,
        once per run): its DataFrame, counting its rows, not yet run; a store writes its input
        and returns None. Stores are the actions: build them in an order a run may take (a
        store another operator's scan reads first)."""
        needed = self._ancestors(op_id)
        for op in self.planned.topological_order():
            if op.id in needed and op.id not in self._built:
                self._build_one(op)
        return self.frames.get(op_id)

    def dataframe(self, op_id: str) -> DataFrame:
        """Operator ``op_id``'s DataFrame as a reader outside the run sees it, built if it is
        not yet: its records with every column it left for its reader to select made (what
        ``explain`` shows of a store's input).

        Example::

            run = SparkPlanRun(plan, spark, engines=engines, params={})
            run.dataframe("3").explain()
        """
        if op_id not in self.frames:
            self.build(op_id)
        return self.compiler.materialized(op_id, self.frames[op_id])

    def _ancestors(self, op_id: str) -> set[str]:
        """The operators ``op_id`` reads from as the run compiles it, itself included: a semi
        (anti) join reads the records below the operators it skips."""
        needed, todo = set(), [op_id]
        while todo:
            current = todo.pop()
            if current not in needed:
                needed.add(current)
                todo.extend(self._as_run(self.planned.operator(current)).input_ids())
        return needed

    def _as_run(self, op: Operator) -> Operator:
        """``op`` as the run compiles it: a semi (anti) join reading the subquery's records."""
        semi = self.ctx.props(op.id).semi_join
        return reading_rows(op, semi) if semi is not None and isinstance(op, Join) else op

    def skipped_by(self, op_id: str) -> str | None:
        """The semi (anti) join that reads the records below planned operator ``op_id``, which
        is then never run (its DataFrame would be compiled for nothing); else None."""
        return self.ctx.props(op_id).skipped_by

    def _skipped(self, op: Operator) -> bool:
        return self.skipped_by(op.id) is not None

    def _build_one(self, op: Operator, built: Future[DataFrame] | None = None) -> None:
        op = self._as_run(op)
        inputs = [self.frames[ref] for ref in op.input_ids()]
        with _failures_named(op, self.fragments.get(op.id), self._culprit_of):
            frame = built.result() if built is not None else self.compiler.compile(op, inputs)
        self._built.add(op.id)
        if isinstance(op, Store):
            return
        if isinstance(op, WindowFrame) and self.ctx.props(op.id).fused:
            self.frames[op.id] = frame  # never run: its reader aggregates over its input
            return
        self.frames[op.id] = self.metrics.track(
            op,
            frame,
            before_limit=self._before_limit,
            unchanged=self.compiler.compiled(op.id).unchanged,
            counted_by=self._counted_by,
        )

    def row_counts(self) -> dict[str, dict[str, Any]]:
        """``{operator id: {"rows": n, ...}}`` of the planned operators counted so far (after
        the stores that ran wrote)."""
        for store_id, written in self.findings.store_results.items():
            self.metrics.stored(store_id, written.row_count)
        return self.metrics.collect()

    def _run(self) -> RunResult:
        order = self.planned.topological_order()
        readers = Counter(ref for op in order for ref in op.input_ids())
        roots = [op for op in order if readers[op.id] == 0]
        outputs: dict[str, pa.Table] = {}
        scans = [op for op in order if op.op == "scan"]
        built = build_apart(scans, self.compiler.compile, spark=self.compiler.spark)
        for op in order:
            if not self._skipped(op):
                self._build_one(op, built.get(op.id))
        for op in roots:
            if not isinstance(op, Store):
                with _failures_named(op, self.fragments.get(op.id), self._culprit_of):
                    frame = self.compiler.flushed(op.id, self.frames[op.id])
                    outputs[op.id] = collect_records(frame)
        return collect_result(
            self.plan,
            self.ctx.engines,
            self.findings.store_results,
            self.row_counts(),
            outputs,
            self.findings.sink_records,
        )

    def _marker_key(self, operator_id: str) -> int | None:
        """The run's number for a marker counting operator ``operator_id``'s rows
        (:mod:`row_markers`), or None where a marker may not count them. It may where no
        limit reads it (Spark pushes a limit below an observation, not below a filter: what
        either counts there is what Spark happened to read), no global sort may read its stage
        twice (:func:`sampled_again`), and some scan it reads from reads files (Spark
        evaluates a filter over local rows while planning, the marker with it)."""
        if self.ctx.props(operator_id).cut_by_limit or operator_id in self._sampled_again:
            return None
        if not self._scans_above.get(operator_id, set()) & self.findings.reading_scans:
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
        scans = self.findings.scan_files.get(file) or self.findings.scan_files.get(
            _LINE.sub("", file)
        )
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
            if self._skipped(op):
                continue
            op = self._as_run(op)
            label = op.op if op.has_generated_id else f"{op.op} {op.id}"
            with _failures_named(op, self.fragments.get(op.id)):
                if isinstance(op, Store):
                    input_id = op.input or ""
                    frames[label] = self.dataframe(input_id)
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


def applied_conditions(plan: LogicalPlan) -> dict[str, Remaining]:
    """The planner's :func:`remaining_conditions` of ``plan``'s filters whose scans apply the
    pushed filters they were computed for: what each such filter has left to test."""
    by_id = {op.id: op for op in plan.query}
    return {
        filter_id: rest
        for filter_id, rest in remaining_conditions(plan).items()
        if all(getattr(by_id.get(i), "pushed_filter", None) == text for i, text in rest.scans)
    }


def _frames_counted_by(plan: LogicalPlan, fused: Collection[str]) -> dict[str, str]:
    """``{windowframe id: collapsingaggregate id}``: for each fused windowframe of ``plan``
    (never built), the aggregate over its frames that counts its rows, the first to compile of
    those reading its segment (an observation is used once)."""
    readers = consumers(plan)
    found = {}
    for frame in plan.topological_order():
        if frame.op != "windowframe" or frame.id not in fused:
            continue
        (segment,) = readers[frame.id]  # fused: one segment reads it
        aggregates = readers.get(segment.id, [])
        if aggregates:
            found[frame.id] = min(aggregates, key=_position(plan)).id
    return found


def _position(plan: LogicalPlan) -> Callable[[Operator], int]:
    """Each operator's place in ``plan``'s topological order (the order the run compiles)."""
    place = {op.id: i for i, op in enumerate(plan.topological_order())}
    return lambda op: place[op.id]


def _aggregate_counts(
    ops: Sequence[Operator],
    remaining: Mapping[str, Remaining],
    frames: Mapping[str, str],
    fused: Collection[str],
) -> tuple[dict[str, str], set[str]]:
    """:func:`~engine.exec.spark.metrics.aggregate_counted` for the operators a run compiles
    (``ops``, in topological order: not those a semi join skips, the semi join reading the
    records below them), and the operators it would observe (what ``OperatorMetrics.track``
    observes; among them the grouping aggregates that count their groups with the input they
    count), given what its filters have left to test (``remaining``: none, their scans apply
    their whole condition)."""
    before_limit, counted_by = limit_inputs(ops), store_counted(ops, frames=frames)
    passes_all = {filter_id for filter_id, rest in remaining.items() if rest.condition is None}
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
