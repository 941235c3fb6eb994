"""The IO manager of store assets: the store wrote the data; downstream Python assets load it.

``handle_output`` writes nothing (the store op has committed its files). ``load_input`` reads the
store target as a Spark DataFrame with Spark's own reader for the stored format, through the
target's current version (so a concurrent store cannot change it under the reader). Partition
directories (``day=2024-01-02``) come back as columns.

>>> from dagster import asset, AssetIn
>>> @asset(ins={"events": AssetIn(key="events_cleaned")})
... def purchases(events):  # a Spark DataFrame
...     return events.filter("kind = 'purchase'")
"""

from __future__ import annotations

import os
from typing import Any

from dagster import ConfigurableIOManager, InputContext, OutputContext

from drill_dagster.errors import DrillFailure
from drill_dagster.resource import DrillSparkResource


class DrillStoreIOManager(ConfigurableIOManager):
    """Loads store assets as Spark DataFrames; writing is the store op's job."""

    spark: DrillSparkResource

    def handle_output(self, context: OutputContext, obj: Any) -> None:
        return None

    def load_input(self, context: InputContext) -> Any:
        metadata = _asset_metadata(context)
        uri = _plain(metadata.get("dagster/uri"))
        if not isinstance(uri, str) or not uri.startswith("file:"):
            key = context.asset_key.to_user_string() if context.has_asset_key else "the input"
            raise DrillFailure(
                description=f"{key} is not stored in a file system; it cannot be loaded"
            )
        from urllib.parse import unquote, urlsplit

        location = os.path.realpath(unquote(urlsplit(uri).path))
        fmt = str(_plain(metadata.get("drill/format")) or "parquet")
        reader = self.spark.spark_session.read
        if fmt == "csv":
            return reader.option("header", "true").option("inferSchema", "true").csv(location)
        if fmt == "json":
            return reader.json(location)
        return reader.parquet(location)


def _asset_metadata(context: InputContext) -> dict[str, Any]:
    upstream = context.upstream_output
    metadata: dict[str, Any] = {}
    if upstream is not None:
        metadata.update(upstream.definition_metadata or {})
    if context.has_asset_key and "dagster/uri" not in metadata:
        node = context.instance.get_latest_materialization_event(context.asset_key)
        if node is not None and node.asset_materialization is not None:
            metadata.update(node.asset_materialization.metadata)
    return metadata


def _plain(value: Any) -> Any:
    return getattr(value, "value", value)
