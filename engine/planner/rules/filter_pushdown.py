"""Push simple filters into scans whose storage engine can apply them (parquet today).

A conjunct of a filter's ``&&`` chain is pushable when it compares one top-level member of the
scan's record with a literal (``e.amount > 10``, ``'x' == e.kind``), and the statistics say the
member is a plain scalar column (a number, decimal, text or boolean; the same type in every file)
of the right family for the literal (a number or a decimal constant, ``cast('0.05' as DECIMAL(2,
2))``, for numbers); or a date column with a date constant (``to_date('1994-01-01')``); or an
``||`` or ``&&`` of such comparisons (``e.mode == 'AIR' || e.mode == 'RAIL'``). Such a test keeps
or drops whole records, exactly as the filter would: Appendix A's nested filtering only applies
through maps and arrays, and these never are. Each reader applies what of it its own pushdown
tests exactly and evaluates the rest as the filter would.
The pushable conjuncts become the scan's ``pushedFilter`` (Spark's parquet reader gets it as a
Column filter right after the read, so row groups can be skipped); the filter stays in the plan.

The path from the filter down to the scan may cross other filters, transforms that do not write
the member, and orders; every operator on it must have no other reader (the scan's records must
reach nothing else). It may also cross a join, into a side every record of which reaches the
join's output unchanged (either side of an inner join, the left side of a left join) when the
conjunct reads only that side's scan ``ref`` and the other side's records cannot hold that name
(it is not among the top-level names they may hold, ``rewrite.top_names``): testing those records before
the join keeps exactly the joined records the filter keeps (left_join_filter's ``o.o_orderdate``
test reaches the orders reader, as in hand-written PySpark). The join then counts fewer records,
on both executors alike.

>>> import pyarrow as pa
>>> from engine.plan import parse_plan
>>> from engine.planner.statistics import ScanStatistics, Statistics
>>> from engine.storage.engines import Capabilities
>>> plan = parse_plan({"storage": {"fs": {"type": "fs", "root": "/data"}}, "query": [
...     {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "e", "selection": {"path": "e"}},
...     {"@id": 2, "op": "filter", "input": 1, "expr": "e.amount > 10 && e.tags.x == 1"}]})
>>> stats = Statistics({"1": ScanStatistics("parquet", 1, 100, 10,
...     Capabilities(can_push_filters=True), {"amount": pa.float64(), "tags": pa.list_(pa.int64())})})
>>> push_filters(plan, stats).operator("1").pushed_filter
'e.amount > 10'
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from engine.expr import Call, Cast, Expr, FieldRef, Literal, to_string
from engine.expr.rewrite import COMPARISONS, conjuncts, constant_date
from engine.plan import Filter, Join, LogicalPlan, Order, Scan, Transform
from engine.plan.expressions import parse_cached
from engine.planner.rewrite import consumers, field_paths, replace_operators, top_names
from engine.planner.statistics import Statistics, is_scalar_type
from engine.types import MinorType


def push_filters(plan: LogicalPlan, stats: Statistics | None) -> LogicalPlan:
    """The plan with pushable filter conjuncts copied into their scans' ``pushedFilter``."""
    if stats is None:
        return plan
    readers = consumers(plan)
    pushed: dict[str, list[Expr]] = {}
    for op in plan.query:
        if not isinstance(op, Filter) or op.input is None:
            continue
        for conjunct in conjuncts(parse_cached(op.expr)):
            scan = _scan_below(plan, op, readers, conjunct)
            scan_stats = stats.scan(scan.id) if scan is not None else None
            if scan is None or scan_stats is None or not scan_stats.capabilities.can_push_filters:
                continue
            known = conjuncts(parse_cached(scan.pushed_filter)) if scan.pushed_filter else []
            known += pushed.get(scan.id, [])
            if _pushable(conjunct, scan, scan_stats.columns or {}) and conjunct not in known:
                pushed.setdefault(scan.id, []).append(conjunct)
    changed = {}
    for scan_id, tests in pushed.items():
        scan = plan.operator(scan_id)
        assert isinstance(scan, Scan)
        if scan.pushed_filter is not None:
            tests = [parse_cached(scan.pushed_filter), *tests]
        text = to_string(_conjunction(tests))
        changed[scan_id] = scan.model_copy(update={"pushed_filter": text})
    return replace_operators(plan, changed)


@dataclass(frozen=True)
class Remaining:
    """What is left of a filter's condition once the scans below applied their pushed filters
    (``scans``: ``(scan id, pushedFilter text)`` pairs): ``condition``, None when nothing is."""

    scans: tuple[tuple[str, str], ...]
    condition: Expr | None


def remaining_conditions(plan: LogicalPlan) -> dict[str, Remaining]:
    """For each filter whose scan below already applies some of its conjuncts (its
    ``pushedFilter``), what is left for the filter to test (None: nothing, every record reaching
    it passes). An executor applying the scan's ``pushedFilter`` applies these instead of the
    filters' whole conditions, so that each test runs once.

    The pushed tests hold for every record the scan emits, and the operators between the scan
    and the filter (filters, orders, transforms not writing the tested members) keep them true.

    >>> from engine.plan import parse_plan
    >>> plan = parse_plan({"storage": {"fs": {"type": "fs", "root": "/data"}}, "query": [
    ...     {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "e", "selection": {"path": "e"},
    ...      "pushedFilter": "e.amount > 10"},
    ...     {"@id": 2, "op": "filter", "input": 1, "expr": "e.amount > 10 && e.tags.x == 1"},
    ...     {"@id": 3, "op": "filter", "input": 2, "expr": "e.amount > 10"}]})
    >>> rest = remaining_conditions(plan)
    >>> to_string(rest["2"].condition), rest["3"].condition, rest["3"].scans
    ('e.tags.x == 1', None, (('1', 'e.amount > 10'),))
    """
    readers = consumers(plan)
    remaining: dict[str, Remaining] = {}
    for op in plan.query:
        if not isinstance(op, Filter) or op.input is None:
            continue
        parts = conjuncts(parse_cached(op.expr))
        rest = []
        scans: dict[str, str] = {}
        for part in parts:
            scan = _scan_below(plan, op, readers, part)
            if scan is None or scan.pushed_filter is None:
                rest.append(part)
            elif part in conjuncts(parse_cached(scan.pushed_filter)):
                scans[scan.id] = scan.pushed_filter
            else:
                rest.append(part)
        if scans:
            condition = _conjunction(rest) if rest else None
            remaining[op.id] = Remaining(tuple(sorted(scans.items())), condition)
    return remaining


