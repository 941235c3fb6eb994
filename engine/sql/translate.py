"""SQL (a sqlglot tree) -> an ordinary logical plan dict, names resolved by the metadata repository.

Every FROM item is held under its own key in the record (a scan's ``ref``, a subquery's projection
``output.<key>.<column>``), so a join's merged record keeps both sides' columns. The SELECT list
becomes the last ``project`` (flat ``output.<name>`` refs), as in the plans of Drill's JdbcTest:

=====================  ====================================================================
SQL                    operators
=====================  ====================================================================
FROM t / JOIN ... ON   scan (or the view's / subquery's operators), join (``outer`` = FULL)
WHERE                  filter
FLATTEN(x) in SELECT   flatten
GROUP BY, aggregates   (transform), segment, collapsingaggregate; HAVING: filter
agg() OVER (...)       order, segment, runningaggregate or windowframe (engine.sql.windows)
SELECT list            project
DISTINCT, UNION        union (``distinct``)
ORDER BY / LIMIT       order (``nullCollation`` when NULLS FIRST/LAST is written), limit
VALUES                 constant
WITH name AS (...)     the named query's operators, once; each reference reads them
subqueries             joins and aggregates (engine.sql.subqueries)
=====================  ====================================================================
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from engine.errors import SqlError
from engine.expr import Call, Expr, FieldRef, IfElse, Literal, to_string
from engine.metadata import MetadataRepository, TableInfo
from engine.sql.dialect import parse_sql, sql_error
from engine.sql.expressions import (
    Aggregation,
    ExprTranslator,
    Relation,
    Scope,
    has_query,
    own_find,
    own_nodes,
    sql_conjuncts,
)
from engine.sql.subqueries import Subqueries
from engine.sql.windows import Windows

CASES = ("preserve", "upper")
_RELATIONSHIPS = {
    exp.EQ: "==",
    exp.NEQ: "!=",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.GT: ">",
    exp.GTE: ">=",
}
_FLIPPED = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
MAX_VIEW_DEPTH = 16
# The parts of each node the translation reads; any other clause fails (see SqlPlanner.supported).
_SELECT_ARGS = frozenset(
    {"expressions", "from_", "joins", "where", "group", "having", "order", "limit", "offset"}
    | {"distinct", "with_", "hint", "windows"}  # OVER w fails in engine.sql.windows
)
_UNION_ARGS = frozenset({"this", "expression", "distinct", "order", "limit", "offset", "with_"})
_TABLE_ARGS = frozenset({"this", "alias", "db", "catalog"})
_SUBQUERY_ARGS = frozenset({"this", "alias"})
_JOIN_ARGS = frozenset({"this", "on", "side", "kind", "using", "hint", "global_"})
_CLAUSE_NAMES = {
    "sample": "TABLESAMPLE",
    "pivots": "PIVOT",
    "laterals": "LATERAL",
    "by_name": "UNION BY NAME",
    "prewhere": "PREWHERE",
    "kind": "this kind of SELECT",
    "side": "this kind of UNION",
}


@dataclass
class Output:
    """What a query produced: the operator id and its column names (None: unknown)."""

    op_id: str
    columns: list[str] | None


@dataclass
class SqlPlanner:
    """Builds the operators of one SQL statement (see the module docstring)."""

    sql: str
    repository: MetadataRepository
    case: str = "preserve"
    query: list[dict[str, Any]] = field(default_factory=list)
    engines: set[str] = field(default_factory=set)
    _keys: int = 0
    _views: list[str] = field(default_factory=list)
    _ctes: list[dict[str, Output]] = field(default_factory=list)
    _outer: Scope | None = None  # the enclosing query of the subquery being planned
    _subqueries: int = 0

    def add(self, op: dict[str, Any]) -> str:
        op_id = str(len(self.query) + 1)
        self.query.append({"@id": op_id, **op})
        return op_id

    def error(self, message: str, node: exp.Expression | None, hint: str | None = None) -> SqlError:
        return sql_error(message, self.sql, node, hint=hint)

    def name(self, ident: exp.Identifier | str) -> str:
        """An output name: unquoted identifiers fold to upper case when ``case`` is upper."""
        if isinstance(ident, str):
            return ident.upper() if self.case == "upper" else ident
        quoted = bool(ident.args.get("quoted"))
        return ident.this if quoted or self.case != "upper" else ident.this.upper()

    # -- queries ------------------------------------------------------------------------------

    def statement(self, node: exp.Expression, prefix: str | None = None) -> Output:
        with_ = node.args.get("with_")
        if with_ is not None:
            return self.with_clause(node, with_, prefix)
        if isinstance(node, exp.Select):
            return self.select(node, prefix)
        if isinstance(node, exp.Union):
            return self.union(node, prefix)
        if isinstance(node, exp.Values):
            return self.values(node, prefix)
        if isinstance(node, exp.Subquery | exp.Paren):
            return self.statement(node.this, prefix)
        raise self.error(f"{type(node).__name__.upper()} is not supported; write a SELECT", node)

    def with_clause(self, node: exp.Expression, with_: exp.With, prefix: str | None) -> Output:
        """``WITH name [(columns)] AS (query), ... query``: each query is planned once, where it
        is named; every reference reads it (an operator may feed several others)."""
        if with_.args.get("recursive"):
            raise self.error("WITH RECURSIVE is not supported", with_)
        node = node.copy()
        node.set("with_", None)
        names: dict[str, Output] = {}
        self._ctes.append(names)
        try:
            for cte in with_.expressions:
                alias = cte.args["alias"]
                out = self.statement(cte.this)
                if alias.args.get("columns"):
                    renamed = [self.name(c) for c in alias.args["columns"]]
                    if out.columns is None or len(renamed) != len(out.columns):
                        raise self.error(f"{len(renamed)} column names for this query", alias)
                    out = self.rename(out, renamed)
                names[alias.name.lower()] = out
            return self.statement(node, prefix)
        finally:
            self._ctes.pop()

    def cte(self, node: exp.Table) -> Output | None:
        """The query a one-part table name names in an enclosing WITH, innermost first."""
        if node.args.get("db") or node.args.get("catalog"):
            return None
        for names in reversed(self._ctes):
            if node.name.lower() in names:
                return names[node.name.lower()]
        return None

    def union(self, node: exp.Union, prefix: str | None) -> Output:
        if isinstance(node, exp.Intersect | exp.Except):
            raise self.error(f"{node.key.upper()} is not supported", node)
        self.supported(node, _UNION_ARGS)
        left = self.statement(node.this)
        right = self.statement(node.expression)
        if left.columns is not None and right.columns is not None:
            if len(left.columns) != len(right.columns):
                raise self.error(
                    f"the two sides of UNION have {len(left.columns)} and "
                    f"{len(right.columns)} columns",
                    node.expression,
                )
            if left.columns != right.columns:
                right = self.rename(right, left.columns)
        distinct = bool(node.args.get("distinct"))
        op_id = self.add({"op": "union", "inputs": [left.op_id, right.op_id], "distinct": distinct})
        out = Output(op_id, left.columns)
        out = self.order_limit(node, out)
        return self.wrap(out, prefix)

    def values(self, node: exp.Values, prefix: str | None) -> Output:
        alias = node.args.get("alias")
        rows = []
        for row in node.expressions:
            items = row.expressions if isinstance(row, exp.Tuple) else [row]
            rows.append([self.constant(item) for item in items])
        width = len(rows[0]) if rows else 0
        if any(len(r) != width for r in rows):
            raise self.error("every VALUES row needs the same number of values", node)
        names = [f"EXPR${i}" for i in range(width)]
        if alias is not None and alias.args.get("columns"):
            names = [self.name(c) for c in alias.args["columns"]]
            if len(names) != width:
                raise self.error(f"{len(names)} column names for {width} values", alias)
        content = [dict(zip(names, row)) for row in rows]
        if prefix is not None:
            content = [{prefix: record} for record in content]
        return Output(self.add({"op": "constant", "content": content}), names)

    def constant(self, node: exp.Expression) -> Any:
        value = ExprTranslator(Scope(), self.sql).visit(node)
        if not isinstance(value, Literal):
            raise self.error("VALUES holds literals only", node)
        return value.value

    def rename(self, out: Output, names: list[str], prefix: str | None = None) -> Output:
        head = ("output", prefix) if prefix else ("output",)
        projections = [
            {"ref": str(FieldRef((*head, new))), "expr": str(FieldRef((old,)))}
            for old, new in zip(out.columns or [], names)
        ]
        return Output(
            self.add({"op": "project", "input": out.op_id, "projections": projections}), names
        )

    def wrap(self, out: Output, prefix: str | None) -> Output:
        """``out``'s columns held under ``prefix`` (how a subquery joins its outer query)."""
        if prefix is None:
            return out
        if out.columns is None:
            raise self.error("a subquery with unknown columns must name them", None)
        return self.rename(out, out.columns, prefix)

    # -- FROM ---------------------------------------------------------------------------------

    def new_key(self, alias: str, scope: Scope) -> str:
        taken = scope.keys()
        # A plain name: a scan's ref is a field name, not a quoted path (`my-t` is my_t).
        alias = re.sub(r"[^\w$]", "_", alias) or "_"
        if alias[0].isdigit():
            alias = f"_{alias}"
        key = alias
        while key in taken:
            self._keys += 1
            key = f"{alias}{self._keys}"
        return key

    def supported(self, node: exp.Expression, allowed: frozenset[str]) -> None:
        """Fail on any clause of ``node`` the translation would otherwise skip (QUALIFY,
        NATURAL, TABLESAMPLE, ...): a skipped clause is a wrong answer."""
        for key, value in node.args.items():
            if key in allowed or value is None or value is False or value == []:
                continue
            words = _CLAUSE_NAMES.get(key, key.rstrip("_").upper().replace("_", " "))
            if key == "method":
                words = f"{str(value).upper()} JOIN"
            place = value[0] if isinstance(value, list) else value
            at = place if isinstance(place, exp.Expression) else node
            raise self.error(f"{words} is not supported", at)

    def from_item(self, node: exp.Expression, scope: Scope) -> tuple[str, Relation]:
        alias_node = node.args.get("alias")
        alias = alias_node.name if alias_node is not None and alias_node.name else None
        if isinstance(node, exp.Table):
            self.supported(node, _TABLE_ARGS)
            if alias_node is not None and alias_node.args.get("columns"):
                # t AS x (a, b): the table's columns renamed, as (SELECT * FROM t) AS x (a, b).
                table = node.copy()
                table.set("alias", None)
                query = exp.Select(expressions=[exp.Star()]).from_(table)
                return self.from_item(exp.Subquery(this=query, alias=alias_node.copy()), scope)
        if isinstance(node, exp.Subquery):
            self.supported(node, _SUBQUERY_ARGS)
        if isinstance(node, exp.Table) and (named := self.cte(node)) is not None:
            key = self.new_key(alias or node.name, scope)
            out = self.wrap(named, key)
            return out.op_id, Relation(key, alias or node.name, out.columns)
        if isinstance(node, exp.Table):
            parts = [p for p in node.parts]
            names = [p.this for p in parts]
            info = self.repository.resolve(names)
            if info is None:
                raise self.error(
                    f"unknown table {'.'.join(names)!r}",
                    node,
                    hint=self.table_hint(),
                )
            alias = alias or names[-1].rsplit("/", 1)[-1].split(".")[0]
            key = self.new_key(alias, scope)
            if info.is_view:
                return self.view(info, node, key, alias)
            return self.scan(info, key, alias)
        if isinstance(node, exp.Subquery | exp.Values):
            alias = alias or f"EXPR${len(scope.relations)}"
            key = self.new_key(alias, scope)
            body = node.this if isinstance(node, exp.Subquery) else node
            named = alias_node is not None and bool(alias_node.args.get("columns"))
            if isinstance(node, exp.Values):
                out = self.values(node, key)
            elif named:
                out = self.statement(body)
                renamed = [self.name(c) for c in alias_node.args["columns"]]
                if out.columns is None or len(renamed) != len(out.columns):
                    width = "an unknown number of" if out.columns is None else len(out.columns)
                    raise self.error(f"{len(renamed)} column names for {width} columns", alias_node)
                out = self.rename(out, renamed, key)
            else:
                out = self.statement(body, key)
            return out.op_id, Relation(key, alias, out.columns)
        if isinstance(node, exp.Unnest | exp.Lateral):
            raise self.error("use FLATTEN(column) in the SELECT list to unnest a list", node)
        raise self.error(f"{type(node).__name__} is not supported in FROM", node)

    def table_hint(self) -> str:
        tables = [t.name for t in self.repository.tables()]
        engines = sorted(self.repository.storage)
        known = f"known tables: {', '.join(tables)}; " if tables else ""
        return f"{known}or name a location as <engine>.`path` (engines: {', '.join(engines)})"

    def scan(self, info: TableInfo, key: str, alias: str) -> tuple[str, Relation]:
        assert info.engine is not None and info.selection is not None
        self.engines.add(info.engine)
        schema = self.repository.schema(info)
        if info.record_column:
            columns: list[str] | None = []
        else:
            columns = None if schema is None else list(schema.names)
        op_id = self.add(
            {
                "op": "scan",
                "storageengine": info.engine,
                "selection": dict(info.selection),
                "ref": key,
            }
        )
        return op_id, Relation(key, alias, columns, info.record_column)

    def view(
        self, info: TableInfo, node: exp.Expression, key: str, alias: str
    ) -> tuple[str, Relation]:
        if info.name in self._views or len(self._views) > MAX_VIEW_DEPTH:
            raise self.error(f"view {info.name!r} refers to itself", node)
        self._views.append(info.name)
        try:
            tree = parse_sql(info.view_sql or "")
        except SqlError as err:
            raise self.error(f"view {info.name!r} does not parse: {err.reason}", node) from None
        inner = SqlPlanner(
            info.view_sql or "", self.repository, self.case, self.query, self.engines
        )
        inner._views = self._views
        try:
            out = inner.statement(tree, key)
        except SqlError as err:
            raise self.error(f"in view {info.name!r}: {err}", node) from None
        finally:
            self._views.pop()
        return out.op_id, Relation(key, alias, out.columns)

    def from_clause(self, node: exp.Select) -> tuple[str | None, Scope]:
        # Only the subquery's own FROM sees the enclosing query, not the queries inside it.
        scope, self._outer = Scope(outer=self._outer), None
        source = node.args.get("from_") or node.args.get("from")
        if source is None:
            return None, scope
        op_id, relation = self.from_item(source.this, scope)
        scope.relations.append(relation)
        for join in node.args.get("joins") or []:
            op_id = self.join(join, op_id, scope)
        return op_id, scope

    def join(self, join: exp.Join, left_id: str, scope: Scope) -> str:
        self.supported(join, _JOIN_ARGS)
        right_id, right = self.from_item(join.this, scope)
        side = (join.args.get("side") or "").upper()
        kind = (join.args.get("kind") or "").upper()
        if join.args.get("using"):
            raise self.error("JOIN ... USING is not supported; write ON a = b", join)
        left_keys = {r.key for r in scope.relations}
        if side == "RIGHT":
            left_id, right_id = right_id, left_id
            scope.relations.insert(0, right)
            join_type = "left"
        else:
            scope.relations.append(right)
            join_type = {"LEFT": "left", "FULL": "outer"}.get(side, "inner")
        if kind in ("SEMI", "ANTI"):
            raise self.error(f"{kind} JOIN is not supported", join)
        right_keys = {right.key}
        if side == "RIGHT":
            left_keys, right_keys = right_keys, left_keys
        conditions: list[tuple[str, Expr, Expr]] = []
        residual, nullable_side = [], []
        kept_tests: dict[str, list[Expr]] = {"left": [], "right": []}
        translator = ExprTranslator(scope, self.sql)
        on = join.args.get("on")
        for part in sql_conjuncts(on) if on is not None else []:
            if _keys_of(translator.visit(part)) - left_keys - right_keys:
                raise self.error(
                    "a join's ON naming a column of an enclosing query is not supported",
                    part,
                    hint="move the test to the subquery's WHERE",
                )
            condition = self.condition(part, translator, left_keys, right_keys)
            if condition is not None:
                conditions.append(condition)
                continue
            expr = translator.visit(part)
            keys = _keys_of(expr)
            if join_type == "inner":
                residual.append(expr)
            elif join_type == "left" and keys <= right_keys:
                # A test of the side that may be missing picks its rows before they are matched.
                nullable_side.append(expr)
            elif keys <= left_keys:
                kept_tests["left"].append(expr)
            elif keys <= right_keys:  # a full join's
                kept_tests["right"].append(expr)
            else:
                raise self.error(
                    "an outer join's ON testing both sides other than by comparing one side "
                    "with the other is not supported",
                    part,
                    hint="compare a column of one side with one of the other, or test one side",
                )
        if any(kept_tests.values()):
            if not conditions:
                raise self.error(
                    "an outer join's ON testing a side it keeps, without comparing the two "
                    "sides, is not supported",
                    on,
                    hint="add a comparison of one side with the other",
                )
            # A kept record failing its side's test matches nothing, and is kept as such: its
            # keys are NULL where the test is not true, and a NULL key matches no record.
            conditions = [
                (
                    relationship,
                    _when_true(kept_tests["left"], left),
                    _when_true(kept_tests["right"], right),
                )
                for relationship, left, right in conditions
            ]
        if nullable_side:
            test = to_string(_and(nullable_side))
            right_id = self.add({"op": "filter", "input": right_id, "expr": test})
        op_id = self.add(
            {
                "op": "join",
                "left": left_id,
                "right": right_id,
                "type": join_type,
                "conditions": [
                    {"relationship": relationship, "left": to_string(a), "right": to_string(b)}
                    for relationship, a, b in conditions
                ],
            }
        )
        for expr in residual:
            op_id = self.add({"op": "filter", "input": op_id, "expr": to_string(expr)})
        return op_id

    def condition(
        self,
        node: exp.Expression,
        translator: ExprTranslator,
        left_keys: set[str],
        right_keys: set[str],
    ) -> tuple[str, Expr, Expr] | None:
        """``node`` as a join condition (relationship, left side's key, right side's key), or
        None where it does not compare one side with the other."""
        relationship = _RELATIONSHIPS.get(type(node))
        if relationship is None:
            return None
        a, b = translator.visit(node.this), translator.visit(node.expression)
        ka, kb = _keys_of(a), _keys_of(b)
        if ka and kb and ka <= left_keys and kb <= right_keys:
            return relationship, a, b
        if ka and kb and ka <= right_keys and kb <= left_keys:
            return _FLIPPED[relationship], b, a
        return None

    # -- SELECT -------------------------------------------------------------------------------

    def select(self, node: exp.Select, prefix: str | None) -> Output:
        self.supported(node, _SELECT_ARGS)
        distinct_node = node.args.get("distinct")
        if distinct_node is not None and distinct_node.args.get("on") is not None:
            raise self.error("DISTINCT ON is not supported", distinct_node.args["on"])
        op_id, scope = self.from_clause(node)
        if op_id is None:
            op_id = self.add({"op": "constant", "content": [{}]})
        subqueries = Subqueries(self, scope)
        where = node.args.get("where")
        if where is not None:
            aggregate = own_find(where.this, exp.AggFunc)
            if aggregate is not None:
                raise self.error("aggregates are not allowed in WHERE; use HAVING", aggregate)
            translator = ExprTranslator(scope, self.sql, subquery=subqueries.translate)
            # The tests without subqueries first: the joins a subquery adds read fewer rows,
            # and the planner sees the FROM's equalities right above its joins.
            parts = sql_conjuncts(where.this)
            subqueries.only_true.update(id(p) for p in parts if isinstance(p, exp.In))
            for tests in (
                [p for p in parts if not has_query(p)],
                [p for p in parts if has_query(p)],
            ):
                if tests:
                    expr = _and([_where_test(p, translator, subqueries) for p in tests])
                    op_id = subqueries.flush(op_id)
                    op_id = self.add({"op": "filter", "input": op_id, "expr": to_string(expr)})
        items = list(node.expressions)
        op_id, items = self.flatten(items, op_id, scope)
        group, having = node.args.get("group"), node.args.get("having")
        grouped = (
            group is not None
            or having is not None
            or any(
                isinstance(a, exp.AggFunc) and not _window_function(a)
                for i in items
                for a in own_nodes(i)
            )
        )
        aggregation, keys = None, []
        if grouped:
            op_id, aggregation, keys = self.aggregate(node, items, op_id, scope)
        windows = Windows(self.sql, scope, aggregation)
        translator = ExprTranslator(
            scope,
            self.sql,
            aggregation=aggregation,
            window=windows.add,
            subquery=subqueries.translate,
        )
        # Translate everything first: the aggregate step needs every aggregate call.
        names, exprs = self.select_list(items, scope, translator)
        having_expr = translator.visit(having.this) if having is not None else None
        if having is not None and having.this.find(exp.Window) is not None:
            raise self.error(
                "window functions are not allowed in HAVING",
                having.this.find(exp.Window),
                hint="compute the window in a subquery and filter its result",
            )
        distinct = node.args.get("distinct") is not None
        hidden = self.hidden_order(node, names, translator, distinct)
        if aggregation is not None:
            op_id = self.emit_aggregate(op_id, keys, aggregation)
        op_id = subqueries.flush(op_id)  # those of HAVING and the SELECT list
        if having_expr is not None:
            op_id = self.add({"op": "filter", "input": op_id, "expr": to_string(having_expr)})
        # Windows read the grouped records: the keys and aggregates, or every FROM item's record.
        if aggregation is not None:
            fields = [*dict.fromkeys(str(k) for k in keys), *(r for r, _ in aggregation.exprs)]
        else:
            fields = [str(FieldRef((r.key,))) for r in scope.relations]
        op_id = windows.emit(self, op_id, fields)
        projections = [
            {"ref": str(FieldRef(("output", name))), "expr": to_string(expr)}
            for name, expr in zip(names, exprs)
        ]
        projections += [
            {"ref": str(FieldRef(("output", ref))), "expr": to_string(expr)} for ref, expr in hidden
        ]
        if not projections:
            raise self.error("the SELECT list is empty", node)
        out = Output(self.add({"op": "project", "input": op_id, "projections": projections}), names)
        if distinct:
            union = {"op": "union", "inputs": [out.op_id], "distinct": True}
            out = Output(self.add(union), out.columns)
        out = self.order_limit(node, out)
        if hidden:
            out = self.rename(out, names)
        return self.wrap(out, prefix)

    def hidden_order(
        self, node: exp.Select, names: list[str], translator: ExprTranslator, distinct: bool
    ) -> list[tuple[str, Expr]]:
        """ORDER BY items that are not result columns: computed as hidden columns, dropped after."""
        order = node.args.get("order")
        hidden = []
        items = [item.this if isinstance(item, exp.Alias) else item for item in node.expressions]
        for i, ordered in enumerate(order.expressions if order is not None else []):
            if self.output_column(ordered.this, names) is not None:
                continue
            if ordered.this in items:  # repeats a SELECT item: ORDER BY a.s beside SELECT a.s
                ordered.meta["column"] = names[items.index(ordered.this)]
            elif not distinct:
                ref = f"$o{i}"
                hidden.append((ref, translator.visit(ordered.this)))
                ordered.meta["hidden"] = ref
        return hidden

    def flatten(
        self, items: list[exp.Expression], op_id: str, scope: Scope
    ) -> tuple[str, list[exp.Expression]]:
        result = []
        for item in items:
            target = item.this if isinstance(item, exp.Alias) else item
            if isinstance(target, exp.Explode | exp.Flatten) or (
                isinstance(target, exp.Anonymous) and str(target.this).lower() == "flatten"
            ):
                args = target.expressions if isinstance(target, exp.Anonymous) else [target.this]
                if len(args) != 1:
                    raise self.error("FLATTEN takes one list column", target)
                ref = f"$f{len(result)}"
                expr = ExprTranslator(scope, self.sql).visit(args[0])
                op_id = self.add(
                    {
                        "op": "flatten",
                        "input": op_id,
                        "ref": ref,
                        "expr": to_string(expr),
                        "drop": False,
                    }
                )
                default = _default_name(args[0])
                scope.relations.append(Relation(ref, ref, [], record_column=ref))
                column = exp.column(ref, quoted=True)
                alias = item.args.get("alias") if isinstance(item, exp.Alias) else None
                name = alias if alias is not None else exp.to_identifier(default)
                item = exp.alias_(column, name)
            result.append(item)
        return op_id, result

    def aggregate(
        self, node: exp.Select, items: list[exp.Expression], op_id: str, scope: Scope
    ) -> tuple[str, Aggregation, list[FieldRef]]:
        plain = ExprTranslator(scope, self.sql)
        aggregation = Aggregation()
        transforms, keys = [], []
        group = node.args.get("group")
        for key_node in group.expressions if group is not None else []:
            if isinstance(key_node, exp.Literal) and not key_node.is_string:
                index = int(key_node.this) - 1
                if not 0 <= index < len(items):
                    raise self.error(f"GROUP BY {index + 1}: no such SELECT item", key_node)
                key_node = items[index].unalias()
            else:
                key_node = self.alias_target(key_node, items) or key_node
            if key_node.find(exp.AggFunc) is not None:
                raise self.error("GROUP BY cannot hold an aggregate", key_node)
            expr = plain.visit(key_node)
            if isinstance(expr, FieldRef):
                ref = expr
            else:
                ref = FieldRef((f"$g{len(transforms)}",))
                transforms.append({"ref": str(ref), "expr": to_string(expr)})
            aggregation.keys[str(expr)] = ref
            keys.append(ref)
        if transforms:
            op_id = self.add({"op": "transform", "input": op_id, "transforms": transforms})
        return op_id, aggregation, keys

    def alias_target(
        self, node: exp.Expression, items: list[exp.Expression]
    ) -> exp.Expression | None:
        if isinstance(node, exp.Column) and len(node.parts) == 1:
            for item in items:
                if isinstance(item, exp.Alias) and item.alias.lower() == node.name.lower():
                    return item.this
        return None

    def emit_aggregate(self, op_id: str, keys: list[FieldRef], aggregation: Aggregation) -> str:
        within = None
        if keys:
            within = "$seg"
            op_id = self.add(
                {"op": "segment", "input": op_id, "ref": within, "exprs": [str(k) for k in keys]}
            )
        body: dict[str, Any] = {"op": "collapsingaggregate", "input": op_id}
        if within:
            body["within"] = within
        body["carryovers"] = [str(k) for k in keys]
        body["aggregations"] = [{"ref": ref, "expr": to_string(e)} for ref, e in aggregation.exprs]
        if not aggregation.exprs:  # GROUP BY without aggregates: DISTINCT on the keys
            body["aggregations"] = [{"ref": "$count", "expr": "count(1)"}]
        return self.add(body)

    def select_list(
        self, items: list[exp.Expression], scope: Scope, translator: ExprTranslator
    ) -> tuple[list[str], list[Expr | None]]:
        names: list[str] = []
        exprs: list[Expr | None] = []
        for i, item in enumerate(items):
            if isinstance(item, exp.Star) or (
                isinstance(item, exp.Column) and isinstance(item.this, exp.Star)
            ):
                relations = scope.relations
                if isinstance(item, exp.Column):
                    relation = scope.relation(item.table)
                    if relation is None:
                        raise self.error(f"unknown table {item.table!r}", item)
                    relations = [relation]
                if translator.aggregation is not None:
                    raise self.error("SELECT * cannot be grouped; name the columns", item)
                for relation in relations:
                    if relation.key.startswith("$f"):
                        continue
                    if relation.columns is None:
                        raise self.error(
                            f"the columns of {relation.alias} are not known yet (no data, no "
                            "stored schema), so * cannot be expanded",
                            item,
                            hint="name the columns, or run the plans that write it first",
                        )
                    cols = [relation.record_column] if relation.record_column else relation.columns
                    for column in cols:
                        names.append(column)
                        exprs.append(FieldRef(relation.path(column)))
                continue
            target = item.this if isinstance(item, exp.Alias) else item
            expr = translator.visit(target)
            if isinstance(item, exp.Alias):
                name = self.name(item.args["alias"])
            elif isinstance(expr, FieldRef) and isinstance(target, exp.Column | exp.Dot):
                name = str(expr.path[-1])
            else:
                name = f"EXPR${i}"
            names.append(name)
            exprs.append(expr)
        return _unique(names), exprs

    def output_column(self, node: exp.Expression, names: list[str]) -> str | None:
        if isinstance(node, exp.Literal) and not node.is_string:
            index = int(node.this) - 1
            if not 0 <= index < len(names):
                raise self.error(f"ORDER BY {index + 1}: there is no such SELECT item", node)
            return names[index]
        if isinstance(node, exp.Column) and len(node.parts) == 1:
            wanted = node.name
            exact = [n for n in names if n == wanted]
            folded = [n for n in names if n.lower() == wanted.lower()]
            if exact or len(folded) == 1:
                return (exact or folded)[0]
        return None

    def order_limit(self, node: exp.Expression, out: Output) -> Output:
        order = node.args.get("order")
        op_id = out.op_id
        if order is not None:
            orderings = []
            for ordered in order.expressions:
                column = (
                    ordered.meta.get("hidden")
                    or ordered.meta.get("column")
                    or self.output_column(ordered.this, out.columns or [])
                )
                if column is None:
                    raise self.error(
                        "ORDER BY of a UNION or DISTINCT names a result column", ordered.this
                    )
                entry: dict[str, Any] = {
                    "order": "desc" if ordered.args.get("desc") else "asc",
                    "expr": str(FieldRef((column,))),
                }
                if ordered.meta.get("nulls_explicit"):
                    entry["nullCollation"] = "first" if ordered.args.get("nulls_first") else "last"
                orderings.append(entry)
            # SQL leaves the order of ties to the engine: no numbering to keep them in input order.
            op_id = self.add(
                {"op": "order", "input": op_id, "orderings": orderings, "stable": False}
            )
        limit, offset = node.args.get("limit"), node.args.get("offset")
        if limit is not None or offset is not None:
            first = self.count_of(offset) if offset is not None else 0
            body: dict[str, Any] = {"op": "limit", "input": op_id, "first": first}
            if limit is not None:
                body["last"] = first + self.count_of(limit)
            op_id = self.add(body)
        return Output(op_id, out.columns)

    def count_of(self, node: exp.Expression) -> int:
        value = node.expression if isinstance(node, exp.Limit | exp.Offset) else node
        if not isinstance(value, exp.Literal) or value.is_string or not str(value.this).isdigit():
            raise self.error("LIMIT and OFFSET take a whole number", value)
        return int(value.this)


