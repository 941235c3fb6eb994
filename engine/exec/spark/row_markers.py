"""Row counts from Spark's own SQL metrics, where every row of a pipeline flows: an opt-in
(``spark.drill.rowMarkers``, :mod:`engine.exec.spark.settings`), since it reads Spark's internal
status store with Java compiled at run time; by default the engine observes.

An observation (``DataFrame.observe``) is a ``CollectMetrics`` node, which Spark runs outside its
generated code: it adds each row to an accumulator and, standing between two operators of one
stage, splits the stage's generated code in two (the rows copied out of one and read into the
other). Over the rows of a scan or a join that is about 85 ns a row: 5-15% of a join query's
time (measured with ``benchmarks/spark_profile.py``).

A marker is a filter that keeps every row, ``spark_partition_id() >= -N``, with ``N`` the run's
number for the operator (:class:`RowMarkers`). Being nondeterministic, the optimizer neither
folds it away nor moves anything across it; Spark compiles it into the stage's generated code,
and its ``number of output rows`` metric counts the rows that reached it, for the cost of an
addition. After the run's actions, :meth:`RowMarkers.counts` reads those metrics from the
session's SQL status store (what Spark's UI shows; kept with the UI off) by the marker in each
filter's description. A filter Spark merges the marker into (one right below it) keeps what the
marker keeps, so its count is still the marker's.

Markers need the status store on the driver: under Spark Connect, or where the small reader
below cannot be built (another Spark's internals), :func:`row_markers` returns None and the
engine observes instead. The executor puts none (``SparkPlanRun._marker_key``) over local data
only (a constant, an empty scan: Spark evaluates a filter over local rows while planning, the
marker with it), below a global sort (its range partitioning samples the stage below it in a job
of its own, and SQL metrics count both runs: :func:`~engine.exec.spark.metrics.sampled_again`),
nor where a limit reads. Spark's ``PropagateEmptyRelation`` drops a marker over an input found
empty while planning (its count is then missing, not wrong); the sessions the engine creates with
``spark.drill.keepEmptyRelations`` leave that rule out (:mod:`engine.exec.spark.session`).

The status store is read by a few lines of Java compiled in the driver by Janino, the compiler
Spark uses for its own generated code: a walk of an execution's plan in Python costs one py4j
round trip per node (30 ms for a three-way join here), the compiled walk one for the run.
"""

from __future__ import annotations

import itertools
import logging
import re
import threading
import uuid
import weakref
from collections.abc import Collection
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

from engine.exec.spark.constant_columns import lit
from engine.exec.spark.settings import ROW_MARKERS, enabled

_READER_SOURCE = """
// Let Spark's listener record what has run (it waits 10 s at most; then: what is recorded).
private void settle(org.apache.spark.SparkContext sc) {
    try { sc.listenerBus().waitUntilEmpty(); } catch (Exception slow) { }
}

public long nextExecution(org.apache.spark.SparkContext sc,
                          org.apache.spark.sql.execution.ui.SQLAppStatusStore store)
        throws Exception {
    settle(sc);
    long count = store.executionsCount();
    if (count == 0) return 0L;
    scala.collection.Seq last = store.executionsList((int) (count - 1), 1);
    if (last.isEmpty()) return 0L;
    return ((org.apache.spark.sql.execution.ui.SQLExecutionUIData) last.head()).executionId() + 1;
}

public String counts(org.apache.spark.SparkContext sc,
                     org.apache.spark.sql.execution.ui.SQLAppStatusStore store,
                     long since, String marker) throws Exception {
    settle(sc);
    StringBuilder out = new StringBuilder();
    long count = store.executionsCount();
    int chunk = 16;
    boolean older = false;
    for (long end = count; end > 0 && !older; end -= chunk) {
        int offset = (int) Math.max(0L, end - chunk);
        scala.collection.Seq executions = store.executionsList(offset, (int) (end - offset));
        for (int i = executions.size() - 1; i >= 0; i--) {
            org.apache.spark.sql.execution.ui.SQLExecutionUIData execution =
                (org.apache.spark.sql.execution.ui.SQLExecutionUIData) executions.apply(i);
            long id = execution.executionId();
            if (id < since) { older = true; continue; }
            scala.collection.Map values = store.executionMetrics(id);
            scala.collection.Iterator nodes = store.planGraph(id).allNodes().iterator();
            while (nodes.hasNext()) {
                org.apache.spark.sql.execution.ui.SparkPlanGraphNode node =
                    (org.apache.spark.sql.execution.ui.SparkPlanGraphNode) nodes.next();
                String desc = node.desc();
                int at = desc.indexOf(marker);
                if (at < 0 || !node.name().equals("Filter") || node.metrics().isEmpty()) continue;
                org.apache.spark.sql.execution.ui.SQLPlanMetric rows =
                    (org.apache.spark.sql.execution.ui.SQLPlanMetric) node.metrics().head();
                // No value: no task added to it (Spark sends no update of a zero metric).
                scala.Option value = values.get(Long.valueOf(rows.accumulatorId()));
                out.append(id).append('\\t').append(value.isDefined() ? value.get() : "0")
                   .append('\\t')
                   .append(desc.substring(at)).append('\\n');
            }
        }
    }
    return out.toString();
}
"""

