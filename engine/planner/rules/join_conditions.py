"""Comma joins become hash joins: a filter's conjuncts over inner joins move where they belong.

SQL's ``FROM a, b, c WHERE a.k = b.k AND b.j = c.j AND a.x > 1`` translates to joins without
conditions (cross products) under one filter. For a filter reading a tree of ``inner`` joins (each
read by nothing else; filters between them are taken in too), this rule:

- moves each equality of the filter between one side and another (``a.k == b.k``) into the
  conditions of the join where those sides meet, so it is a hash join on both executors;
- puts each conjunct reading one input only (``a.x > 1``) in a new filter right above that input,
  below the joins (an ``(p && q) || (p && r)`` is first factored into ``p && (q || r)``, as
  Calcite does, so a ``p`` repeated in every branch of an OR counts too; an OR whose every
  branch tests one input also puts the OR of those tests above that input, and stays above the
  joins itself); a filter whose every conjunct moves to the same input keeps its id there, so
  its row count follows its records;
- keeps every other conjunct in a filter above the lowest join that has all it reads (the
  original filter, with its id, when that is the top join); a filter left with nothing is removed.

When the tree has a join without conditions (a chain of comma joins), its inputs are also
reordered so that no cross product is built while a joinable input is left: from a first input,
the next is the one an equality connects to the inputs joined so far that gives the smallest
estimated result (any smallest input when none is connected); of the chains from each first
input, the cheapest is built: the sum of its joins' results, plus :data:`SHUFFLE_COST` times the
rows of both inputs of each join neither of whose inputs may be broadcast. Sizes are the scans'
row counts (:mod:`~engine.planner.statistics`), multiplied for each conjunct filtering the input
by 0.1 for an equality with a constant, 0.05 for a ``LIKE`` and 0.5 for anything else; an
aggregate's are one record without groups, else at most the product of its keys' ranges where
they are scan columns (an input of unknown size counts as largest); a join's is the product of
its inputs' divided by the larger number of distinct values of the two sides of its equality
(System R's estimate), a column having at most as many as its integer range (parquet min/max)
and as the rows. Each join reads the larger of its two inputs on the left (the local executor
streams the left input and buffers the right). A tree whose joins all
have conditions keeps its shape: its conditions only gain the filter's equalities.

Inner joins only: a filter above a ``left`` join moves to the left input only the conjuncts
reading nothing but the left input's records (every left record reaches the output unchanged, so
testing it before the join keeps the same rows; the filter keeps its id when all of it
moves); a test of the right side's columns stays above the join (it also drops the rows the
join added for left records without a match, which no join condition would; a filter that
drops all of those has already made the join inner: :mod:`~engine.planner.rules.outer_joins`).
``outer`` joins are left alone.

Nothing changes unless the inputs' top-level names are known and distinct (scans with a ``ref``,
projects, as the SQL front end writes them): a joined record is then its inputs' records side by
side, whatever the order of the joins, and each conjunct reads the inputs its names belong to.
What a reordering changes is the order of the joined records, which inner joins do not define.

>>> from engine.plan import parse_plan
>>> scan = lambda i, ref: {"@id": i, "op": "scan", "storageengine": "fs", "ref": ref,
...     "selection": {"path": ref}}
>>> plan = parse_plan({"storage": {"fs": {"type": "fs", "root": "/d"}}, "query": [
...   scan(1, "a"), scan(2, "b"),
...   {"@id": 3, "op": "join", "left": 1, "right": 2, "type": "inner"},
...   {"@id": 4, "op": "filter", "input": 3, "expr": "a.k == b.k && a.x > 1 && a.y < b.y"}]})
>>> planned = plan_joins(plan)
>>> join = planned.operator("3")
>>> [(c.left, c.relationship, c.right) for c in join.conditions]
[('b.k', '==', 'a.k')]
>>> planned.operator(join.right).expr, planned.operator("4").expr
('a.x > 1', 'a.y < b.y')
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from engine.expr import Call, Expr, FieldRef, Literal, field_refs, to_string
from engine.expr.rewrite import conjuncts
from engine.plan import (
    CollapsingAggregate,
    Filter,
    Join,
    LogicalPlan,
    Operator,
    Scan,
    Segment,
    Transform,
)
from engine.plan.expressions import parse_cached
from engine.plan.parts import JoinCondition
from engine.plan.traits import traits
from engine.planner.rewrite import IdSource, consumers, top_names, with_inputs_renamed
from engine.planner.statistics import Statistics

_CALLS = {
    "==": "equal",
    "!=": "not_equal",
    "<": "less_than",
    "<=": "less_than_or_equal",
    ">": "greater_than",
    ">=": "greater_than_or_equal",
}
_FLIPPED = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def plan_joins(plan: LogicalPlan, stats: Statistics | None = None) -> LogicalPlan:
    """The plan with the conjuncts of filters over joins placed as described in the module
    docstring (each filter, and each filter this creates, is considered once)."""
    ids = IdSource(plan)
    done: set[str] = set()
    while True:
        readers = consumers(plan)
        todo = [
            op
            for op in reversed(plan.topological_order())
            if isinstance(op, Filter) and op.id not in done
        ]
        if not todo:
            return plan
        op = todo[0]
        done.add(op.id)
        changed = _rewrite(plan, op, readers, stats, ids)
        if changed is not None:
            plan = changed


@dataclass(frozen=True)
class _Candidate:
    """A comparison of two expressions, each reading inputs of the tree (by index)."""

    relationship: str
    left: Expr
    right: Expr
    left_inputs: frozenset[int]
    right_inputs: frozenset[int]

    def as_expr(self) -> Expr:
        return Call(_CALLS[self.relationship], (self.left, self.right))


@dataclass
class _Tree:
    """A filter's tree of inner joins: its inputs, shape, conditions and conjuncts."""

    inputs: list[str] = field(default_factory=list)
    joins: list[str] = field(default_factory=list)  # ids, bottom-up
    absorbed: list[str] = field(default_factory=list)  # filters between the joins
    shape: object = None  # an input index or (left shape, right shape, join id)
    conditions: list[tuple[str, Expr, Expr]] = field(default_factory=list)
    tests: list[Expr] = field(default_factory=list)
    bare_join: bool = False  # a join without conditions


