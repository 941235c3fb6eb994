"""SQL expressions (sqlglot trees) -> Drill expression trees (:mod:`engine.expr`).

Names resolve through a :class:`Scope` (the relations of a FROM clause, each held under its own key
in the record); the result is printed with :func:`engine.expr.to_string`, so user identifiers are
always quoted by the printer's rules, never pasted into text.

>>> from engine.sql.dialect import parse_sql
>>> scope = Scope([Relation("e", "e", ["deptId", "name"])])
>>> tree = parse_sql("select upper(name) || 'x', deptId + 1 > 3 from e").expressions
>>> [str(ExprTranslator(scope, "").visit(t)) for t in tree]
["concat(upper(e.name), 'x')", 'e.deptId + 1 > 3']
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sqlglot import exp

from engine.errors import SqlError
from engine.expr import Call, Cast, Expr, FieldRef, IfElse, Literal, field_refs, lookup_function
from engine.expr.nodes import cast_type
from engine.sql.dialect import sql_error
from engine.types import MinorType

_BINARY: dict[type[exp.Expression], str] = {
    exp.Add: "add",
    exp.Sub: "subtract",
    exp.Mul: "multiply",
    exp.Div: "divide",
    exp.Mod: "modulo",
    exp.Pow: "power",
    exp.EQ: "equal",
    exp.NEQ: "not_equal",
    exp.GT: "greater_than",
    exp.GTE: "greater_than_or_equal",
    exp.LT: "less_than",
    exp.LTE: "less_than_or_equal",
    exp.And: "and",
    exp.Or: "or",
}

_TYPES: dict[str, MinorType] = {
    "BOOLEAN": MinorType.BIT,
    "TINYINT": MinorType.INT,
    "SMALLINT": MinorType.INT,
    "INT": MinorType.INT,
    "BIGINT": MinorType.BIGINT,
    "FLOAT": MinorType.FLOAT4,
    "DOUBLE": MinorType.FLOAT8,
    "DECIMAL": MinorType.FLOAT8,
    "VARCHAR": MinorType.VARCHAR,
    "CHAR": MinorType.VARCHAR,
    "TEXT": MinorType.VARCHAR,
    "NVARCHAR": MinorType.VARCHAR,
    "VARBINARY": MinorType.VARBINARY,
    "BINARY": MinorType.VARBINARY,
    "DATE": MinorType.DATE,
    "TIME": MinorType.TIME,
    "TIMESTAMP": MinorType.TIMESTAMP,
}


@dataclass
class Relation:
    """One FROM item: held under ``key`` in the record, named ``alias`` in the SQL.

    ``columns`` None means the schema is unknown (no data yet): any column name is accepted.
    ``record_column`` is a column that stands for the whole record (``_MAP``).
    """

    key: str
    alias: str
    columns: list[str] | None
    record_column: str | None = None

    def find(self, name: str) -> str | None:
        """The column's real name (exact match first, then case-insensitive), or None."""
        names = list(self.columns or [])
        if self.record_column:
            names.append(self.record_column)
        if name in names:
            return name
        matches = [c for c in names if c.lower() == name.lower()]
        return matches[0] if len(matches) == 1 else None

    def path(self, column: str) -> tuple[str, ...]:
        if self.record_column and column == self.record_column:
            return (self.key,)
        return (self.key, column)


@dataclass
class Scope:
    """The relations a SELECT reads, in FROM order."""

    relations: list[Relation] = field(default_factory=list)

    def relation(self, alias: str) -> Relation | None:
        exact = [r for r in self.relations if r.alias == alias]
        if exact:
            return exact[0]
        folded = [r for r in self.relations if r.alias.lower() == alias.lower()]
        return folded[0] if len(folded) == 1 else None


@dataclass
class Aggregation:
    """The aggregate step of a grouped SELECT: group keys and the aggregate calls it computes."""

    keys: dict[str, FieldRef] = field(default_factory=dict)  # printed key expr -> field
    calls: dict[str, str] = field(default_factory=dict)  # printed aggregate call -> ref
    exprs: list[tuple[str, Expr]] = field(default_factory=list)  # (ref, aggregate call)

    def add(self, call: Expr) -> FieldRef:
        text = str(call)
        if text not in self.calls:
            ref = f"$a{len(self.calls)}"
            self.calls[text] = ref
            self.exprs.append((ref, call))
        return FieldRef((self.calls[text],))


