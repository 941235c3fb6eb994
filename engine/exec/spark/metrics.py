"""Per-operator row counts on Spark: from what the parquet files say where that is exact, else
from ``DataFrame.observe`` or a marker filter read from Spark's SQL metrics; never an extra pass
over the data.

An operator's DataFrame is wrapped in an observation counting the rows that flow through it
while the plan's actions (the stores) run, unless its count is known otherwise (below). Where
the run has markers (:mod:`engine.exec.spark.row_markers`: a classic session) and the operator
reads rows Spark reads from files, a marker counts them instead, for the cost of an addition per
row where an observation splits the stage's generated code (the executor says which operators,
``SparkPlanRun._marker_key``). Counts are read after the run: an operator Spark never executed
(optimised away, e.g. below ``limit 0``) has no count. Spark pushes limits below an observation,
so the operators feeding a ``limit`` count only the rows Spark read (and are always observed).

A scan observes its rows as read, after its pushed filter, before they become records. A parquet
scan read by Spark's reader with no pushed filter (nor pushed limit), and not read by a
``limit``, reads every row of its files: its count is the sum of their footers' row counts,
which the scan reads anyway to number its rows (the compiler records it in
``RunFindings.read_rows``), and it is not observed. A parquet store likewise counts the rows
of the files Spark wrote from their footers (:func:`~engine.exec.spark.stores.store_dataframe`);
json and csv stores observe what they write.

An operator (a scan, a join, ...) whose records all reach one grouping ``collapsingaggregate``
through operators that emit one record per record (a filter its scan applied whole among them)
is counted there instead (:func:`aggregate_counted`; the engine's executor only, the Dagster
ops observe those operators where they stand): by a marker on the aggregate's input, the
aggregate's groups by a marker of their own, where the run's markers may count both
(:meth:`OperatorMetrics.count_at_aggregate`); else the aggregate adds a hidden ``count(1)`` per
group, and one observation sums it over the aggregate's few output rows, counting the groups
with it. An observation where every row flows splits Spark's code generation there and costs
each row; at the aggregate it costs no row, but the run a ``CollectMetrics`` node and the driver
an analysis (q6 at scale 1: 3-6% of its time).

A windowframe the compiler fuses into the ``collapsingaggregate`` over its windows (its members
are never built, ``compiler.fused_operators``) is counted there: the aggregate adds a hidden
window ``count(1)`` over each record's frame, and one observation sums it
(:meth:`OperatorMetrics.count_frames`): over its records before those with an empty frame, or
no target, go; or, where it gives one record per record, further on, where no record is left
whole to keep Spark from pruning (the compiler carries the column to the project a store reads,
the operators that extend records, :func:`engine.plan.traits.traits`). The segment grouping the windows is one-to-one, so it counts
the same.

A scan that skips bad records (``onError: skip``) carries, from the Drill data source, rows that
count what each file skipped (:data:`~engine.exec.spark.datasource.SKIPPED_COLUMN`); the same
observation sums them into ``skipped_records`` and the rows are dropped right after it.

An operator that emits exactly one record per input record (:data:`ONE_TO_ONE`, and a filter left
with nothing to test because its scan applied its whole condition) is not observed: its count is
its input's; a ``collapsingaggregate`` without ``within`` nor ``target`` emits one record; an
operator whose records all reach a store through one-to-one operators (its only reader, and
theirs, :func:`store_counted`) counts what the store wrote (the store counts anyway). Each
observation is a ``CollectMetrics`` node that splits Spark's whole-stage code generation and
costs the driver a dozen py4j calls and one more analysis; a marker is a filter, a few calls.
:meth:`OperatorMetrics.track` applies this rule for both the engine's executor and the Dagster
ops.

A session with ``spark.drill.rowCounts=stores`` (:mod:`engine.exec.spark.settings`) counts only
what costs nothing (footers, stores, the one-to-one operators and those a store counts): nothing
is observed nor marked where rows flow, but a scan's rows that count skipped records.

>>> OperatorMetrics().collect()
{}
"""

from __future__ import annotations

import functools
import itertools
import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F