def _rewrite(
    plan: LogicalPlan,
    top: Filter,
    readers: dict[str, list[Operator]],
    stats: Statistics | None,
    ids: IdSource,
) -> LogicalPlan | None:
    below = plan.operator(top.input) if top.input else None
    if not isinstance(below, Join) or len(readers.get(below.id, [])) != 1:
        return None
    if below.type == "left":
        return _below_left_join(plan, top, below, ids)
    if below.type != "inner":
        return None
    tree = _Tree()
    tree.shape = _gather(plan, below.id, readers, tree)
    # the top filter's conjuncts, then those of the filters between the joins (_gather's)
    tests = [*conjuncts(parse_cached(top.expr)), *tree.tests]
    tree.tests = [part for test in tests for part in _factored(test)]
    by_id = {op.id: op for op in plan.query}
    names = [top_names(by_id.get(ref), by_id) for ref in tree.inputs]
    if any(n is None for n in names) or sum(map(len, names)) != len(set().union(*names)):
        return None
    owner = {name: i for i, input_names in enumerate(names) for name in input_names or ()}
    placement = _Placement(owner)
    for relationship, left, right in tree.conditions:
        placement.add_condition(relationship, left, right)
    for test in tree.tests:
        placement.add_test(test)
    moved = any(c.relationship == "==" for c in placement.candidates[len(tree.conditions) :])
    if not (tree.bare_join or moved or any(placement.pushed.values())):
        return None
    shape = tree.shape
    if tree.bare_join:
        inputs = [
            estimate_input(plan, ref, stats, placement.pushed.get(i, []))
            for i, ref in enumerate(tree.inputs)
        ]
        shape = _greedy_shape(inputs, placement.candidates, list(tree.joins))
    return _Builder(plan, tree, placement, top, ids).build(shape)


