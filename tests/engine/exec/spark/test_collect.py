"""Collecting to Arrow past Arrow IPC's nesting limit: the row path gives what ``toArrow`` gives."""

from __future__ import annotations

import datetime
from decimal import Decimal
from typing import Any

import pytest
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from engine.exec.spark import collect
from engine.exec.spark.collect import ARROW_IPC_DEPTH, nesting_depth, to_arrow
from engine.exec.spark.compiler_visit_sources import nullable_everywhere

pytestmark = pytest.mark.spark


def every_type(spark: Any) -> DataFrame:
    """Two rows of every type a plan's records hold, the second all null."""
    values: dict[str, Column] = {
        "i": F.lit(7),
        "d": F.lit(1.5),
        "s": F.lit("x"),
        "b": F.lit(True),
        "dt": F.lit(datetime.date(2024, 1, 2)),
        "ts": F.lit(datetime.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=datetime.UTC)),
        "ntz": F.to_timestamp_ntz(F.lit("2024-01-02 03:04:05")),
        "dec": F.lit(Decimal("1.25")).cast("decimal(10,2)"),
        "bin": F.lit(bytearray(b"\x01\x02")),
        "m": F.create_map(F.lit("k"), F.lit(1)),
        "arr": F.array(F.struct(F.lit(1).alias("a"), F.array(F.lit(1), F.lit(2)).alias("b"))),
        "st": F.struct(F.lit(None).cast("string").alias("x"), F.lit(2).alias("y")),
    }
    first = F.col("id") == 0
    # Nullable at every level, as the executor collects (Spark's own toArrow needs it too).
    return nullable_everywhere(
        spark.range(2).select(*[F.when(first, v).alias(k) for k, v in values.items()])
    )


def deep(column: Column, levels: int) -> Column:
    for _ in range(levels):
        column = F.struct(column.alias("n"))
    return column


def test_rows_give_what_arrow_gives(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    df = every_type(spark)
    expected = df.toArrow()
    monkeypatch.setattr(collect, "ARROW_IPC_DEPTH", -1)  # every schema takes the row path
    assert to_arrow(df).equals(expected)


def test_records_deeper_than_arrow_ipc_allows(spark: Any) -> None:
    df = every_type(spark).select(deep(F.struct("*"), 100).alias("r"))
    assert nesting_depth(df.schema) > ARROW_IPC_DEPTH
    with pytest.raises(Exception, match="recursion depth"):
        df.toArrow()  # the limit this module works around
    table = to_arrow(df)
    value = table.to_pylist()[0]["r"]
    for _ in range(100):
        value = value["n"]
    assert value["ts"] == datetime.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=datetime.UTC)
    assert value["m"] == [("k", 1)] and value["arr"] == [{"a": 1, "b": [1, 2]}]
    assert value["dec"] == Decimal("1.25") and value["bin"] == b"\x01\x02"
