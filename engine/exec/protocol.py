"""The runtime operator protocol of seed 001, for Arrow record batches.

A runtime operator (Drill's "record batch") is a Volcano iterator over batches:

- ``next()`` returns an :class:`IterOutcome`: ``OK_NEW_SCHEMA`` with the first batch and whenever the
  schema changes, ``OK`` with a batch of the same schema, ``NONE`` at the end (and on every call after),
  ``STOP`` after an error (``error`` holds it, naming the operator id and kind).
- ``schema`` and ``batch`` describe what the last ``next()`` returned.
- The constructor does no schema work: the first ``next()`` fetches upstream's first batch and sets the
  operator up from its schema (seed 001's first-batch path).
- ``close()`` releases what the operator holds, calls no other operator, and is safe to call twice.

A :class:`FragmentExecutor` drives the root (``while root.next() ...``) and then closes every operator,
root to leaf, exactly once, also after an error.

>>> import pyarrow as pa
>>> source = BatchSource("1", [pa.record_batch({"a": [1, 2]})])
>>> FragmentExecutor(source).run().num_rows
2
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pyarrow as pa

from engine.errors import DrillError, ExecutionError
from engine.types.batches import concat_batches


class IterOutcome(enum.Enum):
    OK_NEW_SCHEMA = "OK_NEW_SCHEMA"
    OK = "OK"
    NONE = "NONE"
    STOP = "STOP"

    @property
    def has_batch(self) -> bool:
        return self in (IterOutcome.OK_NEW_SCHEMA, IterOutcome.OK)


class _State(enum.Enum):
    NEW = "new"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CLOSED = "closed"


class UpstreamFailed(Exception):
    """Raised inside an operator when an input returned STOP; the input already holds the error."""


class BatchOperator:
    """Base of every runtime operator. Subclasses implement :meth:`produce` and, if they hold
    resources, :meth:`release`.

    ``produce()`` returns the next outgoing batch, or ``None`` at the end of data. It may raise a
    :class:`~engine.errors.DrillError`; the protocol turns it into ``STOP`` with an
    :class:`~engine.errors.ExecutionError` naming this operator.
    """

    kind = "operator"

    def __init__(self, operator_id: str, inputs: Iterable[BatchOperator] = ()) -> None:
        self.operator_id = operator_id
        self.inputs: list[BatchOperator] = list(inputs)
        self.schema: pa.Schema | None = None
        self.batch: pa.RecordBatch | None = None
        self.error: ExecutionError | None = None
        self.rows_out = 0
        self._state = _State.NEW

    def counters(self) -> dict[str, Any]:
        """What this operator counted besides its rows, for the run's metrics (a scan: files)."""
        return {}

    # -- the protocol -------------------------------------------------------------------------

    def next(self) -> IterOutcome:
        if self._state is _State.CLOSED:
            raise RuntimeError(f"next() called on closed operator {self.operator_id}")
        if self._state is _State.DONE:
            return IterOutcome.NONE
        if self._state is _State.FAILED:
            return IterOutcome.STOP
        self._state = _State.RUNNING
        try:
            batch = self.produce()
        except UpstreamFailed:
            return self._fail(None)
        except DrillError as err:
            return self._fail(err)
        if batch is None:
            self._state = _State.DONE
            self.batch = None
            return IterOutcome.NONE
        self.batch = batch
        self.rows_out += batch.num_rows
        if self.schema is None or not batch.schema.equals(self.schema):
            self.schema = batch.schema
            return IterOutcome.OK_NEW_SCHEMA
        return IterOutcome.OK

    def close(self) -> None:
        """Release this operator's resources, once. Calls no other operator."""
        if self._state is _State.CLOSED:
            return
        self._state = _State.CLOSED
        self.batch = None
        self.release()

    @property
    def closed(self) -> bool:
        return self._state is _State.CLOSED

    # -- for subclasses -----------------------------------------------------------------------

    def produce(self) -> pa.RecordBatch | None:
        raise NotImplementedError

    def release(self) -> None:
        """Free files, buffers and other resources. Called once, by :meth:`close`."""

    def pull(self, index: int = 0) -> IterOutcome:
        """Call ``next()`` on input ``index``; raises :class:`UpstreamFailed` if it stopped."""
        outcome = self.inputs[index].next()
        if outcome is IterOutcome.STOP:
            raise UpstreamFailed
        return outcome

    def drain(self, index: int = 0) -> Iterator[pa.RecordBatch]:
        """Every remaining batch of input ``index`` (for blocking operators)."""
        while self.pull(index).has_batch:
            batch = self.inputs[index].batch
            assert batch is not None
            yield batch

    def _fail(self, err: DrillError | None) -> IterOutcome:
        self._state = _State.FAILED
        self.batch = None
        if err is not None:
            reason = err.reason if isinstance(err, ExecutionError) else err.message
            self.error = ExecutionError(
                reason, operator_id=self.operator_id, operator_kind=self.kind, hint=err.hint
            )
            self.error.__cause__ = err
        return IterOutcome.STOP


