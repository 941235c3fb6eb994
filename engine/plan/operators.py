"""One pydantic model per logical operator of seed 000, discriminated on ``op``.

Ids and references are strings (``1`` is read as ``"1"``); ``storageEngine`` and ``storage_engine``
are read as ``storageengine``, flatten's ``name`` as ``ref``. A dump (:meth:`Operator.to_dict`)
writes the seed's spelling and leaves out what the author left out.

>>> f = Filter.model_validate({"@id": 2, "op": "filter", "input": 1, "expr": "a.x > 3"})
>>> f.id, f.input_ids(), f.to_dict()
('2', ['1'], {'@id': '2', 'op': 'filter', 'input': '1', 'expr': 'a.x > 3'})
"""

from __future__ import annotations

import enum
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AliasChoices,
    BeforeValidator,
    ConfigDict,
    Field,
    WithJsonSchema,
    model_validator,
)

from engine.plan.expressions import ExpressionContext, ExpressionSite
from engine.plan.ids import OpId, is_generated_id
from engine.plan.parts import (
    PLAN_MODEL_CONFIG,
    Expression,
    JoinCondition,
    Name,
    NamedExpression,
    Ordering,
    PlanModel,
    Projection,
    WindowRef,
    empty_list,
    keyword_schema,
)


class OperatorKind(enum.StrEnum):
    """Seed 000's operator classes: 0 (source), 1 (single input), M (multi input), K (sink)."""

    SOURCE = "source"
    SINGLE_INPUT = "single-input"
    MULTI_INPUT = "multi-input"
    SINK = "sink"


_SPELLINGS = {"storageengine": ("storageEngine",), "ref": ("name",)}


def _operator_schema(schema: dict[str, Any]) -> None:
    # In a document `@id` may be omitted (sinks, sequence members) and `op` always names the operator.
    required = [name for name in schema.get("required", []) if name not in ("@id", "op")]
    properties = schema.get("properties", {})
    for key, others in _SPELLINGS.items():
        # Upstream plans also write `storageEngine`, and flatten's `name`: let editors accept them.
        if key not in properties or (key == "ref" and schema.get("title") != "Flatten"):
            continue
        for other in others:
            properties[other] = {**properties[key], "description": f"Another spelling of '{key}'."}
        if key in required:
            required.remove(key)
            schema["anyOf"] = [{"required": [spelling]} for spelling in (key, *others)]
    schema["required"] = ["op", *required]


def _storage_engine_field() -> Any:
    return Field(
        validation_alias=AliasChoices("storageengine", "storageEngine", "storage_engine"),
        serialization_alias="storageengine",
        min_length=1,
    )


_INPUT_KEYS = ("input", "left", "right", "inputs")


class Operator(PlanModel):
    """Fields every operator has: ``@id`` and an optional ``memo``."""

    model_config = ConfigDict(**PLAN_MODEL_CONFIG, json_schema_extra=_operator_schema)

    kind: ClassVar[OperatorKind]
    op: str
    id: OpId = Field(validation_alias=AliasChoices("@id", "id"), serialization_alias="@id")
    memo: str | None = None

    def input_ids(self) -> list[str]:
        """The ids of the operators this one reads from, in order (left before right)."""
        return []

    def expressions(self) -> list[ExpressionSite]:
        """Every expression of this operator, with its path and evaluation context."""
        return []

    def names(self) -> list[tuple[str, str]]:
        """Every field name this operator writes or reads by name, as (path suffix, name)."""
        return []

    @property
    def has_generated_id(self) -> bool:
        """True when the plan gave no ``@id`` and the parser made one up."""
        return is_generated_id(self.id)

    def to_dict(self) -> dict[str, Any]:
        """The operator as plan JSON: ``@id`` and ``op`` first, then what the author wrote."""
        body = self.model_dump(mode="json", by_alias=True, exclude_unset=True)
        return ordered_operator_dict(self.id, self.op, body)


