"""A value an expression cannot take, met by Spark in a store's job: said as the local executor
says it, at the operator and expression that raised it (engine.exec.spark.data_errors)."""

from __future__ import annotations

import json
import logging
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.errors import ExecutionError
from engine.exec.spark.data_errors import (
    ARITHMETIC_OVERFLOW,
    CAST_OVERFLOW,
    INVALID_INPUT,
    DataError,
    data_error,
    locate,
)
from engine.exec.spark.session import _LOG4J
from engine.plan import parse_plan
from engine.run import run_plan

INVALID = (
    "org.apache.spark.SparkNumberFormatException: [CAST_INVALID_INPUT] The value 'x' of the type "
    '"STRING" cannot be cast to "INT" because it is malformed. Correct the value as per the '
    "syntax, or change its target type. Use `try_cast` to tolerate malformed input.\n"
    '== DataFrame ==\n"cast" was called from\njava.base/jdk.internal.reflect.Native...'
)
OVERFLOW = (
    '[CAST_OVERFLOW] The value 9999999999L of the type "BIGINT" cannot be cast to "INT" due to an '
    "overflow. Use `try_cast` to tolerate overflow and return NULL instead. SQLSTATE: 22003"
)
ARITHMETIC = (
    "[ARITHMETIC_OVERFLOW] long overflow. Use 'try_multiply' to tolerate overflow and return "
    'NULL instead.\n== DataFrame ==\n"multiply" was called from\n...'
)


def test_spark_messages_are_read_into_the_kind_and_values_they_name() -> None:
    invalid, overflow, arithmetic = (
        data_error(INVALID),
        data_error(OVERFLOW),
        data_error(ARITHMETIC),
    )
    assert invalid is not None and overflow is not None and arithmetic is not None
    assert (invalid.kind, invalid.value, invalid.target, invalid.called) == (
        INVALID_INPUT,
        "x",
        "INT",
        "cast",
    )
    assert invalid.message == "cannot read 'x' as INT"
    assert (overflow.kind, overflow.value, overflow.target) == (CAST_OVERFLOW, "9999999999", "INT")
    assert (arithmetic.kind, arithmetic.called) == (ARITHMETIC_OVERFLOW, "multiply")
    assert arithmetic.message == "an arithmetic overflow"
    raised = data_error("[USER_RAISED_EXCEPTION] integer division by zero (in %) SQLSTATE: P0001")
    assert raised is not None and raised.message == "integer division by zero (in %)"
    assert data_error("[USER_RAISED_EXCEPTION] disk on fire SQLSTATE: P0001") is None
    assert data_error("[DIVIDE_BY_ZERO] Division by zero.") is None
    assert data_error("Job aborted: something else") is None


def plan_with(*exprs: str, second_store: str | None = None) -> Any:
    """A constant, a project of ``exprs``, a queue store; ``second_store``: a filter of the
    constant with that condition, stored too."""
    query: list[dict[str, Any]] = [
        {"@id": 1, "op": "constant", "content": [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}]},
        {
            "@id": 2,
            "op": "project",
            "input": 1,
            "projections": [{"ref": f"output.c{i}", "expr": e} for i, e in enumerate(exprs)],
        },
        {"@id": 3, "op": "store", "input": 2, "storageengine": "q", "target": {}},
    ]
    if second_store is not None:
        query += [
            {"@id": 4, "op": "filter", "input": 1, "expr": second_store},
            {"@id": 5, "op": "store", "input": 4, "storageengine": "q", "target": {}},
        ]
    return parse_plan({"storage": {"q": {"type": "queue"}}, "query": query})


def test_an_error_is_located_at_the_one_expression_feeding_the_store_that_can_raise_it() -> None:
    error = data_error(INVALID)
    assert isinstance(error, DataError)
    plan = plan_with("r.a + 1", "cast(b as INT) * 2", second_store="cast(b as BIGINT) > 0")
    located = locate(error, plan, "3")
    assert located is not None
    said, op = located
    assert op.id == "2"
    assert said.message == "cannot read 'x' as INT in `cast(b as INT)`"
    # A cast to another type cannot raise it; the other store's operators are not the job's.
    assert (
        locate(error, plan_with("cast(b as BIGINT)", second_store="cast(b as INT) > 0"), "3")
        is None
    )
    assert (
        locate(error, plan_with("cast(b as INT)", second_store="cast(b as INT) > 0"), "5")[1].id
        == "4"
    )


def test_an_error_two_expressions_can_raise_is_left_at_the_store() -> None:
    error = data_error(INVALID)
    assert isinstance(error, DataError)
    assert locate(error, plan_with("cast(b as INT)", "cast(a as INT)"), "3") is None
    # The same expression twice in one operator is one place.
    assert locate(error, plan_with("cast(b as INT)", "cast(b as INT) + 1"), "3") is not None