def _gather(
    plan: LogicalPlan, op_id: str, readers: dict[str, list[Operator]], tree: _Tree
) -> object:
    """The shape of the inner-join tree at ``op_id``, recording its parts in ``tree``."""
    op = plan.operator(op_id)
    if isinstance(op, Filter) and len(readers.get(op.id, [])) == 1 and op.input:
        below = plan.operator(op.input)
        if _inner(below, readers):
            tree.absorbed.append(op.id)
            tree.tests += conjuncts(parse_cached(op.expr))
            return _gather(plan, below.id, readers, tree)
    if _inner(op, readers):
        assert isinstance(op, Join)
        left = _gather(plan, op.left, readers, tree)
        right = _gather(plan, op.right, readers, tree)
        tree.joins.append(op.id)
        tree.bare_join |= not op.conditions
        tree.conditions += [
            (c.relationship, parse_cached(c.left), parse_cached(c.right)) for c in op.conditions
        ]
        return (left, right, op.id)
    tree.inputs.append(op_id)
    return len(tree.inputs) - 1


def _inner(op: Operator, readers: dict[str, list[Operator]]) -> bool:
    return (
        isinstance(op, Join)
        and op.type == "inner"
        and op.left != op.right
        and len(readers.get(op.id, [])) == 1
    )


def _factored(test: Expr) -> list[Expr]:
    """``test`` as conjuncts, with what every branch of an OR tests taken out of it."""
    if not (isinstance(test, Call) and test.name == "or"):
        return [test]
    branches = [conjuncts(branch) for branch in _disjuncts(test)]
    common = [part for part in branches[0] if all(part in other for other in branches[1:])]
    if not common:
        return [test]
    rests = [[part for part in branch if part not in common] for branch in branches]
    if any(not rest for rest in rests):  # one branch is the common part itself
        return common
    rest = _join_all("or", [_join_all("and", r) for r in rests])
    return [*common, rest]


def _disjuncts(expr: Expr) -> list[Expr]:
    if isinstance(expr, Call) and expr.name == "or":
        return [part for arg in expr.args for part in _disjuncts(arg)]
    return [expr]


def _join_all(name: str, parts: list[Expr]) -> Expr:
    result = parts[0]
    for part in parts[1:]:
        result = Call(name, (result, part))
    return result


class _Placement:
    """The tree's comparisons between inputs (join condition candidates), its conjuncts of one
    input (``pushed``) and the rest, by the inputs they read."""

    def __init__(self, owner: dict[str, int]) -> None:
        self.owner = owner
        self.candidates: list[_Candidate] = []
        self.pushed: dict[int, list[Expr]] = {}
        self.rest: list[tuple[Expr, frozenset[int] | None]] = []

    def inputs_of(self, expr: Expr) -> frozenset[int] | None:
        """The inputs ``expr`` reads (None: a name no input holds)."""
        found = set()
        for ref in field_refs(expr):
            index = self.owner.get(ref.root.lower())
            if index is None:
                return None
            found.add(index)
        return frozenset(found)

    def add_condition(self, relationship: str, left: Expr, right: Expr) -> None:
        left_inputs, right_inputs = self.inputs_of(left), self.inputs_of(right)
        if left_inputs and right_inputs and not left_inputs & right_inputs:
            self.candidates.append(_Candidate(relationship, left, right, left_inputs, right_inputs))
        else:
            self.add_test(Call(_CALLS[relationship], (left, right)))

    def add_test(self, test: Expr) -> None:
        inputs = self.inputs_of(test)
        if inputs is not None and len(inputs) == 1:
            self.pushed.setdefault(next(iter(inputs)), []).append(test)
            return
        if isinstance(test, Call) and test.name == "equal" and inputs:
            left, right = (self.inputs_of(arg) for arg in test.args)
            if left and right and not left & right:
                self.candidates.append(_Candidate("==", *test.args, left, right))
                return
        self.rest.append((test, inputs))
        for index, implied in self.implied_tests(test, inputs):
            self.pushed.setdefault(index, []).append(implied)

    def implied_tests(self, test: Expr, inputs: frozenset[int] | None) -> list[tuple[int, Expr]]:
        """What an OR across inputs implies of each one, to test below the joins while the OR
        itself stays above: where every branch tests an input alone, the OR of those tests
        (TPC-H q07's ``(n1 = a && n2 = b) || (n1 = b && n2 = a)`` implies ``n1 = a || n1 = b``
        of n1)."""
        if not inputs or not (isinstance(test, Call) and test.name == "or"):
            return []
        branches = [conjuncts(branch) for branch in _disjuncts(test)]
        implied = []
        for index in sorted(inputs):
            own = [
                [part for part in branch if self.inputs_of(part) == {index}] for branch in branches
            ]
            if all(own):
                implied.append((index, _join_all("or", [_join_all("and", p) for p in own])))
        return implied


