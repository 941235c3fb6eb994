"""The catalog storage engine on the shared test session (Spark's in-memory catalog).

Tables live in databases the engine creates under each test's temporary warehouse (the shared
session's own warehouse is a temporary directory too, see tests/conftest.py); each test uses a
database of its own, so the tests share the session's catalog without meeting.
The Hive metastore (Derby) is tested in its own processes: tests/engine/exec/spark/
test_catalog_hive.py.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from engine.errors import DrillError, StorageError
from engine.run import run_plan

pytestmark = pytest.mark.spark


def _database() -> str:
    return f"t_{uuid.uuid4().hex[:10]}"


def _plan(warehouse: Path, query: list[dict], database: str = "default") -> dict:
    return {
        "head": {"type": "APACHE_DRILL_LOGICAL", "version": 1},
        "storage": {
            "lake": {"type": "fs", "root": str(warehouse.parent / "files")},
            "cat": {"type": "catalog", "warehouse": str(warehouse), "database": database},
            "queue": {"type": "queue"},
        },
        "query": query,
    }


def _write(warehouse: Path, database: str, records: list[dict], target: dict) -> dict:
    """A plan storing ``records`` (a constant) into the catalog table ``target``."""
    return _plan(
        warehouse,
        [
            {"@id": 1, "op": "constant", "content": records},
            {"@id": 2, "op": "store", "input": 1, "storageengine": "cat", "target": target},
        ],
        database,
    )


def _read(warehouse: Path, database: str, table: str, *, extra: list[dict] = ()) -> dict:
    last = 1 + len(extra)
    return _plan(
        warehouse,
        [
            {
                "@id": 1,
                "op": "scan",
                "storageengine": "cat",
                "ref": "r",
                "selection": {"table": table},
            },
            *extra,
            {"@id": 99, "op": "store", "input": last, "storageengine": "queue", "target": {}},
        ],
        database,
    )


def _records(result) -> list[dict]:
    """The records a scan (ref ``r``) stored into the queue."""
    return [r.get("r", r) for r in result.records()]


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    (tmp_path / "files").mkdir()
    return tmp_path / "warehouse"


def test_store_creates_a_managed_parquet_table_readable_by_name(spark, warehouse):
    db = _database()
    records = [{"user": "a", "n": 1}, {"user": "b", "n": 2}]
    result = run_plan(
        _write(warehouse, db, records, {"table": "daily_activity"}), executor="spark", spark=spark
    )
    assert result.stores[0].row_count == 2
    assert result.stores[0].location == f"{db}.daily_activity"
    detail = {
        r[0]: r[1] for r in spark.sql(f"DESCRIBE TABLE EXTENDED {db}.daily_activity").collect()
    }
    assert detail["Type"] == "MANAGED" and detail["Provider"] == "parquet"
    location = str(warehouse / f"{db}.db" / "daily_activity")
    assert detail["Location"] in (f"file:{location}", f"file://{location}")
    assert sorted((r.user, r.n) for r in spark.table(f"{db}.daily_activity").collect()) == [
        ("a", 1),
        ("b", 2),
    ]
    for executor in ("spark", "local"):
        read = run_plan(_read(warehouse, db, "daily_activity"), executor=executor, spark=spark)
        assert sorted((r["user"], r["n"]) for r in _records(read)) == [("a", 1), ("b", 2)], executor


def test_overwrite_replaces_the_table_and_its_schema(spark, warehouse):
    db = _database()
    run_plan(_write(warehouse, db, [{"a": 1}], {"table": "t"}), executor="spark", spark=spark)
    run_plan(
        _write(warehouse, db, [{"b": "x"}, {"b": "y"}], {"table": f"{db}.t"}),
        executor="spark",
        spark=spark,
    )
    assert [f.name for f in spark.table(f"{db}.t").schema.fields] == ["b"]
    assert sorted(r.b for r in spark.table(f"{db}.t").collect()) == ["x", "y"]
    # no staging or replaced table, nor their directories, is left behind
    assert [t.name for t in spark.catalog.listTables(db)] == ["t"]
    assert sorted(p.name for p in (warehouse / f"{db}.db").iterdir()) == ["t"]


def test_a_reader_during_a_full_replace_reads_one_whole_version_or_no_table(spark, warehouse):
    """The replace renames the old table aside and the staged one in: between the two renames
    the name is briefly absent. A reader meanwhile reads all of the old rows, all of the new
    ones, or fails naming the missing table (or the old files, dropped under its read), never
    a mix or a part of either."""
    db = _database()
    old = [{"k": i, "v": "old"} for i in range(40)]
    new = [{"k": i, "v": "new"} for i in range(70)]
    run_plan(_write(warehouse, db, old, {"table": "t"}), executor="spark", spark=spark)
    seen: list[tuple] = []
    after_replace: list[tuple] = []  # reads that started once the replace had returned
    errors: list[str] = []
    replaced = threading.Event()
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            started_after = replaced.is_set()
            try:
                rows = tuple(sorted((r.k, r.v) for r in spark.table(f"{db}.t").collect()))
            except Exception as err:
                errors.append(str(err))
                continue
            seen.append(rows)
            if started_after:
                after_replace.append(rows)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        run_plan(_write(warehouse, db, new, {"table": "t"}), executor="spark", spark=spark)
        replaced.set()
        deadline = time.monotonic() + 300
        while not after_replace and reader.is_alive() and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        done.set()
        reader.join(timeout=300)
    versions = {tuple(sorted((r["k"], r["v"]) for r in rows)) for rows in (old, new)}
    assert seen and set(seen) <= versions
    assert after_replace and set(after_replace) == {tuple(sorted((r["k"], r["v"]) for r in new))}
    missing = ("TABLE_OR_VIEW_NOT_FOUND", "FileNotFound", "FILE_NOT_EXIST", "does not exist")
    assert all(any(m in e for m in missing) for e in errors), errors


def test_append_adds_rows_and_refuses_other_columns(spark, warehouse):
    db = _database()
    run_plan(_write(warehouse, db, [{"a": 1}], {"table": "t"}), executor="spark", spark=spark)
    append = {"table": "t", "mode": "append"}
    run_plan(_write(warehouse, db, [{"a": 2}], append), executor="spark", spark=spark)
    assert sorted(r.a for r in spark.table(f"{db}.t").collect()) == [1, 2]
    with pytest.raises(DrillError, match=r"has the columns \(a: bigint\).*\(b: bigint\)"):
        run_plan(_write(warehouse, db, [{"b": 3}], append), executor="spark", spark=spark)
    assert sorted(r.a for r in spark.table(f"{db}.t").collect()) == [1, 2]


def test_mode_error_refuses_an_existing_table(spark, warehouse):
    db = _database()
    run_plan(_write(warehouse, db, [{"a": 1}], {"table": "t"}), executor="spark", spark=spark)
    with pytest.raises(DrillError, match="already exists and mode is error"):
        run_plan(
            _write(warehouse, db, [{"a": 2}], {"table": "t", "mode": "error"}),
            executor="spark",
            spark=spark,
        )


def test_partitioned_overwrite_replaces_exactly_the_written_partitions(spark, warehouse):
    db = _database()
    target = {"table": "events", "partitionBy": ["day"]}
    first = [{"day": "d1", "v": 1}, {"day": "d2", "v": 2}, {"day": "d2", "v": 3}]
    run_plan(_write(warehouse, db, first, target), executor="spark", spark=spark)
    second = [{"day": "d2", "v": 20}, {"day": "d3", "v": 30}]
    result = run_plan(_write(warehouse, db, second, target), executor="spark", spark=spark)
    assert result.stores[0].row_count == 2
    rows = sorted((r.day, r.v) for r in spark.table(f"{db}.events").collect())
    assert rows == [("d1", 1), ("d2", 20), ("d3", 30)]
    partitions = sorted(r[0] for r in spark.sql(f"SHOW PARTITIONS {db}.events").collect())
    assert partitions == ["day=d1", "day=d2", "day=d3"]
    # the session's own setting is untouched: the dynamic overwrite was this write's alone
    assert spark.conf.get("spark.sql.sources.partitionOverwriteMode").lower() == "static"
    # both executors read the three partitions, the partition column typed as written
    for executor in ("spark", "local"):
        read = run_plan(_read(warehouse, db, "events"), executor=executor, spark=spark)
        assert sorted((r["day"], r["v"]) for r in _records(read)) == rows, executor


def test_scan_reads_only_the_columns_the_plan_uses(spark, warehouse):
    db = _database()
    records = [{"a": i, "b": f"x{i}", "c": float(i)} for i in range(3)]
    run_plan(_write(warehouse, db, records, {"table": "wide"}), executor="spark", spark=spark)
    plan = _read(
        warehouse,
        db,
        "wide",
        extra=[
            {
                "@id": 2,
                "op": "project",
                "input": 1,
                "projections": [{"ref": "output.b", "expr": "r.b"}],
            }
        ],
    )
    from engine.exec.spark.executor import SparkPlanRun
    from engine.plan import parse_plan
    from engine.storage.engines import plan_engines

    logical = parse_plan(plan)
    engines = plan_engines(logical, base_dir=None, classpath=())
    run = SparkPlanRun(logical, spark, engines=engines, params={})
    result = run.run()
    assert sorted(r["b"] for r in result.records()) == ["x0", "x1", "x2"]
    scan = next(op for op in run.planned.query if op.op == "scan")
    assert scan.projection is not None and list(scan.projection) == ["b"], scan.projection
    # what Spark reads from the table's files: the one column
    df = spark.table(f"{db}.wide")
    from engine.exec.spark.catalog_tables import scan_table

    scanned = scan_table(spark, engines["cat"], {"table": "wide"}, "r", projection=["b"])
    read_schema = scanned._jdf.queryExecution().executedPlan().toString()
    read = re.search(r"ReadSchema: struct<([^>]*)>", read_schema)
    assert read is not None, read_schema
    # b, and the row index the scan's sequence reads; not a nor c
    assert [c.split(":")[0] for c in read.group(1).split(",")] == ["b", "_tmp_metadata_row_index"]
    assert len(df.columns) == 3


def test_a_filter_on_the_partition_column_prunes_partitions(spark, warehouse):
    db = _database()
    records = [{"day": f"d{i % 3}", "v": i} for i in range(9)]
    target = {"table": "ev", "partitionBy": ["day"]}
    run_plan(_write(warehouse, db, records, target), executor="spark", spark=spark)
    from engine.exec.spark.catalog_tables import scan_table
    from engine.exec.spark.columns import compile_condition
    from engine.expr import parse_expression
    from engine.storage.catalog import create_catalog_engine

    engine = create_catalog_engine("cat", {"warehouse": str(warehouse), "database": db})
    scanned = scan_table(spark, engine, {"table": "ev"}, "r")
    kept = scanned.where(compile_condition(parse_expression("r.day == 'd1'"), scanned.schema))
    plan = kept._jdf.queryExecution().executedPlan().toString()
    assert re.search(r"PartitionFilters: \[[^\]]*day#\d+ = d1", plan), plan
    assert sorted(r["r"]["v"] for r in kept.collect()) == [1, 4, 7]


@pytest.mark.parametrize(
    "name",
    [
        "a`b",
        "x; DROP TABLE y",
        "db.t.u",
        "my table",
        "`quoted`",
        "a.b`c",
        "1st",
        "",
        "t--comment",
        "d.",
    ],
)
def test_untrusted_table_names_are_refused_before_anything_runs(spark, warehouse, name):
    db = _database()
    run_plan(_write(warehouse, db, [{"a": 1}], {"table": "keep"}), executor="spark", spark=spark)
    for plan in (
        _write(warehouse, db, [{"a": 2}], {"table": name}),
        _read(warehouse, db, name),
    ):
        for executor in ("spark", "local"):
            with pytest.raises(StorageError, match="table"):
                run_plan(plan, executor=executor, spark=spark)
    assert [t.name for t in spark.catalog.listTables(db)] == ["keep"]


def test_bad_database_and_partition_names_are_refused(spark, warehouse):
    plan = _write(warehouse, "x`y", [{"a": 1}], {"table": "t"})
    with pytest.raises(StorageError, match="database 'x`y' is not a plain identifier"):
        run_plan(plan, executor="spark", spark=spark)
    plan = _write(warehouse, _database(), [{"a": 1}], {"table": "t", "partitionBy": ["a b"]})
    with pytest.raises(StorageError, match="partitionBy must be a list of column names"):
        run_plan(plan, executor="spark", spark=spark)


def test_local_executor_refuses_to_write_and_to_read_unrecorded_tables(spark, warehouse):
    db = _database()
    with pytest.raises(StorageError, match=r"'cat' \(catalog\): the local executor cannot write"):
        run_plan(_write(warehouse, db, [{"a": 1}], {"table": "t"}), executor="local")
    spark.sql(f"CREATE DATABASE {db} LOCATION '{(warehouse / (db + '.db')).as_uri()}'")
    spark.sql(f"CREATE TABLE {db}.foreign (a BIGINT) USING parquet")
    spark.sql(f"INSERT INTO {db}.foreign VALUES (1)")
    with pytest.raises(DrillError, match=r"cannot read table .*foreign.*no record") as err:
        run_plan(_read(warehouse, db, "foreign"), executor="local")
    assert "--executor spark" in (err.value.hint or "")
    read = run_plan(_read(warehouse, db, "foreign"), executor="spark", spark=spark)
    assert [r["a"] for r in _records(read)] == [1]


def test_missing_table_is_named(spark, warehouse):
    with pytest.raises(DrillError, match=r"table t_none\.nope does not exist"):
        run_plan(_read(warehouse, "t_none", "nope"), executor="spark", spark=spark)


def test_store_records_location_schema_and_rows(spark, warehouse):
    db = _database()
    records = [{"day": "d1", "v": 1}, {"day": "d2", "v": 2}]
    run_plan(
        _write(warehouse, db, records, {"table": "ev", "partitionBy": "day"}),
        executor="spark",
        spark=spark,
    )
    record = json.loads((warehouse / "_drill_metadata" / "catalog" / db / "ev.json").read_text())
    assert record["table"] == f"{db}.ev" and record["partition_by"] == ["day"]
    assert record["metadata"]["row_count"] == 2
    assert [c["name"] for c in record["metadata"]["columns"]] == ["v", "day"]
    files = list(Path(record["location"]).rglob("*.parquet"))
    assert sum(pq.read_metadata(f).num_rows for f in files) == 2


def test_a_failed_overwrite_leaves_the_table_as_it_was(spark, warehouse):
    db = _database()
    run_plan(_write(warehouse, db, [{"a": 1}], {"table": "t"}), executor="spark", spark=spark)
    failing = _plan(
        warehouse,
        [
            {"@id": 1, "op": "constant", "content": [{"a": "1"}, {"a": "not a number"}]},
            {
                "@id": 2,
                "op": "project",
                "input": 1,
                "projections": [{"ref": "output.a", "expr": "cast(a as BIGINT)"}],
            },
            {"@id": 3, "op": "store", "input": 2, "storageengine": "cat", "target": {"table": "t"}},
        ],
        db,
    )
    with pytest.raises(DrillError):
        run_plan(failing, executor="spark", spark=spark)
    assert [r.a for r in spark.table(f"{db}.t").collect()] == [1]
    assert [t.name for t in spark.catalog.listTables(db)] == ["t"]
    assert sorted(p.name for p in (warehouse / f"{db}.db").iterdir()) == ["t"]


def test_local_read_refuses_files_another_writer_changed(spark, warehouse):
    db = _database()
    run_plan(_write(warehouse, db, [{"a": 1}], {"table": "t"}), executor="spark", spark=spark)
    # another tool replaces the table's data with other columns, behind the engine's back
    location = warehouse / f"{db}.db" / "t"
    spark.createDataFrame([("x",)], "b string").write.mode("overwrite").parquet(str(location))
    with pytest.raises(DrillError, match="do not hold the columns the engine recorded"):
        run_plan(_read(warehouse, db, "t"), executor="local")
