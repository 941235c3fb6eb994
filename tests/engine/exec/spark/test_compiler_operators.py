"""The Spark operator building blocks (engine/exec/spark/compiler_*.py) on small DataFrames, against
the semantics of CASES.md: stable order, limit ranges, runs, segments, window frames, aggregates,
joins, unions and flatten."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from spark_plans import physical_plan
from spark_settings import spark_setting

from engine.errors import AggregateError
from engine.exec.spark.compiler_aggregate import collapse_rows, running_columns
from engine.exec.spark.compiler_flatten import Flattened, element_type, flatten_rows
from engine.exec.spark.compiler_join import join_rows, union_rows
from engine.exec.spark.compiler_order import (
    limit_rows,
    order_rows,
    top_rows,
    with_run_numbers,
)
from engine.exec.spark.compiler_window import segment_rows, windowframe_rows
from engine.exec.spark.paths import Typed

SEQ = "__seq"


def frame(spark: Any, schema: str, rows: list[tuple]) -> DataFrame:
    """A DataFrame of ``rows`` with a sequence column numbering them in list order, stored in
    reverse so that nothing can rely on the physical order of the rows."""
    data = [(*row, i * 10) for i, row in enumerate(rows)]
    return spark.createDataFrame(data[::-1], f"{schema}, {SEQ} long")


def rows(df: DataFrame, *columns: str) -> list[tuple]:
    """The records in sequence order (one Spark action)."""
    return [tuple(r) for r in df.orderBy(SEQ).select(*columns).collect()]


def test_order_is_stable_with_nulls_first_whatever_the_direction(spark: Any) -> None:
    df = frame(spark, "k long, id long", [(2, 0), (None, 1), (1, 2), (2, 3), (None, 4), (3, 5)])
    desc = order_rows(df, [(F.col("k"), "desc", "first")], seq=SEQ)
    asc_last = order_rows(df, [(F.col("k"), "asc", "last")], seq=SEQ)
    assert rows(desc, "id") == [(1,), (4,), (5,), (0,), (3,), (2,)]
    assert rows(asc_last, "id") == [(2,), (0,), (3,), (5,), (1,), (4,)]


def test_order_within_sorts_inside_runs_and_keeps_runs_in_place(spark: Any) -> None:
    df = frame(spark, "g long, k long", [(1, 3), (1, 1), (2, 9), (2, 0), (1, 5), (1, 4)])
    ordered = order_rows(df, [(F.col("k"), "asc", "first")], seq=SEQ, within=F.col("g"))
    assert rows(ordered, "g", "k") == [(1, 1), (1, 3), (2, 0), (2, 9), (1, 4), (1, 5)]


@pytest.mark.parametrize(
    ("first", "last", "expected"),
    [(0, 2, [0, 1]), (1, 2, [1]), (3, 10, [3, 4]), (1, 1, []), (0, 0, []), (2, None, [2, 3, 4])],
)
def test_limit_keeps_first_to_last(
    spark: Any, first: int, last: int | None, expected: list
) -> None:
    df = frame(spark, "id long", [(i,) for i in range(5)])
    assert [r[0] for r in rows(limit_rows(df, first, last, seq=SEQ), "id")] == expected


def test_top_rows_sorts_and_limits_at_once(spark: Any) -> None:
    df = frame(spark, "k long, id long", [(3, 0), (1, 1), (None, 2), (1, 3), (2, 4)])
    keys = [(F.col("k"), "asc", "last")]
    assert rows(top_rows(df, keys, 1, 4, seq=SEQ), "id") == [(3,), (4,), (0,)]  # ties: input order
    assert top_rows(df, keys, 0, 2, seq=SEQ).columns == ["k", "id", SEQ]  # no key columns left


def test_top_rows_sorts_by_fields_in_place_or_by_computed_keys_alike(spark: Any) -> None:
    """A key reading a column or a member is sorted by as it is; another key is computed into a
    column of its own, which the output drops: the same rows either way."""
    df = frame(
        spark,
        "r struct<k:long>, x long, id long",
        [({"k": 3}, 1, 0), ({"k": 1}, 5, 1), (None, 0, 2), ({"k": 1}, 2, 3), ({"k": 2}, 7, 4)],
    )
    by_member = [(F.col("r").getField("k"), "asc", "last")]
    top = top_rows(df, by_member, 1, 4, seq=SEQ, fields=[True])
    again = top_rows(df, by_member, 1, 4, seq=SEQ, fields=[False])
    assert rows(top, "id") == rows(again, "id") == [(3,), (4,), (0,)]  # ties: input order
    mixed = [(F.col("x") % 2, "asc", "last"), (F.col("r").getField("k"), "desc", "first")]
    plan = top_rows(df, mixed, 0, 5, seq=SEQ, fields=[False, True])
    assert rows(plan, "id") == [(2,), (3,), (0,), (4,), (1,)]
    assert plan.columns == ["r", "x", "id", SEQ]


def test_runs_treat_null_as_a_value_and_compare_maps_deeply(spark: Any) -> None:
    df = frame(
        spark,
        "m struct<a:long>",
        [({"a": 1},), ({"a": 1},), (None,), (None,), ({"a": None},), ({"a": 1},)],
    )
    numbered = with_run_numbers(df, F.col("m"), seq=SEQ, name="run")
    assert [r[0] for r in rows(numbered, "run")] == [0, 0, 1, 1, 2, 3]


def test_segment_groups_in_first_appearance_order(spark: Any) -> None:
    df = frame(spark, "g string, id long", [("b", 0), ("a", 1), ("b", 2), (None, 3), ("a", 4)])
    grouped = segment_rows(df, [F.col("g")], seq=SEQ, name="seg")
    assert rows(grouped, "id", "seg") == [(0, 1), (2, 1), (1, 2), (4, 2), (3, 3)]


def test_segment_without_keys_is_one_group_in_input_order(spark: Any) -> None:
    df = frame(spark, "id long", [(5,), (1,), (3,)])
    assert rows(segment_rows(df, [], seq=SEQ, name="seg"), "id", "seg") == [(5, 1), (1, 1), (3, 1)]


def test_windowframe_members_segments_and_positions(spark: Any) -> None:
    # DRILL-31's example: start -2, end 0 over [0..4] gives 12 rows.
    df = frame(spark, "id long", [(i,) for i in range(5)])
    framed = windowframe_rows(
        df, start=-2, end=0, within=None, seq=SEQ, segment="seg", position="pos"
    )
    got = rows(framed, "id", "seg", "pos")
    assert [r[1] for r in got] == [0, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4]
    assert [r[2] for r in got] == [0, -1, 0, -2, -1, 0, -2, -1, 0, -2, -1, 0]
    assert [r[0] for r in got] == [0, 0, 1, 0, 1, 2, 1, 2, 3, 2, 3, 4]


def test_windowframe_within_and_unbounded_end(spark: Any) -> None:
    df = frame(spark, "v long", [(0,), (0,), (1,), (1,), (1,)])
    framed = windowframe_rows(
        df, start=0, end=None, within=F.col("v"), seq=SEQ, segment="seg", position="pos"
    )
    assert rows(framed, "seg", "pos") == [
        (0, 0),
        (0, 1),
        (1, 0),
        (2, 0),
        (2, 1),
        (2, 2),
        (3, 0),
        (3, 1),
        (4, 0),
    ]


def one() -> Typed:
    return Typed(F.lit(1), T.IntegerType())


def typed(df: Any, name: str) -> Typed:
    return Typed(F.col(name), df.schema[name].dataType)


def test_collapse_runs_with_target_and_carryovers(spark: Any) -> None:
    df = frame(
        spark,
        "g long, x long, t boolean",
        [(1, 5, False), (1, None, True), (1, 7, False), (2, 1, False), (1, 2, True)],
    )
    out = collapse_rows(
        df,
        [("count", [one()]), ("count", [typed(df, "x")]), ("sum", [typed(df, "x")])],
        [F.col("x")],
        within=F.col("g"),
        target=F.col("t"),
        seq=SEQ,
        aggregate_names=["rows", "n", "total"],
        carryover_names=["carried"],
    ).select()
    # Runs: g=1 (3 rows), g=2 (no true target: no record), g=1 again (1 row).
    assert rows(out, "rows", "n", "total", "carried") == [(3, 2, 12, None), (1, 1, 2, 2)]


def test_collapse_of_nothing_without_within_gives_one_record(spark: Any) -> None:
    df = frame(spark, "x long", [])
    out = collapse_rows(
        df,
        [("count", [one()]), ("sum", [typed(df, "x")]), ("count_distinct", [typed(df, "x")])],
        [],
        within=None,
        target=None,
        seq=SEQ,
        aggregate_names=["n", "s", "d"],
        carryover_names=[],
    ).select()
    assert rows(out, "n", "s", "d") == [(0, None, 0)]


def test_sum_of_strings_is_refused(spark: Any) -> None:
    df = frame(spark, "s string", [("a",)])
    with pytest.raises(AggregateError, match="sum\\(\\) needs numbers"):
        collapse_rows(
            df,
            [("sum", [typed(df, "s")])],
            [],
            within=None,
            target=None,
            seq=SEQ,
            aggregate_names=["x"],
            carryover_names=[],
        )


def test_running_aggregates_restart_with_within(spark: Any) -> None:
    df = frame(spark, "g long, x long", [(1, 1), (1, None), (1, 3), (2, 4), (1, 5)])
    df = with_run_numbers(df, F.col("g"), seq=SEQ, name="run")
    values = running_columns(
        [
            ("row_number", []),
            ("sum", [typed(df, "x")]),
            ("count", [typed(df, "x")]),
            ("max", [typed(df, "x")]),
        ],
        partition="run",
        order=[F.col(SEQ)],
    )
    assert [dtype for _, dtype in values] == [T.LongType()] * 4
    out = df.select(SEQ, *[c.alias(n) for (c, _), n in zip(values, ["rn", "s", "c", "m"])])
    assert rows(out, "rn", "s", "c", "m") == [
        (1, 1, 1, 1),
        (2, 1, 1, 1),
        (3, 4, 2, 3),
        (1, 4, 1, 4),
        (1, 5, 1, 5),
    ]


def test_outer_join_order_merge_and_null_keys(spark: Any) -> None:
    left = frame(
        spark,
        "e struct<k:long,n:string>, m struct<a:long>",
        [({"k": 1, "n": "x"}, {"a": 1}), ({"k": None, "n": "y"}, None), ({"k": 2, "n": "z"}, None)],
    )
    right = frame(
        spark,
        "d struct<k:long>, m struct<b:long>",
        [({"k": 2}, {"b": 7}), ({"k": 1}, {"b": 8}), ({"k": 1}, {"b": 9}), ({"k": 5}, None)],
    )
    joined = join_rows(left, right, [(F.col("e.k"), "==", F.col("d.k"))], how="outer", seq=SEQ)
    got = [
        (r[0] and r[0]["n"], r[1] and r[1]["k"], r[2] and tuple(r[2]))
        for r in rows(joined, "e", "d", "m")
    ]
    assert got == [
        ("x", 1, (1, 8)),
        ("x", 1, (1, 9)),
        ("y", None, None),
        ("z", 2, (None, 7)),
        (None, 5, None),
    ]


def test_a_join_of_records_with_no_field_in_common_pairs_them_in_order(spark: Any) -> None:
    left = frame(spark, "e struct<k:long>", [({"k": 1},), ({"k": None},), ({"k": 2},)])
    right = frame(spark, "d struct<k:long>", [({"k": 2},), ({"k": 1},), ({"k": 5},)])
    joined = join_rows(left, right, [(F.col("e.k"), "==", F.col("d.k"))], how="outer", seq=SEQ)
    got = [(r[0] and r[0]["k"], r[1] and r[1]["k"]) for r in rows(joined, "e", "d")]
    assert got == [(1, 1), (None, None), (2, 2), (None, 5)]
    # Unordered: the same pairs, with no sequence read.
    condition = [(F.col("e.k"), "==", F.col("d.k"))]
    unordered = join_rows(left, right, condition, how="outer", seq=SEQ, ordered=False)
    assert unordered.columns == ["e", "d", SEQ]
    got = sorted(((r.e and r.e.k, r.d and r.d.k, r[SEQ]) for r in unordered.collect()), key=str)
    assert got == sorted([(1, 1, 0), (None, None, 0), (2, 2, 0), (None, 5, 0)], key=str)


@pytest.mark.parametrize("broadcast", [False, True])
def test_a_shuffled_join_leaves_its_rows_partitioned_by_its_keys(
    spark: Any, broadcast: bool
) -> None:
    # An aggregate by the join's key over a shuffled join needs no exchange of its own: the
    # join compares the key columns themselves. A planned broadcast compares them through
    # ifnull (no inferred isnotnull filter); null keys match nothing either way.
    left = frame(spark, "k long, v long", [(1, 10), (2, 20), (None, 30), (1, 40)])
    right = frame(spark, "j long", [(1,), (None,), (2,), (3,)])
    joined = join_rows(
        left,
        right,
        [(F.col("k"), "==", F.col("j"))],
        how="inner",
        seq=SEQ,
        ordered=False,
        broadcast=broadcast,
    )
    totals = joined.groupBy("k").agg(F.sum("v").alias("total"))
    with spark_setting(spark, "spark.sql.autoBroadcastJoinThreshold", "-1"):
        plan = physical_plan(totals)
        assert sorted(tuple(r) for r in totals.collect()) == [(1, 50), (2, 20)]
    if not broadcast:
        assert plan.count("hashpartitioning(") == 2, plan  # the join's two sides only


def test_inner_join_needs_every_condition_and_no_condition_is_cartesian(spark: Any) -> None:
    left = frame(spark, "x long, y long", [(1, 3), (5, 1)])
    right = frame(spark, "a long, b long", [(3, 1), (6, 2)])
    both = join_rows(
        left,
        right,
        [(F.col("x"), "<", F.col("a")), (F.col("y"), "!=", F.col("b"))],
        how="inner",
        seq=SEQ,
    )
    cartesian = join_rows(left, right, [], how="inner", seq=SEQ)
    assert rows(both, "x", "a") == [(1, 3), (1, 6), (5, 6)]
    assert len(rows(cartesian, "x", "a")) == 4


def test_union_keeps_input_order_and_distinct_keeps_first(spark: Any) -> None:
    a = frame(spark, "x long", [(1,), (2,), (1,)])
    b = frame(spark, "x long, y string", [(2, None), (3, "q")])
    assert rows(union_rows([a, b], distinct=False, seq=SEQ), "x", "y") == [
        (1, None),
        (2, None),
        (1, None),
        (2, None),
        (3, "q"),
    ]
    assert rows(union_rows([a, b], distinct=True, seq=SEQ), "x", "y") == [
        (1, None),
        (2, None),
        (3, "q"),
    ]


def flattened(rows: Flattened) -> DataFrame:
    sequence = [F.col(SEQ)] if rows.sequence is None else [rows.sequence.alias(SEQ)]
    return rows.frame.select("id", rows.element.column.alias("e"), *sequence)


def test_flatten_arrays_empty_null_and_scalars(spark: Any) -> None:
    df = frame(spark, "id long, a array<long>", [(1, [7, 8]), (2, []), (3, None), (4, [9])])
    array = Typed(F.col("a"), T.ArrayType(T.LongType()))
    assert element_type(array.dtype) == T.LongType()
    assert rows(flattened(flatten_rows(df, array, seq=SEQ, name="e")), "id", "e") == [
        (1, 7),
        (1, 8),
        (3, None),
        (4, 9),
    ]
    scalar = Typed(F.col("id"), T.LongType())
    assert element_type(scalar.dtype) == T.LongType()
    one_each = flatten_rows(df, scalar, seq=SEQ, name="e")
    assert one_each.frame is df and one_each.sequence is None  # no step: the value itself
    assert rows(flattened(one_each), "e") == [(1,), (2,), (3,), (4,)]