UNKNOWN_ROWS = 1e15
"""The size of an input without statistics: larger than any other, still a number."""

SHUFFLE_COST = 3.0
"""What a join that shuffles both its inputs costs per input row, in rows of a join's result: a
row written to and read from a shuffle costs several times one a broadcast join streams
(TPC-H q02's subquery: ``partsupp`` joined to a broadcast ``supplier``, ``nation`` and
``region`` in turn, not shuffled to meet their small join's result)."""

BROADCAST_BYTES = 10 * 1024 * 1024
"""The most bytes of a join input the physical planner broadcasts (Spark's default threshold,
:class:`~engine.planner.physical.PlannerOptions`)."""


@dataclass(frozen=True)
class InputEstimate:
    """An input's estimated rows, its integer columns' value ranges (lower-cased names) and
    whether the physical planner may broadcast it (its files hold at most
    :data:`BROADCAST_BYTES`)."""

    rows: float
    ranges: dict[str, tuple[int, int]]
    small: bool = False
    known: bool = False  # rows estimated from a scan's row count, not UNKNOWN_ROWS

    def distinct(self, expr: Expr) -> float:
        """How many distinct values ``expr`` (reading this input only) may have: at most the
        range of a column, and at most the rows."""
        if isinstance(expr, FieldRef) and len(expr.path) == 2:
            bounds = self.ranges.get(str(expr.path[1]).lower())
            if bounds is not None:
                return max(1.0, min(self.rows, float(bounds[1] - bounds[0] + 1)))
        return max(1.0, self.rows)


def estimate_input(
    plan: LogicalPlan, op_id: str, stats: Statistics | None, tests: Sequence[Expr] = ()
) -> InputEstimate:
    """The estimate of the records of operator ``op_id`` (see the module docstring), filtered
    further by ``tests``: rows, value ranges and whether its files are small. Records of a join,
    an aggregate or anything but record-wise operators over a scan count as
    :data:`UNKNOWN_ROWS`."""
    rows, ranges = UNKNOWN_ROWS, {}
    renamed = small = known = False
    op: Operator | None = plan.operator(op_id)
    while op is not None:
        if isinstance(op, Scan):
            scan_stats = stats.scan(op.id) if stats is not None else None
            if scan_stats is not None and scan_stats.row_count is not None:
                rows, known = float(scan_stats.row_count), True
            small = scan_stats is not None and scan_stats.total_bytes <= BROADCAST_BYTES
            if scan_stats is not None and scan_stats.ranges and not renamed:
                ranges = {name.lower(): r for name, r in scan_stats.ranges.items()}
            break
        if isinstance(op, CollapsingAggregate):
            groups = _aggregate_groups(plan, op, stats)
            if groups is not None:
                rows, known = groups, True
            break
        if isinstance(op, Filter):
            tests = [*tests, *conjuncts(parse_cached(op.expr))]
        renamed |= traits(op.op).projects
        if not traits(op.op).record_wise or not op.input_ids():
            break
        op = plan.operator(op.input_ids()[0])
    for test in tests:
        rows *= _selectivity(test)
    return InputEstimate(rows, ranges, small, known)


