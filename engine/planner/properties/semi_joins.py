"""Semi and anti joins: a join whose right side only tells whether a left record has a match.

The SQL front end decorrelates ``IN``, ``EXISTS``, ``NOT IN`` and ``NOT EXISTS`` into a left join
with the subquery's distinct keys (a ``segment`` + ``collapsingaggregate`` of them, nested under a
name of their own by a ``project``) and a filter testing the match: ``isnotnull(found.m)`` keeps
the records with one, ``isnull(found.m)`` (or ``!isnotnull``) those without. Where nothing else
reads the right side's fields, that join and test are a *semi* join (the left records with a
match, each once) or an *anti* join (those without): an executor runs them as one, over the
subquery's rows themselves (the distinct keys only kept a left record from being repeated, which
neither join does), and the filter tests only the rest of its condition.

Conditions (else the plan runs as it is, never a different answer):

* the filter is the join's one reader; the join is ``left`` (or ``inner``, for a semi join) with
  only ``==`` conditions, each right side a field the ``project`` copies from a distinct key,
  every key once;
* the ``project``, the aggregate and the segment each have one reader;
* the left records' top-level names are known (:func:`~engine.planner.rewrite.top_names`) and
  none is the right side's: the join merges no left field with a right one;
* the filter's conjuncts naming the right side are each ``isnotnull`` (semi) or ``isnull`` /
  ``!isnotnull`` (anti) of a key or of a ``count`` (never null where a match was found); and
  nothing after the filter reads the right side.

A left record whose key is NULL finds no match in a semi or anti join, as in the left join: the
anti join keeps it (``NOT IN``'s own NULL rules are tests of the filter's rest, see
:meth:`~engine.sql.subqueries.Subqueries.not_in`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.expr import Call, Expr, FieldRef, field_refs, to_string
from engine.expr.rewrite import conjuncts
from engine.plan import LogicalPlan
from engine.plan.expressions import parse_cached
from engine.plan.field_paths import output_path, overlaps
from engine.plan.operators import CollapsingAggregate, Filter, Join, Project, Segment
from engine.planner.rewrite import consumers, top_names
from engine.planner.rules.projection_pushdown import required_paths

SEMI_JOIN_PARAM = "semi_joins"
"""The run parameter that, False, runs these joins as the plan has them (to compare)."""


@dataclass(frozen=True)
class SemiJoin:
    """A join run as a semi (``kind="semi"``) or anti (``"anti"``) join: a left record is kept
    when some record of operator ``rows`` has, for each condition ``i``, ``keys[i]`` equal to
    the condition's left value (``semi``), or when none has (``anti``). The join's output is its
    left input's records; the filter reading it (``test_of``) tests only ``rest``. The
    operators ``skipped`` (the project, aggregate and segment making the distinct keys) are
    needless: the join reads operator ``rows`` itself (:func:`reading_rows`)."""

    kind: str
    rows: str
    keys: tuple[str, ...]
    test_of: str
    rest: str | None
    skipped: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"left {self.kind}"


def reading_rows(join: Join, semi: SemiJoin) -> Join:
    """``join`` as the semi (anti) join ``semi`` runs it: its right input operator ``semi.rows``,
    each condition comparing its left value with its key over those records."""
    conditions = [
        c.model_copy(update={"right": key})
        for c, key in zip(join.conditions, semi.keys, strict=True)
    ]
    return join.model_copy(update={"right": semi.rows, "conditions": conditions})


def skipped_operators(joins: dict[str, SemiJoin]) -> dict[str, str]:
    """``{operator id: the semi (anti) join id}`` for the operators those joins make needless
    (never run: the join reads the records below them)."""
    return {op_id: join_id for join_id, semi in joins.items() for op_id in semi.skipped}


def semi_joins(plan: LogicalPlan) -> dict[str, SemiJoin]:
    """``{join id: how it runs}`` for the joins of ``plan`` that are semi or anti joins (see the
    module docstring)."""
    readers = consumers(plan)
    needs: dict[str, Any] | None = None
    found: dict[str, SemiJoin] = {}
    for op in plan.query:
        if not isinstance(op, Filter):
            continue
        join = plan.operator(op.input) if op.input else None
        if not isinstance(join, Join) or not _one_reader(readers, join.id, op.id):
            continue
        keyed = _distinct_keys(plan, readers, join)
        if keyed is None:
            continue
        rows, keys, copies, skipped = keyed
        roots = {path[0] for path in copies}
        if not _apart(plan, join.left, roots):
            continue
        kind, rest = _match_test(parse_cached(op.expr), roots, copies)
        if kind is None or (kind == "anti" and join.type != "left"):
            continue
        if needs is None:
            needs = required_paths(plan)
        need = needs.get(op.id)
        if need is None or any(
            overlaps((root,), tuple(map(str, p))) for p in need for root in roots
        ):
            continue  # the whole record, or fields of the right side, are read after the filter
        found[join.id] = SemiJoin(kind, rows, keys, op.id, rest, skipped)
    return found


def _apart(plan: LogicalPlan, left: str, roots: set[str]) -> bool:
    """Whether the left records hold no top-level field named as the right side's (the join would
    merge the two): the left input's top-level names must be known (a superset) and apart."""
    names = top_names(plan.operator(left), {op.id: op for op in plan.query})
    return names is not None and names.isdisjoint(root.lower() for root in roots)