_log = logging.getLogger(__name__)

_MARKER_TEXT = "SPARK_PARTITION_ID() >= -"
"""How a marker reads in a filter's description."""

_MARKER = re.compile(r"SPARK_PARTITION_ID\(\) >= -(\d+)\b")

SLOT_SIZE = 100_000
"""A run's markers are its slot's base plus one number per operator (see :class:`RowMarkers`)."""

_slots: set[int] = set()  # the slots of the runs in progress
_slots_lock = threading.Lock()
_readers: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_readers_lock = threading.Lock()


def slots_in_use() -> int:
    """How many runs hold marker slots now (none once every run has finished)."""
    with _slots_lock:
        return len(_slots)


def marker_condition(number: int) -> Column:
    """The marker filter's condition: true for every row.

    Example (with a SparkSession)::

        spark.range(3).where(marker_condition(7)).count()  # 3
    """
    return F.spark_partition_id() >= lit(-number)


class RowMarkers:
    """The markers of one run on one classic session: :meth:`mark` a DataFrame where its rows are
    to be counted, run the actions, then :meth:`counts`, and :meth:`close`.

    A marker's number is in the code Spark generates for its stage, and Spark keeps generated
    code by its source: numbers that changed from run to run made Spark compile every stage of a
    repeated plan again (+40% executor CPU on q3). So a run's numbers are the same each time it
    runs the same plan: ``key`` (the run's number for an operator) above the base of the lowest
    slot no run in progress holds. The run's executions are those since it began; a run that
    began earlier and still runs holds another slot, so its markers are not this run's."""

    def __init__(self, spark: Any, reader: Any) -> None:
        self._spark = spark
        self._reader = reader
        store = spark._jsparkSession.sharedState().statusStore()
        self._store = store
        with _slots_lock:
            self._slot = next(s for s in itertools.count() if s not in _slots)
            _slots.add(self._slot)
        # A run dropped unclosed (its caller failed before closing it) gives its slot back too.
        self._release = weakref.finalize(self, _release_slot, self._slot)
        try:
            # The executions before this run's (once the listener has recorded all that ran).
            self._since = reader.nextExecution(spark.sparkContext._jsc.sc(), store)
        except BaseException:
            self._release()
            raise

    def mark(self, df: Any, key: int) -> tuple[Any, int]:
        """``df`` with the marker of ``key`` (below :data:`SLOT_SIZE`), and its number."""
        number = self._slot * SLOT_SIZE + key + 1
        return df.where(marker_condition(number)), number

    def close(self) -> None:
        """Give the run's slot back (after its last :meth:`counts`)."""
        self._release()

    def counts(self, numbers: Collection[int]) -> dict[int, int]:
        """The rows that reached each of ``numbers`` in the run's executions so far, from the
        first execution that ran it (as an observation keeps its first action's values). A
        marker Spark did not run (optimised away below ``limit 0``) has no count."""
        if not numbers:
            return {}
        try:
            text = self._reader.counts(
                self._spark.sparkContext._jsc.sc(), self._store, self._since, _MARKER_TEXT
            )
        except Exception as err:  # the run's stores are written: it loses its counts, no more
            _log.warning("row counts of the run's operators could not be read: %s", one_line(err))
            return {}
        return parse_counts(text, set(numbers))


