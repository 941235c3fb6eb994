"""What one Spark run finds out as it compiles and runs: :class:`RunFindings`.

The run's context (:class:`~engine.exec.spark.compiler.SparkRunContext`) holds what the planner
decided, the storage engines and the parameters: what the compiler reads. What compiling and
running the operators finds out (the files a scan reads, the rows its footers count, what a store
wrote, the records a sink received) is written here, and read only by the run
(:class:`~engine.exec.spark.executor.SparkPlanRun`), which makes its row counts, its failures'
culprits and its :class:`~engine.exec.result.RunResult` of it. No visitor reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.storage.store import StoreResult


@dataclass
class RunFindings:
    """What one run found out so far (empty before it compiles anything)."""

    store_results: dict[str, StoreResult] = field(default_factory=dict)
    """Store id -> what it wrote."""

    sink_records: list[Any] = field(default_factory=list)
    """The records the queue and console stores received, in order."""

    scan_files: dict[str, set[str]] = field(default_factory=dict)
    """A file's path -> the ids of the scans reading it (a read that fails names a scan)."""

    files_read: dict[str, int] = field(default_factory=dict)
    """Scan id -> the files it reads, where Spark reads them all (no limit reads the scan)."""

    reading_scans: set[str] = field(default_factory=set)
    """The scans that read some file's bytes: Spark reads them, no local rows (see
    :mod:`~engine.exec.spark.row_markers`)."""

    read_rows: dict[str, int] = field(default_factory=dict)
    """Scan id -> the rows it reads, from its parquet footers (a whole read: no filter, no
    limit)."""