def _one_reader(readers: dict[str, list[Any]], op_id: str, reader: str) -> bool:
    return [r.id for r in readers.get(op_id, [])] == [reader]


def _distinct_keys(
    plan: LogicalPlan, readers: dict[str, list[Any]], join: Join
) -> tuple[str, tuple[str, ...], dict[tuple[str, ...], str | None], tuple[str, ...]] | None:
    """For a join of the distinct keys of some records: those records' operator, the key per
    condition, what each field of the right side holds (a key, ``"count"``, or None), and the
    operators between those records and the join."""
    if join.type not in ("left", "inner") or not join.conditions:
        return None
    if any(c.relationship != "==" for c in join.conditions):
        return None
    project = plan.operator(join.right)
    if not isinstance(project, Project) or not _one_reader(readers, project.id, join.id):
        return None
    aggregate = plan.operator(project.input) if project.input else None
    if not isinstance(aggregate, CollapsingAggregate) or aggregate.within is None:
        return None
    segment = plan.operator(aggregate.input) if aggregate.input else None
    if (
        not isinstance(segment, Segment)
        or segment.ref != aggregate.within
        or not _one_reader(readers, aggregate.id, project.id)
        or not _one_reader(readers, segment.id, aggregate.id)
        or list(aggregate.carryovers) != list(segment.exprs)
        or segment.input is None
    ):
        return None
    keys = {str(parse_cached(k)): str(parse_cached(k)) for k in segment.exprs}
    counts = {
        str(parse_cached(a.ref))
        for a in aggregate.aggregations
        if isinstance(a.parsed, Call) and a.parsed.name == "count"
    }
    copies: dict[tuple[str, ...], str | None] = {}
    for projection in project.projections:
        path = tuple(str(p) for p in output_path(projection.ref))
        source = str(parse_cached(projection.expr))
        if not path:
            return None
        copies[path] = source if source in keys else ("count" if source in counts else None)
    chosen: list[str] = []
    for condition in join.conditions:
        right = parse_cached(condition.right)
        if not isinstance(right, FieldRef):
            return None
        key = copies.get(tuple(str(p) for p in right.path))
        if key is None or key == "count":
            return None
        chosen.append(key)
    if sorted(chosen) != sorted(keys) or len(set(chosen)) != len(chosen):
        return None
    return segment.input, tuple(chosen), copies, (project.id, aggregate.id, segment.id)


def _match_test(
    condition: Expr, roots: set[str], copies: dict[tuple[str, ...], str | None]
) -> tuple[str | None, str | None]:
    """``(kind, rest)``: whether ``condition``'s conjuncts naming the right side (``roots``)
    test a match (``semi``) or none (``anti``), and its other conjuncts (None: none)."""
    kinds, rest = set(), []
    for part in conjuncts(condition):
        if not any(ref.path[0] in roots for ref in field_refs(part)):
            rest.append(part)
            continue
        kind = _test_kind(part, copies)
        if kind is None:
            return None, None
        kinds.add(kind)
    if len(kinds) != 1:
        return None, None
    text = None
    if rest:
        joined = rest[0]
        for part in rest[1:]:
            joined = Call("and", (joined, part))
        text = to_string(joined)
    return kinds.pop(), text


def _test_kind(part: Expr, copies: dict[tuple[str, ...], str | None]) -> str | None:
    """``semi`` for ``isnotnull(f)``, ``anti`` for ``isnull(f)`` or ``!isnotnull(f)``, where
    ``f`` is a right field never null where a match was found (a key or a count)."""
    negated = isinstance(part, Call) and part.name == "not"
    if negated:
        part = part.args[0]
    if not (isinstance(part, Call) and part.name in ("isnull", "isnotnull")):
        return None
    (field,) = part.args
    if not isinstance(field, FieldRef) or copies.get(tuple(map(str, field.path))) is None:
        return None
    return "semi" if (part.name == "isnotnull") != negated else "anti"
