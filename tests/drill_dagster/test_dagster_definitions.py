"""load_definitions: asset keys, lineage across plans, op graphs, partitions, schedules, checks."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from dagster import (
    AssetKey,
    AutomationCondition,
    DagsterInstance,
    DailyPartitionsDefinition,
    Definitions,
    GraphDefinition,
    build_schedule_context,
    in_process_executor,
    multiprocess_executor,
)
from dagster._core.definitions.backfill_policy import BackfillPolicyType

from drill_dagster import DrillDefinitionsError, DrillTranslator, load_definitions
from engine.plan import parse_plan

Kit = Any

CLEAN_KEY, ENRICHED, TOTALS = AssetKey("clean"), AssetKey("enriched"), AssetKey("totals")
EVENTS, CUSTOMERS = AssetKey(["raw", "events"]), AssetKey(["raw", "customers_csv"])


@pytest.fixture
def defs(plans_dir: Path) -> Definitions:
    return load_definitions(plans_dir, executor="local")


def _graph(defs: Definitions, name: str) -> GraphDefinition:
    assets = next(
        a for a in defs.assets if getattr(a, "node_def", None) and a.node_def.name == name
    )  # type: ignore[union-attr]
    return assets.node_def  # type: ignore[union-attr,return-value]


def test_asset_keys_deps_across_plans_and_external_sources(defs: Definitions) -> None:
    graph = defs.resolve_asset_graph()
    assert graph.get_all_asset_keys() == {CLEAN_KEY, ENRICHED, TOTALS, EVENTS, CUSTOMERS}
    assert graph.get(CLEAN_KEY).parent_keys == {EVENTS}
    assert graph.get(ENRICHED).parent_keys == {CLEAN_KEY, CUSTOMERS}
    assert graph.get(TOTALS).parent_keys == {CLEAN_KEY}  # only what its records come from
    assert not graph.get(EVENTS).is_materializable
    assert not graph.get(CUSTOMERS).is_materializable
    assert graph.get(EVENTS).group_name == "sources"


def test_one_node_per_operator_named_and_described_and_wired(defs: Definitions, kit: Kit) -> None:
    for name, document in (("clean", kit.CLEAN), ("split", kit.SPLIT)):
        graph = _graph(defs, name)
        plan = parse_plan(document)
        # The node (what the run's graph and the step keys show) is the operator; its op
        # definition is shared by every node of its kind, in every plan.
        expected = {f"{op.op}_{op.id}" for op in plan.query}
        assert {node.name for node in graph.nodes} == expected
        for op in plan.query:
            node = graph.node_named(f"{op.op}_{op.id}")
            # (a store's by its checks too: they are its op's outputs)
            assert node.definition.name.partition("__")[0] == f"drill_{op.op}"
            assert node.definition.tags["drill/op"] == op.op
            # The graph's description shows the operator as written, after what the planner
            # does to it (when it does), under the node's name.
            section = graph.description.split(f"#### {op.op}_{op.id}\n\n")[1]
            written = section.split("```json\n")[1].split("\n```")[0]
            assert json.loads(written) == op.to_dict()
    # Two plans, one definition per kind of operator.
    scans = {_graph(defs, name).node_named("scan_1").definition for name in ("clean", "split")}
    assert len(scans) == 1
    split = _graph(defs, "split")
    join = split.dependency_structure.input_to_upstream_outputs_for_node("join_3")
    upstream = {inp.input_name: out.node_name for inp, outs in join.items() for out in outs}
    assert upstream == {"left": "scan_1", "right": "scan_2"}


def test_spec_attributes_from_the_translator_defaults_and_project_file(defs: Definitions) -> None:
    graph = defs.resolve_asset_graph()
    clean, enriched = graph.get(CLEAN_KEY), graph.get(ENRICHED)
    assert clean.group_name == "ingest" and enriched.group_name == "split"
    assert clean.owners == ["team:data"] and clean.tags["tier"] == "bronze"
    assert clean.kinds == {"spark", "parquet"} and graph.get(TOTALS).kinds == {"spark", "json"}
    assert "events with a positive amount" in (clean.description or "")
    # The generator's note is a tag, not the description.
    assert clean.tags["drill/generator"] == "cleaned"
    assert clean.description == (
        "events with a positive amount\n\n"
        "Written by store 4 of plan `clean.json` to `clean/day=${day}` (parquet)."
    )
    assert clean.metadata["dagster/uri"].endswith("/data/lake/clean")
    references = clean.metadata["dagster/code_references"].code_references
    assert references[0].file_path.endswith("plans/clean.json")
    assert enriched.automation_condition == AutomationCondition.eager()
    assert clean.automation_condition is None


def test_partitions_backfill_policy_and_can_subset(defs: Definitions) -> None:
    graph = defs.resolve_asset_graph()
    partitions = graph.get(CLEAN_KEY).partitions_def
    assert isinstance(partitions, DailyPartitionsDefinition)
    assert partitions.get_partition_keys() == ["2024-01-01", "2024-01-02", "2024-01-03"]
    assert graph.get(ENRICHED).partitions_def is None
    clean_assets = next(a for a in defs.assets if getattr(a, "keys", None) == {CLEAN_KEY})
    assert clean_assets.backfill_policy.policy_type is BackfillPolicyType.SINGLE_RUN  # type: ignore[union-attr]
    split_assets = next(a for a in defs.assets if getattr(a, "keys", None) == {ENRICHED, TOTALS})
    assert split_assets.can_subset  # type: ignore[union-attr]
    subset = split_assets.subset_for({TOTALS}, selected_asset_check_keys=None)  # type: ignore[union-attr]
    assert {n.name for n in subset.node_def.nodes} == {
        "scan_1",
        "collapsingaggregate_6",
        "store_7",
    }


def test_only_a_scheduled_plan_gets_a_job(tmp_path: Path, kit: Kit) -> None:
    yaml = kit.PROJECT_YAML.replace('    schedule: {cron: "0 4 * * *"}\n', "")
    defs = load_definitions(kit.write(tmp_path, project_yaml=yaml), executor="local")
    assert {job.name for job in defs.jobs} == {"clean_job"}
    assert {s.name for s in defs.get_repository_def().schedule_defs} == {"clean_schedule"}
    graph = defs.resolve_asset_graph()  # split's stores stay materializable, from their group
    assert graph.get(ENRICHED).is_materializable and graph.get(ENRICHED).group_name == "split"
    implicit = defs.resolve_implicit_global_asset_job_def()
    assert {ENRICHED, TOTALS} <= implicit.asset_layer.selected_asset_keys


def test_jobs_schedules_and_checks(defs: Definitions) -> None:
    assert {job.name for job in defs.jobs} == {"clean_job", "split_job"}
    schedules = {s.name: s for s in defs.get_repository_def().schedule_defs}
    assert set(schedules) == {"clean_schedule", "split_schedule"}
    assert schedules["split_schedule"].cron_schedule == "0 4 * * *"
    assert schedules["clean_schedule"].cron_schedule == "0 0 * * *"  # from the daily partitions
    assert schedules["clean_schedule"].job_name == "clean_job"
    check_keys = defs.resolve_asset_graph().asset_check_keys
    assert {(k.asset_key, k.name) for k in check_keys} == {
        (CLEAN_KEY, "schema_contract"),
        (CLEAN_KEY, "row_count_bounds"),
    }
    Definitions.validate_loadable(defs)


def test_translator_overrides_keys_groups_and_sources(plans_dir: Path) -> None:
    class LakeTranslator(DrillTranslator):
        def get_asset_key(self, store):  # type: ignore[no-untyped-def]
            return super().get_asset_key(store).with_prefix("lake")

        def get_group_name(self, store):  # type: ignore[no-untyped-def]
            return "everything"

        def get_source_asset_key(self, source):  # type: ignore[no-untyped-def]
            return AssetKey(["landing", *source.parts[1:]])

        def get_kinds(self, store):  # type: ignore[no-untyped-def]
            return {"spark", "drill"}

    defs = load_definitions(plans_dir, translator=LakeTranslator(), executor="local")
    graph = defs.resolve_asset_graph()
    lake_enriched = AssetKey(["lake", "enriched"])
    assert graph.get(lake_enriched).parent_keys == {
        AssetKey(["lake", "clean"]),
        AssetKey(["landing", "customers.csv"]),
    }
    assert graph.get(lake_enriched).group_name == "everything"
    assert graph.get(lake_enriched).kinds == {"spark", "drill"}


def test_a_bad_plan_fails_loading_with_file_and_json_path(tmp_path: Path, kit: Kit) -> None:
    broken = kit.copy(kit.CLEAN)
    broken["query"][1]["op"] = "fliter"
    del broken["query"][2]["projections"][0]["expr"]
    plans_dir = kit.write(tmp_path, plans={"clean": broken, "split": kit.SPLIT})
    with pytest.raises(DrillDefinitionsError) as caught:
        load_definitions(plans_dir)
    message = str(caught.value)
    assert f"{plans_dir / 'clean.json'}: 2 problems" in message
    assert "$.query[1].op (operator 2): unknown op 'fliter' (did you mean 'filter'?)" in message
    assert "$.query[2].projections[0].expr" in message
    assert caught.value.__cause__ is None  # the message is the whole story, no chained traceback


def test_a_relaxed_json_syntax_error_names_the_file_line_and_column(
    tmp_path: Path, kit: Kit
) -> None:
    plans_dir = kit.write(tmp_path, project_yaml=None)
    (plans_dir / "clean.json").write_text('{"query": [\n  {"op": "scan",, }]}')
    with pytest.raises(DrillDefinitionsError, match=r"clean\.json.*line 2"):
        load_definitions(plans_dir)


@pytest.mark.parametrize(
    ("yaml_text", "expected"),
    [
        (
            "plans: {clean: {partitions: {param: day}}}",
            "plans.clean.partitions: give exactly one of",
        ),
        ("plans: {clean: {partitons: {}}}", "plans.clean.partitons: unknown key"),
        ("plans: {nope: {group: x}}", "plans.nope: no plan file nope.json"),
        (
            "plans: {clean: {stores: {nowhere: {}}}}",
            "plans.clean.stores.nowhere: clean.json has no store",
        ),
        (
            "plans: {clean: {stores: {clean: {checks: {columns: {id: BIGNIT}}}}}}",
            "plans.clean.stores.clean.checks.columns: column 'id': unknown Drill type 'BIGNIT'",
        ),
        (
            "plans: {split: {schedule: {}}}",
            "plans.split.schedule: give either cron or from_partitions",
        ),
        ("plans: [clean", "drill_project.yaml:1:"),
    ],
)
def test_project_file_mistakes_name_the_file_and_key(
    tmp_path: Path, kit: Kit, yaml_text: str, expected: str
) -> None:
    plans_dir = kit.write(tmp_path, project_yaml=yaml_text)
    with pytest.raises(DrillDefinitionsError) as caught:
        load_definitions(plans_dir)
    assert str(plans_dir / "drill_project.yaml") in str(caught.value)
    assert expected in str(caught.value)


def test_from_partitions_needs_time_partitions(tmp_path: Path, kit: Kit) -> None:
    yaml_text = "plans: {split: {schedule: {from_partitions: true}}}"
    plans_dir = kit.write(tmp_path, project_yaml=yaml_text)
    with pytest.raises(
        DrillDefinitionsError, match=r"plans\.split\.schedule: from_partitions needs"
    ):
        load_definitions(plans_dir)


def test_two_stores_with_one_key_are_refused(tmp_path: Path, kit: Kit) -> None:
    # Two targets, one key (given in the project file): refused by the Dagster layer. (Two stores
    # of one plan with one target are refused earlier, by the plan's own validation.)
    yaml_text = "plans: {split: {stores: {totals: {key: [enriched]}}}}"
    plans_dir = kit.write(tmp_path, plans={"split": kit.SPLIT}, project_yaml=yaml_text)
    with pytest.raises(DrillDefinitionsError, match="both have the asset key enriched"):
        load_definitions(plans_dir)


def test_two_stores_with_one_target_are_refused_naming_both(tmp_path: Path, kit: Kit) -> None:
    twin = kit.copy(kit.SPLIT)
    twin["query"][6]["target"]["path"] = "enriched"
    plans_dir = kit.write(tmp_path, plans={"split": twin}, project_yaml=None)
    with pytest.raises(
        DrillDefinitionsError, match=r"\$\.query\[6\]\.target\.path .*\$\.query\[4\]"
    ):
        load_definitions(plans_dir)


def test_static_partitions_and_a_cron_schedule(tmp_path: Path, kit: Kit) -> None:
    yaml_text = (
        "plans: {clean: {partitions: {static: [2024-01-01, 2024-01-02], param: day,"
        " max_partitions_per_run: 1}, schedule: {cron: '5 * * * *'}}}"
    )
    defs = load_definitions(kit.write(tmp_path, project_yaml=yaml_text), executor="local")
    graph = defs.resolve_asset_graph()
    assert graph.get(CLEAN_KEY).partitions_def.get_partition_keys() == ["2024-01-01", "2024-01-02"]  # type: ignore[union-attr]
    clean_assets = next(a for a in defs.assets if getattr(a, "keys", None) == {CLEAN_KEY})
    assert clean_assets.backfill_policy.max_partitions_per_run == 1  # type: ignore[union-attr]
    (schedule,) = defs.get_repository_def().schedule_defs
    assert schedule.cron_schedule == "5 * * * *"


def test_a_partition_parameter_the_plan_never_reads_is_warned_about(
    tmp_path: Path, kit: Kit
) -> None:
    yaml_text = "plans: {split: {partitions: {static: [a, b], param: region}}}"
    plans_dir = kit.write(tmp_path, project_yaml=yaml_text)
    with pytest.warns(
        UserWarning, match=r"plans\.split\.partitions: split\.json uses no \$\{region\}"
    ):
        load_definitions(plans_dir, executor="local")


@pytest.mark.parametrize("enabled", [True, False])
def test_loading_restores_the_collector_and_freezes_nothing(plans_dir: Path, enabled: bool) -> None:
    """The collector is paused while definitions are built, then left as it was; the loaded
    objects go to the oldest generation, not to the permanent (frozen) one."""
    import gc

    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        load_definitions(plans_dir, executor="local")
        assert gc.isenabled() is enabled
        assert gc.get_freeze_count() == 0
    finally:
        (gc.enable if was else gc.disable)()


def test_a_scan_below_a_store_target_depends_on_that_store(tmp_path: Path, kit: Kit) -> None:
    """A scan of a directory or file under another plan's store target reads that store (the
    nearest target above it); a sibling whose name only starts the same is a source."""

    def plan(scan_path: str, store_path: str) -> dict[str, Any]:
        return {
            "storage": {"lake": {"type": "fs", "root": "../lake"}},
            "query": [
                {"@id": 1, "op": "scan", "storageengine": "lake", "ref": "r",
                 "selection": {"path": scan_path, "format": "parquet"}},
                {"@id": 2, "op": "store", "input": 1, "storageengine": "lake",
                 "target": {"path": store_path, "format": "parquet"}},
            ],
        }  # fmt: skip

    plans = {
        "writer": plan("raw", "big"),
        "reads_a_day": plan("big/day=2024-01-01/part-0.parquet", "below"),
        "reads_a_sibling": plan("bigger", "beside"),
    }
    defs = load_definitions(kit.write(tmp_path, plans=plans, project_yaml=None), executor="local")
    graph = defs.resolve_asset_graph()
    assert graph.get(AssetKey("below")).parent_keys == {AssetKey("big")}
    assert graph.get(AssetKey("beside")).parent_keys == {AssetKey(["lake", "bigger"])}


def test_no_executor_is_forced_so_user_definitions_merge(plans_dir: Path) -> None:
    defs = load_definitions(plans_dir, executor="local")
    assert defs.executor is None
    merged = Definitions.merge(defs, Definitions(executor=multiprocess_executor))
    assert merged.executor is multiprocess_executor
    assert merged.resolve_implicit_global_asset_job_def().executor_def is multiprocess_executor
    # The job a schedule runs carries its own executor: one process per run.
    assert merged.resolve_job_def("clean_job").executor_def is in_process_executor


def test_a_cron_schedule_stops_targeting_partitions_that_have_ended(
    tmp_path: Path, kit: Kit
) -> None:
    yaml_text = kit.PROJECT_YAML.replace(
        "schedule: {from_partitions: true}", 'schedule: {cron: "0 3 * * *"}'
    )
    defs = load_definitions(kit.write(tmp_path, project_yaml=yaml_text), executor="local")
    schedule = defs.resolve_schedule_def("clean_schedule")

    def evaluate(when: datetime) -> Any:
        with DagsterInstance.ephemeral() as instance:
            context = build_schedule_context(
                instance=instance,
                scheduled_execution_time=when,
                repository_def=defs.get_repository_def(),
            )
            return schedule.evaluate_tick(context)

    during = evaluate(datetime(2024, 1, 3, 3, tzinfo=UTC))
    assert [r.partition_key for r in during.run_requests] == ["2024-01-02"]
    after = evaluate(datetime(2024, 3, 1, 3, tzinfo=UTC))
    assert not after.run_requests
    assert "the partitions end with 2024-01-03" in after.skip_message