def test_an_overflow_is_located_by_the_operation_spark_names() -> None:
    error = data_error(ARITHMETIC)
    assert isinstance(error, DataError)
    located = locate(error, plan_with("a + 1", "a * 9223372036854775807"), "3")
    assert located is not None
    assert located[0].message == "cannot evaluate `a * 9223372036854775807`: overflow"


JSON_ROWS = '{"a": 1, "b": "x"}\n{"a": 2, "b": "y"}\n'


def json_plan(root: Path, expr: str) -> Any:
    (root / "t.json").write_text(JSON_ROWS)
    return parse_plan(
        {
            "storage": {"fs": {"type": "fs", "root": str(root)}, "q": {"type": "queue"}},
            "query": [
                {
                    "@id": 1,
                    "op": "scan",
                    "storageengine": "fs",
                    "ref": "r",
                    "selection": {"path": "t.json", "format": "json"},
                },
                {"@id": 2, "op": "filter", "input": 1, "expr": "r.a > 0"},
                {
                    "@id": 3,
                    "op": "project",
                    "input": 2,
                    "projections": [{"ref": "output.x", "expr": expr}],
                },
                {"@id": 4, "op": "store", "input": 3, "storageengine": "q", "target": {}},
            ],
        }
    )


@pytest.mark.parametrize(
    ("expr", "said"),
    [
        ("cast(r.b as INT)", r"cannot read '[xy]' as INT in `cast\(r\.b as INT\)`"),
        ("cast(r.b as FLOAT8)", r"cannot read '[xy]' as FLOAT8 in `cast\(r\.b as FLOAT8\)`"),
        ("to_date(r.b)", r"cannot read '[xy]' as TIMESTAMP in `to_date\(r\.b\)`"),
        (
            "cast(r.a * 3000000000 as INT)",
            r"cannot cast \d+ to INT: out of its range in `cast\(r\.a \* 3000000000 as INT\)`",
        ),
        (
            "9223372036854775807 + r.a",
            r"cannot evaluate `9223372036854775807 \+ r\.a`: overflow",
        ),
        ("cast(r.b as DATE)", r"cannot read '[xy]' as DATE in `cast\(r\.b as DATE\)`"),
        ("r.a % 0", r"integer division by zero \(in %\) in `r\.a % 0`"),
        (
            f"cast('{'9' * 38}' as DECIMAL(38, 0)) + r.a",
            r"a DECIMAL result does not fit its type DECIMAL\(38, 0\) \(in add\) in `.*`",
        ),
        (
            "cast(r.a as DECIMAL(5, 2)) / (r.a - r.a)",
            r"division by zero \(DECIMAL\) in `cast\(r\.a as DECIMAL\(5, 2\)\) / \(r\.a - r\.a\)`",
        ),
        (
            "date_trunc(r.b, cast(r.a as DATE))",
            r"date_trunc has no unit '[xy]'; use one of .* in `date_trunc\(r\.b, .*\)`",
        ),
    ],
    ids=[
        "string-as-int",
        "string-as-float",
        "string-as-date",
        "int-overflow",
        "long-overflow",
        "cast-to-date",
        "modulo-zero",
        "decimal-overflow",
        "decimal-by-zero",
        "unknown-unit",
    ],
)
def test_spark_names_the_operator_and_expression_as_the_local_executor(
    spark: Any, tmp_path: Path, expr: str, said: str
) -> None:
    plan = json_plan(tmp_path, expr)
    with pytest.raises(ExecutionError) as on_spark:
        run_plan(plan, executor="spark", spark=spark)
    with pytest.raises(ExecutionError) as local:
        run_plan(plan, executor="local")
    assert on_spark.value.operator_id == local.value.operator_id == "3"
    assert on_spark.value.operator_kind == "project"
    where = r"fragment 0, operator 3 \(project\): "
    # Where Spark names the value, the file it was read from is named too (bad_records).
    read_from = f", read from {tmp_path / 't.json'}"
    message = on_spark.value.message
    if said.startswith(("cannot read", "cannot cast")):
        assert message.endswith(read_from), message
        message = message[: -len(read_from)]
    assert re.fullmatch(where + said, message), message
    assert f"`{expr}`" in local.value.message
    assert "try_cast" not in str(on_spark.value) and "SQLSTATE" not in str(on_spark.value)


def test_the_sessions_leave_a_failed_tasks_logs_to_the_error_the_engine_reports(
    spark: Any,
) -> None:
    """Spark logs a failed task's Java stack trace and the job it aborts, and PySpark prints
    the error again as JSON: the engine reports the failure itself, so the sessions say none."""
    for logger in (
        "org.apache.spark.executor.Executor",
        "org.apache.spark.scheduler.TaskSetManager",
    ):
        assert re.search(rf"logger\.(\w+)\.name = {re.escape(logger)}\n", _LOG4J)
        name = re.search(rf"logger\.(\w+)\.name = {re.escape(logger)}\n", _LOG4J).group(1)
        assert f"logger.{name}.level = off" in _LOG4J
    for logger in ("DataFrameQueryContextLogger", "SQLQueryContextLogger"):
        assert logging.getLogger(logger).level == logging.CRITICAL


