"""The one customization surface: how plans, stores and sources become Dagster assets.

Subclass :class:`DrillTranslator` and override what you need, as with dagster-dbt's
``DagsterDbtTranslator``; the defaults need no configuration and read ``drill_project.yaml``.

>>> from dagster import AssetKey
>>> class LakeKeys(DrillTranslator):
...     def get_asset_key(self, store):
...         return super().get_asset_key(store).with_prefix("lake")
>>> LakeKeys().get_asset_key.__qualname__
'LakeKeys.get_asset_key'
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from dagster import (
    AssetKey,
    AssetSpec,
    AutomationCondition,
    BackfillPolicy,
    BetaWarning,
    CodeReferencesMetadataValue,
    DailyPartitionsDefinition,
    HourlyPartitionsDefinition,
    LocalFileCodeReference,
    MetadataValue,
    MonthlyPartitionsDefinition,
    PartitionsDefinition,
    StaticPartitionsDefinition,
    WeeklyPartitionsDefinition,
)

from drill_dagster.plans import DrillPlan, DrillSource, DrillStore, location_parts, safe_name
from drill_dagster.project import PartitionsConfig

_TAG_VALUE = re.compile(r"[^A-Za-z0-9_.-]+")  # what Dagster accepts in a tag value
_TIME_WINDOWS = {
    "hourly": HourlyPartitionsDefinition,
    "daily": DailyPartitionsDefinition,
    "weekly": WeeklyPartitionsDefinition,
    "monthly": MonthlyPartitionsDefinition,
}


class DrillTranslator:
    """Maps plans, stores and sources to asset keys, groups, descriptions, metadata and more.

    Every ``get_*`` method has a default that needs no configuration:

    * asset key: the store's target path (``events_cleaned``, ``a/b`` -> ``a/b``);
    * group: the plan file stem; description: the store's memo, else the plan's;
    * kinds: ``spark`` and the store format; owners and tags: from ``drill_project.yaml``;
    * partitions and automation: from ``drill_project.yaml``;
    * a source's key: the engine root's directory name, then the path (``raw/events``).
    """

    # ------------------------------------------------------------------ stores

    def get_asset_key(self, store: DrillStore) -> AssetKey:
        """The key of a store's asset."""
        configured = store.config.key
        if configured:
            return AssetKey([configured] if isinstance(configured, str) else list(configured))
        parts = location_parts(store.target_path) if store.target_path else ()
        if store.table is not None:
            parts = store.table.parts
        if not parts:
            return AssetKey([store.plan.name, f"store_{safe_name(store.id).lstrip('_')}"])
        return AssetKey([safe_name(p) for p in parts])

    def get_group_name(self, store: DrillStore) -> str | None:
        """The asset group: the plan's ``group`` setting, else the plan file stem."""
        return safe_name(store.plan.config.group) if store.plan.config.group else store.plan.name

    def get_description(self, store: DrillStore) -> str | None:
        """The store's own text (``description`` in ``drill_project.yaml``, else its ``memo``) and
        the plan's description, then what writes it (the generator's info is a tag)."""
        if store.config.description:
            return store.config.description
        parts = [p for p in (store.outline.memo, store.plan.memo) if p]
        written = f"Written by store {store.id} of plan `{store.plan.path.name}`"
        if store.target_path:
            written += f" to `{store.target_path}` ({store.format})"
        if store.table is not None:
            written += f" to table `{store.table.name}` of {store.table.where}"
        return "\n\n".join([*parts, written + "."])

    def get_owners(self, store: DrillStore) -> Sequence[str]:
        return list(store.config.owners or store.plan.config.owners or [])

    def get_tags(self, store: DrillStore) -> Mapping[str, str]:
        """The plan's and store's tags; ``drill/generator``: what generated the plan file."""
        generated = {}
        if store.plan.generator:
            generated["drill/generator"] = _TAG_VALUE.sub("_", store.plan.generator)[:63]
        return {**generated, **(store.plan.config.tags or {}), **(store.config.tags or {})}

    def get_kinds(self, store: DrillStore) -> set[str]:
        """``spark`` and the stored format (``parquet``, ``json``, ``csv``; ``postgres`` for a
        table)."""
        return {"spark", "postgres" if store.format == "table" else store.format}

    def get_metadata(self, store: DrillStore) -> Mapping[str, Any]:
        """Definition metadata: where it is written, the plan file as a code reference."""
        with warnings.catch_warnings():  # code references are a beta API
            warnings.simplefilter("ignore", BetaWarning)
            references = CodeReferencesMetadataValue(
                code_references=[
                    LocalFileCodeReference(file_path=str(store.plan.path), label="logical plan")
                ]
            )
        metadata: dict[str, Any] = {
            "dagster/code_references": references,
            "drill/plan": MetadataValue.path(str(store.plan.path)),
            "drill/store": MetadataValue.md(
                f"```json\n{json.dumps(store.outline.to_dict(), indent=2)}\n```"
            ),
            "drill/format": store.format,
        }
        if store.location is not None:
            metadata["dagster/uri"] = store.location.as_uri()
        if store.target_path:
            metadata["drill/target_path"] = store.target_path
        if store.partition_by:
            metadata["drill/partition_by"] = list(store.partition_by)
        if store.table is not None:
            metadata["dagster/table_name"] = store.table.name
        return {**metadata, **(store.config.metadata or {})}

    def get_automation_condition(self, store: DrillStore) -> AutomationCondition | None:
        """From the plan's ``automation`` setting: eager, on_missing or on_cron."""
        setting = store.plan.config.automation
        if setting is None:
            return None
        if setting == "eager":
            return AutomationCondition.eager()
        if setting == "on_missing":
            return AutomationCondition.on_missing()
        return AutomationCondition.on_cron(setting["on_cron"])

    def get_code_version(self, store: DrillStore) -> str | None:
        """A hash of the operators the store reads from, their storage engines, the plan's
        fixed params and partition settings (:func:`drill_dagster.versions.store_code_version`)."""
        from drill_dagster.versions import store_code_version

        return store_code_version(store)

    def get_freshness_policy(self, store: DrillStore) -> Any:
        """Dagster's ``FreshnessPolicy`` from the store's ``freshness`` setting, else its plan's
        (``drill_project.yaml``); None when neither sets one."""
        config = store.config.freshness or store.plan.config.freshness
        return config.policy() if config is not None else None

    def get_asset_spec(self, store: DrillStore) -> AssetSpec:
        """Everything above as one spec; the deps from the lineage are added by the caller.

        This is the one place that decides a store's asset: override it (or the ``get_*``
        methods it calls) and the key, group and everything else it returns is the asset's,
        and the lineage edges of the plans that read the store follow the key.
        """
        return AssetSpec(
            key=self.get_asset_key(store),
            code_version=self.get_code_version(store),
            description=self.get_description(store),
            metadata=self.get_metadata(store),
            group_name=self.get_group_name(store),
            owners=self.get_owners(store),
            tags=self.get_tags(store),
            kinds=self.get_kinds(store),
            automation_condition=self.get_automation_condition(store),
            partitions_def=self.get_partitions_def(store.plan),
            freshness_policy=self.get_freshness_policy(store),
        )

    # ------------------------------------------------------------------ plans

    def get_partitions_def(self, plan: DrillPlan) -> PartitionsDefinition | None:
        """The plan's partitions (all its stores share them)."""
        config = plan.config.partitions
        return partitions_def_from_config(config) if config is not None else None

    def get_backfill_policy(self, plan: DrillPlan) -> BackfillPolicy | None:
        """One run per backfill (``single_run``) unless ``max_partitions_per_run`` is set."""
        config = plan.config.partitions
        if config is None:
            return None
        if config.max_partitions_per_run:
            return BackfillPolicy.multi_run(config.max_partitions_per_run)
        return BackfillPolicy.single_run()

    def get_op_tags(self, plan: DrillPlan) -> Mapping[str, str]:
        """Tags of every op of the plan's graph."""
        return {"dagster/kind/spark": ""}

    def get_pool(self, plan: DrillPlan) -> str | None:
        """The concurrency pool of every op of the plan's graph (None: no pool)."""
        return None

    # ------------------------------------------------------------------ sources

    def get_source_asset_key(self, source: DrillSource) -> AssetKey:
        """The key of an external source: the root's directory name, then the path."""
        return AssetKey([safe_name(p) for p in source.parts])

    def get_source_spec(self, source: DrillSource) -> AssetSpec:
        """The external asset a source becomes."""
        where = str(source.location) if source.location is not None else source.path
        readers = sorted({f"`{scan.plan.path.name}`" for scan in source.scans})
        metadata: dict[str, Any] = {"drill/path": source.path}
        if source.location is not None:
            metadata["dagster/uri"] = source.location.as_uri()
        kinds = {source.format} if source.format else set()
        if source.table is not None:
            where = f"table {source.table.name} of {source.table.where}"
            metadata = {"dagster/table_name": source.table.name}
            kinds = {"postgres"}
        return AssetSpec(
            key=self.get_source_asset_key(source),
            description=f"Read from `{where}` by {', '.join(readers)}.",
            metadata=metadata,
            group_name="sources",
            kinds=kinds,
        )


def partitions_def_from_config(config: PartitionsConfig) -> PartitionsDefinition:
    """The Dagster partitions of a ``partitions`` setting.

    >>> partitions_def_from_config(PartitionsConfig(static=["eu", "us"])).get_partition_keys()
    ['eu', 'us']
    >>> partitions_def_from_config(PartitionsConfig(daily={"start": "2024-01-01"})).start.day
    1
    """
    if config.static is not None:
        return StaticPartitionsDefinition(list(config.static))
    window = config.window
    assert window is not None
    options: dict[str, Any] = {"start_date": window.start, "end_offset": window.end_offset}
    for name, value in (("end_date", window.end), ("timezone", window.timezone)):
        if value is not None:
            options[name] = value
    if window.fmt is not None:
        options["fmt"] = window.fmt
    return _TIME_WINDOWS[config.kind](**options)
