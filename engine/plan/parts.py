"""The pieces operators are built from: named expressions, orderings, join conditions, window refs.

Expressions are kept as the text the plan author wrote, so a dumped plan reads like its source; the
validator parses them (see :mod:`engine.plan.expressions`).

>>> Ordering.model_validate({"order": "DESC", "expr": "a.b"})
Ordering(order='desc', expr='a.b', null_collation='first')
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    WithJsonSchema,
    field_validator,
)

from engine.plan.expressions import parse_cached

if TYPE_CHECKING:
    from engine.expr import Expr

PLAN_MODEL_CONFIG = ConfigDict(
    defer_build=True,  # a model's validator is built when first used: a plan builds only its own
    extra="forbid",
    field_title_generator=lambda name, info: info.serialization_alias or name,
    frozen=True,
    validate_by_name=True,
    validate_by_alias=True,
    serialize_by_alias=True,
)


def _lower(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


Lowercase = BeforeValidator(_lower)
"""Keywords such as ``DESC`` or ``Inner`` are case-insensitive; the model keeps them in lower case."""


def keyword_schema(*words: str) -> WithJsonSchema:
    """The JSON Schema of a case-insensitive keyword: its lower- and upper-case spellings."""
    return WithJsonSchema({"enum": [*words, *(w.upper() for w in words)]})


def empty_list() -> list[Any]:
    """A list field's ``default_factory``.

    A Python function rather than ``list``: pydantic reads a factory's signature, and a builtin's
    is parsed with the tokenizer, whose regular expressions take milliseconds to compile at startup.
    """
    return []


Name = Annotated[str, Field(min_length=1)]
"""A field path naming an output field (``donuts.typeCount``); not parsed as an expression."""

Expression = Annotated[str, Field(min_length=1)]
"""Expression text, parsed during validation."""


class PlanModel(BaseModel):
    """Base of every plan model: unknown keys are errors, instances are immutable."""

    model_config = PLAN_MODEL_CONFIG


class NamedExpression(PlanModel):
    """``{ref: <name>, expr: <expr>}``: the value of ``expr`` written at ``ref``.

    >>> NamedExpression(ref="q", expr="a.b * 2").parsed.name
    'multiply'
    """

    ref: Name
    expr: Expression

    @property
    def parsed(self) -> Expr:
        """The parsed ``expr`` (memoised); the plan validator has already checked it."""
        return parse_cached(self.expr)


class Projection(NamedExpression):
    """A project's named expression: its ``ref`` must be ``output`` or lie under ``output.``."""

    @field_validator("ref")
    @classmethod
    def _ref_under_output(cls, ref: str) -> str:
        if ref != "output" and not ref.startswith("output."):
            raise ValueError(
                f"project ref '{ref}' must be 'output' or start with 'output.' "
                f"(for example 'output.{ref}')"
            )
        return ref


class Ordering(PlanModel):
    """``{order: asc|desc, expr, nullCollation: first|last}``; nulls go first unless told otherwise."""

    order: Annotated[Literal["asc", "desc"], Lowercase, keyword_schema("asc", "desc")] = "asc"
    expr: Expression
    null_collation: Annotated[
        Literal["first", "last"], Lowercase, keyword_schema("first", "last")
    ] = Field(
        default="first",
        validation_alias=AliasChoices("nullCollation", "null_collation"),
        serialization_alias="nullCollation",
    )


Relationship = Literal["==", "!=", "<", "<=", ">", ">="]


class JoinCondition(PlanModel):
    """``left`` is evaluated on the left record and ``right`` on the right one (R-JOIN-AND)."""

    relationship: Relationship
    left: Expression
    right: Expression


class WindowRef(PlanModel):
    """Where windowframe writes the window number and the position inside the window."""

    segment: Name = "ref.segment"
    position: Name = "ref.position"
