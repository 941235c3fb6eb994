"""The JSON Schema of the plan format, so editors can complete and check plans.

The repository commits it as ``plan.schema.json``; regenerate it with
``python -m engine.plan.schema > plan.schema.json``.

>>> schema = plan_json_schema()
>>> sorted(schema["properties"])
['engines', 'head', 'query', 'storage']
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from engine.plan.document import Head, StorageConfig
from engine.plan.operators import (
    CollapsingAggregate,
    Constant,
    Filter,
    Flatten,
    Join,
    Limit,
    Order,
    Project,
    RunningAggregate,
    Scan,
    Segment,
    Sequence,
    Store,
    Transform,
    Union,
    WindowFrame,
)

SCHEMA_ID = "https://drill-dagster.dev/plan.schema.json"

DocumentOperator = Annotated[
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
    | Flatten
    | Sequence,
    Field(discriminator="op"),
]


class NamedStorageConfig(StorageConfig):
    """A storage engine in the older list form: ``{type, name, ...}``."""

    name: str = Field(min_length=1)


class PlanDocument(BaseModel):
    """A Drill logical plan (seed 000): ``head``, the storage engines and the ``query`` operators."""

    model_config = ConfigDict(extra="forbid", title="Drill logical plan")

    head: Head = Field(default_factory=Head)
    storage: dict[str, StorageConfig] | list[NamedStorageConfig] = Field(
        default_factory=dict,
        description="Storage engines by name (the older list form [{type, name, ...}] is accepted too).",
    )
    engines: dict[str, StorageConfig] | None = Field(
        default=None, description="Seed 000's name for 'storage'; give one of the two."
    )
    query: list[DocumentOperator] = Field(
        description="The operators. Ids and references may be numbers or strings; sequences chain operators."
    )


def plan_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a plan document, discriminated on ``op``."""
    schema = PlanDocument.model_json_schema(by_alias=True, mode="validation")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        **_for_editors(schema),
    }


def _for_editors(node: Any) -> Any:
    """Descriptions come from docstrings: keep their prose, drop the doctest examples and RST quoting."""
    if isinstance(node, list):
        return [_for_editors(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _for_editors(value) for key, value in node.items()}
    if isinstance(out.get("description"), str):
        prose = out["description"].split(">>>", 1)[0]
        out["description"] = " ".join(prose.replace("``", "`").split())
    return out
