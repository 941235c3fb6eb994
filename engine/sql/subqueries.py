"""Subqueries in expressions, decorrelated into joins and aggregates (as Calcite does for Drill).

A subquery becomes operators joined to the records of the query that holds it, as top-level
fields named apart by a key of its own (:func:`member`); the subquery's expression is then an
ordinary expression over those fields, so both executors run it and it may stand anywhere in
WHERE, HAVING or the SELECT list (even under OR).

=========================================  ==========================================================
SQL                                        operators (``outer`` is the enclosing query's records)
=========================================  ==========================================================
``(select agg(..) from ..)``               the subquery (one row: an aggregate without GROUP BY),
                                           joined to ``outer`` without conditions
``(select agg(..) .. where i = o)``        the subquery grouped by ``i``, left-joined on ``o == i``;
                                           ``count`` of no row reads 0
``x IN (select y ..)``                     the distinct ``y`` left-joined on ``x == y``, and the
                                           count of rows and of non-null ``y`` (one row): IN is
                                           true, false or NULL exactly as SQL says (NOT IN too;
                                           a conjunct of WHERE needs only the left join)
``EXISTS (select .. where i = o)``         the distinct ``i`` left-joined on ``o == i``; EXISTS:
                                           the join found a row
``EXISTS (.. where i = o and i2 <> o2)``   the least and greatest ``i2`` per ``i`` (for ``<``,
                                           ``<=``: the least; ``>``, ``>=``: the greatest)
                                           left-joined on ``o == i``; EXISTS: a bound passes
``EXISTS (.. i = o and other tests)``      ``outer`` numbered (runningaggregate ``row_number``),
                                           joined to the subquery on ``o == i``, filtered by the
                                           other tests, the numbers found left-joined back
=========================================  ==========================================================

As a conjunct of WHERE, ``x NOT IN (select y ..)`` is two: no ``y`` found, and the counts allow
it (no row, or no NULL ``y`` and ``x`` not NULL). A left join whose match only such a conjunct
tests (``IN``, ``[NOT] EXISTS`` by equalities, ``NOT IN``) the planner runs as a semi or anti join
(:mod:`engine.planner.properties.semi_joins`).

Correlation is by equalities of a subquery column with an enclosing one (plus, for EXISTS, other
tests of both); anything else fails with "not supported" and the subquery's line and column.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from engine.expr import Call, Cast, Expr, FieldRef, IfElse, Literal, field_refs, to_string
from engine.expr.nodes import cast_type
from engine.sql.expressions import Aggregation, ExprTranslator, Scope, own_find, sql_conjuncts
from engine.types import MinorType

if TYPE_CHECKING:
    from engine.sql.translate import Output, SqlPlanner

Step = Callable[[str], str]


def member(key: str, name: str) -> FieldRef:
    """Field ``name`` of a subquery's records joined under ``key``: a top-level field of its own,
    not a member of a map, so that a join on it compares plain columns (Spark then keeps the
    rows partitioned by them, and moves filters on them as on any column).

    >>> str(member("$s2", "k0"))
    '$s2_k0'
    """
    return FieldRef((f"{key}_{name}",))


@dataclass
class Inner:
    """A correlated subquery's rows (after its own tests) and how they relate to the outer ones:
    ``pairs`` of (inner, outer) expressions that must be equal, ``residual`` other tests of both."""

    op_id: str
    scope: Scope
    pairs: list[tuple[Expr, Expr]]
    residual: list[Expr]


@dataclass
class Subqueries:
    """The subqueries of one SELECT over ``scope``: :meth:`translate` is the expression
    translator's hook; :meth:`flush` joins what the translated subqueries need onto the records."""

    planner: SqlPlanner
    scope: Scope
    pending: list[Step] = field(default_factory=list)
    # IN tests whose NULL reads as false (a conjunct of WHERE): they need no counts.
    only_true: set[int] = field(default_factory=set)

    def flush(self, op_id: str) -> str:
        for step in self.pending:
            op_id = step(op_id)
        self.pending.clear()
        return op_id

    def translate(self, node: exp.Expression, translator: ExprTranslator) -> Expr:
        if isinstance(node, exp.Exists):
            return self.exists(node, translator)
        if isinstance(node, exp.In):
            return self.in_(node, translator)
        assert isinstance(node, exp.Subquery)
        return self.scalar(node, translator)

    # -- helpers ------------------------------------------------------------------------------

    def error(self, message: str, node: exp.Expression) -> Exception:
        return self.planner.error(message, node)

    def key(self, letter: str) -> str:
        self.planner._subqueries += 1
        return f"${letter}{self.planner._subqueries}"

    def add(self, op: dict[str, Any]) -> str:
        return self.planner.add(op)

    def named_apart(self, op_id: str, key: str, fields: dict[str, str]) -> str:
        """The flat ``fields`` (name -> field) of ``op_id``'s records, renamed apart by ``key``
        (read with :func:`member`)."""
        projections = [
            {
                "ref": str(FieldRef(("output", *member(key, name).path))),
                "expr": str(FieldRef((source,))),
            }
            for name, source in fields.items()
        ]
        return self.add({"op": "project", "input": op_id, "projections": projections})

    def join(self, left: str, right: str, kind: str, pairs: list[tuple[Expr, Expr]] = ()) -> str:
        conditions = [
            {"relationship": "==", "left": to_string(o), "right": to_string(i)} for o, i in pairs
        ]
        body = {"op": "join", "left": left, "right": right, "type": kind, "conditions": conditions}
        return self.add(body)

    def aggregate(self, op_id: str, keys: list[Expr], calls: list[Expr]) -> tuple[str, list[str]]:
        """``calls`` aggregated per distinct ``keys`` (none: one row); the record is flat:
        ``$k0..`` the keys, and the returned names hold the calls."""
        key_refs = []
        transforms = []
        for i, expr in enumerate(keys):
            ref = FieldRef((f"$k{i}",))
            transforms.append({"ref": str(ref), "expr": to_string(expr)})
            key_refs.append(ref)
        if transforms:
            op_id = self.add({"op": "transform", "input": op_id, "transforms": transforms})
        aggregation = Aggregation()
        names = [aggregation.add(call).path[0] for call in calls]
        return self.planner.emit_aggregate(op_id, key_refs, aggregation), names

    def outer_only(self, exprs: list[Expr], translator: ExprTranslator, node: exp.Expression):
        """After grouping, an enclosing column a subquery names must be a group key."""
        agg = translator.aggregation
        if agg is None:
            return
        for expr in exprs:
            for ref in field_refs(expr):
                if not any(ref.path[: len(k.path)] == k.path for k in agg.keys.values()):
                    raise self.error(
                        "a subquery after GROUP BY naming a column that is not a group key is "
                        "not supported",
                        node,
                    )

    # -- uncorrelated queries -----------------------------------------------------------------

    def plain(self, query: exp.Expression) -> Output | None:
        """``query`` planned as an ordinary query, or None (nothing planned) if it names a column
        of an enclosing query."""
        mark, size = self.scope.correlations, len(self.planner.query)
        self.planner._outer = self.scope
        try:
            out = self.planner.statement(query)
        finally:
            self.planner._outer = None
        if self.scope.correlations != mark:
            del self.planner.query[size:]
            return None
        return out

    # -- scalar -------------------------------------------------------------------------------

    def scalar(self, node: exp.Subquery, translator: ExprTranslator) -> Expr:
        query = node.this
        if not isinstance(query, exp.Select):
            raise self.error("a scalar subquery that is not a SELECT is not supported", node)
        items = query.expressions
        if len(items) != 1:
            raise self.error("a scalar subquery returns one column", node)
        single_row = (
            own_find(items[0], exp.AggFunc) is not None
            and not any(query.args.get(k) for k in ("group", "having", "limit", "offset"))
            and own_find(items[0], exp.Window) is None
        )
        if not single_row:
            raise self.error(
                "a scalar subquery that is not one aggregate without GROUP BY (one row) is not "
                "supported",
                node,
            )
        out = self.plain(query)
        if out is not None:
            key = self.key("s")
            column = (out.columns or ["EXPR$0"])[0]
            wrapped = self.named_apart(out.op_id, key, {"v": column})
            self.pending.append(lambda op_id: self.join(op_id, wrapped, "inner"))
            return member(key, "v")
        inner = self.correlated(query, node, allow_residual=False)
        outer = [o for _, o in inner.pairs]
        self.outer_only(outer, translator, node)
        aggregation = Aggregation()
        value = ExprTranslator(inner.scope, self.planner.sql, aggregation=aggregation).visit(
            items[0].unalias()
        )
        keys = [i for i, _ in inner.pairs]
        grouped, names = self.aggregate(inner.op_id, keys, [c for _, c in aggregation.exprs])
        key = self.key("s")
        fields = {f"k{i}": f"$k{i}" for i in range(len(keys))}
        fields.update({f"a{i}": name for i, name in enumerate(names)})
        apart = self.named_apart(grouped, key, fields)
        pairs = [(o, member(key, f"k{i}")) for i, o in enumerate(outer)]
        self.pending.append(lambda op_id: self.join(op_id, apart, "left", pairs))
        # An outer row no subquery row matches sees the aggregates of no rows: count 0, else NULL.
        reads: dict[str, Expr] = {}
        for i, (ref, call) in enumerate(aggregation.exprs):
            value_ref: Expr = member(key, f"a{i}")
            if isinstance(call, Call) and call.name in ("count", "count_distinct"):
                value_ref = Call("coalesce", (value_ref, Literal.of(0)))
            reads[ref] = value_ref
        return _replace_fields(value, reads)

    # -- IN -----------------------------------------------------------------------------------

    def in_(self, node: exp.In, translator: ExprTranslator, *, negated: bool = False) -> Expr:
        """``node`` (``x IN (subquery)``) as an expression; ``negated``: ``NOT node`` as a
        conjunct of WHERE (NULL reads as false), the test keeping the records it keeps."""
        query = node.args["query"]
        if isinstance(node.this, exp.Tuple):
            raise self.error("IN with several columns is not supported", node)
        value = translator.visit(node.this)
        out = self.plain(query.this if isinstance(query, exp.Subquery) else query)
        if out is None:
            raise self.error(
                "a correlated IN (subquery) is not supported; write EXISTS with the equalities",
                node,
            )
        if out.columns is None or len(out.columns) != 1:
            raise self.error("an IN subquery returns one column", query)
        column = FieldRef((out.columns[0],))
        distinct, (marker,) = self.aggregate(out.op_id, [column], [Call("count", (Literal.of(1),))])
        found_key = self.key("i")
        found = self.named_apart(distinct, found_key, {"v": "$k0", "m": marker})
        pairs = [(value, member(found_key, "v"))]
        if id(node) in self.only_true:
            self.pending.append(lambda op_id: self.join(op_id, found, "left", pairs))
            return Call("isnotnull", (member(found_key, "m"),))
        if negated:
            return self.not_in(out.op_id, column, value, (found_key, found), pairs)
        counted, (rows, values) = self.aggregate(
            out.op_id, [], [Call("count", (Literal.of(1),)), Call("count", (column,))]
        )
        count_key = self.key("n")
        counts = self.named_apart(counted, count_key, {"n": rows, "nn": values})

        def step(op_id: str) -> str:
            op_id = self.join(op_id, counts, "inner")
            return self.join(op_id, found, "left", pairs)

        self.pending.append(step)
        n, nn = member(count_key, "n"), member(count_key, "nn")
        null = Cast(Literal.of(None), _BIT)
        return IfElse(
            (
                (Call("isnotnull", (member(found_key, "m"),)), Literal.of(True)),
                (Call("equal", (n, Literal.of(0))), Literal.of(False)),
                (Call("or", (Call("isnull", (value,)), Call("less_than", (nn, n)))), null),
            ),
            Literal.of(False),
        )

    def not_in(
        self,
        rows: str,
        column: FieldRef,
        value: Expr,
        found: tuple[str, str],
        pairs: list[tuple[Expr, Expr]],
    ) -> Expr:
        """``NOT x IN (subquery)`` as a conjunct of WHERE (``found``: the key and operator of
        the distinct subquery values): true where no subquery row equals ``x`` and either the subquery has no row, or it has no NULL and ``x`` is not NULL (else
        NOT IN is false or NULL). The no-match test is a conjunct of its own: the planner may
        run the left join and it as an anti join."""
        counted, (n, nn) = self.aggregate(
            rows, [], [Call("count", (Literal.of(1),)), Call("count", (column,))]
        )
        count_key = self.key("n")
        counts = self.named_apart(counted, count_key, {"n": n, "nn": nn})
        found_key, found_id = found

        def step(op_id: str) -> str:
            op_id = self.join(op_id, counts, "inner")
            return self.join(op_id, found_id, "left", pairs)

        self.pending.append(step)
        n_ref, nn_ref = member(count_key, "n"), member(count_key, "nn")
        no_null = Call("and", (Call("equal", (nn_ref, n_ref)), Call("isnotnull", (value,))))
        counted_test = Call("or", (Call("equal", (n_ref, Literal.of(0))), no_null))
        return Call("and", (Call("isnull", (member(found_key, "m"),)), counted_test))

    # -- EXISTS -------------------------------------------------------------------------------

    def exists(self, node: exp.Exists, translator: ExprTranslator) -> Expr:
        query = node.this
        if isinstance(query, exp.Subquery):
            query = query.this
        if not isinstance(query, exp.Select):
            raise self.error("EXISTS over a query that is not a SELECT is not supported", node)
        for arg, words in _CLAUSES.items():
            if query.args.get(arg):
                raise self.error(f"EXISTS over a query with {words} is not supported", node)
        if any(own_find(i, exp.AggFunc) is not None for i in query.expressions):
            raise self.error("EXISTS over an aggregate query is not supported", node)
        inner = self.correlated(query, node, allow_residual=True)
        outer = [o for _, o in inner.pairs]
        self.outer_only([*outer, *inner.residual], translator, node)
        count = [Call("count", (Literal.of(1),))]
        key = self.key("e")
        if not inner.residual:
            keys = [i for i, _ in inner.pairs]
            grouped, (marker,) = self.aggregate(inner.op_id, keys, count)
            fields = {f"k{i}": f"$k{i}" for i in range(len(keys))}
            apart = self.named_apart(grouped, key, {**fields, "m": marker})
            pairs = [(o, member(key, f"k{i}")) for i, o in enumerate(outer)]
            kind = "left" if pairs else "inner"  # no correlation: one row, the count of rows
            self.pending.append(lambda op_id: self.join(op_id, apart, kind, pairs))
            if not pairs:
                return Call("greater_than", (member(key, "m"), Literal.of(0)))
            return Call("isnotnull", (member(key, "m"),))

        bound = _bound_test(inner.residual, {r.key for r in self.scope.relations})
        if bound is not None:
            return self.exists_bounded(inner, key, outer, bound)

        number = f"$r{self.planner._subqueries}"

        def step(op_id: str) -> str:
            numbered = self.add(
                {
                    "op": "runningaggregate",
                    "input": op_id,
                    "aggregations": [{"ref": str(FieldRef((number,))), "expr": "row_number()"}],
                }
            )
            pairs = [(o, i) for i, o in inner.pairs]
            matched = self.join(numbered, inner.op_id, "inner", pairs)
            test = to_string(_and(inner.residual))
            matched = self.add({"op": "filter", "input": matched, "expr": test})
            grouped, (marker,) = self.aggregate(matched, [FieldRef((number,))], count)
            apart = self.named_apart(grouped, key, {"r": "$k0", "m": marker})
            return self.join(numbered, apart, "left", [(FieldRef((number,)), member(key, "r"))])

        self.pending.append(step)
        return Call("isnotnull", (member(key, "m"),))

    def exists_bounded(
        self, inner: Inner, key: str, outer: list[Expr], bound: tuple[str, Expr, Expr]
    ) -> Expr:
        """EXISTS whose one other test compares a subquery value with an enclosing one
        (``i2 <> o2``, ``i2 < o2``, ...): some row of the group passes it exactly when the
        group's least or greatest value does (SQL's min and max skip NULLs, as the test does:
        a NULL compares to nothing). The group's bounds join the records as a correlated
        aggregate does; no record is numbered (a numbering is one sequence over all of them)."""
        name, value, enclosing = bound
        keys = [i for i, _ in inner.pairs]
        calls = [Call(f, (value,)) for f in _BOUNDS[name]]
        grouped, names = self.aggregate(inner.op_id, keys, calls)
        fields = {f"k{i}": f"$k{i}" for i in range(len(keys))}
        bounds = {f"b{i}": n for i, n in enumerate(names)}
        apart = self.named_apart(grouped, key, {**fields, **bounds})
        pairs = [(o, member(key, f"k{i}")) for i, o in enumerate(outer)]
        kind = "left" if pairs else "inner"  # no correlation: one row, the bounds of all rows
        self.pending.append(lambda op_id: self.join(op_id, apart, kind, pairs))
        tests = [Call(name, (member(key, b), enclosing)) for b in bounds]
        found = tests[0] if len(tests) == 1 else Call("or", tuple(tests))
        # A NULL bound (no row, or no value) or enclosing value passes no test: EXISTS is false.
        return IfElse(((found, Literal.of(True)),), Literal.of(False))

    # -- correlation --------------------------------------------------------------------------

    def correlated(self, query: exp.Select, node: exp.Expression, *, allow_residual: bool) -> Inner:
        """The FROM and WHERE of ``query``, its WHERE split into its own tests (applied), the
        equalities with enclosing columns and (``allow_residual``) other tests naming both."""
        planner = self.planner
        planner._outer = self.scope
        try:
            op_id, scope = planner.from_clause(query)
        finally:
            planner._outer = None
        if op_id is None:
            op_id = self.add({"op": "constant", "content": [{}]})
        nested = Subqueries(planner, scope)
        translator = ExprTranslator(scope, planner.sql, subquery=nested.translate)
        outer_keys = {r.key for r in self.scope.relations}
        farther = self.scope.outer.keys() if self.scope.outer is not None else set()
        own, pairs, residual = [], [], []
        where = query.args.get("where")
        for part in sql_conjuncts(where.this) if where is not None else []:
            if own_find(part, exp.AggFunc) is not None:
                raise self.error("aggregates are not allowed in WHERE; use HAVING", part)
            expr = translator.visit(part)
            roots = {ref.root for ref in field_refs(expr)}
            if roots & (farther - outer_keys):
                raise self.error(
                    "a subquery naming a column of a query two levels out is not supported", part
                )
            if not roots & outer_keys:
                own.append(expr)
                continue
            pair = _equality(expr, outer_keys)
            if pair is not None:
                pairs.append(pair)
            elif allow_residual:
                residual.append(expr)
            else:
                raise self.error(
                    "in a scalar subquery, a test naming an enclosing column other than "
                    "`column = enclosing column` is not supported",
                    part,
                )
        op_id = nested.flush(op_id)
        if own:
            op_id = self.add({"op": "filter", "input": op_id, "expr": to_string(_and(own))})
        return Inner(op_id, scope, pairs, residual)


