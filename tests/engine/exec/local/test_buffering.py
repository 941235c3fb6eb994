"""The shared buffer of blocking local operators: byte limit, schema unification, re-chunking."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.errors import ExecutionError, SchemaConflictError
from engine.exec.local.buffering import (
    BatchBuffer,
    BufferLimitError,
    concat_batches,
    rechunk,
    to_batch,
)
from engine.exec.local.ordering import create_order
from engine.exec.local.registry import ExecContext
from engine.exec.protocol import BatchSource, FragmentExecutor
from engine.plan.operators import Order


def test_buffer_counts_rows_and_bytes() -> None:
    buffer = BatchBuffer("4", "order", max_bytes=1 << 20)
    first = pa.record_batch({"a": [1, 2, 3]})
    second = pa.record_batch({"a": [4]})
    buffer.extend([first, second])
    assert buffer.num_rows == 4
    assert buffer.nbytes == first.nbytes + second.nbytes
    assert buffer.table().column("a").to_pylist() == [1, 2, 3, 4]


def test_empty_batches_cost_nothing_but_keep_the_schema() -> None:
    buffer = BatchBuffer("4", "order", max_bytes=0)
    buffer.add(pa.record_batch({"a": pa.array([], pa.int64())}))
    assert buffer.num_rows == 0 and buffer.nbytes == 0
    assert buffer.table().schema == pa.schema([("a", pa.int64())])
    assert buffer.batch().num_rows == 0


def test_over_the_limit_raises_naming_the_operator_and_what_to_do() -> None:
    buffer = BatchBuffer("9", "segment", max_bytes=20)
    buffer.add(pa.record_batch({"a": [1, 2]}))  # 16 bytes
    with pytest.raises(BufferLimitError) as raised:
        buffer.add(pa.record_batch({"a": [3]}))
    assert "segment 9" in raised.value.message
    assert "20 bytes" in raised.value.message
    assert "max_buffered_bytes" in (raised.value.hint or "")
    assert buffer.num_rows == 2  # the batch that did not fit is not half-kept


def test_limit_surfaces_as_the_operators_execution_error() -> None:
    batches = [pa.record_batch({"k": list(range(100))}) for _ in range(3)]
    plan = Order.model_validate({"@id": 5, "op": "order", "orderings": [{"expr": "k"}]})
    ctx = ExecContext(max_buffered_bytes=1000)
    op = create_order(plan, [BatchSource("1", batches)], ctx)
    with pytest.raises(ExecutionError) as raised:
        FragmentExecutor(op).run()
    assert raised.value.operator_id == "5"
    assert raised.value.operator_kind == "order"
    assert "1000 bytes" in str(raised.value)


def test_concat_unifies_columns_and_map_members() -> None:
    first = pa.record_batch({"a": [1], "m": pa.array([{"x": 1}])})
    second = pa.record_batch({"m": pa.array([{"y": "q"}]), "b": ["z"]})
    table = concat_batches([first, second])
    assert table.to_pylist() == [
        {"a": 1, "m": {"x": 1, "y": None}, "b": None},
        {"a": None, "m": {"x": None, "y": "q"}, "b": "z"},
    ]


def test_concat_promotes_null_and_numeric_columns() -> None:
    table = concat_batches(
        [
            pa.record_batch({"a": pa.nulls(1)}),
            pa.record_batch({"a": [1]}),
            pa.record_batch({"a": [2.5]}),
        ]
    )
    assert table.schema.field("a").type == pa.float64()
    assert table.column("a").to_pylist() == [None, 1.0, 2.5]


def test_concat_of_incompatible_types_names_the_column() -> None:
    with pytest.raises(SchemaConflictError) as raised:
        concat_batches([pa.record_batch({"a": [1], "b": [1]}), pa.record_batch({"b": ["x"]})])
    assert raised.value.column == "b"
    assert raised.value.old_type == "int64"
    assert raised.value.new_type == "string"


def test_concat_of_nothing_uses_the_given_schema() -> None:
    schema = pa.schema([("a", pa.string())])
    assert concat_batches([], schema=schema).schema == schema
    assert concat_batches([]).num_columns == 0


def test_to_batch_combines_chunks() -> None:
    table = pa.Table.from_batches([pa.record_batch({"a": [1]}), pa.record_batch({"a": [2]})])
    batch = to_batch(table)
    assert isinstance(batch, pa.RecordBatch)
    assert batch.column(0).to_pylist() == [1, 2]


def test_rechunk_of_an_empty_table_keeps_its_schema() -> None:
    schema = pa.schema([("a", pa.int64())])
    batches = rechunk(schema.empty_table(), 10)
    assert len(batches) == 1
    assert batches[0].num_rows == 0
    assert batches[0].schema == schema


@given(
    sizes=st.lists(st.integers(min_value=0, max_value=30), min_size=1, max_size=6),
    batch_rows=st.integers(min_value=1, max_value=17),
)
def test_rechunk_keeps_rows_in_order_in_batches_of_at_most_batch_rows(
    sizes: list[int], batch_rows: int
) -> None:
    start = 0
    batches = []
    for size in sizes:
        values = pa.array(range(start, start + size), pa.int64())
        batches.append(pa.record_batch({"i": values}))
        start += size
    table = pa.Table.from_batches(batches)
    out = rechunk(table, batch_rows)
    assert all(b.num_rows <= batch_rows for b in out)
    assert [i for b in out for i in b.column(0).to_pylist()] == list(range(start))
    if start:
        assert all(b.num_rows for b in out)


_ORDER_PLAN = {
    "storage": {"q": {"type": "queue"}},
    "query": [
        {"@id": 1, "op": "constant", "content": [{"a": i} for i in range(300, 0, -1)]},
        {"@id": 2, "op": "order", "input": 1, "orderings": [{"expr": "a"}]},
        {"@id": 3, "op": "store", "input": 2, "storageengine": "q", "target": {}},
    ],
}


def test_run_plan_takes_the_buffer_limit_its_error_asks_to_raise() -> None:
    from engine import run_plan

    with pytest.raises(ExecutionError) as raised:
        run_plan(_ORDER_PLAN, max_buffered_bytes=100)
    assert "max_buffered_bytes=N" in str(raised.value) and "--max-buffered-bytes" in str(
        raised.value
    )
    records = run_plan(_ORDER_PLAN, max_buffered_bytes=1 << 20).records()
    assert [r["a"] for r in records] == list(range(1, 301))


def test_the_cli_run_command_passes_the_buffer_limit(tmp_path, capsys) -> None:
    import json

    from engine.cli import EXIT_OK, run

    plan = tmp_path / "order.json"
    plan.write_text(json.dumps(_ORDER_PLAN))
    local = ["--executor", "local"]
    assert run(["run", str(plan), *local, "--max-buffered-bytes", "100"]) != EXIT_OK
    assert "order 2 needs to buffer more than 100 bytes" in capsys.readouterr().err
    assert run(["run", str(plan), *local, "--max-buffered-bytes", str(1 << 20)]) == EXIT_OK
    assert capsys.readouterr().out.splitlines()[:2] == ['{"a": 1}', '{"a": 2}']