from engine.exec.spark.constant_columns import col, lit
from engine.exec.spark.datasource import SKIPPED_COLUMN
from engine.exec.spark.row_markers import RowMarkers
from engine.plan.traits import operators_where, traits

ROWS = "rows"
"""The metric name of an operator's row count."""

SKIPPED = "skipped_records"
"""The metric name of the bad records a scan skipped (``onError: skip``), as the local
executor's."""

FILES = "files"
"""The metric name of the files a scan read, as the local executor's."""

GROUPS = "groups"
"""An aggregate's rows, observed together with the rows of its input it counts."""

RowCounter = Callable[[DataFrame, str], DataFrame]
"""Attaches an operator's observation to a DataFrame, summing its count column (named second)."""


@dataclass(frozen=True)
class InputCounter:
    """How a grouping ``collapsingaggregate`` counts the rows of the operator whose records all
    reach it (:func:`aggregate_counted`): ``mark`` puts a marker on the aggregate's input (its
    groups are then marked as any operator's rows), or ``observe`` sums a hidden ``count(1)``
    per group over the aggregate's output (:meth:`OperatorMetrics.observe_total`)."""

    mark: Callable[[DataFrame], DataFrame] | None = None
    observe: RowCounter | None = None


@dataclass(frozen=True)
class RowCounting:
    """How the compiler counts the rows of a run's operators where they are compiled, decided
    by the run before it compiles any (:class:`~engine.exec.spark.executor.SparkPlanRun`)."""

    scans: Mapping[str, Callable[[DataFrame], DataFrame]] = field(default_factory=dict)
    """Scan id -> what observes its rows as they are read (:func:`scan_observed`)."""

    aggregates: Mapping[str, Callable[[], InputCounter]] = field(default_factory=dict)
    """Grouping ``collapsingaggregate`` id -> how it counts the rows of the operator it counts
    (:func:`aggregate_counted`), asked as it compiles (a marker needs its scans compiled)."""

    frames: Mapping[str, RowCounter] = field(default_factory=dict)
    """``collapsingaggregate`` id -> what observes the rows of the fused windowframe it
    aggregates over, summed over its frames (:meth:`OperatorMetrics.count_frames`)."""


ONE_TO_ONE = operators_where(lambda t: t.one_to_one)
"""Operators whose row count is always their (single) input's."""


def sampled_again(
    operators: Any,
    *,
    top_n: Collection[str] = (),
    sinks: Collection[str] = (),
    one_task: Collection[str] = (),
    store_sorted: Collection[str] = (),
) -> set[str]:
    """The ids of the operators whose rows a global sort may read twice: Spark's range
    partitioning first runs a job that samples its input, running the stage below it a second
    time, and Spark's SQL metrics (a marker's count, :mod:`engine.exec.spark.row_markers`) count
    both runs, where an observation counts one. A global sort may be an ``order`` (but a top-N,
    ``top_n``), a store keeping its records' order (a sink, ``sinks``, or a store with an
    ``order`` or ``limit`` upstream) or an output (an operator nothing reads); the operators
    reading into it count, up to one that surely starts a stage of its own (an aggregate, a
    distinct union, a top-N: each shuffles its input). ``operators`` in topological order. A
    store sorting small data in one task (``one_task``: :mod:`~engine.exec.spark.one_task_sort`)
    samples nothing, and neither does an order such a store sorts for it (``store_sorted``: the
    store sorts by its project's copies of the order's keys).

    >>> from types import SimpleNamespace as Op
    >>> ops = [Op(id="1", op="scan", input=None), Op(id="2", op="filter", input="1"),
    ...     Op(id="3", op="order", input="2", within=None), Op(id="4", op="store", input="3"),
    ...     Op(id="5", op="collapsingaggregate", input="1"), Op(id="6", op="store", input="5")]
    >>> sorted(sampled_again(ops))  # the order, itself read by a store keeping its order
    ['1', '2', '3']
    >>> ops[3:4] = [Op(id="7", op="project", input="3"), Op(id="4", op="store", input="7")]
    >>> sorted(sampled_again(ops, one_task={"4"}, store_sorted={"3"}))  # sorted in one task
    []
    """
    ops = list(operators)
    readers = readers_of(ops)
    upstream: dict[str, set[str]] = {}
    for op in ops:  # the op kinds above each operator, for "an order or a limit upstream"
        upstream[op.id] = {op.op}.union(*(upstream.get(i, set()) for i in _inputs(op)))

    def sorts(op: Any) -> bool:
        if op.op == "order":
            return op.id not in top_n and not sorted_in_one_task(op)
        if op.op == "store":
            keeps_order = op.id in sinks or any(traits(k).orders for k in upstream[op.input])
            return keeps_order and op.id not in one_task
        return not readers.get(op.id)  # an output, collected in order

    def sorted_in_one_task(order: Any) -> bool:  # by the store reading its one reader, a project
        stores = [s for p in readers.get(order.id, []) for s in readers.get(p.id, [])]
        return order.id in store_sorted and bool(stores) and all(s.id in one_task for s in stores)

    def shuffles(op: Any) -> bool:
        return (
            op.op == "collapsingaggregate"
            or (op.op == "union" and getattr(op, "distinct", False))
            or (op.op == "order" and op.id in top_n)
        )

    found: set[str] = set()
    for op in reversed(ops):
        if any(sorts(r) or (not shuffles(r) and r.id in found) for r in readers.get(op.id, [])):
            found.add(op.id)
    return found