_CLAUSES = {
    "group": "GROUP BY",
    "having": "HAVING",
    "limit": "LIMIT",
    "offset": "OFFSET",
    "distinct": "DISTINCT",
}
_BIT = cast_type(MinorType.BIT)


def _equality(expr: Expr, outer_keys: set[str]) -> tuple[Expr, Expr] | None:
    """(inner, outer) of ``inner = outer`` where one side names only enclosing columns and the
    other only the subquery's own."""
    if not (isinstance(expr, Call) and expr.name == "equal"):
        return None
    a, b = expr.args
    ra, rb = ({r.root for r in field_refs(x)} for x in (a, b))
    if ra and rb and ra <= outer_keys and not rb & outer_keys:
        return b, a
    if ra and rb and rb <= outer_keys and not ra & outer_keys:
        return a, b
    return None


_BOUNDS = {
    "not_equal": ("min", "max"),
    "less_than": ("min",),
    "less_than_or_equal": ("min",),
    "greater_than": ("max",),
    "greater_than_or_equal": ("max",),
}
_FLIPPED = {
    "not_equal": "not_equal",
    "less_than": "greater_than",
    "less_than_or_equal": "greater_than_or_equal",
    "greater_than": "less_than",
    "greater_than_or_equal": "less_than_or_equal",
}


