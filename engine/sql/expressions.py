"""SQL expressions (sqlglot trees) -> Drill expression trees (:mod:`engine.expr`).

Names resolve through a :class:`Scope` (the relations of a FROM clause, each held under its own key
in the record); the result is printed with :func:`engine.expr.to_string`, so user identifiers are
always quoted by the printer's rules, never pasted into text.

>>> from engine.sql.dialect import parse_sql
>>> scope = Scope([Relation("e", "e", ["deptId", "name"])])
>>> tree = parse_sql("select upper(name) || 'x', deptId + 1 > 3 from e").expressions
>>> [str(ExprTranslator(scope, "").visit(t)) for t in tree]
["concatoperator(upper(e.name), 'x')", 'e.deptId + 1 > 3']
"""

from __future__ import annotations

import calendar
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal

from sqlglot import exp

from engine.errors import SqlError
from engine.expr import Call, Cast, Expr, FieldRef, IfElse, Literal, field_refs, lookup_function
from engine.expr.nodes import cast_type
from engine.sql.dialect import sql_error
from engine.types import MAX_DECIMAL_PRECISION, MinorType

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
    "DECIMAL": MinorType.DECIMAL,
    "NUMERIC": MinorType.DECIMAL,
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
    outer: Scope | None = None  # the query a subquery's columns may also name (correlation)
    correlations: int = 0  # how often a subquery named a column of this scope

    def keys(self) -> set[str]:
        """The record keys of this scope and every enclosing one (a new key avoids them all)."""
        own = {r.key for r in self.relations}
        return own | self.outer.keys() if self.outer is not None else own

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
        subquery: Callable[[exp.Expression, ExprTranslator], Expr] | None = None,
    ) -> None:
        self.scope = scope
        self.sql = sql
        self.aggregation = aggregation
        self.window = window
        self.subquery = subquery

    def error(self, message: str, node: exp.Expression, hint: str | None = None) -> SqlError:
        return sql_error(message, self.sql, node, hint=hint)

    def plain(self) -> ExprTranslator:
        return ExprTranslator(self.scope, self.sql, window=self.window, subquery=self.subquery)

    def visit(self, node: exp.Expression) -> Expr:
        agg = self.aggregation
        if agg is not None and not isinstance(node, exp.Window) and not has_query(node):
            if isinstance(node, exp.AggFunc):
                return agg.add(self.plain().visit(node))
            if own_find(node, exp.AggFunc) is None and own_find(node, exp.Window) is None:
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
        if node.args.get("negate") and not isinstance(node, exp.Like | exp.ILike | exp.Is):
            # A NOT sqlglot folds into the node: never run it as the positive test.
            raise self.error(f"NOT {type(node).__name__.upper()} is not supported", node)
        kind = type(node)
        if isinstance(node, exp.Add) and isinstance(node.this, exp.Interval):
            return self.date_shift(node.expression, node.this, 1)
        if isinstance(node, exp.Add | exp.Sub) and isinstance(node.expression, exp.Interval):
            return self.date_shift(node.this, node.expression, -1 if kind is exp.Sub else 1)
        if isinstance(node, exp.Interval):
            raise self.error(_INTERVAL_USE, node)
        if isinstance(node, exp.Extract):
            unit = node.this.name if isinstance(node.this, exp.Var | exp.Column) else None
            if not unit:
                raise self.error("EXTRACT takes a unit name: EXTRACT(year FROM d)", node.this)
            return Call("extract", (Literal.of(unit.lower()), self.visit(node.expression)))
        if kind in _BINARY:
            return Call(_BINARY[kind], (self.visit(node.this), self.visit(node.expression)))
        if isinstance(node, exp.DPipe):
            # SQL's ||, null where either side is (Drill's concat reads a null as '').
            return Call("concatoperator", (self.visit(node.this), self.visit(node.expression)))
        if isinstance(node, exp.Neg):
            inner = self.visit(node.this)
            if isinstance(inner, Literal) and isinstance(inner.value, int | float | Decimal):
                return Literal.of(-inner.value)
            return Call("negate", (inner,))
        if isinstance(node, exp.Not):
            if isinstance(node.this, exp.Is) and isinstance(node.this.expression, exp.Null):
                return Call("isnotnull", (self.visit(node.this.this),))
            return Call("not", (self.visit(node.this),))
        if isinstance(node, exp.Is):
            return _negated(node, self.is_test(node))
        if isinstance(node, exp.NullSafeEQ | exp.NullSafeNEQ):
            same = _not_distinct(self.visit(node.this), self.visit(node.expression))
            return same if isinstance(node, exp.NullSafeEQ) else Call("not", (same,))
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
        if isinstance(node, exp.Subquery | exp.Exists) or (
            isinstance(node, exp.In) and node.args.get("query") is not None
        ):
            if self.subquery is None:
                raise self.error(
                    "a subquery is not supported here (only in WHERE, HAVING and the SELECT list)",
                    node,
                )
            return self.subquery(node, self)
        if isinstance(node, exp.In):
            if node.args.get("unnest") is not None or node.args.get("field") is not None:
                raise self.error("this form of IN is not supported", node)
            value = self.visit(node.this)
            tests = [Call("equal", (value, self.visit(e))) for e in node.expressions]
            return _chain("or", tests)
        if isinstance(node, exp.Between):
            if node.args.get("symmetric"):
                raise self.error("BETWEEN SYMMETRIC is not supported", node)
            value = self.visit(node.this)
            low = Call("greater_than_or_equal", (value, self.visit(node.args["low"])))
            high = Call("less_than_or_equal", (value, self.visit(node.args["high"])))
            return Call("and", (low, high))
        if isinstance(node, exp.Like | exp.ILike | exp.Escape):
            return self.like(node)
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
        if isinstance(node, exp.Select):
            raise self.error("a subquery is not supported here", node)
        if isinstance(node, exp.All | exp.Any):
            raise self.error(
                f"a comparison with {node.key.upper()} (subquery) is not supported", node
            )
        raise self.error(f"{type(node).__name__.lower()} is not supported in an expression", node)

    def is_test(self, node: exp.Is) -> Expr:
        """``x IS NULL``, ``x IS TRUE``, ``x IS FALSE``: never null."""
        value = self.visit(node.this)
        if isinstance(node.expression, exp.Null):
            return Call("isnull", (value,))
        if isinstance(node.expression, exp.Boolean):
            test = value if node.expression.this else Call("not", (value,))
            return Call("and", (Call("isnotnull", (value,)), test))
        raise self.error("IS takes NULL, TRUE or FALSE", node.expression)

    def like(self, node: exp.Expression) -> Expr:
        """``s [NOT] [I]LIKE pattern [ESCAPE e]``."""
        escape = None
        if isinstance(node, exp.Escape):
            escape, node = node.expression, node.this
            if not isinstance(node, exp.Like | exp.ILike):
                raise self.error("ESCAPE follows a LIKE pattern", node)
        value, pattern = self.visit(node.this), self.visit(node.expression)
        if isinstance(node, exp.ILike):
            value = Call("lower", (value,))
            if isinstance(pattern, Literal) and isinstance(pattern.value, str):
                pattern = Literal.of(pattern.value.lower())
            else:
                pattern = Call("lower", (pattern,))
        args = (value, pattern) if escape is None else (value, pattern, self.visit(escape))
        return _negated(node, Call("like", args))

    def date_shift(self, date: exp.Expression, interval: exp.Interval, sign: int) -> Expr:
        """``DATE '1998-12-01' - INTERVAL '90' DAY``: folded to the date it names."""
        value = self.visit(date)
        day = _date_literal(value)
        amount, unit = _interval(interval)
        if day is None or amount is None or unit not in _INTERVAL_UNITS:
            raise self.error(_INTERVAL_USE, interval)
        shifted = _INTERVAL_UNITS[unit](day, sign * amount)
        return Cast(Literal.of(shifted.isoformat()), cast_type(MinorType.DATE))

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
        if self.scope.outer is not None:
            # A subquery's name that its own FROM does not hold: the enclosing query's column.
            try:
                path = ExprTranslator(self.scope.outer, self.sql).resolve(parts, node)
            except SqlError:
                pass
            else:
                self.scope.outer.correlations += 1
                return path
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
        if isinstance(node, exp.Concat):  # CONCAT reads a NULL as '', as Drill, PostgreSQL, DuckDB
            return Call("concat", tuple(self.visit(a) for a in node.expressions))
        if isinstance(node, exp.Nullif):
            value, other = self.visit(node.this), self.visit(node.expression)
            return IfElse(((Call("equal", (value, other)), Literal.of(None)),), value)
        if isinstance(node, exp.Greatest | exp.Least):  # NULLs left out, as PostgreSQL and DuckDB
            name = "greatest" if isinstance(node, exp.Greatest) else "least"
            return Call(name, tuple(self.visit(a) for a in [node.this, *node.expressions]))
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
                elif value is not None and value is not False:
                    # A keyword sqlglot keeps as text (TRIM(LEADING ...)): not to be dropped.
                    raise self.error(f"{name.upper()}({value} ...) is not supported", node)
        spec = lookup_function(name)
        if spec is None:
            raise self.error(
                f"unknown function {name!r}",
                node,
                hint="`drill-dagster functions` lists the functions expressions may call",
            )
        if not spec.accepts(len(args)):
            raise self.error(f"{spec.name} takes {spec.arity_text()}, got {len(args)}", node)
        return Call(spec.name, tuple(self.visit(a) for a in args))

    def cast(self, node: exp.Cast | exp.TryCast) -> Expr:
        to = node.args["to"]
        type_name = to.this.name if isinstance(to, exp.DataType) else str(to)
        minor = _TYPES.get(type_name.upper())
        if minor is None:
            raise self.error(f"cannot cast to {type_name}", to)
        params = to.expressions if isinstance(to, exp.DataType) else []
        sizes = []
        if minor == MinorType.DECIMAL:
            for param in params:
                size = param.this if isinstance(param, exp.DataTypeParam) else param
                if not isinstance(size, exp.Literal) or not str(size.this).isdigit():
                    raise self.error("a DECIMAL's precision and scale are whole numbers", param)
                sizes.append(int(size.this))
        try:
            target = cast_type(minor, *sizes[:2])
        except ValueError as err:
            raise self.error(str(err), to) from None
        return Cast(self.visit(node.this), target)