class ExprTranslator:
    """Translates one SQL expression against ``scope``.

    With ``aggregation`` set it translates *after* grouping: aggregate calls become the fields the
    aggregate step writes, group keys their fields, and any other column is an error.
    ``window`` is called for window functions (the SELECT decides where they are computed).
    """

    def __init__(
        self,
        scope: Scope,
        sql: str,
        *,
        aggregation: Aggregation | None = None,
        window: Callable[[exp.Window], Expr] | None = None,
    ) -> None:
        self.scope = scope
        self.sql = sql
        self.aggregation = aggregation
        self.window = window

    def error(self, message: str, node: exp.Expression, hint: str | None = None) -> SqlError:
        return sql_error(message, self.sql, node, hint=hint)

    def plain(self) -> ExprTranslator:
        return ExprTranslator(self.scope, self.sql, window=self.window)

    def visit(self, node: exp.Expression) -> Expr:
        agg = self.aggregation
        if agg is not None and not isinstance(node, exp.Window):
            if isinstance(node, exp.AggFunc):
                return agg.add(self.plain().visit(node))
            if node.find(exp.AggFunc) is None and node.find(exp.Window) is None:
                plain = self.plain().visit(node)
                if str(plain) in agg.keys:
                    return agg.keys[str(plain)]
                for ref in field_refs(plain):
                    if not any(_under(ref, key) for key in agg.keys.values()):
                        raise self.error(
                            f"column {_sql_text(node)!r} must appear in GROUP BY or inside an "
                            "aggregate function",
                            node,
                        )
                return plain
        return self.translate(node)

    def translate(self, node: exp.Expression) -> Expr:
        if isinstance(node, exp.Paren):
            return self.visit(node.this)
        kind = type(node)
        if kind in _BINARY:
            return Call(_BINARY[kind], (self.visit(node.this), self.visit(node.expression)))
        if isinstance(node, exp.DPipe):
            return Call("concat", (self.visit(node.this), self.visit(node.expression)))
        if isinstance(node, exp.Neg):
            inner = self.visit(node.this)
            if isinstance(inner, Literal) and isinstance(inner.value, int | float):
                return Literal.of(-inner.value)
            return Call("negate", (inner,))
        if isinstance(node, exp.Not):
            if isinstance(node.this, exp.Is) and isinstance(node.this.expression, exp.Null):
                return Call("isnotnull", (self.visit(node.this.this),))
            return Call("not", (self.visit(node.this),))
        if isinstance(node, exp.Is):
            if isinstance(node.expression, exp.Null):
                return Call("isnull", (self.visit(node.this),))
            return Call("equal", (self.visit(node.this), self.visit(node.expression)))
        if isinstance(node, exp.Literal):
            return _literal(node)
        if isinstance(node, exp.Boolean):
            return Literal.of(bool(node.this))
        if isinstance(node, exp.Null):
            return Literal.of(None)
        if isinstance(node, exp.Column | exp.Dot | exp.Bracket):
            return self.field(node)
        if isinstance(node, exp.Cast | exp.TryCast):
            return self.cast(node)
        if isinstance(node, exp.In):
            if node.args.get("query") is not None:
                raise self.error("IN (subquery) is not supported; use a join", node)
            value = self.visit(node.this)
            tests = [Call("equal", (value, self.visit(e))) for e in node.expressions]
            return _chain("or", tests)
        if isinstance(node, exp.Between):
            value = self.visit(node.this)
            low = Call("greater_than_or_equal", (value, self.visit(node.args["low"])))
            high = Call("less_than_or_equal", (value, self.visit(node.args["high"])))
            return Call("and", (low, high))
        if isinstance(node, exp.Like):
            return Call("like", (self.visit(node.this), self.visit(node.expression)))
        if isinstance(node, exp.Case):
            subject = node.this
            branches = []
            for case in node.args.get("ifs") or []:
                test = self.visit(case.this)
                if subject is not None:
                    test = Call("equal", (self.visit(subject), test))
                branches.append((test, self.visit(case.args["true"])))
            default = node.args.get("default")
            return IfElse(tuple(branches), self.visit(default) if default else Literal.of(None))
        if isinstance(node, exp.If):
            default = node.args.get("false")
            return IfElse(
                ((self.visit(node.this), self.visit(node.args["true"])),),
                self.visit(default) if default else Literal.of(None),
            )
        if isinstance(node, exp.Window):
            if self.window is None:
                raise self.error("a window function is only allowed in the SELECT list", node)
            return self.window(node)
        if isinstance(node, exp.Count):
            return self.count(node)
        if isinstance(node, exp.Func):
            return self.call(node)
        if isinstance(node, exp.Star):
            raise self.error("* is only allowed alone in the SELECT list or in count(*)", node)
        if isinstance(node, exp.Subquery | exp.Select):
            raise self.error("scalar subqueries are not supported; use a join", node)
        raise self.error(f"{type(node).__name__.lower()} is not supported in an expression", node)

    # -- names --------------------------------------------------------------------------------

    def field(self, node: exp.Expression) -> FieldRef:
        """A column, ``t.col``, ``col.member``, ``col['key']`` or ``col[0]``."""
        if isinstance(node, exp.Dot):
            base = self.field(node.this)
            name = node.expression
            if not isinstance(name, exp.Identifier):
                raise self.error("expected a member name after '.'", name)
            return FieldRef((*base.path, name.this))
        if isinstance(node, exp.Bracket):
            base_node = node.this
            if not isinstance(base_node, exp.Column | exp.Dot | exp.Bracket):
                raise self.error("[...] applies to a column", node)
            base = self.field(base_node)
            (key,) = node.expressions if len(node.expressions) == 1 else (None,)
            if not isinstance(key, exp.Literal):
                raise self.error("[...] takes one literal: a member name or a list index", node)
            if key.is_string:
                return FieldRef((*base.path, key.this))
            index = int(key.this)
            if index < 0:
                raise self.error("a list index is not negative", key)
            return FieldRef((*base.path, index))
        assert isinstance(node, exp.Column)
        if isinstance(node.this, exp.Star):
            raise self.error("t.* is only allowed alone in the SELECT list", node)
        parts = [p for p in node.parts]
        return FieldRef(self.resolve(parts, node))

    def resolve(self, parts: list[exp.Identifier], node: exp.Expression) -> tuple[str, ...]:
        names = [p.this for p in parts]
        if len(names) > 1:
            relation = self.scope.relation(names[0])
            if relation is not None:
                column = self._column(relation, parts[1], node)
                return (*relation.path(column), *names[2:])
        candidates = [r for r in self.scope.relations if r.find(names[0]) is not None]
        if len(candidates) > 1:
            aliases = ", ".join(r.alias for r in candidates)
            raise self.error(
                f"column {names[0]!r} is ambiguous: it is in {aliases}",
                parts[0],
                hint=f"qualify it, e.g. {candidates[0].alias}.{names[0]}",
            )
        if candidates:
            relation = candidates[0]
            return (*relation.path(relation.find(names[0]) or names[0]), *names[1:])
        unknown = [r for r in self.scope.relations if r.columns is None]
        if len(unknown) == 1:
            return (*unknown[0].path(names[0]), *names[1:])
        known = sorted({c for r in self.scope.relations for c in (r.columns or [])})
        what = "column or table" if len(names) > 1 else "column"
        raise self.error(
            f"unknown {what} {names[0]!r}",
            parts[0],
            hint=f"known columns: {', '.join(known)}" if known else None,
        )

    def _column(self, relation: Relation, ident: exp.Identifier, node: exp.Expression) -> str:
        column = relation.find(ident.this)
        if column is not None:
            return column
        if relation.columns is None:
            return ident.this
        known = ", ".join(
            [*relation.columns, *([relation.record_column] if relation.record_column else [])]
        )
        raise self.error(
            f"unknown column {ident.this!r} in {relation.alias}",
            ident,
            hint=f"{relation.alias} has: {known}",
        )

    # -- calls --------------------------------------------------------------------------------

    def count(self, node: exp.Count) -> Expr:
        arg = node.this
        if arg is None or isinstance(arg, exp.Star):
            return Call("count", (Literal.of(1),))
        if isinstance(arg, exp.Distinct):
            (inner,) = arg.expressions
            return Call("count_distinct", (self.visit(inner),))
        return Call("count", (self.visit(arg),))

    def call(self, node: exp.Func) -> Expr:
        if isinstance(node, exp.Anonymous):
            name, args = str(node.this), list(node.expressions)
        else:
            name = node.sql_name().lower()
            args = []
            for key in node.arg_types:
                value = node.args.get(key)
                if isinstance(value, list):
                    args.extend(value)
                elif isinstance(value, exp.Expression):
                    args.append(value)
        spec = lookup_function(name)
        if spec is None:
            raise self.error(
                f"unknown function {name!r}",
                node,
                hint="`drill-dagster functions` lists the functions expressions may call",
            )
        return Call(spec.name, tuple(self.visit(a) for a in args))

    def cast(self, node: exp.Cast | exp.TryCast) -> Expr:
        to = node.args["to"]
        type_name = to.this.name if isinstance(to, exp.DataType) else str(to)
        minor = _TYPES.get(type_name.upper())
        if minor is None:
            raise self.error(f"cannot cast to {type_name}", to)
        return Cast(self.visit(node.this), cast_type(minor))


def _literal(node: exp.Literal) -> Literal:
    if node.is_string:
        return Literal.of(str(node.this))
    text = str(node.this)
    if any(c in text for c in ".eE"):
        return Literal.of(float(text))
    return Literal.of(int(text))


def _chain(name: str, parts: list[Expr]) -> Expr:
    result = parts[0]
    for part in parts[1:]:
        result = Call(name, (result, part))
    return result


def _under(ref: FieldRef, key: FieldRef) -> bool:
    return ref.path[: len(key.path)] == key.path


def _sql_text(node: exp.Expression) -> str:
    return node.sql(dialect="drill")
