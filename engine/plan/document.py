"""The plan document around the operators: ``head`` and the storage engines.

>>> Head.model_validate({"type": "apache_drill_logical_plan", "version": "1"}).type
'apache_drill_logical_plan'
>>> StorageConfig.model_validate({"type": "fs", "root": "file:///"}).extra()
{'root': 'file:///'}
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, ConfigDict, Field

from engine.plan.parts import PLAN_MODEL_CONFIG, PlanModel

PLAN_TYPES = ("APACHE_DRILL_LOGICAL", "apache_drill_logical_plan")
"""``head.type`` values: the final one, and the older one (compared case-insensitively)."""


def _plan_type(value: str) -> str:
    if value.lower() not in {t.lower() for t in PLAN_TYPES}:
        raise ValueError(f"head type '{value}' is not a logical plan: use 'APACHE_DRILL_LOGICAL'")
    return value


class Generator(PlanModel):
    """Who wrote the plan (``manual``, ``optiq``, ...) and a free-form note."""

    type: str = "manual"
    info: str = ""


class Head(PlanModel):
    """``head``: the document type and version, and the generator."""

    type: Annotated[str, AfterValidator(_plan_type)] = "APACHE_DRILL_LOGICAL"
    version: int | str = 1
    generator: Generator = Field(default_factory=Generator)


class StorageConfig(PlanModel):
    """One storage engine: its ``type`` and whatever settings that type takes (kept as written)."""

    model_config = ConfigDict(**{**PLAN_MODEL_CONFIG, "extra": "allow"})

    type: str = Field(min_length=1)

    def extra(self) -> dict[str, Any]:
        """The engine's settings other than ``type`` (``root``, ``encoding``, ...)."""
        return dict(self.__pydantic_extra__ or {})

    def to_dict(self) -> dict[str, Any]:
        """The engine as plan JSON."""
        return {"type": self.type, **self.extra()}