QUERIES = (exp.Subquery, exp.Exists, exp.Select)


def own_nodes(node: exp.Expression):  # type: ignore[no-untyped-def]
    """The nodes of ``node`` outside any subquery it holds (a subquery's aggregates are its own)."""
    for child in node.walk(prune=lambda n: n is not node and isinstance(n, QUERIES)):
        if child is node or not isinstance(child, QUERIES):
            yield child


def own_find(node: exp.Expression, kind: type) -> exp.Expression | None:
    """The first ``kind`` node of ``node`` outside its subqueries, or None."""
    return next((n for n in own_nodes(node) if isinstance(n, kind)), None)


def sql_conjuncts(node: exp.Expression) -> list[exp.Expression]:
    """The parts of a SQL condition joined by AND (parentheses looked through)."""
    if isinstance(node, exp.Paren):
        return sql_conjuncts(node.this)
    if isinstance(node, exp.And):
        return [*sql_conjuncts(node.this), *sql_conjuncts(node.expression)]
    return [node]


def has_query(node: exp.Expression) -> bool:
    """Whether ``node`` holds a subquery (scalar, IN or EXISTS)."""
    return any(isinstance(n, QUERIES) for n in node.walk())


def _literal(node: exp.Literal) -> Literal:
    """A SQL literal. A number with a point and no exponent (``0.06``) is an exact numeric
    literal, DECIMAL(digits, digits after the point), as in the SQL standard, Drill (Calcite),
    Spark and DuckDB; one with an exponent (``6e-2``) is approximate, DOUBLE; one without either
    is BIGINT."""
    if node.is_string:
        return Literal.of(str(node.this))
    text = str(node.this)
    if any(c in text for c in "eE"):
        return Literal.of(float(text))
    if "." in text:
        value = Decimal(text)
        if len(value.as_tuple().digits) <= MAX_DECIMAL_PRECISION:
            return Literal.of(value)
        return Literal.of(float(text))
    return Literal.of(int(text))


