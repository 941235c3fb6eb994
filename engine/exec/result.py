"""What a run returns, whichever executor ran it: the records of its sinks, a summary of each
store and the per-operator metrics.

>>> from engine import run_plan
>>> result = run_plan({"query": [{"@id": 1, "op": "constant", "content": [{"a": 1}]}]})
>>> result.records()
[{'a': 1}]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from engine.errors import StorageError
from engine.plan import LogicalPlan


@dataclass(frozen=True)
class StoreSummary:
    """What one store operator wrote."""

    operator_id: str
    engine: str
    location: str
    format: str
    row_count: int
    schema: pa.Schema
    files: tuple[str, ...] = ()
    version: str | None = None


@dataclass
class RunResult:
    """The outcome of a run: sink records, store summaries, per-operator metrics."""

    plan: LogicalPlan
    stores: list[StoreSummary] = field(default_factory=list)
    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)
    outputs: dict[str, pa.Table] = field(default_factory=dict)
    _sink_records: list[Any] = field(default_factory=list, repr=False)

    def records(self) -> list[Any]:
        """Records that reached queue and console stores, in arrival order; for a plan without a
        store, the records of its last operator."""
        if self._sink_records or self.stores:
            return list(self._sink_records)
        return [r for table in self.outputs.values() for r in table.to_pylist()]


def collect_result(
    plan: LogicalPlan,
    engines: Mapping[str, Any],
    store_results: Mapping[str, Any],
    metrics: dict[str, dict[str, Any]],
    outputs: dict[str, pa.Table],
    sink_records: list[Any],
) -> RunResult:
    """A :class:`RunResult` from what the stores wrote (shared by both executors)."""
    result = RunResult(plan, metrics=metrics, outputs=outputs)
    for op in plan.sinks():
        written = store_results.get(op.id)
        if written is None:
            raise StorageError(f"store {op.id} did not run")
        result.stores.append(
            StoreSummary(
                operator_id=op.id,
                engine=op.storage_engine,
                location=written.location,
                format=written.format,
                row_count=written.row_count,
                schema=written.schema,
                files=tuple(written.files),
                version=written.version,
            )
        )
    result._sink_records.extend(sink_records)
    return result
