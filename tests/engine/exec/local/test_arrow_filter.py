"""A pushed filter as a pyarrow Expression: translated only where it keeps exactly the records the
evaluator keeps, including inside a parquet read that skips row groups by their statistics."""

from __future__ import annotations

import datetime
import io
import math
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.exec.local.arrow_filter import arrow_filter, to_arrow_filter
from engine.exec.local.sources import wrap_under
from engine.expr import parse_expression
from engine.expr.arrow.evaluate import evaluate_predicate
from engine.storage.formats import ParquetReader

TYPES = {
    "i": pa.int64(),
    "j": pa.int32(),
    "u": pa.uint8(),
    "d": pa.float64(),
    "h": pa.float32(),
    "s": pa.string(),
    "b": pa.bool_(),
    "t": pa.date32(),
}
_NUMBER = st.one_of(st.integers(-3, 3), st.sampled_from([-1.5, 0.0, -0.0, 2.5, math.nan]))
VALUES = {
    "i": st.integers(-3, 3),
    "j": st.integers(-3, 3),
    "u": st.integers(0, 3),
    "d": _NUMBER.map(float),
    "h": _NUMBER.map(float),
    "s": st.sampled_from(["", "a", "b", "ab", "é"]),
    "b": st.booleans(),
    "t": st.dates(datetime.date(1994, 12, 30), datetime.date(1995, 1, 2)),
}
ROW = st.fixed_dictionaries({c: st.one_of(st.none(), v) for c, v in VALUES.items()})


def _literal(column: str) -> st.SearchStrategy[str]:
    if column == "s":
        return st.sampled_from(["''", "'a'", "'ab'", "'é'"])
    if column == "b":
        return st.sampled_from(["true", "false"])
    if column == "t":  # the date constants: to_date and SQL's DATE '...' (a cast)
        days = ["1994-12-31", "1995-01-01"]
        return st.sampled_from(
            [f"to_date('{d}')" for d in days] + [f"cast('{d}' as DATE)" for d in days]
        )
    return st.sampled_from(["0", "1", "-2", "2.5", "0.0", "-1.5"])


@st.composite
def comparisons(draw: st.DrawFn) -> str:
    column = draw(st.sampled_from(sorted(TYPES)))
    op = draw(st.sampled_from(["==", "!=", "<", "<=", ">", ">="]))
    literal = draw(_literal(column))
    if draw(st.booleans()):
        return f"{literal} {op} f.{column}"
    return f"f.{column} {op} {literal}"


CONDITIONS = st.recursive(
    comparisons(),
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["&&", "||"]), inner).map(lambda t: f"({' '.join(t)})"),
        inner.map(lambda e: f"!({e})"),
    ),
    max_leaves=4,
)


def _table(rows: list[dict]) -> pa.Table:
    return pa.table({c: pa.array([r[c] for r in rows], type=t) for c, t in TYPES.items()})


def _parquet(table: pa.Table, row_group_size: int) -> io.BytesIO:
    buffer = io.BytesIO()
    pq.write_table(table, buffer, row_group_size=row_group_size)
    buffer.seek(0)
    return buffer


def _expected(condition: str, table: pa.Table) -> list[dict]:
    batch = wrap_under("f", table.combine_chunks().to_batches()[0])
    kept = batch.filter(evaluate_predicate(parse_expression(condition), batch))
    return [r["f"] for r in kept.to_pylist()]


def _same(a: list[dict], b: list[dict]) -> bool:
    """Rows equal, NaN equal to NaN."""

    def key(row: dict) -> list:
        return [("nan",) if isinstance(v, float) and math.isnan(v) else v for v in row.values()]

    return [key(r) for r in a] == [key(r) for r in b]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(ROW, min_size=1, max_size=12), condition=CONDITIONS, group=st.integers(1, 4))
def test_a_translated_filter_keeps_what_the_evaluator_keeps(
    rows: list[dict], condition: str, group: int
) -> None:
    table = _table(rows)
    found = arrow_filter(parse_expression(condition), table.schema, "f")
    if found is None:
        return  # not exact: the scan filters after the read (see the fallback tests)
    expected = _expected(condition, table)
    read = pq.read_table(_parquet(table, group), filters=found.expression)  # Acero's filter
    assert _same(read.to_pylist(), expected)
    with tempfile.TemporaryDirectory() as tmp:  # the scan's: row groups pruned, then the mask
        path = Path(tmp) / "t.parquet"
        path.write_bytes(_parquet(table, group).getvalue())
        pruned = ParquetReader(path).read_arrow(prune=found.expression)
        assert _same(pruned.filter(found.mask(pruned)).to_pylist(), expected)


