"""The planner reads what earlier stores recorded (the metadata repository's ``_drill_metadata/``):
rows and bytes of the tables they wrote choose broadcast joins and one- or two-phase aggregation.

The tables are written by real store runs; JSON keeps no row count in its files, so a scan's
``rows`` can only come from the record."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from engine.explain import explain
from engine.metadata import MetadataRepository
from engine.plan import parse_plan
from engine.planner import Statistics
from engine.planner.physical import PlannerOptions
from engine.run import run_plan
from engine.sql import sql_to_plan


@pytest.fixture
def lake(tmp_path: Path) -> MetadataRepository:
    rows = [{"k": i % 7, "v": i, "pad": "x" * 40} for i in range(400)]
    (tmp_path / "src.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    repo = MetadataRepository({"lake": {"type": "fs", "root": str(tmp_path)}})
    for name, sql, extra in [
        ("small", "select k, v from lake.`src.json` where v < 5", {}),
        ("big", "select k, v, pad from lake.`src.json`", {}),
        ("big2", "select k, pad from lake.`src.json`", {}),
        ("parts", "select k, v from lake.`src.json` where v < 20", {"partitionBy": ["k"]}),
    ]:
        target = {"path": name, "format": "json", **extra}
        run_plan(sql_to_plan(sql, repo, store={"engine": "lake", "target": target}))
    return repo


def _explain(repo: MetadataRepository, sql: str, **options: int) -> tuple[str, list[dict]]:
    plan = parse_plan(sql_to_plan(sql, repo))
    planner = PlannerOptions(**options)
    text = explain(plan, options=planner)
    physical = json.loads(explain(plan, fmt="json", options=planner))["physical"]["graph"]
    return text, physical


def _bytes(repo: MetadataRepository, name: str) -> int:
    stats = repo.statistics(repo.resolve(["lake", name]))
    assert stats is not None
    return stats.total_bytes


def test_scans_of_stored_tables_use_the_recorded_rows_and_bytes(lake: MetadataRepository) -> None:
    plan = parse_plan(sql_to_plan("select k from lake.small", lake))
    (scan,) = Statistics.collect(plan).scans.values()
    recorded = lake.statistics(lake.resolve(["lake", "small"]))
    assert scan.recorded and scan.format == "json"
    assert (scan.row_count, scan.total_bytes, scan.file_count) == (
        5,
        recorded.total_bytes,
        recorded.file_count,
    )


def test_broadcast_join_chosen_from_recorded_statistics(lake: MetadataRepository) -> None:
    threshold = 2 * _bytes(lake, "small")
    assert _bytes(lake, "big") > threshold
    text, graph = _explain(
        lake,
        "select b.v from lake.big b join lake.small s on b.k = s.k",
        broadcast_threshold=threshold,
    )
    assert "broadcast-hash-join" in text and "statistics=recorded" in text
    (join,) = [op for op in graph if op["pop"].endswith("join")]
    assert join["pop"] == "broadcast-hash-join" and join["build"] == "right"
    scans = {op["selection"]["path"]: op for op in graph if op["pop"].startswith("scan")}
    assert scans["small"]["rows"] == 5 and scans["big"]["rows"] == 400
    assert all(op["statistics"] == "recorded" for op in scans.values())


def test_hash_join_when_the_recorded_tables_are_big(lake: MetadataRepository) -> None:
    threshold = 2 * _bytes(lake, "small")
    assert min(_bytes(lake, "big"), _bytes(lake, "big2")) > threshold
    text, graph = _explain(
        lake,
        "select b.v from lake.big b join lake.big2 c on b.k = c.k",
        broadcast_threshold=threshold,
    )
    (join,) = [op for op in graph if op["pop"].endswith("join")]
    assert join["pop"] == "hash-join" and "broadcast" not in text


def test_recorded_rows_keep_a_small_aggregate_in_one_phase(lake: MetadataRepository) -> None:
    sql = "select k, sum(v) as s from lake.parts group by k"
    _, graph = _explain(lake, sql)
    pops = [op["pop"] for op in graph]
    (scan,) = [op for op in graph if op["pop"].startswith("scan")]
    assert scan["files"] > 1 and scan["rows"] == 20  # parallel, but known to be small
    assert "partial-aggregate" not in pops
    # Without the record, the rows of JSON files are unknown: two phases.
    shutil.rmtree(Path(lake.storage["lake"]["root"]) / "_drill_metadata")
    _, graph = _explain(lake, sql)
    assert "partial-aggregate" in [op["pop"] for op in graph]
    assert all("statistics" not in op for op in graph)