def _aggregate_groups(
    plan: LogicalPlan, op: CollapsingAggregate, stats: Statistics | None
) -> float | None:
    """How many records aggregate ``op`` may emit: one without ``within`` (nor ``target``); for
    segments of keys that are columns of one scan above it (or a transform's copies of them),
    at most the product of their value ranges (parquet min/max); else None (not known)."""
    if op.target is not None:
        return None
    if op.within is None:
        return 1.0
    segment = plan.operator(op.input) if op.input else None
    if not (isinstance(segment, Segment) and segment.ref == op.within and segment.input):
        return None
    copies: dict[str, Expr] = {}  # a transform's name -> what it copies
    below: Operator | None = plan.operator(segment.input)
    while isinstance(below, Transform) and below.input:
        for named in below.transforms:
            copies.setdefault(named.ref, parse_cached(named.expr))
        below = plan.operator(below.input)
    scans: dict[str, list[Scan]] = {}
    for ancestor in plan.ancestors(segment):
        scan = plan.operator(ancestor)
        if isinstance(scan, Scan) and scan.ref:
            scans.setdefault(scan.ref.lower(), []).append(scan)
    groups = 1.0
    for text in segment.exprs:
        key = parse_cached(text)
        key = copies.get(to_string(key), key)
        if not (isinstance(key, FieldRef) and len(key.path) == 2):
            return None
        found = scans.get(str(key.path[0]).lower(), [])
        scan_stats = stats.scan(found[0].id) if len(found) == 1 and stats is not None else None
        ranges = {n.lower(): r for n, r in (scan_stats.ranges or {}).items()} if scan_stats else {}
        bounds = ranges.get(str(key.path[1]).lower())
        if bounds is None:
            return None
        groups *= float(bounds[1] - bounds[0] + 1)
    return min(groups, UNKNOWN_ROWS)


def _selectivity(test: Expr) -> float:
    """The share of records a conjunct keeps, by its kind: an equality with a constant 0.1, a
    ``LIKE`` with a constant pattern 0.05 (a word inside a name, as in TPC-H's ``'%green%'``,
    matches few), anything else 0.5."""
    if _equals_constant(test):
        return 0.1
    if isinstance(test, Call) and test.name == "like" and isinstance(test.args[-1], Literal):
        return 0.05
    return 0.5


def _equals_constant(test: Expr) -> bool:
    if not (isinstance(test, Call) and test.name == "equal" and len(test.args) == 2):
        return False
    kinds = {type(arg) for arg in test.args}
    return kinds == {FieldRef, Literal}


def _greedy_shape(
    inputs: list[InputEstimate], candidates: list[_Candidate], join_ids: list[str]
) -> object:
    """The cheapest of the greedy chains, one from each input: the cost of a chain is the sum of
    its joins' estimated results, so a selective input joined early wins over a small one that
    leads only to a large join (TPC-H q09: nation leads to all of lineitem, the filtered part to
    a twentieth of it), plus :data:`SHUFFLE_COST` times the rows of both inputs of each join
    neither of whose inputs may be broadcast (both are shuffled: TPC-H q08 shuffles a twentieth
    of lineitem after a broadcast join with the filtered part, not all of it to meet orders
    first). Ties go to the smaller first input."""
    best: tuple[float, float, int] | None = None
    best_shape: object = None
    for first in range(len(inputs)):
        shape, cost = _greedy_from(first, inputs, candidates, iter(join_ids))
        key = (cost, inputs[first].rows, first)
        if best is None or key < best:
            best, best_shape = key, shape
    return best_shape


