"""A table's schema read the way a scan would read it: the scan schema tracker over a sample.

>>> import tempfile, pathlib
>>> from engine.storage.engines import create_engine
>>> root = pathlib.Path(tempfile.mkdtemp())
>>> _ = (root / "a.json").write_text('{"x": 1}\\n{"x": 2, "y": {"z": "b"}}\\n')
>>> engine = create_engine("fs", {"type": "fs", "root": str(root)})
>>> sample_schema(engine, {"path": "a.json"}).names
['x', 'y']
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from engine.scan.framework import FileScan
from engine.storage.paths import InputFile

SAMPLE_FILES = 4
SAMPLE_ROWS = 10_000


class _SampleScan(FileScan):
    """A :class:`FileScan` over the first files of a selection only."""

    def __init__(self, engine: Any, selection: Mapping[str, Any], files: int) -> None:
        super().__init__(engine, selection, batch_rows=min(SAMPLE_ROWS, 4096))
        self._files = files

    def files(self) -> list[InputFile]:
        return super().files()[: self._files]


def sample_schema(
    engine: Any,
    selection: Mapping[str, Any],
    *,
    files: int = SAMPLE_FILES,
    rows: int = SAMPLE_ROWS,
) -> pa.Schema:
    """The output schema the scan schema tracker settles on over ``rows`` rows of the first
    ``files`` files (a provided ``schema`` in the selection is honoured, as in a scan). Implicit
    ``dirN`` partition columns are included; file columns (``filename`` ...) are not."""
    scan = _SampleScan(engine, selection, files)
    seen = 0
    schema: pa.Schema | None = None
    for batch in scan.batches():
        schema = batch.schema if schema is None else pa.unify_schemas([schema, batch.schema])
        seen += batch.num_rows
        if seen >= rows:
            break
    if schema is None and scan.tracker is not None:
        schema = scan.tracker.output_schema()
    return schema if schema is not None else pa.schema([])
