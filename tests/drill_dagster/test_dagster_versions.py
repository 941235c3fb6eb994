"""Code versions from the plan, data versions from the store's commits, and skip_unchanged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dagster import AssetKey, DagsterInstance, Definitions
from dagster._core.storage.tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
)
from dagster_runs import materialize_ok

from drill_dagster import load_definitions

Kit = Any
CLEAN, ENRICHED, TOTALS = AssetKey("clean"), AssetKey("enriched"), AssetKey("totals")
RANGE = {ASSET_PARTITION_RANGE_START_TAG: "2024-01-01", ASSET_PARTITION_RANGE_END_TAG: "2024-01-03"}


def _versions(defs: Definitions) -> dict[AssetKey, str | None]:
    graph = defs.resolve_asset_graph()
    return {key: graph.get(key).code_version for key in (CLEAN, ENRICHED, TOTALS)}


def _load(root: Path, kit: Kit, split: dict[str, Any], *, indent: int | None = 1) -> Definitions:
    plans_dir = kit.write(root, plans={"clean": kit.CLEAN})
    (plans_dir / "split.json").write_text(json.dumps(split, indent=indent))
    return load_definitions(plans_dir, executor="local")


def test_a_code_version_changes_with_what_determines_the_data(tmp_path: Path, kit: Kit) -> None:
    base = _versions(_load(tmp_path / "a", kit, kit.SPLIT))
    assert all(v and len(v) == 16 for v in base.values())
    # Reformatted, keys reordered, a memo added: the same code versions.
    reordered = kit.copy(kit.SPLIT)
    reordered["query"] = [dict(reversed(list(op.items()))) for op in reordered["query"]]
    reordered["query"][0]["memo"] = "the cleaned events"
    assert _versions(_load(tmp_path / "b", kit, reordered, indent=None)) == base
    # A changed aggregate changes the store that reads it, not its sibling.
    changed = kit.copy(kit.SPLIT)
    changed["query"][5]["aggregations"][1]["expr"] = "max(c.amount)"
    versions = _versions(_load(tmp_path / "c", kit, changed))
    assert versions[TOTALS] != base[TOTALS]
    assert versions[ENRICHED] == base[ENRICHED] and versions[CLEAN] == base[CLEAN]
    # A changed upstream filter of clean changes clean's.
    plans_dir = kit.write(tmp_path / "d")
    plan = kit.copy(kit.CLEAN)
    plan["query"][1]["expr"] = "e.amount > 1"
    (plans_dir / "clean.json").write_text(json.dumps(plan))
    assert _versions(load_definitions(plans_dir))[CLEAN] != base[CLEAN]


def test_each_materialization_carries_a_new_data_version_and_the_code_version(
    plans_dir: Path,
) -> None:
    defs = load_definitions(plans_dir, executor="local")
    instance = DagsterInstance.ephemeral()
    materialize_ok(defs, instance, "clean", tags=RANGE)
    seen = []
    for _ in range(2):
        result = materialize_ok(defs, instance, "totals")
        (event,) = result.get_asset_materialization_events()
        tags = event.materialization.tags
        assert tags["dagster/code_version"] == _versions(defs)[TOTALS]
        seen.append(tags["dagster/data_version"])
    assert len(set(seen)) == 2  # each write is a new version of the data


def test_skip_unchanged_skips_a_store_whose_code_and_inputs_did_not_change(
    tmp_path: Path, kit: Kit
) -> None:
    yaml_text = kit.PROJECT_YAML.replace("defaults:\n", "defaults:\n  skip_unchanged: true\n")
    plans_dir = kit.write(tmp_path, project_yaml=yaml_text)
    defs = load_definitions(plans_dir, executor="local")
    instance = DagsterInstance.ephemeral()
    lake = plans_dir.parent / "data" / "lake"
    materialize_ok(defs, instance, "clean", partition_key="2024-01-01")
    first = materialize_ok(defs, instance, "totals")
    assert len(first.get_asset_materialization_events()) == 1
    files = sorted(p.name for p in lake.rglob("*"))

    again = materialize_ok(defs, instance, "totals")
    assert again.get_asset_materialization_events() == []
    assert sorted(p.name for p in lake.rglob("*")) == files  # nothing written
    messages = [e.user_message for e in instance.all_logs(again.run_id)]
    assert any("skipped (skip_unchanged)" in m for m in messages), messages

    # Clean's partition is unchanged too: skipped; another partition is written.
    skipped = materialize_ok(defs, instance, "clean", partition_key="2024-01-01")
    assert skipped.get_asset_materialization_events() == []
    materialize_ok(defs, instance, "clean", partition_key="2024-01-02")
    # Its input changed (a new partition of clean): the store runs.
    third = materialize_ok(defs, instance, "totals")
    assert len(third.get_asset_materialization_events()) == 1