def store_counted(operators: Any, *, frames: Mapping[str, str] | None = None) -> dict[str, str]:
    """``{operator id: store id}`` for each operator (not read by a ``limit``) whose only reader
    is a store, or a one-to-one operator (:data:`ONE_TO_ONE`) whose only reader is, and so on:
    it emits exactly the records that store writes. ``frames`` maps a windowframe to the
    collapsing aggregate that gives one record per record of its input
    (``compiler.frame_collapses``): the windowframe's input counts what that aggregate counts.
    ``operators`` in topological order.

    >>> from types import SimpleNamespace as Op
    >>> store_counted([Op(id="1", op="scan", input=None), Op(id="2", op="flatten", input="1"),
    ...     Op(id="3", op="project", input="2"), Op(id="4", op="store", input="3")])
    {'3': '4', '2': '4'}
    """
    ops = list(operators)
    readers = readers_of(ops)
    found: dict[str, str] = {}
    for op in reversed(ops):
        if op.op == "store":
            continue
        (reader, *others) = readers.get(op.id) or [None]
        if reader is None or others:
            continue
        collapse = (frames or {}).get(reader.id)
        if reader.op == "store":
            found[op.id] = reader.id
        elif reader.op in ONE_TO_ONE and reader.id in found:
            found[op.id] = found[reader.id]
        elif collapse is not None and collapse in found:
            found[op.id] = found[collapse]
    return found


def scan_observed(
    scan_id: str, *, before_limit: Collection[str] = (), counted_by: Mapping[str, str] | None = None
) -> bool:
    """Whether :meth:`OperatorMetrics.track` would observe scan ``scan_id`` (a scan is never
    one-to-one): the executor then lets the scan observe its rows as they are read, before they
    become records, where the observation keeps Spark from nothing (``struct(...).member`` above
    it still simplifies to the column). A scan whose rows its parquet footers count (see the
    module docstring) takes that count instead of the observation."""
    return scan_id in before_limit or scan_id not in (counted_by or {})


def aggregate_counted(
    operators: Any, *, passes_all: Collection[str] = (), observed: Collection[str] = ()
) -> dict[str, str]:
    """``{collapsingaggregate id: operator id}`` for each operator in ``observed`` (a scan, a
    join, ...) whose records all reach one grouping ``collapsingaggregate`` (no ``target``), each
    through a single reader that emits one record per record (:data:`ONE_TO_ONE`, or a filter in
    ``passes_all``: one whose whole condition its scan applied): the aggregate counts the
    operator's rows as a hidden ``count(1)`` per group, and the observation sums them over its
    few output rows instead of counting every row as it flows (an observation splits Spark's
    code generation where it stands). ``operators`` in topological order.

    >>> from types import SimpleNamespace as Op
    >>> ops = [Op(id="1", op="scan", input=None), Op(id="2", op="filter", input="1"),
    ...     Op(id="3", op="collapsingaggregate", input="2", target=None)]
    >>> aggregate_counted(ops, passes_all={"2"}, observed={"1"})
    {'3': '1'}
    >>> aggregate_counted(ops, observed={"1"})  # the filter drops records
    {}
    """
    ops = list(operators)
    readers = readers_of(ops)
    found: dict[str, str] = {}
    for counted in ops:
        if counted.id not in observed:
            continue
        current = counted
        while len(readers.get(current.id, [])) == 1:
            (reader,) = readers[current.id]
            if reader.op == "collapsingaggregate" and reader.target is None:
                found.setdefault(reader.id, counted.id)
                break
            if reader.op not in ONE_TO_ONE and reader.id not in passes_all:
                break
            current = reader
    return found