def _window_function(node: exp.AggFunc) -> bool:
    """Whether ``node`` is the function of an OVER (...), not an aggregate of the grouping."""
    return isinstance(node.parent, exp.Window) and node.parent.this is node


def _where_test(part: exp.Expression, translator: ExprTranslator, subqueries: Subqueries) -> Expr:
    """A conjunct of WHERE; ``NOT x IN (subquery)`` as the test keeping what it keeps (its
    NULL reads as false), whose no-match test the planner may run as an anti join."""
    inner = part.this.unnest() if isinstance(part, exp.Not) else None
    if isinstance(inner, exp.In) and inner.args.get("query") is not None:
        return subqueries.in_(inner, translator, negated=True)
    return translator.visit(part)


def _when_true(tests: list[Expr], key: Expr) -> Expr:
    """``key`` where every one of ``tests`` is true, else NULL (``key`` itself without tests)."""
    if not tests:
        return key
    return IfElse(((_and(tests), key),), Literal.of(None))


def _and(parts: list[Expr]) -> Expr:
    result = parts[0]
    for part in parts[1:]:
        result = Call("and", (result, part))
    return result


def _keys_of(expr: Expr) -> set[str]:
    from engine.expr import field_refs

    return {ref.root for ref in field_refs(expr)}


def _default_name(node: exp.Expression) -> str:
    if isinstance(node, exp.Column):
        return node.name
    return "EXPR$0"


