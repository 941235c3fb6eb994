"""Plan outlines kept between loads: a code location whose plan files have not changed builds the
same definitions without parsing them, and its runs run the plans as they were loaded."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from dagster import AssetsDefinition, DagsterInstance, Definitions
from dagster_runs import materialize_ok

from drill_dagster import load_definitions, outline_cache
from drill_dagster.errors import DrillDefinitionsError
from drill_dagster.outline_cache import CACHE_DIR_ENV

REPO = Path(__file__).resolve().parents[2]


def _typed(kit: Any) -> dict[str, Any]:
    """The kit's clean plan with an always-true filter (the planner removes it: a note in the
    description) and a scan that declares its columns' types (a column schema on the spec)."""
    plan = kit.copy(kit.CLEAN)
    scan, always, project, store = plan["query"]
    scan["selection"]["schema"] = {"id": "BIGINT", "amount": "DOUBLE"}
    always["expr"] = "1 < 2"
    project["projections"] = [
        {"ref": "output.id", "expr": "e.id"},
        {"ref": "output.doubled", "expr": "e.amount * 2"},
    ]
    store.update(memo="typed events", target={"path": "typed", "format": "parquet"})
    return plan


def _shape(defs: Definitions) -> dict[str, Any]:
    """Everything a load decides, asset by asset: specs (keys, deps, descriptions, metadata,
    code versions, groups, tags, kinds), the plan graphs (descriptions, nodes and their op
    definitions, wiring) and the checks."""
    shape: dict[str, Any] = {}
    for assets_def in defs.assets or ():
        if not isinstance(assets_def, AssetsDefinition):
            shape[repr(assets_def)] = assets_def
            continue
        for spec in assets_def.specs:
            shape[spec.key.to_user_string()] = (
                sorted(dep.asset_key.to_user_string() for dep in spec.deps),
                spec.description,
                dict(spec.metadata),
                spec.code_version,
                spec.group_name,
                dict(spec.tags),
                sorted(spec.kinds),
                list(spec.owners),
            )
        graph = assets_def.node_def
        shape[f"graph {graph.name}"] = (
            graph.description,
            sorted((node.name, node.definition.name) for node in graph.nodes),
            sorted(
                (node.alias, node.name, sorted((i, d.node, d.output) for i, d in wiring.items()))
                for node, wiring in graph.dependencies.items()
            ),
            sorted(key.to_user_string() for key in assets_def.check_keys),
        )
    return shape


def _project(root: Path, kit: Any) -> Path:
    plans_dir = kit.write(root)
    (plans_dir / "typed.json").write_text(json.dumps(_typed(kit), indent=2))
    relaxed_plan = json.loads(json.dumps(kit.CLEAN))
    relaxed_plan["query"][3]["target"]["path"] = "relaxed/day=${day}"
    # hjson: an unquoted key
    relaxed = json.dumps(relaxed_plan, indent=2).replace('"op": "filter"', 'op: "filter"')
    (plans_dir / "relaxed.hjson").write_text(relaxed)
    return plans_dir