def ordered_operator_dict(op_id: str, kind: str, body: dict[str, Any]) -> dict[str, Any]:
    """An operator's JSON fields (``body``, pydantic's JSON of what the author wrote) in plan
    order: ``@id`` and ``op`` first, then its inputs, the rest, and its ``memo`` last.

    >>> ordered_operator_dict("2", "filter", {"memo": "m", "expr": "a", "input": "1"})
    {'@id': '2', 'op': 'filter', 'input': '1', 'expr': 'a', 'memo': 'm'}
    """
    head = {"@id": op_id, "op": kind}
    head.update({key: body[key] for key in _INPUT_KEYS if key in body})
    tail = {key: body[key] for key in ("memo",) if key in body}
    rest = {key: value for key, value in body.items() if key not in (*head, *tail)}
    return {**head, **rest, **tail}


def _sites(
    prefix: str, named: list[NamedExpression], context: ExpressionContext
) -> list[ExpressionSite]:
    return [ExpressionSite(f"{prefix}[{i}].expr", n.expr, context) for i, n in enumerate(named)]


def _refs(prefix: str, named: list[NamedExpression]) -> list[tuple[str, str]]:
    return [(f"{prefix}[{i}].ref", n.ref) for i, n in enumerate(named)]


def _optional(key: str, name: str | None) -> list[tuple[str, str]]:
    return [(key, name)] if name is not None else []


class SingleInputOperator(Operator):
    """An operator reading one input. ``input`` is absent only inside a sequence (the † rule)."""

    kind: ClassVar[OperatorKind] = OperatorKind.SINGLE_INPUT
    input: OpId | None = None

    def input_ids(self) -> list[str]:
        return [self.input] if self.input is not None else []


class Scan(Operator):
    """Reads ``selection`` from a storage engine; every record is held under ``ref``.

    The planner (:mod:`engine.planner`) may add what it pushed into the scan; a plan may also say
    it: ``projection`` (the record's top-level members to read; absent: all of them),
    ``pushedFilter`` (only records where this expression is true are read) and ``pushedLimit``
    (at most this many records, the first in scan order).
    """

    kind: ClassVar[OperatorKind] = OperatorKind.SOURCE
    op: Literal["scan"] = "scan"
    storage_engine: str = _storage_engine_field()
    selection: dict[str, Any] | None = None
    ref: Name | None
    projection: list[Name] | None = None
    pushed_filter: Expression | None = Field(
        default=None,
        validation_alias=AliasChoices("pushedFilter", "pushed_filter"),
        serialization_alias="pushedFilter",
    )
    pushed_limit: int | None = Field(
        default=None,
        ge=0,
        validation_alias=AliasChoices("pushedLimit", "pushed_limit"),
        serialization_alias="pushedLimit",
    )

    def expressions(self) -> list[ExpressionSite]:
        if self.pushed_filter is None:
            return []
        return [ExpressionSite("pushedFilter", self.pushed_filter, "scalar")]

    def names(self) -> list[tuple[str, str]]:
        return [("ref", self.ref)] if self.ref is not None else []


class Constant(Operator):
    """Emits each object of ``content`` as a record (SQL ``VALUES``)."""

    kind: ClassVar[OperatorKind] = OperatorKind.SOURCE
    op: Literal["constant"] = "constant"
    content: list[dict[str, Any]]


def _join_type(value: Any) -> Any:
    value = _lower_if_str(value)
    if value == "right":
        raise ValueError(
            "join type 'right' is not supported: swap 'left' and 'right' and use 'left'"
        )
    return value


