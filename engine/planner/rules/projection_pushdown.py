"""Give every scan the list of its record's top-level members the plan uses (``projection``).

The members each operator needs from its input are worked out from the sinks back: a store, a
distinct union or a result nobody reads needs the whole record; a project or an aggregate needs
only what its expressions read (a carried member only what its readers read of it); the other operators need what their readers need plus what they
read or write themselves; a join passes its readers' needs to both sides (a merged member comes
from the same member of each side). At a scan, a path under its ``ref`` names a member; the whole
``ref`` (or any whole-record need) leaves the scan without a projection (all members). Paths are
cut to the member (``e.a.b`` -> ``a``), so a projection never reshapes a member's value.

A scan that already has a projection keeps it.

>>> from engine.plan import parse_plan
>>> plan = parse_plan({"storage": {"fs": {"type": "fs", "root": "/data"}, "q": {"type": "queue"}},
...   "query": [
...     {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "e", "selection": {"path": "e"}},
...     {"@id": 2, "op": "filter", "input": 1, "expr": "e.amount > 10"},
...     {"@id": 3, "op": "project", "input": 2, "projections": [
...         {"ref": "output.who", "expr": "e.user.name"}]},
...     {"@id": 4, "op": "store", "input": 3, "storageengine": "q", "target": {}}]})
>>> push_projections(plan).operator("1").projection
['amount', 'user']
"""

from __future__ import annotations

from collections.abc import Iterable

from engine.expr import parse_field_ref
from engine.plan import (
    CollapsingAggregate,
    Filter,
    Flatten,
    Join,
    Limit,
    LogicalPlan,
    Operator,
    Order,
    Project,
    RunningAggregate,
    Scan,
    Segment,
    Store,
    Transform,
    Union,
    WindowFrame,
)
from engine.planner.rewrite import Path, consumers, field_paths, replace_operators

Need = frozenset[Path] | None
"""The paths of a record an operator needs; None: the whole record."""

WHOLE: Need = None


def push_projections(plan: LogicalPlan) -> LogicalPlan:
    """The plan with a ``projection`` on every scan that does not read whole records."""
    needs = required_paths(plan)
    changed = {}
    for op in plan.query:
        if isinstance(op, Scan) and op.projection is None and op.id in needs:
            members = scan_projection(op, needs[op.id])
            if members is not None:
                changed[op.id] = op.model_copy(update={"projection": members})
    return replace_operators(plan, changed)


def required_paths(plan: LogicalPlan) -> dict[str, Need]:
    """For every operator, the paths of its output that the rest of the plan reads."""
    readers = consumers(plan)
    needs: dict[str, Need] = {}
    for op in reversed(plan.topological_order()):
        if not readers.get(op.id):
            needs[op.id] = WHOLE  # a result: every field of it is output
        for input_id, need in _input_needs(op, needs.get(op.id, frozenset())):
            needs[input_id] = _union(needs.get(input_id, frozenset()), need)
    return needs


def scan_projection(scan: Scan, need: Need) -> list[str] | None:
    """The members of ``scan``'s record that ``need`` names (None: the whole record)."""
    if need is None:
        return None
    paths = set(need)
    if scan.pushed_filter is not None:
        paths.update(field_paths(scan.pushed_filter))
    prefix = tuple(_key(s) for s in _path(scan.ref)) if scan.ref else ()
    members: dict[str, str] = {}
    # Sorted: names are case-insensitive, and the spelling kept must not depend on set order.
    for path in sorted(paths, key=lambda p: tuple(map(str, p))):
        if tuple(_key(s) for s in path[: len(prefix)]) != prefix:
            continue  # not under the scan's ref: a field this scan does not provide
        if len(path) == len(prefix):
            return None  # the whole record
        member = path[len(prefix)]
        members.setdefault(_key(member), member)
    if not members:
        return None  # nothing read by name (count(1)): keep the records as they are
    return [members[k] for k in sorted(members)]


def _input_needs(op: Operator, need: Need) -> list[tuple[str, Need]]:
    inputs = op.input_ids()
    if isinstance(op, Store):
        return [(inputs[0], WHOLE)]
    if isinstance(op, Project):
        return [(inputs[0], _paths(e for p in op.projections for e in field_paths(p.expr)))]
    if isinstance(op, CollapsingAggregate):
        read = [e for a in op.aggregations for e in field_paths(a.expr)]
        read += [_path(n) for n in (op.within, op.target) if n]
        for name in op.carryovers:
            read += _carried(_path(name), need)
        return [(inputs[0], _paths(read))]
    if isinstance(op, Union):
        return [(ref, WHOLE if op.distinct else need) for ref in inputs]
    if isinstance(op, Join):
        left = [p for c in op.conditions for p in field_paths(c.left)]
        right = [p for c in op.conditions for p in field_paths(c.right)]
        return [(op.left, _union(need, _paths(left))), (op.right, _union(need, _paths(right)))]
    own = _own_paths(op)
    return [(ref, _union(need, _paths(own))) for ref in inputs]


def _carried(path: Path, need: Need) -> list[Path]:
    """What a carryover of ``path`` (written at ``path`` of the output) reads of its input: the
    paths under it the output's readers need (``e`` carried, ``e.a`` read: ``e.a``), else all of
    it."""
    if need is None or not path:
        return [path]
    under = [p for p in need if _keys(p[: len(path)]) == _keys(path) and len(p) > len(path)]
    return under if under and not any(_keys(path[: len(p)]) == _keys(p) for p in need) else [path]


def _keys(path: Path) -> Path:
    return tuple(_key(step) for step in path)


def _own_paths(op: Operator) -> list[Path]:
    """What a record-preserving operator reads or writes itself."""
    read = [p for site in op.expressions() for p in field_paths(site.text)]
    if isinstance(op, Transform):
        read += [_path(t.ref) for t in op.transforms]
    elif isinstance(op, Order | WindowFrame | RunningAggregate | Segment | Flatten):
        read += [_path(name) for _, name in op.names()]
    elif not isinstance(op, Filter | Limit):
        return [()]  # an operator this rule does not know: assume it reads everything
    return read


def _paths(paths: Iterable[Path]) -> Need:
    found = frozenset(paths)
    return WHOLE if () in found else found


def _union(a: Need, b: Need) -> Need:
    return WHOLE if a is None or b is None else a | b


def _path(name: str) -> Path:
    steps = []
    for step in parse_field_ref(name).path:
        if not isinstance(step, str):
            break
        steps.append(step)
    return tuple(steps)


def _key(name: str) -> str:
    return name.lower()