def test_a_load_from_kept_outlines_builds_the_same_definitions(
    tmp_path: Path, kit: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    plans_dir = _project(tmp_path / "project", kit)
    monkeypatch.setenv(CACHE_DIR_ENV, "off")
    parsed = _shape(load_definitions(plans_dir, executor="local"))
    assert "Removed by the planner" in parsed["graph typed"][0]
    assert "dagster/column_schema" in parsed["typed"][2]
    assert "dagster/column_lineage" in parsed["typed"][2]
    assert not (tmp_path / "cache").exists()  # off: nothing kept

    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    first = _shape(load_definitions(plans_dir, executor="local"))
    assert len(list((tmp_path / "cache").rglob("*.json"))) == 1
    again = _shape(load_definitions(plans_dir, executor="local"))
    assert first == parsed
    assert again == parsed


def test_the_examples_load_the_same_from_kept_outlines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plans_dir = REPO / "examples" / "plans"
    monkeypatch.setenv(CACHE_DIR_ENV, "off")
    parsed = _shape(load_definitions(plans_dir))
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    load_definitions(plans_dir)
    assert _shape(load_definitions(plans_dir)) == parsed


def test_a_changed_plan_file_is_read_again(
    tmp_path: Path, kit: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    plans_dir = _project(tmp_path / "project", kit)
    load_definitions(plans_dir, executor="local")
    changed = _typed(kit)
    changed["query"][3]["memo"] = "typed events, changed"
    changed["query"][2]["projections"][1]["expr"] = "e.amount * 3"
    (plans_dir / "typed.json").write_text(json.dumps(changed))
    defs = load_definitions(plans_dir, executor="local")
    shape = _shape(defs)
    assert shape["typed"][1].startswith("typed events, changed")
    assert '"e.amount * 3"' in shape["graph typed"][0]
    monkeypatch.setenv(CACHE_DIR_ENV, "off")
    assert _shape(load_definitions(plans_dir, executor="local")) == shape
    # A plan file made invalid is reported, whatever was kept of it.
    (plans_dir / "typed.json").write_text('{"query": [{"op": "filter"}]}')
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    with pytest.raises(DrillDefinitionsError, match=r"typed\.json"):
        load_definitions(plans_dir, executor="local")


def test_a_run_runs_the_plan_as_it_was_loaded(
    tmp_path: Path, kit: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Definitions built from kept outlines parse a plan when a step runs it: from the text the
    load read, not from the file as it is by then."""
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    plans_dir = kit.write(tmp_path / "project")
    load_definitions(plans_dir, executor="local")
    defs = load_definitions(plans_dir, executor="local")  # from the kept outline
    edited = json.loads(json.dumps(kit.CLEAN))
    edited["query"][1]["expr"] = "e.amount > 1000"  # would keep no row
    (plans_dir / "clean.json").write_text(json.dumps(edited))
    with DagsterInstance.ephemeral() as instance:
        materialize_ok(defs, instance, "clean", partition_key="2024-01-01")
    written = pq.read_table(tmp_path / "project/data/lake/clean").to_pylist()
    positive = [e for e in kit.EVENTS["2024-01-01"] if e["amount"] > 0]
    assert sorted(r["id"] for r in written) == sorted(e["id"] for e in positive)


def test_kept_outlines_that_cannot_be_read_or_written_cost_only_time(
    tmp_path: Path, kit: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    plans_dir = kit.write(tmp_path / "project")
    monkeypatch.setenv(CACHE_DIR_ENV, "off")
    parsed = _shape(load_definitions(plans_dir, executor="local"))
    cache = tmp_path / "cache"
    monkeypatch.setenv(CACHE_DIR_ENV, str(cache))
    load_definitions(plans_dir, executor="local")
    (kept,) = cache.rglob("*.json")
    for damage in ('{"format": 1, "code": "other", "plans": {}}', "{not json", "[]"):
        kept.write_text(damage)
        assert _shape(load_definitions(plans_dir, executor="local")) == parsed
    stored = json.loads(kept.read_text())  # each damaged file was written anew
    entries = stored["plans"]
    for damage in ("not operators", 5, None, [1]):  # entries of other shapes: parsed again
        entries["clean.json"][1]["operators"] = damage
        entries["split.json"] = damage
        kept.write_text(json.dumps(stored))
        assert _shape(load_definitions(plans_dir, executor="local")) == parsed
        stored = json.loads(kept.read_text())
        entries = stored["plans"]
    # A cache directory that is a file: nothing is kept, the load is the same.
    shutil.rmtree(cache)
    cache.write_text("a file")
    assert _shape(load_definitions(plans_dir, executor="local")) == parsed


def test_outlines_are_kept_for_a_bounded_number_of_directories(
    tmp_path: Path, kit: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(outline_cache, "KEPT_DIRECTORIES", 2)
    for name in ("a", "b", "c"):
        plans = kit.write(tmp_path / name, plans={"clean": kit.CLEAN}, project_yaml=None)
        load_definitions(plans, executor="local")
    assert len(list((tmp_path / "cache").rglob("*.json"))) == 2
    # A removed plan file's outline goes with the next load.
    plans_dir = kit.write(tmp_path / "d", project_yaml=None)
    load_definitions(plans_dir, executor="local")
    (plans_dir / "split.json").unlink()
    load_definitions(plans_dir, executor="local")
    newest = max((tmp_path / "cache").rglob("*.json"), key=lambda f: f.stat().st_mtime_ns)
    assert sorted(json.loads(newest.read_text())["plans"]) == ["clean.json"]