def _lower_if_str(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


class Join(Operator):
    """Joins ``left`` and ``right`` where all ``conditions`` hold; no condition is a cartesian join."""

    kind: ClassVar[OperatorKind] = OperatorKind.MULTI_INPUT
    op: Literal["join"] = "join"
    left: OpId
    right: OpId
    type: Annotated[
        Literal["inner", "left", "outer"],
        BeforeValidator(_join_type),
        keyword_schema("inner", "left", "outer"),
    ] = "inner"
    conditions: list[JoinCondition] = Field(default_factory=empty_list)

    def input_ids(self) -> list[str]:
        return [self.left, self.right]

    def expressions(self) -> list[ExpressionSite]:
        sites: list[ExpressionSite] = []
        for i, condition in enumerate(self.conditions):
            sites.append(ExpressionSite(f"conditions[{i}].left", condition.left, "scalar"))
            sites.append(ExpressionSite(f"conditions[{i}].right", condition.right, "scalar"))
        return sites


class Union(Operator):
    """Concatenates ``inputs`` in order; ``distinct`` removes duplicate records."""

    kind: ClassVar[OperatorKind] = OperatorKind.MULTI_INPUT
    op: Literal["union"] = "union"
    distinct: bool = False
    inputs: list[OpId] = Field(min_length=1)

    def input_ids(self) -> list[str]:
        return list(self.inputs)


class Store(SingleInputOperator):
    """Writes its input to ``target`` of a storage engine (a sink)."""

    kind: ClassVar[OperatorKind] = OperatorKind.SINK
    op: Literal["store"] = "store"
    storage_engine: str = _storage_engine_field()
    target: dict[str, Any] | None
    partition: dict[str, Any] | None = None


class Project(SingleInputOperator):
    """Keeps only the projected values; every ``ref`` lies under ``output``."""

    op: Literal["project"] = "project"
    projections: list[Projection] = Field(min_length=1)

    def expressions(self) -> list[ExpressionSite]:
        return _sites("projections", list(self.projections), "scalar")

    def names(self) -> list[tuple[str, str]]:
        return _refs("projections", list(self.projections))


class Order(SingleInputOperator):
    """Sorts by ``orderings``, within each segment when ``within`` is given. Records that tie
    keep their input order unless ``stable`` is false (SQL's ``ORDER BY``, which leaves ties in
    any order): then the executors need not number the records to break ties."""

    op: Literal["order"] = "order"
    within: Name | None = None
    orderings: list[Ordering] = Field(min_length=1)
    stable: bool = Field(
        True,
        description="Whether records that tie keep their input order (the default); false "
        "leaves them in any order, as SQL's ORDER BY does, which saves numbering the records.",
    )

    def expressions(self) -> list[ExpressionSite]:
        return [
            ExpressionSite(f"orderings[{i}].expr", o.expr, "scalar")
            for i, o in enumerate(self.orderings)
        ]

    def names(self) -> list[tuple[str, str]]:
        return _optional("within", self.within)


class Filter(SingleInputOperator):
    """Keeps the records where ``expr`` is true."""

    op: Literal["filter"] = "filter"
    expr: Expression

    def expressions(self) -> list[ExpressionSite]:
        return [ExpressionSite("expr", self.expr, "scalar")]


class Transform(SingleInputOperator):
    """Writes each ``transforms[i].expr`` at its ``ref``, keeping the rest of the record."""

    op: Literal["transform"] = "transform"
    transforms: list[NamedExpression] = Field(min_length=1)

    def expressions(self) -> list[ExpressionSite]:
        return _sites("transforms", list(self.transforms), "scalar")

    def names(self) -> list[tuple[str, str]]:
        return _refs("transforms", list(self.transforms))


class Limit(SingleInputOperator):
    """Keeps records with 0-based index ``first <= i < last``; no ``last`` means no upper bound."""

    op: Literal["limit"] = "limit"
    first: int = Field(default=0, ge=0)
    last: int | None = Field(default=None, ge=0)


class Segment(SingleInputOperator):
    """Groups records with equal ``exprs`` and writes the segment key at ``ref``."""

    op: Literal["segment"] = "segment"
    ref: Name
    exprs: list[Expression] = Field(default_factory=empty_list)

    def expressions(self) -> list[ExpressionSite]:
        return [ExpressionSite(f"exprs[{i}]", text, "scalar") for i, text in enumerate(self.exprs)]

    def names(self) -> list[tuple[str, str]]:
        return [("ref", self.ref)]


class WindowFrame(SingleInputOperator):
    """One window per record, from ``start`` to ``end`` relative to it (a missing side is unbounded)."""

    op: Literal["windowframe"] = "windowframe"
    within: Name | None = None
    start: int | None = None
    end: int | None = None
    ref: WindowRef | None = None

    @model_validator(mode="after")
    def _bounds(self) -> WindowFrame:
        if self.start is None and self.end is None:
            raise ValueError(
                "windowframe needs 'start', 'end' or both (a missing side is unbounded)"
            )
        if self.start is not None and self.end is not None and self.start > self.end:
            raise ValueError(
                f"windowframe start ({self.start}) must be less than or equal to end ({self.end})"
            )
        return self

    def names(self) -> list[tuple[str, str]]:
        named = _optional("within", self.within)
        if self.ref is not None:
            named += [("ref.segment", self.ref.segment), ("ref.position", self.ref.position)]
        return named

    @property
    def segment_ref(self) -> str:
        """Where the window number is written (``ref.segment`` by default)."""
        return (self.ref or WindowRef()).segment

    @property
    def position_ref(self) -> str:
        """Where the position inside the window is written (``ref.position`` by default)."""
        return (self.ref or WindowRef()).position


class CollapsingAggregate(SingleInputOperator):
    """Collapses each segment (``within``) into one record of aggregations and carryovers."""

    op: Literal["collapsingaggregate"] = "collapsingaggregate"
    within: Name | None = None
    target: Name | None = None
    carryovers: list[Name] = Field(default_factory=empty_list)
    aggregations: list[NamedExpression]

    def expressions(self) -> list[ExpressionSite]:
        return _sites("aggregations", list(self.aggregations), "aggregate")

    def names(self) -> list[tuple[str, str]]:
        named = _optional("within", self.within) + _optional("target", self.target)
        named += [(f"carryovers[{i}]", name) for i, name in enumerate(self.carryovers)]
        return named + _refs("aggregations", list(self.aggregations))


class RunningAggregate(SingleInputOperator):
    """Appends running aggregations to every record; they restart when ``within`` changes."""

    op: Literal["runningaggregate"] = "runningaggregate"
    within: Name | None = None
    aggregations: list[NamedExpression] = Field(min_length=1)

    def expressions(self) -> list[ExpressionSite]:
        return _sites("aggregations", list(self.aggregations), "running")

    def names(self) -> list[tuple[str, str]]:
        return _optional("within", self.within) + _refs("aggregations", list(self.aggregations))


class Flatten(SingleInputOperator):
    """One record per element of an array ``expr`` (one for a scalar or map), value at ``ref``."""

    op: Literal["flatten"] = "flatten"
    ref: Name = Field(validation_alias=AliasChoices("ref", "name"))
    expr: Expression
    drop: Annotated[bool, WithJsonSchema({"anyOf": [{"type": "boolean"}, {"enum": [0, 1]}]})] = (
        False
    )

    def expressions(self) -> list[ExpressionSite]:
        return [ExpressionSite("expr", self.expr, "scalar")]

    def names(self) -> list[tuple[str, str]]:
        return [("ref", self.ref)]


AnyOperator = Annotated[
    Scan
    | Constant
    | Join
    | Union
    | Store
    | Project
    | Order
    | Filter
    | Transform
    | Limit
    | Segment
    | WindowFrame
    | CollapsingAggregate
    | RunningAggregate
    | Flatten,
    Field(discriminator="op"),
]
"""Any operator of an expanded plan (a sequence is expanded away)."""


class Sequence(PlanModel):
    """A non-branching chain: ``input`` feeds the first of ``do``, ``@id`` names the last.

    Operators inside a sequence take no ``@id`` or ``input`` of their own (seed 000's † rule). The
    parser expands sequences; this model documents the form for the JSON Schema.
    """

    model_config = ConfigDict(**PLAN_MODEL_CONFIG, json_schema_extra=_operator_schema)

    op: Literal["sequence"] = "sequence"
    id: OpId | None = Field(
        default=None, validation_alias=AliasChoices("@id", "id"), serialization_alias="@id"
    )
    memo: str | None = None
    input: OpId | None = None
    do: list[AnyOperator] = Field(min_length=1)


OPERATORS: dict[str, type[Operator]] = {
    cls.model_fields["op"].default: cls
    for cls in (
        Scan,
        Constant,
        Join,
        Union,
        Store,
        Project,
        Order,
        Filter,
        Transform,
        Limit,
        Segment,
        WindowFrame,
        CollapsingAggregate,
        RunningAggregate,
        Flatten,
    )
}
"""Operator classes by their lower-case ``op`` name."""

OP_NAMES: tuple[str, ...] = (*OPERATORS, "sequence")
"""Every ``op`` a plan may use."""