def readers_of(operators: Any) -> dict[str, list[Any]]:
    """``{operator id: the operators that read it}``."""
    readers: dict[str, list[Any]] = {}
    for op in operators:
        for ref in _inputs(op):
            readers.setdefault(ref, []).append(op)
    return readers


def _inputs(op: Any) -> list[str]:
    if hasattr(op, "input_ids"):
        return list(op.input_ids())
    return [op.input] if getattr(op, "input", None) else []


class OperatorMetrics:
    """Observations of the operators of one run, by operator id."""

    def __init__(
        self,
        read: Mapping[str, int] | None = None,
        files: Mapping[str, int] | None = None,
        *,
        markers: RowMarkers | None = None,
        marker_key: Callable[[str], int | None] | None = None,
        every_operator: bool = True,
    ) -> None:
        # False: only what costs nothing is counted (``spark.drill.rowCounts=stores``)
        self._every_operator = every_operator
        # scan id -> the rows it reads, known from its parquet footers (filled as scans compile)
        self._read: Mapping[str, int] = {} if read is None else read
        # scan id -> the files it reads, every one of them (filled as scans compile)
        self._files: Mapping[str, int] = {} if files is None else files
        self._observations: dict[str, Observation] = {}
        self._same: dict[str, str] = {}
        self._fixed: dict[str, int] = {}
        self._known: dict[str, int] = {}
        self._run = uuid.uuid4().hex[:12]
        self._names = itertools.count()  # a run's scans observe from threads of their own
        self._later: set[str] = set()
        # aggregate id -> the operator it counts, whose observation counts the aggregate's rows too
        self._groups: dict[str, str] = {}
        # where rows flow, a marker counts them instead of an observation (see row_markers)
        self._markers = markers
        self._marker_key = marker_key or (lambda _: None)
        self._marked: dict[str, int] = {}  # operator id -> its marker

    def count_later(self, operator_ids: Collection[str]) -> None:
        """Operators an aggregate counts (:func:`aggregate_counted`): :meth:`track` leaves them
        as they are (unless one must count where it stands: a scan its footers count, or one
        counting skipped records), and :meth:`count_at_aggregate` counts them."""
        self._later.update(operator_ids)

    def count_at_aggregate(
        self, operator_id: str, aggregate_id: str, *, groups: bool = False
    ) -> InputCounter:
        """How aggregate ``aggregate_id``, compiling now, counts the rows of ``operator_id``
        (:meth:`count_later`), whose records all reach it; ``groups``: its own rows are counted
        too. By a marker on the aggregate's input where the run's markers may count both (no
        observation then: each costs a ``CollectMetrics`` node and the driver an analysis), else
        by an observation attached by :meth:`observe_total`, its groups with it. Nothing where
        ``operator_id`` was counted where it stands."""
        if operator_id not in self._later or not self._every_operator:
            return InputCounter()
        markers = self._markers
        key = None if markers is None else self._marker_key(operator_id)
        if key is not None and not (groups and self._marker_key(aggregate_id) is None):
            return InputCounter(mark=functools.partial(self._mark, markers, operator_id, key))
        self._observations[operator_id] = self._new_observation()
        groups_of = aggregate_id if groups else None
        return InputCounter(
            observe=functools.partial(self.observe_total, operator_id, groups_of=groups_of)
        )

    def _mark(self, markers: RowMarkers, operator_id: str, key: int, df: DataFrame) -> DataFrame:
        df, self._marked[operator_id] = markers.mark(df, key)
        return df

    def count_frames(self, frame_ids: Collection[str]) -> dict[str, RowCounter]:
        """Fused windowframes (``compiler.fused_operators``): never built, so the aggregate over
        their frames counts their rows. Their observations are made now (:meth:`track` leaves
        them as they are); returns ``{frame id: what attaches it}``, a callable given the
        aggregate's DataFrame and a column of each record's frame rows, which it sums."""
        counters: dict[str, RowCounter] = {}
        for frame_id in frame_ids if self._every_operator else ():
            observation = self._observations[frame_id] = self._new_observation()
            counters[frame_id] = functools.partial(_observe_sum, observation)
        return counters

    def _new_observation(self) -> Observation:
        return Observation(f"drill_{self._run}_{next(self._names)}")

    @functools.cached_property
    def _row_count(self) -> Column:
        # One Column for every observation of the run: Spark resolves it in each plan anew, and
        # building it costs three py4j calls (made once, on first use: a run needs a session).
        return F.count(lit(1)).alias(ROWS)

    def track(
        self,
        op: Any,
        df: DataFrame,
        *,
        before_limit: Collection[str] = (),
        unchanged: bool = False,
        counted_by: Mapping[str, str] | None = None,
    ) -> DataFrame:
        """``df``, operator ``op``'s DataFrame, with its row count: observed, or derived from its
        input's (one-to-one operators; ``unchanged``: the operator returned its input as it is),
        from the store that writes its records (``counted_by``: :func:`store_counted`; the
        store's count is given with :meth:`stored`) or known (one record; a scan's rows from
        its parquet footers, given as ``read`` when built). ``before_limit``: ids read by a
        ``limit`` (:func:`limit_inputs`), always observed since Spark counts only what the limit
        read. An operator already observed (a scan, at its read: :func:`scan_observed`) is
        returned as it is, and so is an operator an aggregate counts (:meth:`count_later`),
        but a scan its footers count or one that counts skipped records (those rows must go
        before the aggregate)."""
        if op.id in self._later:
            if op.id not in self._read and SKIPPED_COLUMN not in df.columns:
                return df
            self._later.discard(op.id)
            self._observations.pop(op.id, None)
            if op.id in self._read:
                return df  # every row of its files: their footers count them
            return self.observe(op.id, df)
        if op.id in self._observations or op.id in self._marked:
            return df
        if op.id in before_limit:
            return self.observe(op.id, df)
        if op.op == "scan" and op.id in self._read:
            return df  # every row of its files: their footers count them
        if (op.op in ONE_TO_ONE or unchanged) and getattr(op, "input", None):
            self.same_as(op.id, op.input)
            return df
        if counted_by and op.id in counted_by and SKIPPED_COLUMN not in df.columns:
            self.same_as(op.id, counted_by[op.id])
            return df
        if op.op == "collapsingaggregate" and op.within is None and op.target is None:
            self._fixed[op.id] = 1  # the aggregates of the whole input, even of no input
            return df
        if op.id in self._groups:
            return df  # its groups are counted where it counts its input's rows
        return self.observe(op.id, df)

    def observe(self, operator_id: str, df: DataFrame) -> DataFrame:
        """``df`` counting its rows into operator ``operator_id``'s metrics (and, for a scan
        that counts skipped records, those too: its counting rows are dropped): by a marker
        where the run has them and ``marker_key`` gives the operator one, else by an
        observation. Where the run counts only what costs nothing, only the skipped records
        are counted (the rows with them: one observation either way)."""
        if not self._every_operator and SKIPPED_COLUMN not in df.columns:
            return df
        markers = self._markers
        key = None if markers is None else self._marker_key(operator_id)
        if markers is not None and key is not None and SKIPPED_COLUMN not in df.columns:
            df, self._marked[operator_id] = markers.mark(df, key)
            return df
        observation = self._new_observation()
        self._observations[operator_id] = observation
        if SKIPPED_COLUMN not in df.columns:
            return df.observe(observation, self._row_count)
        skipped = col(SKIPPED_COLUMN)
        observed = df.observe(
            observation,
            F.count(F.when(skipped.isNull(), lit(1))).alias(ROWS),
            F.ifnull(F.sum(skipped), lit(0)).alias(SKIPPED),
        )
        return without_skip_counts(observed)

    def observe_total(
        self, operator_id: str, df: DataFrame, counts: str, *, groups_of: str | None = None
    ) -> DataFrame:
        """``df`` summing its column ``counts`` into operator ``operator_id``'s row count (one
        an aggregate counts: ``counts`` holds each group's rows, see :func:`aggregate_counted`).
        ``groups_of``: the aggregate whose rows ``df``'s are (no ``target``), counted by the same
        observation rather than one of its own."""
        if operator_id not in self._later:
            return df  # observed as it was read after all
        total = F.ifnull(F.sum(counts), lit(0)).alias(ROWS)
        if groups_of is None:
            return df.observe(self._observations[operator_id], total)
        self._groups[groups_of] = operator_id
        groups = self._row_count.alias(GROUPS)
        return df.observe(self._observations[operator_id], total, groups)

    def close(self) -> None:
        """The run is over: no :meth:`collect` follows."""
        if self._markers is not None:
            self._markers.close()

    def counting(self) -> set[str]:
        """The operators whose rows this run counts as they flow (an observation or a marker;
        an aggregate's input it counts per group among them)."""
        return set(self._observations) | set(self._marked)

    def same_as(self, operator_id: str, other_id: str) -> None:
        """Operator ``operator_id`` counts what ``other_id`` counts (its input, or the store that
        writes its records)."""
        self._same[operator_id] = other_id

    def stored(self, store_id: str, rows: int) -> None:
        """The rows store ``store_id`` wrote (what the operators it counts for count)."""
        self._known[store_id] = rows

    def collect(self) -> dict[str, dict[str, Any]]:
        """``{operator id: {"rows": n}}`` for every observed operator Spark executed, and for
        a scan that reads every file it lists ``files`` and ``skipped_records`` too, as the
        local executor counts them (0 skipped where the reader fails on a bad record)."""
        known = {**self._read, **self._fixed, **self._known}
        found: dict[str, dict[str, Any]] = {k: {ROWS: n} for k, n in known.items()}
        for operator_id, observation in self._observations.items():
            values = _ready(observation)
            if values and values.get(ROWS) is not None:
                found[operator_id] = {k: int(values[k]) for k in (ROWS, SKIPPED) if k in values}
        if self._markers is not None and self._marked:
            counted = self._markers.counts(self._marked.values())
            for operator_id, marker in self._marked.items():
                if marker in counted:
                    found[operator_id] = {ROWS: counted[marker]}
        for aggregate_id, counted_id in self._groups.items():
            values = _ready(self._observations[counted_id])
            if aggregate_id not in found and values and values.get(GROUPS) is not None:
                found[aggregate_id] = {ROWS: int(values[GROUPS])}
        pending = dict(self._same)
        while pending:  # chains run up (to an input) and down (to a store)
            resolved = {k: v for k, v in pending.items() if v in found}
            if not resolved:
                break
            for operator_id, other_id in resolved.items():
                found[operator_id] = {ROWS: found[other_id][ROWS]}
                del pending[operator_id]
        for scan_id, files in self._files.items():
            if scan_id in found:  # it ran; a reader that does not count skips fails instead
                found[scan_id] = {FILES: files, SKIPPED: 0, **found[scan_id]}
        return found


def _observe_sum(observation: Observation, df: DataFrame, counts: str) -> DataFrame:
    return df.observe(observation, F.ifnull(F.sum(counts), lit(0)).alias(ROWS))


def without_skip_counts(df: DataFrame) -> DataFrame:
    """``df`` without a scan's rows that count skipped records (see the module docstring)."""
    if SKIPPED_COLUMN not in df.columns:
        return df
    return df.where(col(SKIPPED_COLUMN).isNull()).drop(SKIPPED_COLUMN)


def _ready(observation: Observation) -> dict[str, Any] | None:
    """The observed values, or None when no action has produced them (never waits)."""
    java = getattr(observation, "_jo", None)
    if java is not None and not java.future().isCompleted():
        return None
    try:
        return dict(observation.get)  # Spark Connect fills it when the action returns
    except Exception:  # an observation never attached, or one whose action failed
        return None