def write_rows(directory: Path, name: str, fmt: str, rows: list[dict[str, Any]]) -> Path:
    directory.mkdir(exist_ok=True)
    path = directory / f"{name}.{fmt}"
    if fmt == "json":
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    elif fmt == "csv":
        path.write_text("a,b\n" + "".join(f"{row['a']},{row['b']}\n" for row in rows))
    else:
        pq.write_table(pa.Table.from_pylist(rows), path)
    return path


@pytest.mark.parametrize("fmt", ["json", "csv", "parquet"])
def test_a_bad_value_on_spark_names_the_file_it_was_read_from(
    spark: Any, tmp_path: Path, fmt: str
) -> None:
    """Spark's error names the value and the expression, not the record: once the run has
    failed, the engine asks Spark which file holds the value (the good path runs as before)."""
    good = [{"a": str(i), "b": f"2024-01-0{i} 10:00:00"} for i in range(1, 6)]
    write_rows(tmp_path / "events", "part-0", fmt, good)
    bad = write_rows(
        tmp_path / "events", "part-1", fmt, [*good, {"a": "9", "b": "yesterday evening"}]
    )
    plan = parse_plan(
        {
            "storage": {"fs": {"type": "fs", "root": str(tmp_path)}, "q": {"type": "queue"}},
            "query": [
                {
                    "@id": 1,
                    "op": "scan",
                    "storageengine": "fs",
                    "ref": "e",
                    "selection": {"path": "events", "format": fmt},
                },
                {
                    "@id": 2,
                    "op": "project",
                    "input": 1,
                    "projections": [{"ref": "output.ts", "expr": "to_timestamp(e.b)"}],
                },
                {"@id": 3, "op": "store", "input": 2, "storageengine": "q", "target": {}},
            ],
        }
    )
    with pytest.raises(ExecutionError) as on_spark:
        run_plan(plan, executor="spark", spark=spark)
    assert on_spark.value.operator_id == "2"
    assert re.fullmatch(
        r"fragment \d+, operator 2 \(project\): cannot read 'yesterday evening' as TIMESTAMP "
        rf"in `to_timestamp\(e\.b\)`, read from {re.escape(str(bad))}",
        on_spark.value.message,
    ), on_spark.value.message


def test_a_run_that_does_not_fail_reads_no_file_names(spark: Any, tmp_path: Path) -> None:
    """The file of a bad value is looked for only once a run has failed: a good run's plan
    carries no file column."""
    from engine.exec.spark.executor import SparkPlanRun
    from engine.run import build_engines

    plan = json_plan(tmp_path, "cast(r.a as INT)")
    engines = build_engines(plan, base_dir=None, classpath=[])
    frames = SparkPlanRun(plan, spark, engines=engines, params={}).compile_frames()
    for frame in frames.values():
        assert "input_file_name" not in frame._jdf.queryExecution().executedPlan().toString()


@pytest.mark.parametrize("grouped", [False, True], ids=["global", "grouped"])
def test_a_decimal_sum_past_38_digits_fails_on_both_executors(
    spark: Any, tmp_path: Path, grouped: bool
) -> None:
    """Spark's sum of DECIMAL(p, s) is DECIMAL(min(38, p + 10), s) and, in ANSI mode, fails
    where it overflows; the local executor fails too (Arrow alone would wrap around)."""
    big = pa.array([Decimal("9" * 37 + ".0")] * 2 + [Decimal("1.5")], pa.decimal128(38, 1))
    pq.write_table(pa.table({"k": [1, 1, 2], "v": big}), tmp_path / "t.parquet")
    segment = {"@id": 2, "op": "segment", "input": 1, "ref": "g", "exprs": ["r.k"]}
    collapse = {
        "@id": 3,
        "op": "collapsingaggregate",
        "input": 2 if grouped else 1,
        "carryovers": ["r.k"] if grouped else [],
        "aggregations": [{"ref": "s", "expr": "sum(r.v)"}],
        **({"within": "g"} if grouped else {}),
    }
    plan = parse_plan(
        {
            "storage": {"fs": {"type": "fs", "root": str(tmp_path)}, "q": {"type": "queue"}},
            "query": [
                {
                    "@id": 1,
                    "op": "scan",
                    "storageengine": "fs",
                    "ref": "r",
                    "selection": {"path": "t.parquet"},
                },
                *([segment] if grouped else []),
                collapse,
                {"@id": 4, "op": "store", "input": 3, "storageengine": "q", "target": {}},
            ],
        }
    )
    with pytest.raises(ExecutionError) as local:
        run_plan(plan, executor="local")
    with pytest.raises(ExecutionError) as on_spark:
        run_plan(plan, executor="spark", spark=spark)
    assert local.value.operator_id == on_spark.value.operator_id == "3"
    assert "a DECIMAL result does not fit its type DECIMAL(38, 1) (in sum)" in local.value.message
    assert "`sum(r.v)`: overflow" in on_spark.value.message