def _greedy_from(
    first: int, inputs: list[InputEstimate], candidates: list[_Candidate], ids: Iterator[str]
) -> tuple[object, float]:
    """A chain starting with ``first``, then always joining the connected input that gives the
    smallest estimated result (any smallest input when none is connected), and its cost."""
    joined, shape, size, cost = {first}, first, inputs[first].rows, 0.0
    small = inputs[first].small  # a join's result is never broadcast: its bytes are unknown
    remaining = sorted(
        (i for i in range(len(inputs)) if i != first), key=lambda i: (inputs[i].rows, i)
    )
    while remaining:
        options = []
        for i in remaining:
            divisor = _join_divisor(candidates, inputs, joined, i)
            if divisor is not None:
                options.append((size * inputs[i].rows / divisor, inputs[i].rows, i))
        if options:
            new_size, _, pick = min(options)
        else:
            pick = remaining[0]
            new_size = size * inputs[pick].rows
        remaining.remove(pick)
        join_id = next(ids)
        rows = inputs[pick].rows
        shape = (pick, shape, join_id) if rows > size else (shape, pick, join_id)
        if not (small or inputs[pick].small):
            cost += SHUFFLE_COST * (size + rows)  # both sides shuffled
        joined.add(pick)
        size, small = max(1.0, new_size), False
        cost += size
    return shape, cost


def _join_divisor(
    candidates: Iterable[_Candidate], inputs: list[InputEstimate], joined: set[int], index: int
) -> float | None:
    """How much the equalities between ``joined`` and input ``index`` divide their cross
    product by (the larger distinct count of the two sides, System R's estimate; the most
    selective equality when there are several), or None when no equality connects them."""
    best = None
    for c in candidates:
        if c.relationship != "==":
            continue
        if c.left_inputs <= joined and c.right_inputs == {index}:
            mine, theirs, their_inputs = c.right, c.left, c.left_inputs
        elif c.right_inputs <= joined and c.left_inputs == {index}:
            mine, theirs, their_inputs = c.left, c.right, c.right_inputs
        else:
            continue
        other = inputs[next(iter(their_inputs))] if len(their_inputs) == 1 else None
        divisor = max(
            inputs[index].distinct(mine),
            other.distinct(theirs) if other is not None else 1.0,
        )
        best = divisor if best is None else max(best, divisor)
    return best


