"""Push simple filters into scans whose storage engine can apply them (parquet today).

A conjunct of a filter's ``&&`` chain is pushable when it compares one top-level member of the
scan's record with a literal (``e.amount > 10``, ``'x' == e.kind``), and the statistics say the
member is a plain scalar column (a number, text or boolean; the same type in every file) of the
right family for the literal; or a date column with a date constant (``to_date('1994-01-01')``). Such a test keeps or drops whole records, exactly as the filter
would: Appendix A's nested filtering only applies through maps and arrays, and these never are.
The pushable conjuncts become the scan's ``pushedFilter`` (Spark's parquet reader gets it as a
Column filter right after the read, so row groups can be skipped); the filter stays in the plan.

The path from the filter down to the scan may cross other filters, transforms that do not write
the member, and orders; every operator on it must have no other reader (the scan's records must
reach nothing else).

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

from engine.expr import Call, Expr, FieldRef, Literal, to_string
from engine.plan import Filter, LogicalPlan, Order, Scan, Transform
from engine.plan.expressions import parse_cached
from engine.planner.rewrite import consumers, field_paths, replace_operators
from engine.planner.statistics import Statistics, is_scalar_type
from engine.types import MinorType

COMPARISONS = frozenset(
    {
        "equal",
        "not_equal",
        "less_than",
        "less_than_or_equal",
        "greater_than",
        "greater_than_or_equal",
    }
)


def push_filters(plan: LogicalPlan, stats: Statistics | None) -> LogicalPlan:
    """The plan with pushable filter conjuncts copied into their scans' ``pushedFilter``."""
    if stats is None:
        return plan
    readers = consumers(plan)
    pushed: dict[str, list[Expr]] = {}
    for op in plan.query:
        if not isinstance(op, Filter) or op.input is None:
            continue
        scan = _scan_below(plan, op, readers)
        scan_stats = stats.scan(scan.id) if scan is not None else None
        if scan is None or scan_stats is None or not scan_stats.capabilities.can_push_filters:
            continue
        columns = scan_stats.columns or {}
        known = conjuncts(parse_cached(scan.pushed_filter)) if scan.pushed_filter else []
        for conjunct in conjuncts(parse_cached(op.expr)):
            if _pushable(conjunct, scan, columns) and conjunct not in known:
                known.append(conjunct)
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
    """What is left of a filter's condition once scan ``scan_id`` applied ``pushed`` (its
    ``pushedFilter`` text): ``condition``, None when nothing is."""

    scan_id: str
    pushed: str
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
    >>> to_string(rest["2"].condition), rest["3"].condition, rest["3"].scan_id
    ('e.tags.x == 1', None, '1')
    """
    readers = consumers(plan)
    remaining: dict[str, Remaining] = {}
    for op in plan.query:
        if not isinstance(op, Filter) or op.input is None:
            continue
        scan = _scan_below(plan, op, readers)
        if scan is None or scan.pushed_filter is None:
            continue
        applied = conjuncts(parse_cached(scan.pushed_filter))
        parts = conjuncts(parse_cached(op.expr))
        rest = [part for part in parts if part not in applied]
        if len(rest) < len(parts):
            condition = _conjunction(rest) if rest else None
            remaining[op.id] = Remaining(scan.id, scan.pushed_filter, condition)
    return remaining


def conjuncts(expr: Expr) -> list[Expr]:
    """The operands of a chain of ``&&`` (the expression itself when it is not one)."""
    if isinstance(expr, Call) and expr.name == "and":
        return [part for arg in expr.args for part in conjuncts(arg)]
    return [expr]


def _conjunction(tests: list[Expr]) -> Expr:
    result = tests[0]
    for test in tests[1:]:
        result = Call("and", (result, test))
    return result


def _scan_below(plan: LogicalPlan, op: Filter, readers: dict) -> Scan | None:
    """The scan the filter's records come from through pass-through operators, if any."""
    written: list[tuple[str, ...]] = []
    current = plan.operator(op.input) if op.input else None
    while current is not None:
        if len(readers.get(current.id, [])) != 1:
            return None
        if isinstance(current, Scan):
            tested = field_paths(op.expr)
            if any(_overlaps(path, w) for path in tested for w in written):
                return None
            return current
        if isinstance(current, Transform):
            written += [field_paths(t.ref)[0] for t in current.transforms]
        elif not isinstance(current, Filter | Order):
            return None
        current = plan.operator(current.input) if current.input else None
    return None


def _overlaps(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    n = min(len(a), len(b))
    return tuple(s.lower() for s in a[:n]) == tuple(s.lower() for s in b[:n])


def _pushable(test: Expr, scan: Scan, columns: dict) -> bool:
    if not isinstance(test, Call) or test.name not in COMPARISONS or len(test.args) != 2:
        return False
    left, right = test.args
    ref, literal = (left, right) if isinstance(left, FieldRef) else (right, left)
    if not isinstance(ref, FieldRef):
        return False
    date = constant_date(literal)
    if date is None and (not isinstance(literal, Literal) or literal.value is None):
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
    return is_scalar_type(matches[0]) and _same_family(matches[0], literal)


def constant_date(expr: Expr) -> Literal | None:
    """The text literal of ``to_date('...')`` (a date constant: there is no date literal), or
    None when ``expr`` is not one.

    >>> constant_date(parse_cached("to_date('1994-01-01')")).value
    '1994-01-01'
    """
    if isinstance(expr, Call) and expr.name == "to_date" and len(expr.args) == 1:
        (arg,) = expr.args
        if isinstance(arg, Literal) and isinstance(arg.value, str):
            return arg
    return None


def _same_family(dtype: object, literal: Literal) -> bool:
    minor = literal.type.minor
    if minor in (MinorType.BIGINT, MinorType.FLOAT8):
        return pa.types.is_integer(dtype) or pa.types.is_floating(dtype)
    if minor == MinorType.VARCHAR:
        return pa.types.is_string(dtype) or pa.types.is_large_string(dtype)
    if minor == MinorType.BIT:
        return pa.types.is_boolean(dtype)
    return False
