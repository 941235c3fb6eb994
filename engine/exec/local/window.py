"""The local windowframe operator.

Window ``k`` targets input record ``k``; its members are the records ``j`` with
``k + start <= j <= k + end`` inside the target's run of equal ``within`` values (a missing ``start``
or ``end`` is unbounded on that side). Windows come out in ``k`` order, members in input order, and
every emitted copy carries ``ref.segment = k`` (0-based over the whole input) and
``ref.position = j - k`` (R-WF-POS). Complete runs are processed as soon as they end, so memory is
bounded by the longest run; output is generated batch by batch with index arithmetic and ``take``.

>>> import pyarrow as pa
>>> from engine.exec.protocol import BatchSource, FragmentExecutor
>>> from engine.plan.operators import WindowFrame
>>> op = WindowFrame.model_validate({"@id": 2, "op": "windowframe", "start": -1, "end": 0})
>>> source = BatchSource("1", [pa.record_batch({"id": [0, 1, 2]})])
>>> for r in FragmentExecutor(create_windowframe(op, [source], ExecContext())).run().to_pylist():
...     print(r)
{'id': 0, 'ref': {'segment': 0, 'position': 0}}
{'id': 0, 'ref': {'segment': 1, 'position': -1}}
{'id': 1, 'ref': {'segment': 1, 'position': 0}}
{'id': 1, 'ref': {'segment': 2, 'position': -1}}
{'id': 2, 'ref': {'segment': 2, 'position': 0}}
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from engine.exec.local.aggregate import output_path
from engine.exec.local.aggregate_functions import (
    RunSplitter,
    run_first_index,
    run_last_index,
    run_starts,
)
from engine.exec.local.buffering import BatchBuffer
from engine.exec.local.registry import ExecContext, creator
from engine.exec.protocol import BatchOperator, GeneratorOperator
from engine.expr import parse_field_ref
from engine.expr.arrow.trees import get_path, set_path
from engine.plan.operators import WindowFrame


class WindowFrameOperator(GeneratorOperator):
    """Emits, for every record, the records of its window with their segment and position."""

    kind = "windowframe"

    def __init__(self, op: WindowFrame, upstream: BatchOperator, ctx: ExecContext) -> None:
        super().__init__(op.id, [upstream])
        self.ctx = ctx
        self.within = parse_field_ref(op.within).path if op.within else None
        self.start = op.start
        self.end = op.end
        self.segment_path = output_path(op.segment_ref, "ref.segment")
        self.position_path = output_path(op.position_ref, "ref.position")

    def generate(self) -> Iterator[pa.RecordBatch]:
        buffer = BatchBuffer(self.operator_id, self.kind, max_bytes=self.ctx.max_buffered_bytes)
        splitter = RunSplitter(self.within, buffer)
        offset = 0  # records before the current chunk: window numbers are global
        emitted = False
        for batch in self.drain():
            complete = splitter.add(batch)
            if complete is not None:
                for out in self.windows(complete, offset):
                    emitted = True
                    yield out
                offset += complete.num_rows
        rest = splitter.finish()
        if rest is not None:
            for out in self.windows(rest, offset):
                emitted = True
                yield out
        if not emitted and splitter.schema is not None:
            # No window at all: still tell downstream what the records look like.
            none = np.zeros(0, dtype=np.int64)
            yield self._label(pa.RecordBatch.from_pylist([], schema=splitter.schema), none, none)

    def windows(self, batch: pa.RecordBatch, offset: int) -> Iterator[pa.RecordBatch]:
        """The windows of every record of ``batch`` (complete runs), in batches of at most
        ``ctx.batch_rows`` rows; ``offset`` is the global index of ``batch``'s first record."""
        n = batch.num_rows
        if self.within is not None:
            starts = run_starts(get_path(batch, self.within))
        else:
            starts = np.zeros(n, dtype=bool)
            starts[:1] = True
        targets = np.arange(n, dtype=np.int64)
        low = run_first_index(starts)
        high = run_last_index(starts)
        if self.start is not None:
            low = np.maximum(targets + self.start, low)
        if self.end is not None:
            high = np.minimum(targets + self.end, high)
        sizes = np.maximum(high - low + 1, 0)
        ends = np.cumsum(sizes)
        total = int(ends[-1]) if n else 0
        step = max(1, self.ctx.batch_rows)
        for first in range(0, total, step):
            rows = np.arange(first, min(first + step, total), dtype=np.int64)
            target = np.searchsorted(ends, rows, side="right")
            member = low[target] + rows - (ends[target] - sizes[target])
            taken = batch.take(pa.array(member))
            yield self._label(taken, target + offset, member - target)

    def _label(
        self, batch: pa.RecordBatch, segments: np.ndarray, positions: np.ndarray
    ) -> pa.RecordBatch:
        batch = set_path(batch, self.segment_path, pa.array(segments, pa.int64()))
        return set_path(batch, self.position_path, pa.array(positions, pa.int64()))


@creator("windowframe")
def create_windowframe(
    op: WindowFrame, inputs: list[BatchOperator], ctx: ExecContext
) -> BatchOperator:
    return WindowFrameOperator(op, inputs[0], ctx)