def test_the_translation_covers_every_column_type() -> None:
    schema = _table([]).schema
    for condition in ["f.i > 1", "f.j <= 2.5", "1 == f.u", "f.d < 0", "f.h >= 2", "f.s != 'a'",
                      "f.b == true", "!(f.i == 1) && (f.s < 'b' || f.d > 1)",
                      "f.t < to_date('1995-01-01')", "cast('1995-01-01' as DATE) <= f.t"]:  # fmt: skip
        assert to_arrow_filter(parse_expression(condition), schema, "f") is not None, condition


@pytest.mark.parametrize(
    "condition",
    [
        "f.d != 1",  # NaN != 1 is true, and NaN is outside the row group statistics
        "!(f.d == 1)",
        "!(f.i > 1 && f.h < 2)",
        "f.i + 1 > 2",  # not a column against a literal
        "f.i > f.j",
        "f.m.k > 1",  # not a top-level column
        "f.I > 1",  # the evaluator reads names as written: f.I is missing here
        "f.missing > 1",
        "f.i == null",
        "f.s > 1",  # an error for the evaluator to report
        "f.i > 'a'",
        "f.b == 1",
        "f.w > 1",  # uint64 against int64
        "g.i > 1",  # another record
        "isnotnull(f.i)",
        "f.i > to_date('1995-01-01')",  # a date constant against a number
        "f.t > to_date('1995-1-1')",  # a text only the evaluator reads
        "f.t > to_date('1995-01-01', 'yyyy-MM-dd')",
        "f.t > cast(f.s as DATE)",
    ],
)
def test_inexact_filters_are_not_translated(condition: str) -> None:
    schema = _table([]).schema.append(pa.field("w", pa.uint64()))
    assert to_arrow_filter(parse_expression(condition), schema, "f") is None


def test_records_at_the_root_and_ambiguous_names() -> None:
    schema = pa.schema({"x": pa.int64(), "y": pa.int64()})
    assert str(to_arrow_filter(parse_expression("x > 1"), schema, None)) == "(x > 1)"
    twice = pa.schema([pa.field("x", pa.int64()), pa.field("x", pa.int64())])
    assert to_arrow_filter(parse_expression("x > 1"), twice, None) is None


def test_nan_rows_survive_where_the_statistics_would_drop_them() -> None:
    table = pa.table({"d": [5.0, math.nan, 5.0]})
    assert _expected("f.d != 5", table) == [{"d": pytest.approx(math.nan, nan_ok=True)}]
    assert to_arrow_filter(parse_expression("f.d != 5"), table.schema, "f") is None


@pytest.fixture(scope="module")
def dictionary_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Texts stored as DuckDB (and Spark) store them: dictionary pages only, nulls among them."""
    import duckdb

    path = tmp_path_factory.mktemp("dictionary") / "t.parquet"
    duckdb.sql(
        "COPY (SELECT CASE WHEN i % 7 = 0 THEN NULL ELSE 'v' || (i % 5) END AS s, i "
        f"FROM range(5000) t(i)) TO '{path}' (FORMAT parquet, ROW_GROUP_SIZE 1000)"
    )
    chunk = pq.ParquetFile(path).metadata.row_group(0).column(0)
    assert chunk.has_dictionary_page and "PLAIN" not in chunk.encodings
    return path


@pytest.mark.parametrize(
    "condition",
    ["f.s == 'v1'", "f.s != 'v1' && f.i < 4000", "!(f.s < 'v3') || f.i == 7", "f.i > 9"],
)
def test_dictionary_texts_are_filtered_before_they_are_decoded(
    dictionary_file: Path, condition: str
) -> None:
    table = pq.read_table(dictionary_file)
    found = arrow_filter(parse_expression(condition), table.schema, "f")
    assert found is not None
    read = ParquetReader(dictionary_file).read_arrow(prune=found.expression, keep=found.mask)
    assert read.schema == table.schema  # plain texts, as without the dictionary
    assert read.to_pylist() == _expected(condition, table)
    assert ParquetReader(dictionary_file).read_arrow().equals(table)