class _Builder:
    """Writes a shape as operators: filters on inputs, joins with conditions, filters above."""

    def __init__(
        self, plan: LogicalPlan, tree: _Tree, placement: _Placement, top: Filter, ids: IdSource
    ) -> None:
        self.plan, self.tree, self.placement, self.top, self.ids = plan, tree, placement, top, ids
        self.placed: set[int] = set()
        self.rest = [(test, inputs) for test, inputs in placement.rest if inputs]
        self.top_tests = [test for test, inputs in placement.rest if not inputs]
        self.new: list[Operator] = []

    def build(self, shape: object) -> LogicalPlan:
        root, _ = self.node(shape, is_root=True)
        tests = self.top_tests + [t for t, _ in self.rest]
        self.keep_top_id(kept_above=bool(tests))
        removed = {self.top.id, *self.tree.joins, *self.tree.absorbed}
        query: list[Operator] = []
        for op in self.plan.query:
            if op.id == self.top.id:
                query += self.new
                if tests:
                    expr = to_string(_join_all("and", tests))
                    query.append(self.top.model_copy(update={"input": root, "expr": expr}))
            if op.id not in removed:
                query.append(op if tests else with_inputs_renamed(op, self.top.id, root))
        return self.plan.with_query(query)

    def keep_top_id(self, *, kept_above: bool) -> None:
        """A top filter that moves whole to one input keeps its id there, so what is known of
        operator ``top`` (its row count, the decisions keyed by its id) follows its records."""
        made = [op for op in self.new if isinstance(op, Filter)]
        joined = len(self.placement.candidates) > len(self.tree.conditions)  # tests now conditions
        if kept_above or joined or self.tree.absorbed or len(made) != 1:
            return
        old_id = made[0].id
        self.new = [
            op.model_copy(update={"id": self.top.id})
            if op.id == old_id
            else with_inputs_renamed(op, old_id, self.top.id)
            for op in self.new
        ]

    def node(self, shape: object, *, is_root: bool = False) -> tuple[str, frozenset[int]]:
        if isinstance(shape, int):
            op_id = self.tree.inputs[shape]
            tests = self.placement.pushed.get(shape, [])
            if tests:
                op_id = self.add_filter(op_id, tests)
            return op_id, frozenset({shape})
        assert isinstance(shape, tuple)
        left_shape, right_shape, join_id = shape
        left, left_inputs = self.node(left_shape)
        right, right_inputs = self.node(right_shape)
        covered = left_inputs | right_inputs
        conditions = []
        for i, c in enumerate(self.placement.candidates):
            if i in self.placed or not (c.left_inputs | c.right_inputs) <= covered:
                continue
            self.placed.add(i)
            if c.left_inputs <= left_inputs and c.right_inputs <= right_inputs:
                conditions.append(
                    JoinCondition(relationship=c.relationship, left=str(c.left), right=str(c.right))
                )
            elif c.left_inputs <= right_inputs and c.right_inputs <= left_inputs:
                flipped = _FLIPPED[c.relationship]
                conditions.append(
                    JoinCondition(relationship=flipped, left=str(c.right), right=str(c.left))
                )
            else:
                self.rest.append((c.as_expr(), c.left_inputs | c.right_inputs))
        original = self.plan.operator(join_id)
        join = original.model_copy(
            update={"left": left, "right": right, "type": "inner", "conditions": conditions}
        )
        self.new.append(join)
        if is_root:
            return join_id, covered
        tests = [t for t, inputs in self.rest if inputs is not None and inputs <= covered]
        self.rest = [
            (t, inputs) for t, inputs in self.rest if not (inputs is not None and inputs <= covered)
        ]
        return (self.add_filter(join_id, tests) if tests else join_id), covered

    def add_filter(self, input_id: str, tests: list[Expr]) -> str:
        op = Filter.model_validate(
            {"@id": self.ids.take(), "op": "filter", "input": input_id,
             "expr": to_string(_join_all("and", tests))}
        )  # fmt: skip
        self.new.append(op)
        return op.id


def _below_left_join(
    plan: LogicalPlan, top: Filter, join: Join, ids: IdSource
) -> LogicalPlan | None:
    """Moves the conjuncts of ``top`` that read only the left input's records below the join."""
    by_id = {op.id: op for op in plan.query}
    left_names = top_names(by_id.get(join.left), by_id)
    right_names = top_names(by_id.get(join.right), by_id)
    if left_names is None or right_names is None or left_names & right_names:
        return None
    moved, kept = [], []
    for test in conjuncts(parse_cached(top.expr)):
        roots = {ref.root.lower() for ref in field_refs(test)}
        (moved if roots and roots <= left_names else kept).append(test)
    if not moved:
        return None
    pushed = Filter.model_validate(
        {"@id": ids.take() if kept else top.id, "op": "filter", "input": join.left,
         "expr": to_string(_join_all("and", moved))}
    )  # fmt: skip
    new_join = join.model_copy(update={"left": pushed.id})
    query: list[Operator] = []
    for op in plan.query:
        if op.id == join.id:
            query += [pushed, new_join]
            continue
        if op.id == top.id:
            if kept:
                query.append(top.model_copy(update={"expr": to_string(_join_all("and", kept))}))
            continue
        query.append(op if kept else with_inputs_renamed(op, top.id, join.id))
    return plan.with_query(query)
