"""drill-dagster's Dagster integration: plans directories as assets, ops, checks and schedules.

:class:`DrillPlansComponent` (``dg scaffold defs drill_dagster.DrillPlansComponent NAME``) and
``load_definitions("plans")`` are the entry points; :func:`drill_assets` wraps one plan in
code of your own; :class:`DrillTranslator` is the one customization surface.

Names are imported on first use, so ``drill_dagster.cli_scaffold`` (used by the engine's CLI)
loads without importing Dagster.

>>> import drill_dagster
>>> drill_dagster.load_definitions.__module__
'drill_dagster.definitions'
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from drill_dagster.component import DrillPlansComponent
    from drill_dagster.decorator import drill_assets
    from drill_dagster.definitions import definitions_for_project, load_definitions
    from drill_dagster.errors import DrillDefinitionsError, DrillFailure
    from drill_dagster.io_manager import DrillStoreIOManager
    from drill_dagster.keys import asset_key_for_store
    from drill_dagster.pipes import pipes_extras
    from drill_dagster.plans import DrillPlan, DrillProject, DrillScan, DrillSource, DrillStore
    from drill_dagster.project import ProjectConfig
    from drill_dagster.resource import DrillResource, DrillSparkResource
    from drill_dagster.translator import DrillTranslator

_EXPORTS = {
    "DrillPlansComponent": "drill_dagster.component",
    "drill_assets": "drill_dagster.decorator",
    "definitions_for_project": "drill_dagster.definitions",
    "load_definitions": "drill_dagster.definitions",
    "DrillDefinitionsError": "drill_dagster.errors",
    "DrillFailure": "drill_dagster.errors",
    "DrillStoreIOManager": "drill_dagster.io_manager",
    "asset_key_for_store": "drill_dagster.keys",
    "pipes_extras": "drill_dagster.pipes",
    "DrillPlan": "drill_dagster.plans",
    "DrillProject": "drill_dagster.plans",
    "DrillScan": "drill_dagster.plans",
    "DrillSource": "drill_dagster.plans",
    "DrillStore": "drill_dagster.plans",
    "ProjectConfig": "drill_dagster.project",
    "DrillResource": "drill_dagster.resource",
    "DrillSparkResource": "drill_dagster.resource",
    "DrillTranslator": "drill_dagster.translator",
}

__all__ = [
    "DrillDefinitionsError",
    "DrillFailure",
    "DrillPlan",
    "DrillPlansComponent",
    "DrillProject",
    "DrillResource",
    "DrillScan",
    "DrillSource",
    "DrillSparkResource",
    "DrillStore",
    "DrillStoreIOManager",
    "DrillTranslator",
    "ProjectConfig",
    "asset_key_for_store",
    "definitions_for_project",
    "drill_assets",
    "load_definitions",
    "pipes_extras",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'drill_dagster' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