_INTERVAL_USE = (
    "INTERVAL is only supported added to or subtracted from a DATE literal "
    "(DATE '1998-12-01' - INTERVAL '90' DAY), in days, months or years"
)


def _add_months(day: dt.date, months: int) -> dt.date:
    """``day`` ``months`` later, the day clamped to the month's last (Jan 31 + 1 month: Feb 28)."""
    index = day.year * 12 + day.month - 1 + months
    year, month = divmod(index, 12)
    last = calendar.monthrange(year, month + 1)[1]
    return dt.date(year, month + 1, min(day.day, last))


_INTERVAL_UNITS: dict[str, Callable[[dt.date, int], dt.date]] = {
    "DAY": lambda day, n: day + dt.timedelta(days=n),
    "WEEK": lambda day, n: day + dt.timedelta(weeks=n),
    "MONTH": _add_months,
    "QUARTER": lambda day, n: _add_months(day, 3 * n),
    "YEAR": lambda day, n: _add_months(day, 12 * n),
}


def _date_literal(value: Expr) -> dt.date | None:
    if (
        isinstance(value, Cast)
        and value.type.minor == MinorType.DATE
        and isinstance(value.expr, Literal)
        and isinstance(value.expr.value, str)
    ):
        try:
            return dt.date.fromisoformat(value.expr.value.strip())
        except ValueError:
            return None
    return None


