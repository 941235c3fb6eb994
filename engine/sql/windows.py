"""Window functions (``agg(x) OVER (PARTITION BY ... ORDER BY ... frame)``) -> plan operators.

Calls with the same PARTITION BY, ORDER BY and frame form one group, computed together; groups run
one after the other, each sorting its input itself. PARTITION BY becomes a ``segment`` (the
``within`` of the operators below), ORDER BY an ``order``. Frames (offsets in rows; None is
unbounded):

==========================================  =====================================================
frame                                       operators
==========================================  =====================================================
ROWS UNBOUNDED PRECEDING .. CURRENT ROW     runningaggregate (also every ``row_number()``)
ROWS n .. CURRENT ROW (n bounded)           windowframe, segment on the window, collapsingaggregate
ROWS CURRENT ROW .. n / UNBOUNDED FOLLOWING the two above over the reversed ORDER BY
ROWS n PRECEDING .. m FOLLOWING (either     the frame up to the row and the frame from it (both
maybe UNBOUNDED)                            above), combined by a transform
other ROWS frames (count(DISTINCT), frames  windowframe, segment, collapsingaggregate; the window
without the current row)                    is widened to hold the current row, which is the
                                            collapse's ``target`` (its columns carried over), and
                                            aggregates only see members whose position is inside
                                            the frame (empty frames: null, 0)
whole partition (no ORDER BY and no frame,  collapsingaggregate per partition, joined back to its
or UNBOUNDED on both sides)                 records
ORDER BY without a frame, or RANGE          peers (equal ORDER BY values) share one value:
UNBOUNDED PRECEDING .. CURRENT ROW          collapsingaggregate per peer group, runningaggregate
                                            over the groups, joined back to the records
==========================================  =====================================================

Other RANGE frames (value offsets, or ending after the current row's peers) and GROUPS frames are
:class:`~engine.errors.SqlError`\\ s that say which ROWS frame to write instead.

>>> from engine.metadata import MetadataRepository
>>> from engine.run import run_plan
>>> from engine.sql import sql_to_plan
>>> plan = sql_to_plan("select x, sum(x) over (order by x rows between 1 preceding and 1 following)"
...     " as s from (values (1), (2), (3)) as t(x) order by x", MetadataRepository({}))
>>> ops = [op["op"] for op in plan["query"]]  # rows numbered, two windows, combined
>>> ops[1:3], ops.count("windowframe"), ops[-4]
(['order', 'runningaggregate'], 2, 'transform')
>>> run_plan(plan).records()
[{'x': 1, 's': 3}, {'x': 2, 's': 6}, {'x': 3, 's': 5}]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from engine.errors import SqlError
from engine.expr import Call, Expr, FieldRef, IfElse, Literal, to_string
from engine.sql.dialect import sql_error
from engine.sql.expressions import Aggregation, ExprTranslator, Scope

WINDOW_FUNCTIONS = ("row_number", "rank", "dense_rank", "count", "sum", "min", "max", "avg")
_RANKS = {"rank", "dense_rank"}
_AGGREGATES = {"count", "count_distinct", "sum", "min", "max", "avg"}
_RUNNING = {"row_number", "count", "sum", "min", "max", "avg"}
_COMBINE = {"count", "sum", "min", "max", "avg"}


@dataclass(frozen=True)
class Frame:
    """Which rows of its partition a window covers around the current row."""

    kind: str  # "rows" (start/end offsets), "whole" (the partition), "peers" (up to the last peer)
    start: int | None = None
    end: int | None = None


@dataclass
class _Group:
    partition: list[Expr]
    orderings: list[dict[str, Any]]
    order_exprs: list[Expr]
    frame: Frame
    calls: list[tuple[str, Call]] = field(default_factory=list)  # (ref, aggregate call)


@dataclass
class Windows:
    """The window functions of one SELECT; :meth:`add` is the translator's window callback."""

    sql: str
    scope: Scope
    aggregation: Aggregation | None = None
    groups: dict[str, _Group] = field(default_factory=dict)
    count: int = 0
    emitted: int = 0

    def error(self, message: str, node: exp.Expression | None, hint: str | None = None) -> SqlError:
        return sql_error(message, self.sql, node, hint=hint)

    @property
    def refs(self) -> list[str]:
        return [ref for group in self.groups.values() for ref, _ in group.calls]

    def add(self, node: exp.Window) -> Expr:
        """The field that will hold the value of window function ``node``."""
        if isinstance(node.args.get("alias"), exp.Identifier):
            raise self.error(
                "named windows (OVER w, WINDOW w AS ...) are not supported",
                node,
                hint="write the window in the OVER (...) of each function",
            )
        # Inside a grouped SELECT, the window reads the grouped records (keys and aggregates).
        inner = ExprTranslator(self.scope, self.sql, aggregation=self.aggregation)
        partition = [inner.visit(p) for p in node.args.get("partition_by") or []]
        order = node.args.get("order")
        orderings, order_exprs = [], []
        for ordered in order.expressions if order is not None else []:
            order_exprs.append(inner.visit(ordered.this))
            entry: dict[str, Any] = {
                "order": "desc" if ordered.args.get("desc") else "asc",
                "expr": to_string(order_exprs[-1]),
            }
            if ordered.meta.get("nulls_explicit"):
                entry["nullCollation"] = "first" if ordered.args.get("nulls_first") else "last"
            orderings.append(entry)
        function = node.this
        if isinstance(function, exp.RowNumber):
            call = Call("row_number", ())
            frame = Frame("rows", None, 0)
        elif _name(function) in _RANKS:
            if not orderings:
                raise self.error(f"{_name(function)}() needs ORDER BY in its OVER (...)", node)
            call = Call(_name(function), ())
            frame = Frame("peers")  # ranks ignore the frame: peers share one rank
        elif isinstance(function, exp.AggFunc) and _name(function) in _AGGREGATES:
            translated = inner.translate(function)
            if not isinstance(translated, Call) or translated.name not in _AGGREGATES:
                raise self.error("this aggregate cannot be a window function", function)
            call = translated
            frame = self.frame(node, bool(orderings))
        else:
            raise self.error(
                "this window function is not supported",
                function,
                hint=f"window functions: {', '.join(WINDOW_FUNCTIONS)}",
            )
        if call.name == "count_distinct" and frame.kind == "peers":
            raise self.error(
                "count(DISTINCT ...) over an ordered window needs a ROWS frame",
                node,
                hint="add ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW (counts rows, not peers)",
            )
        if frame.kind == "peers" and not orderings:
            frame = Frame("whole")
        if frame.kind == "whole":
            orderings, order_exprs = [], []
        key = repr(([str(p) for p in partition], orderings, frame))
        group = self.groups.setdefault(key, _Group(partition, orderings, order_exprs, frame))
        ref = f"$w{self.count}"
        self.count += 1
        group.calls.append((ref, call))
        return FieldRef((ref,))

    def frame(self, node: exp.Window, ordered: bool) -> Frame:
        spec = node.args.get("spec")
        if spec is None:
            return Frame("peers") if ordered else Frame("whole")
        if spec.args.get("exclude") is not None:
            raise self.error("EXCLUDE in a window frame is not supported", spec)
        kind = str(spec.args.get("kind") or "ROWS").upper()
        start = self.bound(spec, "start", "start_side")
        end = self.bound(spec, "end", "end_side") if spec.args.get("end") is not None else 0
        if start == "following_unbounded" or end == "preceding_unbounded":
            raise self.error(
                "a frame cannot start at UNBOUNDED FOLLOWING or end at UNBOUNDED PRECEDING", spec
            )
        low = None if start == "preceding_unbounded" else start
        high = None if end == "following_unbounded" else end
        if low is None and high is None:
            return Frame("whole")
        if kind == "ROWS":
            assert not isinstance(low, str) and not isinstance(high, str)
            return Frame("rows", low, high)
        if kind == "RANGE" and low is None and high == 0:
            return Frame("peers")
        raise self.error(
            f"{kind} frames other than UNBOUNDED PRECEDING .. CURRENT ROW or UNBOUNDED on both "
            "sides are not supported (a RANGE offset is a distance in ORDER BY values)",
            spec,
            hint="write ROWS BETWEEN n PRECEDING AND m FOLLOWING: the frame counts rows",
        )

    def bound(self, spec: exp.WindowSpec, key: str, side_key: str) -> int | str:
        value, side = spec.args.get(key), str(spec.args.get(side_key) or "").upper()
        text = str(value.this if isinstance(value, exp.Expression) else value).upper()
        if text == "CURRENT ROW":
            return 0
        if text == "UNBOUNDED":
            return f"{side.lower()}_unbounded"
        if not isinstance(value, exp.Literal) or value.is_string or not str(value.this).isdigit():
            raise self.error("a ROWS frame bound is a whole number of rows", value or spec)
        offset = int(value.this)
        return -offset if side == "PRECEDING" else offset

    # -- operators ------------------------------------------------------------------------------

    def emit(self, planner: Any, op_id: str, fields: list[str]) -> str:
        """The operators of every group after ``op_id``; ``fields`` are the paths the records hold
        (carried over where a collapse rebuilds the records)."""
        done: list[str] = []
        for group in self.groups.values():
            carry = [*fields, *done]
            if _straddles(group):
                op_id = self.emit_split(planner, op_id, group, carry)
            else:
                op_id = self.emit_group(planner, op_id, group, carry)
            done += [ref for ref, _ in group.calls]
        return op_id

    def emit_group(self, planner: Any, op_id: str, group: _Group, carry: list[str]) -> str:
        n = self.emitted
        self.emitted += 1
        group = _mirrored(group)
        if group.frame.kind == "whole" or group.frame.kind == "peers":
            return self.emit_joined(planner, op_id, group, n)
        if (
            group.frame.start is None
            and group.frame.end == 0
            and all(call.name in _RUNNING for _, call in group.calls)
        ):
            return self.emit_running(planner, op_id, group, n)
        return self.emit_frame(planner, op_id, group, n, carry)

    def emit_split(self, planner: Any, op_id: str, group: _Group, carry: list[str]) -> str:
        """A frame around the current row (``n PRECEDING .. m FOLLOWING``, either side maybe
        unbounded) as the frame up to the row and the frame from it: both end at the row (the
        second over the reversed order), so each is a running aggregate or a window collapsed
        without a target; the current row, counted twice, is taken out again."""
        # Both parts must see one order, also among ties: number the rows in it first.
        n = self.emitted
        self.emitted += 1
        number = f"$wrn{n}"
        numbering = _Group(
            group.partition, group.orderings, group.order_exprs, Frame("rows", None, 0)
        )
        numbering.calls.append((number, Call("row_number", ())))
        op_id = self.emit_running(planner, op_id, numbering, n)
        by_number = [{"order": "asc", "expr": to_string(FieldRef((number,)))}]
        back = _Group(group.partition, by_number, [], Frame("rows", group.frame.start, 0))
        ahead = _Group(group.partition, by_number, [], Frame("rows", 0, group.frame.end))
        carry = [*carry, number]
        combined: list[tuple[str, Expr]] = []
        ratios: list[tuple[str, Expr]] = []
        for ref, call in group.calls:
            value = call.args[0] if call.args else Literal.of(1)
            parts = (
                [("sum", f"{ref}_sum"), ("count", f"{ref}_count")]
                if call.name == "avg"
                else [(call.name, ref)]
            )
            for name, out in parts:
                back.calls.append((f"{out}_back", Call(name, (value,))))
                ahead.calls.append((f"{out}_ahead", Call(name, (value,))))
                a, b = FieldRef((f"{out}_back",)), FieldRef((f"{out}_ahead",))
                combined.append((out, _combine(name, a, b, value)))
            if call.name == "avg":
                ratios.append((ref, _ratio(f"{ref}_sum", f"{ref}_count", value)))
        op_id = self.emit_group(planner, op_id, back, carry)
        op_id = self.emit_group(planner, op_id, ahead, [*carry, *(r for r, _ in back.calls)])
        for transforms in (combined, ratios):
            if transforms:
                op_id = planner.add(
                    {
                        "op": "transform",
                        "input": op_id,
                        "transforms": [{"ref": r, "expr": to_string(e)} for r, e in transforms],
                    }
                )
        return op_id

    def sorted_runs(
        self, planner: Any, op_id: str, group: _Group, n: int
    ) -> tuple[str, str | None]:
        """``op_id`` sorted by partition and ORDER BY, each partition numbered (its ``within``).
        A whole-partition window needs no order: the segment groups the partitions."""
        orderings = [{"order": "asc", "expr": to_string(p)} for p in group.partition]
        orderings += group.orderings
        if orderings and group.frame.kind != "whole":
            op_id = planner.add({"op": "order", "input": op_id, "orderings": orderings})
        if not group.partition:
            return op_id, None
        within = f"$wseg{n}"
        op_id = planner.add(
            {
                "op": "segment",
                "input": op_id,
                "ref": within,
                "exprs": [to_string(p) for p in group.partition],
            }
        )
        return op_id, within

    def emit_running(self, planner: Any, op_id: str, group: _Group, n: int) -> str:
        op_id, within = self.sorted_runs(planner, op_id, group, n)
        body: dict[str, Any] = {"op": "runningaggregate", "input": op_id}
        if within:
            body["within"] = within
        body["aggregations"] = [{"ref": ref, "expr": to_string(c)} for ref, c in group.calls]
        return planner.add(body)

    def emit_frame(self, planner: Any, op_id: str, group: _Group, n: int, carry: list[str]) -> str:
        start, end = group.frame.start, group.frame.end
        op_id, within = self.sorted_runs(planner, op_id, group, n)
        # The window always holds the current row (so no window is empty, and the collapse can
        # take the current row's columns); members outside the SQL frame are masked out.
        low = None if start is None else min(start, 0)
        high = None if end is None else max(end, 0)
        target, position = f"$wk{n}", f"$wp{n}"
        body: dict[str, Any] = {"op": "windowframe", "input": op_id}
        if within:
            body["within"] = within
        if low is not None:
            body["start"] = low
        if high is not None:
            body["end"] = high
        body["ref"] = {"segment": target, "position": position}
        op_id = planner.add(body)
        calls = group.calls
        masked = low != start or high != end
        if masked:
            pos = FieldRef((position,))
            tests = []
            if start is not None:
                tests.append(Call("greater_than_or_equal", (pos, Literal.of(start))))
            if end is not None:
                tests.append(Call("less_than_or_equal", (pos, Literal.of(end))))
            inside = tests[0] if len(tests) == 1 else Call("and", tuple(tests))
            calls = [(ref, _masked(call, inside)) for ref, call in calls]
        current = None
        if high != 0:  # the collapse's carryovers come from the current row, not the last member
            current = f"$wc{n}"
            op_id = planner.add(
                {
                    "op": "transform",
                    "input": op_id,
                    "transforms": [
                        {"ref": current, "expr": f"{to_string(FieldRef((position,)))} == 0"}
                    ],
                }
            )
        windows = f"$wks{n}"
        op_id = planner.add(
            {
                "op": "segment",
                "input": op_id,
                "ref": windows,
                "exprs": [to_string(FieldRef((target,)))],
            }
        )
        collapse: dict[str, Any] = {"op": "collapsingaggregate", "input": op_id, "within": windows}
        if current:
            collapse["target"] = current
        collapse["carryovers"] = carry
        collapse["aggregations"] = [{"ref": ref, "expr": to_string(c)} for ref, c in calls]
        return planner.add(collapse)

    def emit_joined(self, planner: Any, op_id: str, group: _Group, n: int) -> str:
        """Aggregates per partition (``whole``) or running over peer groups (``peers``), joined
        back to the records by the partition's or peer group's number."""
        peers = group.frame.kind == "peers"
        records, within = self.sorted_runs(planner, op_id, group, n)
        key = within
        if peers:
            key = f"$wpeer{n}"
            exprs = [*group.partition, *group.order_exprs]
            records = planner.add(
                {
                    "op": "segment",
                    "input": records,
                    "ref": key,
                    "exprs": [to_string(e) for e in exprs],
                }
            )
        partials: list[tuple[str, Call]] = []
        running: list[tuple[str, Call]] = []
        ratios: list[tuple[str, Expr]] = []
        averages: list[tuple[str, Expr]] = []  # after the join: they read the records' argument
        for ref, call in group.calls:
            if not peers:
                partials.append((ref, call))
            elif call.name in _RANKS:
                # rank: rows up to the last peer - peers + 1; dense_rank: the peer group's number.
                size = f"{ref}_peers"
                partials.append((size, Call("count", (Literal.of(1),))))
                if call.name == "rank":
                    running.append((ref, Call("sum", (FieldRef((size,)),))))
                    first = Call("subtract", (FieldRef((ref,)), FieldRef((size,))))
                    ratios.append((ref, Call("add", (first, Literal.of(1)))))
                else:
                    running.append((ref, Call("row_number", ())))
            elif call.name == "avg":
                # Running over peer groups: sums of the groups' sums and counts, extremes of extremes.
                total, count = f"{ref}_sum", f"{ref}_count"
                partials += [(total, Call("sum", call.args)), (count, Call("count", call.args))]
                running.append((total, Call("sum", (FieldRef((total,)),))))
                running.append((count, Call("sum", (FieldRef((count,)),))))
                averages.append((ref, _ratio(total, count, call.args[0])))
            else:
                partials.append((ref, call))
                name = "sum" if call.name == "count" else call.name
                running.append((ref, Call(name, (FieldRef((ref,)),))))
        collapse: dict[str, Any] = {"op": "collapsingaggregate", "input": records}
        if key:
            collapse["within"] = key
        collapse["carryovers"] = list(dict.fromkeys(k for k in (key, within) if k))
        collapse["aggregations"] = [{"ref": r, "expr": to_string(c)} for r, c in partials]
        aggregated = planner.add(collapse)
        if running:
            body: dict[str, Any] = {"op": "runningaggregate", "input": aggregated}
            if within:
                body["within"] = within
            body["aggregations"] = [{"ref": r, "expr": to_string(e)} for r, e in running]
            aggregated = planner.add(body)
        if ratios:
            aggregated = planner.add(
                {
                    "op": "transform",
                    "input": aggregated,
                    "transforms": [{"ref": r, "expr": to_string(e)} for r, e in ratios],
                }
            )
        conditions = []
        if key:
            ref = to_string(FieldRef((key,)))
            conditions = [{"relationship": "==", "left": ref, "right": ref}]
        joined = planner.add(
            {
                "op": "join",
                "left": records,
                "right": aggregated,
                "type": "inner",
                "conditions": conditions,
            }
        )
        if not averages:
            return joined
        return planner.add(
            {
                "op": "transform",
                "input": joined,
                "transforms": [{"ref": r, "expr": to_string(e)} for r, e in averages],
            }
        )