def _unique(names: list[str]) -> list[str]:
    """Calcite's rule: a repeated name gets the lowest free number appended (DEPTID, DEPTID0)."""
    seen: set[str] = set()
    result = []
    for name in names:
        candidate, n = name, 0
        while candidate.lower() in seen:
            candidate = f"{name}{n}"
            n += 1
        seen.add(candidate.lower())
        result.append(candidate)
    return result


def plan_statement(
    sql: str,
    repository: MetadataRepository,
    *,
    case: str = "preserve",
    store: Mapping[str, Any] | None = None,
    storage_extra: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The plan dict of ``sql``; see :func:`engine.sql.sql_to_plan`."""
    if case not in CASES:
        raise ValueError(f"case must be one of {CASES}")
    planner = SqlPlanner(sql, repository, case)
    out = planner.statement(parse_sql(sql))
    store = dict(store or {"engine": "queue", "target": {"number": 0}})
    engine = str(store.get("engine", "queue"))
    storage = {name: dict(repository.storage[name]) for name in sorted(planner.engines)}
    if engine in repository.storage:
        storage[engine] = dict(repository.storage[engine])
    elif engine == "queue":
        storage[engine] = {"type": "queue"}
    storage.update({k: dict(v) for k, v in (storage_extra or {}).items()})
    if engine not in storage:
        raise SqlError(f"the store's storage engine '{engine}' is not defined", sql=sql)
    target = store.get("target")
    if storage[engine].get("type") == "catalog" and isinstance(target, Mapping):
        # `-- store: cat.analytics.daily`: the header's path names the table
        target = {("table" if k == "path" else k): v for k, v in target.items()}
    planner.add({"op": "store", "input": out.op_id, "storageengine": engine, "target": target})
    return {
        "head": {
            "type": "APACHE_DRILL_LOGICAL",
            "version": 1,
            "generator": {"type": "sql", "info": "drill-dagster sql"},
        },
        "storage": storage,
        "query": planner.query,
    }
