"""Each rule of seed 001's operator protocol, proven on small Arrow batches."""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa
import pytest

from engine.errors import ExecutionError, StorageError
from engine.exec.protocol import (
    BatchOperator,
    BatchSource,
    FragmentExecutor,
    IterOutcome,
    SingleInputOperator,
    walk,
)


def batch(**columns: list) -> pa.RecordBatch:
    return pa.record_batch(columns)


class Recorder(SingleInputOperator):
    """A pass-through operator that records the protocol calls it sees."""

    kind = "recorder"

    def __init__(self, operator_id: str, upstream: BatchOperator, log: list[str]) -> None:
        super().__init__(operator_id, upstream)
        self.log = log
        self.log.append(f"{operator_id}:init")

    def setup(self, schema: pa.Schema) -> None:
        self.log.append(f"{self.operator_id}:setup:{','.join(schema.names)}")

    def release(self) -> None:
        self.log.append(f"{self.operator_id}:close")
        super().release()


class FailAfter(SingleInputOperator):
    """Fails on its n-th input batch, as an operator that meets bad data mid-stream."""

    kind = "failing"

    def __init__(self, operator_id: str, upstream: BatchOperator, n: int) -> None:
        super().__init__(operator_id, upstream)
        self.n = n
        self.seen = 0

    def process(self, b: pa.RecordBatch) -> Iterable[pa.RecordBatch]:
        self.seen += 1
        if self.seen == self.n:
            raise StorageError("bad value", file="data.json", line=7)
        return [b]


class Buffering(SingleInputOperator):
    """A blocking operator: emits everything after its input ends."""

    kind = "buffering"

    def __init__(self, operator_id: str, upstream: BatchOperator) -> None:
        super().__init__(operator_id, upstream)
        self.buffer: list[pa.RecordBatch] = []

    def process(self, b: pa.RecordBatch) -> Iterable[pa.RecordBatch]:
        self.buffer.append(b)
        return []

    def finish(self) -> Iterable[pa.RecordBatch]:
        return [pa.Table.from_batches(self.buffer).combine_chunks().to_batches()[0]]


def test_constructor_does_no_schema_work_and_first_next_sets_up() -> None:
    log: list[str] = []
    op = Recorder("2", BatchSource("1", [batch(a=[1])]), log)
    assert log == ["2:init"]
    assert op.schema is None
    assert op.next() is IterOutcome.OK_NEW_SCHEMA
    assert log == ["2:init", "2:setup:a"]
    assert op.schema.names == ["a"]


def test_ok_for_same_schema_and_ok_new_schema_on_change() -> None:
    source = BatchSource("1", [batch(a=[1]), batch(a=[2]), batch(a=[3], b=["x"])])
    outcomes = [source.next() for _ in range(4)]
    assert outcomes == [
        IterOutcome.OK_NEW_SCHEMA,
        IterOutcome.OK,
        IterOutcome.OK_NEW_SCHEMA,
        IterOutcome.NONE,
    ]


def test_empty_input_returns_none_on_first_call_and_forever_after() -> None:
    op = Recorder("2", BatchSource("1", []), [])
    assert [op.next() for _ in range(3)] == [IterOutcome.NONE] * 3
    assert op.batch is None


def test_none_is_repeated_after_the_end() -> None:
    source = BatchSource("1", [batch(a=[1])])
    assert source.next() is IterOutcome.OK_NEW_SCHEMA
    assert [source.next() for _ in range(3)] == [IterOutcome.NONE] * 3


def test_error_mid_stream_returns_stop_and_names_the_operator() -> None:
    source = BatchSource("1", [batch(a=[1]), batch(a=[2]), batch(a=[3])])
    failing = FailAfter("2", source, n=2)
    top = Recorder("3", failing, [])
    assert top.next() is IterOutcome.OK_NEW_SCHEMA
    assert top.next() is IterOutcome.STOP
    assert top.next() is IterOutcome.STOP  # STOP is sticky, like NONE
    assert failing.error is not None
    assert failing.error.operator_id == "2"
    assert failing.error.operator_kind == "failing"
    assert "data.json:7: bad value" in str(failing.error)
    assert top.error is None  # downstream operators only saw STOP


def test_fragment_executor_reports_the_failing_operator_and_closes_everything() -> None:
    log: list[str] = []
    source = BatchSource("1", [batch(a=[1]), batch(a=[2])])
    root = Recorder("3", FailAfter("2", Recorder("1b", source, log), n=2), log)
    with pytest.raises(ExecutionError) as raised:
        FragmentExecutor(root, fragment=0).run()
    err = raised.value
    assert (err.fragment, err.operator_id, err.operator_kind) == (0, "2", "failing")
    assert str(err).startswith("fragment 0, operator 2 (failing): data.json:7: bad value")
    assert all(op.closed for op in walk(root))
    closes = [entry for entry in log if entry.endswith(":close")]
    assert closes == ["3:close", "1b:close"]  # root to leaf, once each


def test_close_is_root_to_leaf_exactly_once_after_success() -> None:
    log: list[str] = []
    root = Recorder("3", Recorder("2", BatchSource("1", [batch(a=[1])]), log), log)
    table = FragmentExecutor(root).run()
    assert table.column("a").to_pylist() == [1]
    assert [e for e in log if e.endswith(":close")] == ["3:close", "2:close"]
    root.close()  # a second close is harmless and logs nothing
    assert [e for e in log if e.endswith(":close")] == ["3:close", "2:close"]
    with pytest.raises(RuntimeError, match="closed"):
        root.next()


def test_blocking_operator_reads_all_input_before_its_first_batch() -> None:
    source = BatchSource("1", [batch(a=[1]), batch(a=[2]), batch(a=[3])])
    op = Buffering("2", source)
    assert op.next() is IterOutcome.OK_NEW_SCHEMA
    assert op.batch.column(0).to_pylist() == [1, 2, 3]
    assert op.next() is IterOutcome.NONE


def test_second_reader_changing_the_schema_reaches_downstream_as_ok_new_schema() -> None:
    log: list[str] = []
    readers = [[batch(a=[1])], [batch(a=[2], b=["x"])]]
    source = BatchSource("1", lambda: (b for reader in readers for b in reader))
    op = Recorder("2", source, log)
    assert op.next() is IterOutcome.OK_NEW_SCHEMA
    assert op.next() is IterOutcome.OK_NEW_SCHEMA
    assert log[-1] == "2:setup:a,b"
    assert FragmentExecutor(
        Recorder("3", BatchSource("1", [batch(a=[1]), batch(a=[2], b=["x"])]), [])
    ).run().to_pylist() == [
        {"a": 1, "b": None},
        {"a": 2, "b": "x"},
    ]


def test_run_of_an_empty_fragment_is_an_empty_table() -> None:
    assert FragmentExecutor(BatchSource("1", [])).run().num_rows == 0


def test_generator_operator_streams_and_close_ends_the_generator() -> None:
    from engine.exec.protocol import GeneratorOperator

    closed: list[bool] = []

    class Doubler(GeneratorOperator):
        kind = "doubler"

        def generate(self):
            try:
                for b in self.drain():
                    yield pa.record_batch({"a": [v * 2 for v in b.column(0).to_pylist()]})
            finally:
                closed.append(True)

    op = Doubler("2", [BatchSource("1", [batch(a=[1]), batch(a=[2])])])
    assert op.next() is IterOutcome.OK_NEW_SCHEMA
    assert op.batch.column(0).to_pylist() == [2]
    op.close()
    assert closed == [True]
