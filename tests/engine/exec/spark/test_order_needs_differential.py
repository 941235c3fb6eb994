"""Differential tests of what the Spark executor leaves unordered (``compiler_order``): random
records in two parquet files per table, with many ties, through the plan shapes whose tie-breaks
or right-side order it drops; the stored records must be those of the local executor, in order.

* an order by every member its scan reads (:func:`~engine.exec.spark.compiler_order.tie_free_orders`);
* a join grouped by keys its left records determine, the groups ordered by an aggregate
  (:func:`~engine.exec.spark.compiler_order.left_grouped_joins`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from grouped_join import grouped_join_query
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import run_plan
from engine.exec.spark.executor import SparkPlanRun
from engine.plan import parse_plan
from engine.run import build_engines

SMALL = st.one_of(st.none(), st.integers(0, 2))
FLOAT = st.sampled_from([None, 0.0, -0.0, 1.5, float("nan")])
ROWS = st.lists(st.tuples(SMALL, SMALL, st.sampled_from(["a", "b"]), FLOAT), max_size=12)
SETTINGS = settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def write_table(root: Path, name: str, rows: list[tuple], names: list[str]) -> None:
    """``rows`` as two parquet files (first half, second half) under ``root / name``."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.iterdir():
        old.unlink()
    types = [pa.int64(), pa.int64(), pa.string(), pa.float64()]
    columns = list(zip(*rows, strict=True)) if rows else [[] for _ in names]
    table = pa.table({n: pa.array(c, t) for n, c, t in zip(names, columns, types, strict=True)})
    half = table.num_rows // 2
    pq.write_table(table.slice(0, half), folder / "part-0.parquet")
    pq.write_table(table.slice(half), folder / "part-1.parquet")


def stored(root: Path) -> list[dict[str, Any]]:
    """The stored records in order, floats as (NaN?, sign, value): NaN equals NaN, and -0.0
    differs from 0.0 (where a tie-break decides which comes first)."""
    files = sorted((root / "out").glob("*.parquet"))
    return [_exact(row) for f in files for row in pq.read_table(f).to_pylist()]


def _exact(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _exact(v) for k, v in value.items()}
    if isinstance(value, float):
        return ("nan",) if math.isnan(value) else (math.copysign(1.0, value), value)
    return value


def both_executors(spark: Any, plan: dict[str, Any], root: Path) -> tuple[list, list, Any]:
    """The records each executor stores, and the Spark run (for what it left unordered)."""
    parsed = parse_plan(plan)
    run = SparkPlanRun(
        parsed, spark, engines=build_engines(parsed, base_dir=None, classpath=[]), params={}
    )
    run.run()
    on_spark = stored(root)
    run_plan(plan, executor="local")
    return on_spark, stored(root), run


def scan(op_id: int, ref: str) -> dict[str, Any]:
    return {
        "@id": op_id,
        "op": "scan",
        "storageengine": "fs",
        "ref": ref,
        "selection": {"path": ref, "format": "parquet"},
    }


@SETTINGS
@given(
    rows=ROWS,
    keys=st.lists(st.sampled_from(["a", "b", "s", "f"]), min_size=1, max_size=3, unique=True),
    directions=st.lists(st.sampled_from(["asc", "desc"]), min_size=3, max_size=3),
    nulls=st.sampled_from(["first", "last"]),
)
def test_an_order_by_every_member_read_agrees_with_the_local_executor(
    spark: Any,
    tmp_path: Path,
    rows: list[tuple],
    keys: list[str],
    directions: list[str],
    nulls: str,
) -> None:
    write_table(tmp_path, "e", rows, ["a", "b", "s", "f"])
    orderings = [
        {"order": d, "expr": f"e.{k}", "nullCollation": nulls}
        for k, d in zip(keys, directions, strict=False)
    ]
    plan = {
        "storage": {"fs": {"type": "fs", "root": str(tmp_path)}},
        "query": [
            scan(1, "e"),
            {"@id": 2, "op": "order", "input": 1, "orderings": orderings},
            {
                "@id": 3,
                "op": "project",
                "input": 2,
                "projections": [{"ref": f"output.{k}", "expr": f"e.{k}"} for k in keys],
            },
            {"@id": 4, "op": "store", "input": 3, "storageengine": "fs", "target": {"path": "out"}},
        ],
    }
    on_spark, local, run = both_executors(spark, plan, tmp_path)
    assert on_spark == local, (orderings, rows)
    assert run.properties["2"].total_order  # no two records tie: no tie-break needed


def test_an_order_by_a_float_keeps_the_order_of_records_that_tie_but_differ(
    spark: Any, tmp_path: Path
) -> None:
    """-0.0 ties 0.0 in a sort but is another record: though the order reads every member of
    its scan, its ties keep their scan order (the first file's first), as on the local
    executor."""
    rows = [(None, None, "a", -0.0), (None, None, "a", 0.0), (None, None, "a", 0.0)]
    rows += [(None, None, "a", -0.0), (None, None, "a", 1.5), (None, None, "a", -0.0)]
    write_table(tmp_path, "e", rows, ["a", "b", "s", "f"])
    plan = {
        "storage": {"fs": {"type": "fs", "root": str(tmp_path)}},
        "query": [
            scan(1, "e"),
            {"@id": 2, "op": "order", "input": 1, "orderings": [{"order": "asc", "expr": "e.f"}]},
            {
                "@id": 3,
                "op": "project",
                "input": 2,
                "projections": [{"ref": "output.f", "expr": "e.f"}],
            },
            {"@id": 4, "op": "store", "input": 3, "storageengine": "fs", "target": {"path": "out"}},
        ],
    }
    on_spark, local, _ = both_executors(spark, plan, tmp_path)
    signs = [row["f"][0] for row in on_spark]
    assert signs == [-1.0, 1.0, 1.0, -1.0, -1.0, 1.0]  # the zeros in file order, then 1.5
    assert on_spark == local


@SETTINGS
@given(
    left=ROWS,
    right=ROWS,
    how=st.sampled_from(["inner", "left"]),
    keys=st.sampled_from([("r.a", "l.s"), ("l.b",), ("l.a", "l.b", "r.a")]),
)
def test_groups_the_left_records_determine_agree_with_the_local_executor(
    spark: Any,
    tmp_path: Path,
    left: list[tuple],
    right: list[tuple],
    how: str,
    keys: tuple[str, ...],
) -> None:
    write_table(tmp_path, "l", left, ["a", "b", "s", "f"])
    write_table(tmp_path, "r", right, ["a", "c", "t", "g"])
    query = grouped_join_query(
        "l",
        "r",
        ("l.a", "r.a"),
        how=how,
        keys=keys,
        aggregations=[{"ref": "n", "expr": "count(1)"}, {"ref": "c", "expr": "sum(r.c)"}],
        order_by="n",
    )
    plan = {"storage": {"fs": {"type": "fs", "root": str(tmp_path)}}, "query": query}
    on_spark, local, run = both_executors(spark, plan, tmp_path)
    assert on_spark == local, (how, keys, left, right)
    assert run.properties["2"].unordered  # the right scan: no order to keep