def _straddles(group: _Group) -> bool:
    """A ROWS frame with rows on both sides of the current row, of aggregates that combine."""
    frame = group.frame
    return (
        frame.kind == "rows"
        and (frame.start is None or frame.start < 0)
        and (frame.end is None or frame.end > 0)
        and all(call.name in _COMBINE for _, call in group.calls)
    )


def _combine(name: str, back: Expr, ahead: Expr, value: Expr) -> Expr:
    """The aggregate ``name`` of a frame from the aggregates of its part up to the current row
    (``back``) and its part from it (``ahead``); both hold the current row's ``value``."""
    if name in ("min", "max"):
        better = Call("less_than" if name == "min" else "greater_than", (back, ahead))
        return IfElse(((_isnull(back), ahead), (_isnull(ahead), back), (better, back)), ahead)
    twice = IfElse(((_isnull(value), Literal.of(0)),), Literal.of(1) if name == "count" else value)
    total = Call("subtract", (Call("add", (back, ahead)), twice))
    if name == "count":
        return total
    return IfElse(((_isnull(back), ahead), (_isnull(ahead), back)), total)


def _isnull(expr: Expr) -> Expr:
    return Call("isnull", (expr,))


def _mirrored(group: _Group) -> _Group:
    """A frame from the current row forward, as the same frame backward over the reversed order:
    ``CURRENT ROW .. UNBOUNDED FOLLOWING`` becomes a running aggregate, ``CURRENT ROW .. n
    FOLLOWING`` a window ending at the current row (collapsed without a target)."""
    frame = group.frame
    if frame.kind != "rows" or frame.start != 0 or frame.end == 0 or not group.orderings:
        return group
    reversed_orderings = [
        {
            "order": "asc" if o["order"] == "desc" else "desc",
            "expr": o["expr"],
            "nullCollation": "first" if o.get("nullCollation") == "last" else "last",
        }
        for o in group.orderings
    ]
    mirrored = Frame("rows", None if frame.end is None else -frame.end, 0)
    return _Group(group.partition, reversed_orderings, group.order_exprs, mirrored, group.calls)


def _masked(call: Call, inside: Expr) -> Call:
    """``call`` over only the members where ``inside`` holds (the others give null, skipped)."""
    if call.name == "row_number":
        return call
    args = call.args or (Literal.of(1),)
    return Call(call.name, tuple(IfElse(((inside, a),), Literal.of(None)) for a in args))


def _ratio(total: str, count: str, value: Expr) -> Expr:
    """``total / count``, the average of ``value``, typed as ``avg(value)`` is (a DECIMAL stays
    a DECIMAL); null when nothing was counted."""
    return Call("avg_ratio", (FieldRef((total,)), FieldRef((count,)), value))


def _name(function: exp.Func) -> str:
    if isinstance(function, exp.Anonymous):
        return str(function.this).lower()
    return function.sql_name().lower()