def _conjunction(tests: list[Expr]) -> Expr:
    result = tests[0]
    for test in tests[1:]:
        result = Call("and", (result, test))
    return result


def _scan_below(plan: LogicalPlan, op: Filter, readers: dict, test: Expr) -> Scan | None:
    """The scan ``test`` (a conjunct of ``op``'s condition) reads through pass-through
    operators and joins (see the module docstring), if any."""
    return _source_scan(plan, op.input, readers, field_paths(test), [])


def _source_scan(
    plan: LogicalPlan,
    op_id: str | None,
    readers: dict,
    tested: list[tuple[str, ...]],
    written: list[tuple[str, ...]],
) -> Scan | None:
    current = plan.operator(op_id) if op_id else None
    while current is not None:
        if len(readers.get(current.id, [])) != 1:
            return None
        if isinstance(current, Scan):
            if any(_overlaps(path, w) for path in tested for w in written):
                return None
            return current
        if isinstance(current, Join):
            return _join_side_scan(plan, current, readers, tested, written)
        if isinstance(current, Transform):
            written = written + [field_paths(t.ref)[0] for t in current.transforms]
        elif not isinstance(current, Filter | Order):
            return None
        current = plan.operator(current.input) if current.input else None
    return None


def _join_side_scan(
    plan: LogicalPlan,
    join: Join,
    readers: dict,
    tested: list[tuple[str, ...]],
    written: list[tuple[str, ...]],
) -> Scan | None:
    """The scan below the side of ``join`` whose records hold every tested path, when the
    test may run before the join (see the module docstring)."""
    names = {path[0].lower() for path in tested if path}
    if not tested or len(names) != 1 or any(not path for path in tested):
        return None
    sides = [(join.left, join.right)]
    if join.type == "inner":
        sides.append((join.right, join.left))
    elif join.type != "left":
        return None
    for side, other in sides:
        others = top_names(plan.operator(other), {op.id: op for op in plan.query})
        if others is None or names & others:
            continue
        scan = _source_scan(plan, side, readers, tested, written)
        if scan is not None and scan.ref and {scan.ref.lower()} == names:
            return scan
    return None


def _overlaps(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    n = min(len(a), len(b))
    return tuple(s.lower() for s in a[:n]) == tuple(s.lower() for s in b[:n])


def _pushable(test: Expr, scan: Scan, columns: dict) -> bool:
    if isinstance(test, Call) and test.name in ("and", "or") and test.args:
        # (a == 'x' || a == 'y'): every record it keeps, its tests keep, however combined
        return all(_pushable(arg, scan, columns) for arg in test.args)
    if not isinstance(test, Call) or test.name not in COMPARISONS or len(test.args) != 2:
        return False
    left, right = test.args
    ref, literal = (left, right) if isinstance(left, FieldRef) else (right, left)
    if not isinstance(ref, FieldRef):
        return False
    date = constant_date(literal)
    constant = _constant_type(literal)
    if date is None and constant is None:
        return False
    prefix = (scan.ref,) if scan.ref else ()
    path = ref.path
    if len(path) != len(prefix) + 1 or any(not isinstance(s, str) for s in path):
        return False
    if prefix and str(path[0]).lower() != str(prefix[0]).lower():
        return False
    member = str(path[-1])
    matches = [t for name, t in columns.items() if name.lower() == member.lower()]
    if len(matches) != 1:
        return False
    if date is not None:
        return pa.types.is_date32(matches[0])
    column = matches[0]
    scalar = is_scalar_type(column) or pa.types.is_decimal(column)
    return scalar and constant is not None and _same_family(column, constant)


def _constant_type(expr: Expr) -> MinorType | None:
    """The type of a non-null literal, or of ``cast('0.05' as DECIMAL(2, 2))`` (SQL's decimal
    constants); None when ``expr`` is neither."""
    if isinstance(expr, Cast) and expr.type.minor == MinorType.DECIMAL:
        expr = expr.expr
        if isinstance(expr, Literal) and expr.value is not None:
            return MinorType.DECIMAL
    if isinstance(expr, Literal) and expr.value is not None:
        return expr.type.minor
    return None


def _same_family(dtype: object, minor: MinorType) -> bool:
    if minor in (MinorType.BIGINT, MinorType.FLOAT8, MinorType.DECIMAL):
        return (
            pa.types.is_integer(dtype) or pa.types.is_floating(dtype) or pa.types.is_decimal(dtype)
        )
    if minor == MinorType.VARCHAR:
        return pa.types.is_string(dtype) or pa.types.is_large_string(dtype)
    if minor == MinorType.BIT:
        return pa.types.is_boolean(dtype)
    return False
