"""What a storage engine reports about one scan's selection (the planner's
:class:`~engine.planner.statistics.Statistics` holds one per scan)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pyarrow as pa

from engine.storage.engines import Capabilities


@dataclass(frozen=True)
class ScanStatistics:
    """One scan's selection as its storage engine reports it."""

    format: str
    file_count: int
    total_bytes: int
    row_count: int | None = None
    capabilities: Capabilities = field(default_factory=Capabilities)
    columns: Mapping[str, pa.DataType] | None = None  # parquet: top-level column -> Arrow type
    # parquet: integer column -> (min, max) over the row groups' statistics, where every one has
    # them; max - min + 1 bounds the number of distinct values (join sizes, engine.planner.rules)
    ranges: Mapping[str, tuple[int, int]] | None = None
    recorded: bool = False  # from the last store's record, not from listing the files
