"""The scan framework end to end: files -> readers -> loader -> tracker -> aligned batches."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from engine.errors import SchemaConflictError, StorageError
from engine.scan.framework import FileScan, implicit_values
from engine.storage.engines import create_engine
from engine.storage.paths import InputFile
from engine.types import UNION, UNION_ARROW, from_arrow_field


def _engine(root: Path):
    return create_engine("fs", {"type": "fs", "root": str(root)})


def test_files_share_one_layout_and_dir_columns(tmp_path: Path) -> None:
    (tmp_path / "d1").mkdir()
    (tmp_path / "d1" / "a.json").write_text('{"x": 1}\n')
    (tmp_path / "b.json").write_text('{"y": "q", "x": 2}\n')
    rows = [r for b in FileScan(_engine(tmp_path), {"path": "/"}).batches() for r in b.to_pylist()]
    assert {"x": 2, "y": "q", "dir0": None} in rows
    assert any(r["x"] == 1 and r["dir0"] == "d1" for r in rows)


def test_file_columns_appear_only_when_referenced(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text('{"x": 1}\n')
    plain = next(FileScan(_engine(tmp_path), {"path": "a.json"}).batches())
    assert "filename" not in plain.schema.names
    named = next(
        FileScan(_engine(tmp_path), {"path": "a.json"}, file_columns=["filename"]).batches()
    )
    assert named.to_pylist() == [{"x": 1, "filename": "a.json"}]


def test_strict_mode_keeps_the_first_schema(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text('{"x": 1}\n')
    (tmp_path / "b.json").write_text('{"x": 2, "extra": true}\n')
    scan = FileScan(_engine(tmp_path), {"path": "/", "schemaMode": "strict"})
    rows = [r for b in scan.batches() for r in b.to_pylist()]
    assert rows == [{"x": 1}, {"x": 2}]
    assert scan.tracker is not None and scan.tracker.warnings


@pytest.mark.parametrize("selection", [{"unionType": False}, {"schemaMode": "strict"}])
def test_conflicting_types_without_unions_name_the_file_and_line(
    tmp_path: Path, selection: dict
) -> None:
    (tmp_path / "a.json").write_text('{"x": [1]}\n{"x": "s"}\n')
    with pytest.raises(SchemaConflictError, match=r"a\.json:2"):
        list(FileScan(_engine(tmp_path), {"path": "a.json", **selection}).batches())


def test_a_field_whose_kind_changes_in_a_file_is_a_union(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(
        '{"x": [1], "n": 1}\n{"x": "s", "n": 2}\n{"x": {"k": [true]}, "n": 3}\n{"n": 4}\n'
    )
    (batch,) = FileScan(_engine(tmp_path), {"path": "a.json"}).batches()
    assert from_arrow_field(batch.schema.field("x")) == UNION
    assert batch.schema.field("n").type == pa.int64()
    assert [r["x"] for r in batch.to_pylist()] == [[1], "s", {"k": [True]}, None]


def test_files_that_disagree_on_a_kind_make_a_union(tmp_path: Path) -> None:
    # the first file goes through pyarrow's reader (a list), the second through the loader
    (tmp_path / "a.json").write_text('{"m": {"x": [1, 2]}}\n')
    (tmp_path / "b.json").write_text('{"m": {"x": 7}}\n')
    (tmp_path / "c.json").write_text('{"m": {"x": [3]}}\n')
    batches = list(FileScan(_engine(tmp_path), {"path": "/"}).batches())
    rows = [r["m"]["x"] for b in batches for r in b.to_pylist()]
    assert rows == [[1, 2], 7, [3]]
    assert batches[-1].schema.field("m").type.field("x").type == UNION_ARROW


def test_a_record_must_be_an_object(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text('{"x": 1}\n{\n"x": 2}\n7\n')
    with pytest.raises(StorageError, match=r"a\.json:4.*must be a JSON object"):
        list(FileScan(_engine(tmp_path), {"path": "a.json"}).batches())


def test_implicit_values_of_a_file() -> None:
    values = implicit_values(
        InputFile(Path("/r/2024/01/e.json"), Path("/r/2024/01/e.json"), ("2024", "01"), 0)
    )
    assert values == {
        "fqn": "/r/2024/01/e.json",
        "filepath": "/r/2024/01",
        "filename": "e.json",
        "suffix": "json",
        "dir0": "2024",
        "dir1": "01",
    }


def test_hive_style_directories_are_columns_not_dirs(tmp_path: Path) -> None:
    for day, rows in [("2024-01-01", '{"v": 1}\n{"v": 2}\n'), ("2024-01-02", '{"v": 3}\n')]:
        (tmp_path / "t" / f"day={day}").mkdir(parents=True)
        (tmp_path / "t" / f"day={day}" / "part.json").write_text(rows)
    (tmp_path / "t" / "day=__HIVE_DEFAULT_PARTITION__").mkdir()
    (tmp_path / "t" / "day=__HIVE_DEFAULT_PARTITION__" / "part.json").write_text('{"v": 4}\n')
    (tmp_path / "t" / "plain").mkdir()
    (tmp_path / "t" / "plain" / "part.json").write_text('{"v": 5}\n')
    rows = [r for b in FileScan(_engine(tmp_path), {"path": "t"}).batches() for r in b.to_pylist()]
    assert sorted(rows, key=lambda r: r["v"]) == [
        {"v": 1, "dir0": None, "day": "2024-01-01"},
        {"v": 2, "dir0": None, "day": "2024-01-01"},
        {"v": 3, "dir0": None, "day": "2024-01-02"},
        {"v": 4, "dir0": None, "day": None},
        {"v": 5, "dir0": "plain", "day": None},
    ]


def test_a_provided_schema_types_a_hive_partition_column(tmp_path: Path) -> None:
    (tmp_path / "t" / "n=7").mkdir(parents=True)
    (tmp_path / "t" / "n=7" / "part.json").write_text('{"v": 1}\n')
    scan = FileScan(_engine(tmp_path), {"path": "t", "schema": {"n": "BIGINT"}})
    (batch,) = scan.batches()
    assert batch.to_pylist() == [{"n": 7, "v": 1}] or batch.to_pylist() == [{"v": 1, "n": 7}]
    assert batch.schema.field("n").type == pa.int64()


def test_a_provided_varchar_type_takes_a_union_column_as_text(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text('{"x": [1, "a"]}\n{"x": "s"}\n{"x": 2}\n{"x": {"k": null}}\n')
    scan = FileScan(_engine(tmp_path), {"path": "a.json", "schema": {"x": "VARCHAR"}})
    rows = [r["x"] for b in scan.batches() for r in b.to_pylist()]
    assert rows == ['[1,"a"]', "s", "2", '{"k":null}']
    with pytest.raises(SchemaConflictError, match="from BIGINT to UNION"):
        list(FileScan(_engine(tmp_path), {"path": "a.json", "schema": {"x": "BIGINT"}}).batches())


def test_narrow_records_come_in_batches_of_up_to_batch_bytes(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    (tmp_path / "narrow").mkdir()
    (tmp_path / "wide").mkdir()
    pq.write_table(pa.table({"n": list(range(10_000))}), tmp_path / "narrow" / "a.parquet")
    pq.write_table(pa.table({"s": ["x" * 1000] * 1000}), tmp_path / "wide" / "a.parquet")

    def sizes(path: str, **batching: int) -> list[int]:
        scan = FileScan(_engine(tmp_path), {"path": path}, batch_rows=100, **batching)
        return [batch.num_rows for batch in scan.batches()]

    assert sizes("narrow") == [100] * 100  # no batch_bytes: batch_rows
    assert sizes("narrow", batch_bytes=4_000) == [500] * 20  # 8 bytes a record
    assert sizes("narrow", batch_bytes=1 << 20) == [800] * 12 + [400]  # at most 8x the rows
    assert sizes("wide", batch_bytes=4_000) == [100] * 10  # never fewer rows than batch_rows