def _release_slot(slot: int) -> None:
    with _slots_lock:
        _slots.discard(slot)


def one_line(err: BaseException) -> str:
    """What went wrong in one line: a py4j error's Java exception and message, not its trace.

    >>> one_line(RuntimeError("An error occurred while calling o132.counts.\\n"
    ...                       ": java.lang.IllegalStateException: stopped\\n\\tat a.b(C.java:1)"))
    'java.lang.IllegalStateException: stopped'
    """
    try:
        text = str(err)  # a py4j error asks the JVM for its text
    except Exception:
        return type(err).__name__
    lines = [line.strip().lstrip(": ") for line in text.splitlines()]
    lines = [line for line in lines if line and not line.startswith("at ")]
    if len(lines) > 1 and lines[0].startswith("An error occurred while calling"):
        lines = lines[1:]
    return lines[0] if lines else type(err).__name__


def parse_counts(text: str, wanted: Collection[int]) -> dict[int, int]:
    """``{marker: rows}`` from the reader's lines (``execution <TAB> rows <TAB> description``),
    the earliest execution's count of each wanted marker. A filter holding two markers says
    nothing of either (no plan the engine builds makes one).

    >>> parse_counts("5\\t1,204\\tSPARK_PARTITION_ID() >= -3)\\n"
    ...              "4\\t7\\tSPARK_PARTITION_ID() >= -3)\\n"
    ...              "4\\t9\\tSPARK_PARTITION_ID() >= -8)\\n", {3, 4})
    {3: 7}
    """
    found: dict[int, tuple[int, int]] = {}
    for line in text.splitlines():
        execution, rows, description = line.split("\t", 2)
        markers = {int(m) for m in _MARKER.findall(description)}
        if len(markers) != 1:
            continue
        (number,) = markers
        if number not in wanted:
            continue
        key = (int(execution), int(rows.replace(",", "")))
        previous = found.get(number)
        if previous is None or key[0] < previous[0] or (key[0] == previous[0] and key > previous):
            found[number] = key
    return {number: rows for number, (_, rows) in found.items()}


def row_markers(spark: Any) -> RowMarkers | None:
    """Markers for a run on ``spark``, or None where the session does not opt in
    (``spark.drill.rowMarkers``, :mod:`engine.exec.spark.settings`) or they cannot be read
    (Spark Connect, or a Spark whose status store this module does not know): the run observes
    instead."""
    from pyspark.sql.utils import is_remote

    if is_remote() or not enabled(spark, ROW_MARKERS):
        return None
    try:
        sc = spark.sparkContext
        with _readers_lock:
            reader = _readers.get(sc)
            if reader is None:
                reader = _readers[sc] = _compile_reader(spark)
        return RowMarkers(spark, reader)
    except Exception as err:  # any failure means: observe instead
        _log.debug("row counts by observation: no status store reader: %s", one_line(err))
        return None


def _compile_reader(spark: Any) -> Any:
    jvm = spark._jvm
    gateway = spark.sparkContext._gateway
    evaluator = jvm.org.codehaus.janino.ClassBodyEvaluator()
    # A name of its own: py4j caches the methods it calls by class *name* (per JVM thread), so
    # a reader compiled for a later SparkContext under Janino's default name would be called
    # through the first reader's methods ("object is not an instance of declaring class").
    evaluator.setClassName(f"DrillRowCountReader{uuid.uuid4().hex}")
    evaluator.setParentClassLoader(jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader())
    evaluator.cook(_READER_SOURCE)
    constructor = evaluator.getClazz().getDeclaredConstructor(
        gateway.new_array(jvm.java.lang.Class, 0)
    )
    return constructor.newInstance(gateway.new_array(jvm.java.lang.Object, 0))
