"""Memory bounds of the local executor: flatten costs memory linear in its output, and a store
streams its input to files, so a run's memory is bounded by ``max_buffered_bytes``.

Each run is a fresh process whose peak RSS (the kernel's figure) is compared before and after.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from engine.exec.local.flatten import OUTPUT_BATCH_BYTES, FlattenOperator
from engine.exec.protocol import BatchSource, IterOutcome
from engine.plan.operators import Flatten
from tests.reliability.reliability_support import peak_rss_growth

REPO = str(Path(__file__).resolve().parents[2])
MB = 2**20

FLATTEN_SETUP = """
import json, pathlib, tempfile
from engine import run_plan
root = pathlib.Path(tempfile.mkdtemp())
elements = {elements}
(root / "one.json").write_text(json.dumps({{"id": 1, "pad": "x" * 1000, "tags": list(range(elements))}}) + "\\n")
plan = {{
    "storage": {{"fs": {{"type": "fs", "root": str(root)}}}},
    "query": [
        {{"@id": 1, "op": "scan", "storageengine": "fs", "ref": "r", "selection": {{"path": "one.json", "format": "json"}}}},
        {{"@id": 2, "op": "flatten", "input": 1, "ref": "tag", "expr": "r.tags", "drop": {drop}}},
        {{"@id": 3, "op": "store", "input": 2, "storageengine": "fs", "target": {{"path": "out"}}}},
    ],
}}
"""


def test_flatten_with_drop_does_not_copy_the_array_per_element() -> None:
    """One record with a 6,000-element array: copying the record per element (the array with
    it) is 6,000 x 6,000 x 8 bytes, ~290 MB; the output itself is well under a megabyte."""
    setup = FLATTEN_SETUP.format(elements=6000, drop="True")
    body = "assert run_plan(plan).stores[0].row_count == elements"
    growth = peak_rss_growth(setup, body, cwd=REPO)
    assert growth < 64 * MB, f"flatten grew the peak RSS by {growth / MB:.0f} MB"


def test_flatten_emits_bounded_batches_when_the_array_is_kept() -> None:
    """Without ``drop`` every output record holds the whole array (the output is that large),
    but it comes in batches of about OUTPUT_BATCH_BYTES, one at a time."""
    tags = list(range(4000))
    source = BatchSource("1", [pa.record_batch({"id": [1, 2], "tags": [tags, [7]]})])
    op = FlattenOperator(Flatten(id="2", ref="tag", expr="tags"), source)
    sizes, rows = [], 0
    while op.next() in (IterOutcome.OK, IterOutcome.OK_NEW_SCHEMA):
        sizes.append(op.batch.nbytes)
        rows += op.batch.num_rows
        last = op.batch
    op.close()
    assert rows == 4001 and last.to_pylist()[-1] == {"id": 2, "tags": [7], "tag": 7}
    assert len(sizes) > 10 and max(sizes) <= 2 * OUTPUT_BATCH_BYTES


CROSS_JOIN_SETUP = """
import json, pathlib, tempfile
from engine import run_plan
root = pathlib.Path(tempfile.mkdtemp())
side = {side}
for name in ("a", "b"):
    (root / f"{{name}}.json").write_text("".join(json.dumps({{"n": i, "s": "v" * 20}}) + "\\n" for i in range(side)))
plan = {{
    "storage": {{"fs": {{"type": "fs", "root": str(root)}}}},
    "query": [
        {{"@id": 1, "op": "scan", "storageengine": "fs", "ref": "a", "selection": {{"path": "a.json", "format": "json"}}}},
        {{"@id": 2, "op": "scan", "storageengine": "fs", "ref": "b", "selection": {{"path": "b.json", "format": "json"}}}},
        {{"@id": 3, "op": "join", "left": 1, "right": 2, "type": "inner", "conditions": []}},
        {{"@id": 4, "op": "store", "input": 3, "storageengine": "fs", "target": {{"path": "out", "format": "{fmt}"}}}},
    ],
}}
"""


def test_a_store_streams_its_input_within_max_buffered_bytes() -> None:
    """A 2,500 x 2,500 cross join (6.25M rows) stored as parquet with a 32 MB limit: the run's
    peak stays a small multiple of the limit (it grew by ~490 MB when the store held its whole
    input; ~120 MB streaming: the join's blocks, a row group, the writer's pages), and every row
    is in the file."""
    limit = 32 * MB
    setup = CROSS_JOIN_SETUP.format(side=2500, fmt="parquet")
    body = f"assert run_plan(plan, max_buffered_bytes={limit}).stores[0].row_count == side * side"
    growth = peak_rss_growth(setup, body, cwd=REPO)
    assert growth < 5 * limit, f"the store grew the peak RSS by {growth / MB:.0f} MB"