def _bound_test(residual: list[Expr], outer_keys: set[str]) -> tuple[str, Expr, Expr] | None:
    """``(comparison, inner, outer)`` when ``residual`` is one comparison of an expression of
    the subquery's own columns with one of enclosing columns, oriented ``inner <op> outer``."""
    if len(residual) != 1:
        return None
    (expr,) = residual
    if not (isinstance(expr, Call) and expr.name in _BOUNDS):
        return None
    a, b = expr.args
    ra, rb = ({r.root for r in field_refs(x)} for x in (a, b))
    if ra and rb and rb <= outer_keys and not ra & outer_keys:
        return expr.name, a, b
    if ra and rb and ra <= outer_keys and not rb & outer_keys:
        return _FLIPPED[expr.name], b, a
    return None


def _replace_fields(expr: Expr, reads: dict[str, Expr]) -> Expr:
    """``expr`` with each one-name field in ``reads`` replaced."""
    if isinstance(expr, FieldRef):
        return reads.get(str(expr.path[0]), expr) if len(expr.path) == 1 else expr
    if isinstance(expr, Call):
        return Call(expr.name, tuple(_replace_fields(a, reads) for a in expr.args))
    if isinstance(expr, IfElse):
        branches = tuple(
            (_replace_fields(c, reads), _replace_fields(v, reads)) for c, v in expr.branches
        )
        return IfElse(branches, _replace_fields(expr.otherwise, reads))
    if isinstance(expr, Cast):
        return Cast(_replace_fields(expr.expr, reads), expr.type)
    return expr


def _and(parts: list[Expr]) -> Expr:
    result = parts[0]
    for part in parts[1:]:
        result = Call("and", (result, part))
    return result


__all__ = ["Subqueries"]
