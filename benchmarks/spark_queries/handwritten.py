"""The benchmark queries as a good engineer writes them in PySpark: one function per plan.

Each ``query(spark, data, out)`` reads the data set under ``data`` with Spark's own readers (the
JSON schema given, not inferred), computes what the plan of the same name computes, and writes
it as parquet to ``out`` (overwriting), as the plan's store does. Plans with an ``order`` write
their records in that order.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

EVENT_SCHEMA = T.StructType(
    [
        T.StructField("event_id", T.LongType()),
        T.StructField("user_id", T.LongType()),
        T.StructField("ts", T.LongType()),
        T.StructField("kind", T.StringType()),
        T.StructField("amount", T.DoubleType()),
        T.StructField(
            "device",
            T.StructType(
                [T.StructField("os", T.StringType()), T.StructField("version", T.StringType())]
            ),
        ),
        T.StructField(
            "items",
            T.ArrayType(
                T.StructType(
                    [
                        T.StructField("sku", T.StringType()),
                        T.StructField("qty", T.LongType()),
                        T.StructField("price", T.DoubleType()),
                    ]
                )
            ),
        ),
    ]
)

Query = Callable[[Any, Path, Path], None]


def _write(df: DataFrame, out: Path) -> None:
    df.write.mode("overwrite").parquet(str(out))


def _events(spark: Any, data: Path) -> DataFrame:
    return spark.read.schema(EVENT_SCHEMA).json(str(data / "events" / "*"))


def q1_pricing_summary(spark: Any, data: Path, out: Path) -> None:
    lineitem = spark.read.parquet(str(data / "lineitem"))
    disc_price = F.col("l_extendedprice") * (1 - F.col("l_discount"))
    result = (
        lineitem.where(F.col("l_shipdate") <= F.lit("1998-09-02").cast("date"))
        .groupBy("l_returnflag", "l_linestatus")
        .agg(
            F.sum("l_quantity").alias("sum_qty"),
            F.sum("l_extendedprice").alias("sum_base_price"),
            F.sum(disc_price).alias("sum_disc_price"),
            F.sum(disc_price * (1 + F.col("l_tax"))).alias("sum_charge"),
            F.avg("l_quantity").alias("avg_qty"),
            F.avg("l_extendedprice").alias("avg_price"),
            F.avg("l_discount").alias("avg_disc"),
            F.count(F.lit(1)).alias("count_order"),
        )
        .orderBy("l_returnflag", "l_linestatus")
    )
    _write(result, out)


def q3_shipping_priority(spark: Any, data: Path, out: Path) -> None:
    day = F.lit("1995-03-15").cast("date")
    customer = spark.read.parquet(str(data / "customer")).where(F.col("c_mktsegment") == "BUILDING")
    orders = spark.read.parquet(str(data / "orders")).where(F.col("o_orderdate") < day)
    lineitem = spark.read.parquet(str(data / "lineitem")).where(F.col("l_shipdate") > day)
    result = (
        customer.join(orders, customer.c_custkey == orders.o_custkey)
        .join(lineitem, orders.o_orderkey == lineitem.l_orderkey)
        .groupBy("l_orderkey", "o_orderdate", "o_shippriority")
        .agg(F.sum(F.col("l_extendedprice") * (1 - F.col("l_discount"))).alias("revenue"))
        .orderBy(F.col("revenue").desc(), "o_orderdate", "l_orderkey")
        .limit(10)
        .select("l_orderkey", "revenue", "o_orderdate", "o_shippriority")
    )
    _write(result, out)


def q6_forecast_revenue(spark: Any, data: Path, out: Path) -> None:
    lineitem = spark.read.parquet(str(data / "lineitem"))
    result = lineitem.where(
        (F.col("l_shipdate") >= F.lit("1994-01-01").cast("date"))
        & (F.col("l_shipdate") < F.lit("1995-01-01").cast("date"))
        & F.col("l_discount").between(0.05, 0.07)
        & (F.col("l_quantity") < 24)
    ).agg(F.sum(F.col("l_extendedprice") * F.col("l_discount")).alias("revenue"))
    _write(result, out)


def sessionize_windowframe(spark: Any, data: Path, out: Path) -> None:
    by_user = Window.partitionBy("user_id").orderBy("ts", "event_id")
    gap = F.col("ts") - F.lag("ts").over(by_user)
    starts = F.when(gap.isNull() | (gap > 1800), 1).otherwise(0)
    so_far = by_user.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    result = (
        _events(spark, data)
        .withColumn("starts", starts)
        .withColumn("session_number", F.sum("starts").over(so_far))
        .select("user_id", "event_id", "ts", "session_number")
        .orderBy("user_id", "ts", "event_id")
    )
    _write(result, out)


def flatten_items(spark: Any, data: Path, out: Path) -> None:
    item = F.col("item")
    result = (
        _events(spark, data)
        .select("event_id", "user_id", F.explode("items").alias("item"))
        .select(
            "event_id",
            "user_id",
            item.sku.alias("sku"),
            item.qty.alias("qty"),
            (item.qty * item.price).alias("line_total"),
        )
    )
    _write(result, out)


def left_join_filter(spark: Any, data: Path, out: Path) -> None:
    orders = spark.read.parquet(str(data / "orders"))
    customer = spark.read.parquet(str(data / "customer"))
    result = (
        orders.join(customer, orders.o_custkey == customer.c_custkey, "left")
        .where(
            (F.col("o_orderdate") >= F.lit("1996-01-01").cast("date"))
            & (F.col("c_name").isNull() | (F.col("c_acctbal") < 5000))
        )
        .select("o_orderkey", "o_custkey", "o_totalprice", "c_name", "c_mktsegment")
    )
    _write(result, out)


def union_distinct(spark: Any, data: Path, out: Path) -> None:
    customers = spark.read.parquet(str(data / "customer")).select(
        F.col("c_name").alias("name"), F.col("c_mktsegment").alias("segment")
    )
    prospects = spark.read.option("header", True).csv(str(data / "prospects.csv"))
    _write(customers.unionByName(prospects.select("name", "segment")).distinct(), out)


def topn_order_limit(spark: Any, data: Path, out: Path) -> None:
    lineitem = spark.read.parquet(str(data / "lineitem"))
    result = (
        lineitem.orderBy(F.col("l_extendedprice").desc(), "l_orderkey", "l_linenumber")
        .limit(100)
        .select("l_orderkey", "l_linenumber", "l_extendedprice", "l_shipmode")
    )
    _write(result, out)


QUERIES: dict[str, Query] = {
    query.__name__: query
    for query in (
        q1_pricing_summary,
        q3_shipping_priority,
        q6_forecast_revenue,
        sessionize_windowframe,
        flatten_items,
        left_join_filter,
        union_distinct,
        topn_order_limit,
    )
}
"""Every query by plan name (``plans/<name>.json``)."""

ORDERED = frozenset(
    {"q1_pricing_summary", "q3_shipping_priority", "sessionize_windowframe", "topn_order_limit"}
)
"""The queries whose records come out in an order the plan defines."""
