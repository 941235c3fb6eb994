"""Rules that look at more than one operator, or inside expressions and names.

Each rule appends :class:`~engine.errors.PlanIssue` values; nothing stops at the first problem.
The rules: duplicate ids, dangling inputs, reading from a sink, a missing input, cycles, storage
engines not declared in ``storage``, expression syntax and registry checks, and names that are not
field paths.

>>> from engine.plan.operators import Filter
>>> entries = [PlacedOperator("2", Filter(id="2", input="1", expr="a >"), Location("$.query[0]"))]
>>> for issue in check_operators(entries, storage=[]):
...     print(issue.path, "|", issue.message.splitlines()[0][:40])
$.query[0].input | 'input' refers to operator '1', which do
$.query[0].expr | expression syntax error: expected an ope
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from engine.errors import ExpressionSyntaxError, PlanIssue
from engine.plan.expressions import check_field_name
from engine.plan.graph import find_cycles
from engine.plan.issues import suggest
from engine.plan.operators import (
    Join,
    Operator,
    OperatorKind,
    Scan,
    SingleInputOperator,
    Store,
    Union,
)
from engine.plan.paths import Location


@dataclass(frozen=True)
class PlacedOperator:
    """An operator id, its model (None when the operator itself did not validate) and its location."""

    op_id: str
    model: Operator | None
    location: Location


def check_operators(entries: list[PlacedOperator], storage: Collection[str]) -> list[PlanIssue]:
    """Every problem the plan-level rules find in ``entries`` (an expanded query).

    ``storage`` holds the names of the declared storage engines.
    """
    issues: list[PlanIssue] = []
    _duplicate_ids(entries, issues)
    known = {entry.op_id: entry for entry in entries}
    consumed = {
        ref for entry in entries if entry.model is not None for ref in entry.model.input_ids()
    }
    for entry in entries:
        if entry.model is None:
            continue
        _references(entry, entry.model, known, issues)
        _missing_input(entry, entry.model, consumed, issues)
        _storage_engine(entry, entry.model, storage, issues)
        _expressions(entry, entry.model, issues)
        _names(entry, entry.model, issues)
    _cycles(entries, issues)
    return issues


def input_keys(op: Operator) -> list[tuple[tuple[str | int, ...], str]]:
    """(key path, referenced id) for every input reference of ``op``: ``(("inputs", 1), "4")``."""
    if isinstance(op, Join):
        return [(("left",), op.left), (("right",), op.right)]
    if isinstance(op, Union):
        return [(("inputs", i), ref) for i, ref in enumerate(op.inputs)]
    if isinstance(op, SingleInputOperator) and op.input is not None:
        return [(("input",), op.input)]
    return []


def _duplicate_ids(entries: list[PlacedOperator], issues: list[PlanIssue]) -> None:
    counts = Counter(entry.op_id for entry in entries)
    first: dict[str, str] = {}
    for entry in entries:
        if counts[entry.op_id] < 2:
            continue
        if entry.op_id not in first:
            first[entry.op_id] = entry.location.of("@id")
            continue
        issues.append(
            PlanIssue(
                f"duplicate operator id '{entry.op_id}' (first used at {first[entry.op_id]}); "
                "every operator needs its own id",
                entry.location.of("@id"),
                entry.op_id,
            )
        )


def _references(
    entry: PlacedOperator,
    op: Operator,
    known: Mapping[str, PlacedOperator],
    issues: list[PlanIssue],
) -> None:
    for keys, ref in input_keys(op):
        target = known.get(ref)
        if target is not None and (
            target.model is None or target.model.kind is not OperatorKind.SINK
        ):
            continue  # the common case: no path to work out
        key = str(keys[0])
        path = entry.location.of(key, *keys[1:])
        if target is None:
            ids = sorted(i for i in known if i != entry.op_id)
            listed = f"known ids: {', '.join(ids)}" if ids else "no operator ids"
            issues.append(
                PlanIssue(
                    f"'{key}' refers to operator '{ref}', which does not exist{suggest(ref, ids)}; {listed}",
                    path,
                    entry.op_id,
                )
            )
        elif target.model is not None and target.model.kind is OperatorKind.SINK:
            issues.append(
                PlanIssue(
                    f"'{key}' reads operator '{ref}', a {target.model.op}, which is a sink and has no output",
                    path,
                    entry.op_id,
                )
            )


def _missing_input(
    entry: PlacedOperator, op: Operator, consumed: set[str], issues: list[PlanIssue]
) -> None:
    # An operator with no input that nothing reads is dead code (upstream's AndTest has one); the plan
    # keeps it and LogicalPlan.warnings names it. Anything else needs its input.
    if not isinstance(op, SingleInputOperator) or op.input is not None:
        return
    if op.kind is OperatorKind.SINK or entry.op_id in consumed:
        issues.append(
            PlanIssue(
                f"missing required field 'input': a {op.op} outside a sequence names the operator it reads",
                entry.location.path,
                entry.op_id,
            )
        )


_WITH_ENGINE = Scan | Store  # built once, not at every call


def _storage_engine(
    entry: PlacedOperator,
    op: Operator,
    storage: Collection[str],
    issues: list[PlanIssue],
) -> None:
    if not isinstance(op, _WITH_ENGINE) or op.storage_engine in storage:
        return
    declared = ", ".join(f"'{name}'" for name in storage) or "none"
    issues.append(
        PlanIssue(
            f"storage engine '{op.storage_engine}' is not declared in 'storage'"
            f"{suggest(op.storage_engine, storage)}; declared: {declared}",
            entry.location.of("storageengine"),
            entry.op_id,
        )
    )


def _expressions(entry: PlacedOperator, op: Operator, issues: list[PlanIssue]) -> None:
    for site in op.expressions():
        try:
            problems = site.problems()
        except ExpressionSyntaxError as exc:
            path = entry.location.below(site.path)
            issues.append(PlanIssue(f"expression syntax error: {exc}", path, entry.op_id))
            continue
        if problems:  # the path only then: most expressions have none
            path = entry.location.below(site.path)
            issues.extend(
                PlanIssue(f"in '{site.text}': {problem}", path, entry.op_id) for problem in problems
            )


def _names(entry: PlacedOperator, op: Operator, issues: list[PlanIssue]) -> None:
    for suffix, name in op.names():
        try:
            check_field_name(name)
        except ExpressionSyntaxError as exc:
            issues.append(
                PlanIssue(
                    f"'{name}' is not a field name (write a path such as a.b or `odd name`.c): {exc}",
                    entry.location.below(suffix),
                    entry.op_id,
                )
            )


def _cycles(entries: list[PlacedOperator], issues: list[PlanIssue]) -> None:
    graph: dict[str, list[str]] = {}
    where: dict[str, PlacedOperator] = {}
    for entry in entries:
        if entry.model is not None and entry.op_id not in graph:
            graph[entry.op_id] = entry.model.input_ids()
            where[entry.op_id] = entry
    for cycle in find_cycles(graph):
        reads = ", ".join(f"{a} reads {b}" for a, b in zip(cycle, [*cycle[1:], cycle[0]]))
        names = ", ".join(cycle)
        first = where[cycle[0]]
        key = "input" if isinstance(first.model, SingleInputOperator) else "@id"
        issues.append(
            PlanIssue(
                f"operators {names} form a cycle ({reads}); a plan must be a DAG",
                first.location.of(key),
                first.op_id,
            )
        )