class SingleInputOperator(BatchOperator):
    """An operator with one input that maps batches: :meth:`setup` on every new input schema, then
    :meth:`process` per batch; blocking operators buffer in ``process`` and emit from :meth:`finish`.
    """

    def __init__(self, operator_id: str, upstream: BatchOperator) -> None:
        super().__init__(operator_id, [upstream])
        # What process/finish gave, consumed one batch at a time: a generator there emits a
        # large output in bounded batches without holding them all.
        self._pending: Iterator[pa.RecordBatch] = iter(())
        self._input_done = False

    def produce(self) -> pa.RecordBatch | None:
        while True:
            out = next(self._pending, None)
            if out is not None:
                return out
            if self._input_done:
                return None
            outcome = self.pull()
            if outcome is IterOutcome.NONE:
                self._input_done = True
                self._pending = iter(self.finish())
                continue
            if outcome is IterOutcome.OK_NEW_SCHEMA:
                self.setup(self.inputs[0].schema)
            batch = self.inputs[0].batch
            assert batch is not None
            self._pending = iter(self.process(batch))

    def setup(self, schema: pa.Schema) -> None:
        """Prepare for batches of ``schema`` (the first batch's, or a changed one)."""

    def process(self, batch: pa.RecordBatch) -> Iterable[pa.RecordBatch]:
        return [batch]

    def finish(self) -> Iterable[pa.RecordBatch]:
        """Batches to emit after the input ended (blocking operators)."""
        return ()

    def release(self) -> None:
        close = getattr(self._pending, "close", None)
        if close is not None:
            close()
        self._pending = iter(())


class GeneratorOperator(BatchOperator):
    """An operator written as a generator: :meth:`generate` yields the outgoing batches and pulls
    its inputs with :meth:`drain`; closing the operator closes the generator."""

    def __init__(self, operator_id: str, inputs: Iterable[BatchOperator] = ()) -> None:
        super().__init__(operator_id, inputs)
        self._stream: Iterator[pa.RecordBatch] | None = None

    def generate(self) -> Iterator[pa.RecordBatch]:
        raise NotImplementedError

    def produce(self) -> pa.RecordBatch | None:
        if self._stream is None:
            self._stream = self.generate()
        return next(self._stream, None)

    def release(self) -> None:
        close = getattr(self._stream, "close", None)
        if close is not None:
            close()
        self._stream = None


class BatchSource(BatchOperator):
    """A leaf operator over an iterable of batches (a scan's readers, a constant, a test)."""

    kind = "source"

    def __init__(
        self,
        operator_id: str,
        batches: Iterable[pa.RecordBatch] | Callable[[], Iterable[pa.RecordBatch]],
    ) -> None:
        super().__init__(operator_id)
        self._batches = batches
        self._iterator: Iterator[pa.RecordBatch] | None = None

    def produce(self) -> pa.RecordBatch | None:
        if self._iterator is None:
            source = self._batches() if callable(self._batches) else self._batches
            self._iterator = iter(source)
        return next(self._iterator, None)

    def release(self) -> None:
        close = getattr(self._iterator, "close", None)
        if close is not None:
            close()
        self._iterator = None


def walk(root: BatchOperator) -> Iterator[BatchOperator]:
    """Every operator of the tree, root first, each once (depth-first, root to leaf)."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        op = stack.pop()
        if id(op) in seen:
            continue
        seen.add(id(op))
        yield op
        stack.extend(reversed(op.inputs))


class FragmentExecutor:
    """Runs a fragment: drives the root to the end, then closes every operator root to leaf, exactly
    once, whatever happened. ``run()`` returns the root's batches as a table, or raises the error of
    the operator that failed first (deepest), naming its id and kind.
    """

    def __init__(self, root: BatchOperator, *, fragment: int | None = None) -> None:
        self.root = root
        self.fragment = fragment

    def batches(self) -> Iterator[pa.RecordBatch]:
        try:
            while True:
                outcome = self.root.next()
                if outcome is IterOutcome.STOP:
                    raise self._first_error()
                if outcome is IterOutcome.NONE:
                    return
                assert self.root.batch is not None
                yield self.root.batch
        finally:
            for op in walk(self.root):
                op.close()

    def run(self) -> pa.Table:
        batches = list(self.batches())
        if not batches:
            schema = self.root.schema or pa.schema([])
            return schema.empty_table()
        return concat_batches(batches)

    def _first_error(self) -> ExecutionError:
        failed = [op for op in walk(self.root) if op.error is not None]
        if not failed:
            return ExecutionError("stopped without an error", fragment=self.fragment)
        err = failed[-1].error  # the deepest failure is the cause; the others only saw STOP
        assert err is not None
        if self.fragment is not None and err.fragment is None:
            err = ExecutionError(
                err.reason,
                operator_id=err.operator_id,
                operator_kind=err.operator_kind,
                fragment=self.fragment,
                hint=err.hint,
            )
        return err