def _interval(node: exp.Interval) -> tuple[int | None, str | None]:
    """(amount, unit) of ``INTERVAL '90' DAY`` / ``INTERVAL '90' DAY(3)`` / ``INTERVAL '3 month'``."""
    value, unit = node.this, node.args.get("unit")
    text = str(value.this) if isinstance(value, exp.Literal) else ""
    if unit is None and len(text.split()) == 2:
        text, name = text.split()
    elif isinstance(unit, exp.Var):
        name = unit.name
    elif unit is not None:
        name = type(unit).__name__
    else:
        return None, None
    name = name.upper().rstrip("S")
    try:
        return int(text.strip()), name
    except ValueError:
        return None, None


def _negated(node: exp.Expression, test: Expr) -> Expr:
    """``test``, negated where sqlglot marks the predicate ``negate`` (``NOT LIKE``)."""
    return Call("not", (test,)) if node.args.get("negate") else test


def _not_distinct(a: Expr, b: Expr) -> Expr:
    """``a IS NOT DISTINCT FROM b``: equal, or both null; never null."""
    both_null = Call("and", (Call("isnull", (a,)), Call("isnull", (b,))))
    both_set = Call("and", (Call("isnotnull", (a,)), Call("isnotnull", (b,))))
    return Call("or", (both_null, Call("and", (both_set, Call("equal", (a, b))))))


def _chain(name: str, parts: list[Expr]) -> Expr:
    result = parts[0]
    for part in parts[1:]:
        result = Call(name, (result, part))
    return result


def _under(ref: FieldRef, key: FieldRef) -> bool:
    return ref.path[: len(key.path)] == key.path


def _sql_text(node: exp.Expression) -> str:
    return node.sql(dialect="drill")
