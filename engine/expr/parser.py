"""The parser: expression text -> tree, by precedence climbing over the registry's operator table.

>>> tree = parse_expression("a.b[0] + 1 > 2")
>>> tree.name, tree.args[0].name, tree.args[0].args[0].path
('greater_than', 'add', ('a', 'b', 0))
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from functools import lru_cache

from engine.errors import ExpressionSyntaxError
from engine.expr.functions import (
    Associativity,
    OperatorEntry,
    binary_operators,
    lookup_function,
    unary_operators,
)
from engine.expr.nodes import (
    Call,
    Cast,
    Expr,
    FieldRef,
    IfElse,
    Literal,
    Position,
    cast_type,
    decimal_type_of,
)
from engine.expr.tokens import Token, TokenKind, position_at, syntax_error, tokenize
from engine.types import DataMode, MinorType, type_from_name

_BINARY = binary_operators()
_UNARY = unary_operators()
_NEGATE = _UNARY["-"].function
_CAST_CALL = re.compile(r"cast([A-Za-z0-9_]+)\Z", re.IGNORECASE)
_BIGINT_RANGE = range(-(2**63), 2**63)
# Word operators that are also written as calls (`and(a, b)`), so every Call prints and re-parses.
_CALLABLE_KEYWORDS = frozenset(s for s in (*_BINARY, *_UNARY) if s.isalpha())


MAX_DEPTH = 256  # tree levels; every tree walker recurses, so deeper trees would crash them


def _deeper_than(expr: Expr, limit: int) -> Expr | None:
    """The first node below ``limit`` levels of ``expr``, or None (iterative: no recursion)."""
    stack = [(expr, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return node
        stack.extend((child, depth + 1) for child in node.children())
    return None


def parse_expression(text: str) -> Expr:
    """The tree of ``text``; raises ExpressionSyntaxError with the line and column of the fault.

    >>> parse_expression("countDistinct(donuts.type)")
    Call(name='count_distinct', args=(FieldRef(path=('donuts', 'type')),))
    >>> parse_expression("a < b < c")
    Traceback (most recent call last):
    ...
    engine.errors.ExpressionSyntaxError: comparisons do not chain: join two comparisons with &&, as in (x < y) && (y < z) at line 1, column 7
      a < b < c
            ^
    """
    if not isinstance(text, str):
        return _Parser(text).parse()
    if len(text) > MAX_EXPRESSION_CHARS:
        raise syntax_error(
            text,
            MAX_EXPRESSION_CHARS,
            f"the expression is {len(text):,} characters long, over the limit of "
            f"{MAX_EXPRESSION_CHARS:,}: split it (several filters or projections; a long IN "
            "list as a constant joined to the records)",
        )
    return _parse_text(text)


MAX_EXPRESSION_CHARS = 100_000
"""The longest expression text a plan may hold: parsing is linear, but a megabyte takes tens of
seconds in Python, and a plan is untrusted input."""


@lru_cache(maxsize=4096)
def _parse_text(text: str) -> Expr:
    # Trees are immutable and a plan's run parses the same few texts many times (validation,
    # planning rules, operators); errors are raised again, not cached.
    return _Parser(text).parse()


def parse_field_ref(text: str) -> FieldRef:
    """A field path such as ``output.a[0].b``; anything else is an ExpressionSyntaxError.

    >>> parse_field_ref("output.`x y`").path
    ('output', 'x y')
    """
    expr = parse_expression(text)
    if not isinstance(expr, FieldRef):
        raise syntax_error(text, 0, "expected a field reference such as a.b[0].c")
    return expr


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.index = 0

    # ------------------------------------------------------------ helpers

    @property
    def token(self) -> Token:
        return self.tokens[self.index]

    def peek(self, ahead: int = 1) -> Token:
        return self.tokens[min(self.index + ahead, len(self.tokens) - 1)]

    def advance(self) -> Token:
        token = self.token
        if token.kind != TokenKind.END:
            self.index += 1
        return token

    def error(self, message: str, token: Token | None = None) -> ExpressionSyntaxError:
        return syntax_error(self.text, (token or self.token).offset, message)

    def expect_symbol(self, symbol: str, context: str) -> Token:
        if not self.token.is_symbol(symbol):
            raise self.error(f"expected '{symbol}' {context}, found {self.token.describe()}")
        return self.advance()

    def expect_keyword(self, word: str, context: str) -> Token:
        if not self.token.is_keyword(word):
            raise self.error(f"expected '{word}' {context}, found {self.token.describe()}")
        return self.advance()

    def position(self, token: Token) -> Position:
        return position_at(self.text, token.offset)

    # ------------------------------------------------------------ grammar

    def parse(self) -> Expr:
        if self.token.kind == TokenKind.END:
            raise self.error("empty expression")
        try:
            expr = self.expression()
        except RecursionError:
            raise self.error("the expression is nested too deeply") from None
        if self.token.kind != TokenKind.END:
            raise self.error(f"unexpected {self.token.describe()} after the end of the expression")
        deep = _deeper_than(expr, MAX_DEPTH)
        if deep is not None:
            raise syntax_error(
                self.text,
                deep.position.offset if deep.position else 0,
                f"the expression is nested too deeply (more than {MAX_DEPTH} levels)",
            )
        return expr

    def expression(self, min_precedence: int = 0) -> Expr:
        left = self.unary()
        while (entry := self.binary_operator()) is not None:
            op = entry.operator
            if op.precedence < min_precedence:
                break
            token = self.advance()
            stronger = (
                op.precedence if op.associativity == Associativity.RIGHT else op.precedence + 1
            )
            right = self.expression(stronger)
            left = Call(entry.function, (left, right), self.position(token))
            follower = self.binary_operator()
            if (
                op.associativity == Associativity.NONE
                and follower is not None
                and follower.operator.precedence == op.precedence
            ):
                raise self.error(
                    f"comparisons do not chain: join two comparisons with &&, as in "
                    f"(x {token.text} y) && (y {self.token.text} z)"
                )
        return left

    def binary_operator(self) -> OperatorEntry | None:
        token = self.token
        if token.kind == TokenKind.SYMBOL or token.kind == TokenKind.KEYWORD:
            return _BINARY.get(str(token.value))
        return None

    def unary(self) -> Expr:
        token = self.token
        if token.kind not in (TokenKind.SYMBOL, TokenKind.KEYWORD) or token.value not in _UNARY:
            return self.primary()
        if token.kind == TokenKind.KEYWORD and self.peek().is_symbol("("):
            return self.primary()  # not(a): the call form
        self.advance()
        entry = _UNARY[str(token.value)]
        if entry.function == _NEGATE and self.token.kind == TokenKind.NUMBER:
            return self.number(negative_from=token)
        return Call(entry.function, (self.unary(),), self.position(token))

    def primary(self) -> Expr:
        token = self.token
        if token.kind == TokenKind.NUMBER:
            return self.number()
        if token.kind == TokenKind.STRING:
            self.advance()
            return Literal.of(str(token.value), self.position(token))
        if token.kind == TokenKind.KEYWORD:
            return self.keyword_form(token)
        if token.is_symbol("("):
            self.advance()
            inner = self.expression()
            if not self.token.is_symbol(")"):
                opening = self.position(token)
                raise self.error(
                    f"expected ')' to close the '(' at {opening}, found {self.token.describe()}"
                )
            self.advance()
            return inner
        if token.kind == TokenKind.NAME and self.peek().is_symbol("("):
            return self.call()
        if token.kind in (TokenKind.NAME, TokenKind.QUOTED_NAME):
            return self.field_path()
        raise self.error(f"expected an operand, found {token.describe()}")

    def number(self, negative_from: Token | None = None) -> Literal:
        token = self.advance()
        value = token.value
        assert isinstance(value, int | float)
        start = negative_from or token
        if negative_from is not None:
            value = -value
        if isinstance(value, int) and value not in _BIGINT_RANGE:
            raise self.error(f"integer {value} is out of the BIGINT range", start)
        return Literal.of(value, self.position(start))

    def keyword_form(self, token: Token) -> Expr:
        word = token.value
        if word in ("true", "false"):
            self.advance()
            return Literal.of(word == "true", self.position(token))
        if word == "null":
            self.advance()
            return Literal.of(None, self.position(token))
        if word == "if":
            return self.if_form()
        if word == "case":
            return self.case_form()
        if word == "cast":
            return self.cast_form()
        if word in _CALLABLE_KEYWORDS and self.peek().is_symbol("("):
            return self.call()
        raise self.error(f"expected an operand, found {token.describe()}")

    def if_form(self) -> IfElse:
        start = self.advance()
        branches = []
        while True:
            condition = self.expression()
            self.expect_keyword("then", "after the condition of 'if'")
            branches.append((condition, self.expression()))
            if not self.token.is_keyword("elseif"):
                break
            self.advance()
        return IfElse(tuple(branches), self.else_end(start), self.position(start))

    def case_form(self) -> IfElse:
        start = self.advance()
        branches = []
        self.expect_keyword("when", "after 'case'")
        while True:
            condition = self.expression()
            self.expect_keyword("then", "after the condition of 'when'")
            branches.append((condition, self.expression()))
            if not self.token.is_keyword("when"):
                break
            self.advance()
        return IfElse(tuple(branches), self.else_end(start), self.position(start))

    def else_end(self, start: Token) -> Expr:
        """``[else x] end``; a missing ``else`` gives null."""
        otherwise: Expr = Literal.of(None, self.position(start))
        has_else = self.token.is_keyword("else")
        if has_else:
            self.advance()
            otherwise = self.expression()
        if not self.token.is_keyword("end"):
            words = "'end'" if has_else else "'else' or 'end'"
            raise self.error(
                f"expected {words} to close the '{start.text}' at {self.position(start)}, "
                f"found {self.token.describe()}"
            )
        self.advance()
        return otherwise

    def cast_form(self) -> Cast:
        start = self.advance()
        self.expect_symbol("(", "after 'cast'")
        inner = self.expression()
        self.expect_keyword("as", "in cast(x as TYPE)")
        name = self.token
        minor = type_from_name(str(name.value)) if name.kind == TokenKind.NAME else None
        if minor is None:
            raise self.error(f"expected a type name such as BIGINT, found {name.describe()}")
        self.advance()
        sizes: list[int] = []
        if self.token.is_symbol("("):  # VARCHAR(20) (the width is not kept), DECIMAL(10, 2)
            self.advance()
            while self.token.kind == TokenKind.NUMBER or self.token.is_symbol(","):
                if self.token.kind == TokenKind.NUMBER and isinstance(self.token.value, int):
                    sizes.append(self.token.value)
                self.advance()
            self.expect_symbol(")", "after the size of the type")
        self.expect_symbol(")", "to close 'cast('")
        if minor != MinorType.DECIMAL:
            return Cast(inner, cast_type(minor), self.position(start))
        return self.decimal_cast(inner, sizes, start)

    def decimal_cast(self, inner: Expr, sizes: list[int], start: Token) -> Expr:
        """``cast(x as DECIMAL(p, s))``; of a number written as a string, the decimal literal
        (how the printer writes one)."""
        if len(sizes) > 2:
            raise self.error("DECIMAL takes a precision and a scale: DECIMAL(10, 2)", start)
        try:
            target = cast_type(MinorType.DECIMAL, *sizes)
        except ValueError as err:
            raise self.error(str(err), start) from None
        if isinstance(inner, Literal) and isinstance(inner.value, str):
            try:
                value = Decimal(inner.value)
            except InvalidOperation:
                value = None
            if value is not None and value.is_finite() and decimal_type_of(value) == target:
                return Literal(value, target.with_mode(DataMode.REQUIRED), self.position(start))
        return Cast(inner, target, self.position(start))

    def call(self) -> Expr:
        name_token = self.advance()
        opening = self.advance()
        args: list[Expr] = []
        if not self.token.is_symbol(")"):
            args.append(self.expression())
            while self.token.is_symbol(","):
                self.advance()
                args.append(self.expression())
        if not self.token.is_symbol(")"):
            raise self.error(
                f"expected ',' or ')' in the call of {name_token.text} opened at "
                f"{self.position(opening)}, found {self.token.describe()}"
            )
        self.advance()
        name = name_token.text
        position = self.position(name_token)
        if (match := _CAST_CALL.match(name)) and (minor := type_from_name(match[1])) is not None:
            if len(args) != 1:
                raise self.error(f"{name}(x) takes one argument, got {len(args)}", name_token)
            return Cast(args[0], cast_type(minor), position)
        spec = lookup_function(name)
        return Call(spec.name if spec else name, tuple(args), position)

    def field_path(self) -> FieldRef:
        first = self.advance()
        path: list[str | int] = [str(first.value)]
        while True:
            if self.token.is_symbol("."):
                self.advance()
                segment = self.token
                if segment.kind == TokenKind.KEYWORD:
                    raise self.error(
                        f"'{segment.text}' is a keyword; write `{segment.text}` for a field of "
                        "that name"
                    )
                if segment.kind not in (TokenKind.NAME, TokenKind.QUOTED_NAME):
                    raise self.error(f"expected a field name after '.', found {segment.describe()}")
                self.advance()
                path.append(str(segment.value))
            elif self.token.is_symbol("["):
                self.advance()
                index = self.token
                if index.kind != TokenKind.NUMBER or not isinstance(index.value, int):
                    raise self.error(f"expected a list index such as [0], found {index.describe()}")
                self.advance()
                self.expect_symbol("]", "after the list index")
                path.append(index.value)
            elif self.token.is_symbol("(") and len(path) > 1:
                raise self.error(
                    f"'{FieldRef(tuple(path))}' is a field path; only a function is called"
                )
            else:
                return FieldRef(tuple(path), self.position(first))
