"""What the storage engines report about a plan's scans, for the planner's choices.

:class:`Statistics` holds, per scan id, a :class:`ScanStatistics`: the format, the files and bytes
the selection lists, rows where the format records them (parquet footers), the top-level column
types of a parquet selection (the columns a filter may be pushed on) and the engine's
:class:`~engine.storage.engines.Capabilities`. A selection that an earlier store wrote is described
by what that store recorded (the metadata repository's ``_drill_metadata/``, see
:func:`~engine.metadata.recorded_metadata`): its rows (also for JSON and CSV, which keep none),
bytes, files and schema, without listing or reading footers; ``recorded`` says so. Constants need
no engine: their rows are counted from the plan. Without statistics the planner assumes the worst: sizes unknown (no broadcast,
every scan parallel) and no filter pushdown.

>>> import tempfile, pathlib
>>> from engine.plan import parse_plan
>>> root = pathlib.Path(tempfile.mkdtemp())
>>> _ = (root / "e.json").write_text('{"a": 1}\\n{"a": 2}\\n')
>>> plan = parse_plan({"storage": {"fs": {"type": "fs", "root": str(root)}}, "query": [
...     {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "e", "selection": {"path": "e.json"}}]})
>>> s = Statistics.collect(plan).scan("1")
>>> s.format, s.file_count, s.total_bytes, s.row_count, s.capabilities.can_push_filters
('json', 1, 18, None, False)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from engine.errors import DrillError
from engine.metadata import VersionMetadata, recorded_metadata
from engine.plan import LogicalPlan, Scan
from engine.storage.engines import Capabilities
from engine.storage.formats.parquet import Footers
from engine.storage.formats.parquet_unions import arrow_schema_of
from engine.storage.statistics import ScanStatistics

SCALAR = "scalar"
NESTED = "nested"


@dataclass(frozen=True)
class Statistics:
    """Statistics of a plan's scans, by scan operator id."""

    scans: Mapping[str, ScanStatistics] = field(default_factory=dict)

    def scan(self, op_id: str) -> ScanStatistics | None:
        return self.scans.get(op_id)

    @staticmethod
    def from_engines(plan: LogicalPlan, engines: Mapping[str, Any]) -> Statistics:
        """Ask each scan's storage engine (``engines`` by name, as the executors build them).

        A scan whose engine cannot tell (a missing path, a queue engine) gets no statistics; the
        run reports that problem itself, with its location.
        """
        found: dict[str, ScanStatistics] = {}
        for op in plan.query:
            if not isinstance(op, Scan) or op.storage_engine not in engines:
                continue
            stats = _scan_statistics(engines[op.storage_engine], op.selection or {})
            if stats is not None:
                found[op.id] = stats
        return Statistics(found)

    @staticmethod
    def collect(
        plan: LogicalPlan,
        *,
        base_dir: Path | None = None,
        classpath: Sequence[Path | str] = (),
    ) -> Statistics:
        """Build the plan's storage engines (as :func:`engine.run.run_plan` does) and ask them."""
        from engine.storage.engines import plan_engines

        try:
            engines = plan_engines(plan, base_dir=base_dir, classpath=classpath)
        except DrillError:
            return Statistics()
        return Statistics.from_engines(plan, engines)


def _scan_statistics(engine: Any, selection: Mapping[str, Any]) -> ScanStatistics | None:
    if hasattr(engine, "scan_statistics"):  # an engine of tables (jdbc) says it itself
        try:
            return engine.scan_statistics(selection)
        except DrillError:
            return None
    if not hasattr(engine, "list_files"):
        return None
    recorded = recorded_metadata(engine, selection)
    if recorded is not None:
        stats = _recorded_statistics(engine, selection, recorded)
        if stats is not None:
            return stats
    try:
        files = engine.list_files(selection)
        fmt = engine.format_of(selection) if files or "format" in selection else "json"
        capabilities = engine.capabilities(selection) if files else Capabilities(can_read=True)
    except DrillError:
        return None
    rows: int | None = None
    columns: dict[str, pa.DataType] | None = None
    ranges: dict[str, tuple[int, int]] | None = None
    if fmt == "parquet":
        rows, columns, ranges = 0, {}, {}
        unknown: set[str] = set()
        # The engine's footers, when it keeps them: the scan reuses what is read here.
        footers = getattr(engine, "footers", None) or Footers()
        for file in files:
            if not file.size:
                continue
            try:
                meta = footers.read(file.real_path)
            except DrillError:
                return None  # the scan reports the file it cannot read, and where
            rows += meta.num_rows
            for column in arrow_schema_of(meta):
                seen = columns.setdefault(column.name, column.type)
                if seen != column.type:
                    columns[column.name] = pa.null()  # differs between files: never pushed on
            _add_ranges(meta, ranges, unknown)
        ranges = {
            name: bounds
            for name, bounds in ranges.items()
            if name not in unknown and pa.types.is_integer(columns.get(name, pa.null()))
        }
    return ScanStatistics(
        format=fmt,
        file_count=len(files),
        total_bytes=sum(f.size for f in files),
        row_count=rows,
        capabilities=capabilities,
        columns=columns,
        ranges=ranges,
    )


def _add_ranges(meta: Any, ranges: dict[str, tuple[int, int]], unknown: set[str]) -> None:
    """Widen ``ranges`` by the integer min/max of each top-level column chunk of ``meta``; a
    column whose chunk has none goes to ``unknown``."""
    for group in range(meta.num_row_groups):
        row_group = meta.row_group(group)
        for index in range(row_group.num_columns):
            chunk = row_group.column(index)
            name = chunk.path_in_schema
            if "." in name or name in unknown:
                continue
            stats = chunk.statistics
            low = stats.min if stats is not None and stats.has_min_max else None
            high = stats.max if stats is not None and stats.has_min_max else None
            if not isinstance(low, int) or not isinstance(high, int):
                unknown.add(name)
                continue
            seen = ranges.get(name)
            ranges[name] = (low, high) if seen is None else (min(seen[0], low), max(seen[1], high))


def _recorded_statistics(
    engine: Any, selection: Mapping[str, Any], recorded: VersionMetadata
) -> ScanStatistics | None:
    """What the last store recorded; None where the footers must be read after all (parquet
    without a recorded schema, or partitioned: the partition columns are not in the files)."""
    try:
        fmt = (
            engine.format_of(selection) if recorded.file_count or "format" in selection else "json"
        )
        capabilities = (
            engine.capabilities(selection) if recorded.file_count else Capabilities(can_read=True)
        )
    except DrillError:
        return None
    columns: dict[str, pa.DataType] | None = None
    if fmt == "parquet":
        schema = recorded.schema
        if schema is None or recorded.partitions:
            return None
        columns = {column.name: column.type for column in schema}
    return ScanStatistics(
        format=fmt,
        file_count=recorded.file_count,
        total_bytes=recorded.total_bytes,
        row_count=recorded.row_count,
        capabilities=capabilities,
        columns=columns,
        recorded=True,
    )


def is_scalar_type(dtype: pa.DataType) -> bool:
    """Whether a column of this type holds one plain value per record (no nested filtering).

    >>> is_scalar_type(pa.int64()), is_scalar_type(pa.list_(pa.int64())), is_scalar_type(pa.null())
    (True, False, False)
    """
    return bool(
        pa.types.is_integer(dtype)
        or pa.types.is_floating(dtype)
        or pa.types.is_string(dtype)
        or pa.types.is_large_string(dtype)
        or pa.types.is_boolean(dtype)
    )
