"""DrillPlansComponent: defs.yaml attributes, translation, select/exclude, freshness, keys."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from dagster import AssetKey, DagsterInstance, FreshnessPolicy, materialize
from dagster.components import build_defs_for_component

from drill_dagster import DrillPlansComponent, DrillTranslator, asset_key_for_store
from drill_dagster.errors import DrillDefinitionsError
from drill_dagster.resource import default_resources


def _component(folder: Path, attributes: dict) -> DrillPlansComponent:
    """The component of these defs.yaml attributes (resolved as dg does; the paths made absolute
    here: their resolution relative to defs.yaml is tested through dg in test_dagster_dg.py)."""
    attributes = {**attributes, "plans_dir": str(folder / attributes["plans_dir"])}
    return DrillPlansComponent.resolve_from_dict(attributes)


def _specs(defs) -> dict[str, object]:
    return {
        spec.key.to_user_string(): spec
        for assets in defs.assets
        for spec in getattr(assets, "specs", [assets])
    }


def test_translation_changes_keys_everywhere_and_op_settings_reach_every_op(
    tmp_path: Path, kit
) -> None:
    folder = tmp_path / "defs" / "lake"
    kit.write(folder)
    component = _component(
        folder,
        {
            "plans_dir": "plans",
            "translation": {
                "key": "lake/{{ spec.key.to_user_string() }}",
                "group_name": "g_{{ plan.name }}",
                "tags": {"store_format": "{{ store.format }}"},
            },
            "op": {"tags": {"team": "data"}, "pool": "spark_pool"},
        },
    )
    defs = build_defs_for_component(component)
    specs = _specs(defs)
    clean, enriched = specs["lake/clean"], specs["lake/enriched"]
    assert clean.group_name == "g_clean" and clean.tags["store_format"] == "parquet"
    # the plan that reads clean depends on the translated key, not the default one
    assert AssetKey(["lake", "clean"]) in {d.asset_key for d in enriched.deps}
    assert "clean" not in specs
    split = next(a for a in defs.assets if AssetKey(["lake", "enriched"]) in getattr(a, "keys", ()))
    op_defs = list(split.node_def.iterate_op_defs())
    assert all(o.tags["team"] == "data" and o.pool == "spark_pool" for o in op_defs)
    assert component.asset_key_for_store("clean", "clean/day=${day}") == AssetKey(["lake", "clean"])
    assert asset_key_for_store(defs, "split", "@5") == specs["lake/enriched"].key


def test_select_and_exclude_by_plan_group_or_key(tmp_path: Path, kit) -> None:
    folder = tmp_path / "defs" / "plans_here"
    kit.write(folder)
    only_split = build_defs_for_component(
        _component(folder, {"plans_dir": "plans", "select": ["totals"]})
    )
    keys = set(_specs(only_split))
    assert {"enriched", "totals"} <= keys and "clean" not in keys
    # the excluded plan's store is still what split depends on
    assert AssetKey(["clean"]) in {d.asset_key for d in _specs(only_split)["enriched"].deps}
    no_ingest = build_defs_for_component(
        _component(folder, {"plans_dir": "plans", "exclude": ["ingest"]})
    )
    assert "clean" not in _specs(no_ingest)
    with pytest.raises(
        DrillDefinitionsError, match=r"defs.yaml: attributes.select: 'nope' names no plan, group"
    ):
        build_defs_for_component(_component(folder, {"plans_dir": "plans", "select": ["nope"]}))


def test_freshness_from_the_project_file_and_the_component(tmp_path: Path, kit) -> None:
    folder = tmp_path / "defs" / "fresh"
    project_yaml = kit.PROJECT_YAML.replace(
        "  clean:\n", '  clean:\n    freshness: {cron: "0 9 * * *", lower_bound: 2h}\n', 1
    )
    assert project_yaml != kit.PROJECT_YAML
    kit.write(folder, project_yaml=project_yaml)
    component = _component(
        folder, {"plans_dir": "plans", "freshness": {"fail_window": "1d", "warn_window": "6h"}}
    )
    specs = _specs(build_defs_for_component(component))
    assert specs["clean"].freshness_policy == FreshnessPolicy.cron(
        deadline_cron="0 9 * * *", lower_bound_delta=timedelta(hours=2)
    )
    assert specs["totals"].freshness_policy == FreshnessPolicy.time_window(
        fail_window=timedelta(days=1), warn_window=timedelta(hours=6)
    )
    bad = _component(folder, {"plans_dir": "plans", "freshness": {"fail_window": "soon"}})
    with pytest.raises(
        DrillDefinitionsError, match=r"defs\.yaml: attributes\.freshness: 'soon' is not a duration"
    ):
        build_defs_for_component(bad)


def test_bad_freshness_in_the_project_file_names_the_key(tmp_path: Path, kit) -> None:
    from drill_dagster import load_definitions

    plans = kit.write(
        tmp_path, project_yaml="plans:\n  clean:\n    freshness: {cron: '0 9 * * *'}\n"
    )
    with pytest.raises(DrillDefinitionsError, match=r"plans.clean.freshness: .*lower_bound"):
        load_definitions(plans)


def test_a_key_from_get_asset_spec_is_the_key_everywhere(plans_dir: Path) -> None:
    from drill_dagster import load_definitions

    class Prefixed(DrillTranslator):
        def get_asset_spec(self, store):
            spec = super().get_asset_spec(store)
            return spec.replace_attributes(key=spec.key.with_prefix("warehouse"))

    defs = load_definitions(plans_dir, translator=Prefixed())
    specs = _specs(defs)
    assert "warehouse/clean" in specs and "clean" not in specs
    assert AssetKey(["warehouse", "clean"]) in {
        d.asset_key for d in specs["warehouse/enriched"].deps
    }
    assert asset_key_for_store(defs, "clean", "clean/day=${day}") == AssetKey(
        ["warehouse", "clean"]
    )
    with pytest.raises(KeyError, match="has no store 'nope'"):
        asset_key_for_store(defs, "clean", "nope")


def test_the_scaffolded_component_materializes(tmp_path: Path) -> None:
    from drill_dagster.cli_scaffold import write_example_plans

    folder = tmp_path / "defs" / "my_plans"
    write_example_plans(folder)
    defs = build_defs_for_component(_component(folder, {"plans_dir": "plans"}))
    result = materialize(
        [*defs.assets, *(defs.asset_checks or ())],
        resources={**defs.resources, **default_resources(executor="local")},
        instance=DagsterInstance.ephemeral(),
    )
    (event,) = result.get_asset_materialization_events()
    assert event.materialization.metadata["dagster/row_count"].value == 2


def test_specs_carry_column_lineage_and_table_name_before_any_run(plans_dir: Path) -> None:
    from dagster import TableColumnDep

    from drill_dagster import load_definitions

    specs = _specs(load_definitions(plans_dir))
    clean, totals = specs["clean"].metadata, specs["totals"].metadata
    assert clean["dagster/table_name"] == "clean"
    lineage = clean["dagster/column_lineage"].deps_by_column
    assert lineage["amount"] == [
        TableColumnDep(asset_key=AssetKey(["raw", "events"]), column_name="amount")
    ]
    table = totals["drill/column_lineage"].value
    assert "| `total` | `clean`.`amount` |" in table
    assert "| `n` | (no source column) |" in table


def test_two_components_with_one_source_share_a_code_location(tmp_path: Path, kit) -> None:
    from dagster import Definitions

    plans = kit.write(tmp_path / "a", plans={"clean": kit.CLEAN}, project_yaml=None)
    other = kit.copy(kit.CLEAN)
    other["query"][-1]["target"]["path"] = "other/day=${day}"
    other["storage"] = {
        name: {**engine, "root": str(plans / engine["root"])}
        for name, engine in other["storage"].items()
    }
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "other.json").write_text(json.dumps(other))
    first = build_defs_for_component(
        DrillPlansComponent.resolve_from_dict({"plans_dir": str(plans)})
    )
    second = build_defs_for_component(
        DrillPlansComponent.resolve_from_dict(
            {"plans_dir": str(tmp_path / "b"), "op": {"tags": {"team": "b"}, "pool": "b"}}
        )
    )
    merged = Definitions.merge(first, second)  # what a defs folder of two components does
    keys = {k.to_user_string() for k in merged.resolve_asset_graph().get_all_asset_keys()}
    assert {"clean", "other", "raw/events"} <= keys
    # One op definition per name in the code location: the job of every asset builds, and the
    # second component's settings give its nodes definitions of their own.
    job = merged.resolve_implicit_global_asset_job_def()
    scans = {
        graph: job.graph.node_named(graph).definition.node_named("scan_1").definition
        for graph in ("clean", "other")
    }
    assert scans["clean"] is not scans["other"]
    assert scans["other"].tags["team"] == "b" and scans["other"].pool == "b"
    assert "team" not in scans["clean"].tags and scans["clean"].pool is None
