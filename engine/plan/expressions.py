"""Where operators hold expressions, and the one place they are parsed and checked.

Every operator lists its expressions as :class:`ExpressionSite` values: the JSON path inside the
operator, the text and the context it is evaluated in (``scalar``, ``aggregate`` inside
collapsingaggregate, ``running`` inside runningaggregate).

>>> site = ExpressionSite("expr", "a.x > 3", "scalar")
>>> site.path, site.context
('expr', 'scalar')
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Literal, NamedTuple

if TYPE_CHECKING:
    from engine.expr import Expr

ExpressionContext = Literal["scalar", "aggregate", "running"]


class ExpressionSite(NamedTuple):
    """One expression of an operator: ``path`` is relative to the operator (``projections[0].expr``)."""

    path: str
    text: str
    context: ExpressionContext

    @property
    def parsed(self) -> Expr:
        """The parsed tree; raises :class:`engine.errors.ExpressionSyntaxError` for bad text."""
        return parse_cached(self.text)

    def problems(self) -> list[str]:
        """What :func:`engine.expr.check_expression` finds wrong here (empty when all is well)."""
        return list(_problems_cached(self.text, self.context))


@lru_cache(maxsize=4096)
def parse_cached(text: str) -> Expr:
    """:func:`engine.expr.parse_expression`, memoised: plans repeat the same few expressions."""
    from engine.expr import parse_expression

    return parse_expression(text)


@lru_cache(maxsize=4096)
def _problems_cached(text: str, context: ExpressionContext) -> tuple[str, ...]:
    # The checks depend on the text and the context only; a syntax error is raised, not cached.
    from engine.expr import check_expression

    return tuple(check_expression(parse_cached(text), context))


@lru_cache(maxsize=4096)
def check_field_name(text: str) -> None:
    """Raise :class:`engine.errors.ExpressionSyntaxError` unless ``text`` is a field path such as
    ``output.a`` (memoised: plans name the same fields again and again).

    >>> check_field_name("output.`x y`")
    """
    from engine.expr import parse_field_ref

    parse_field_ref(text)
