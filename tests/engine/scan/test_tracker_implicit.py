"""Implicit file columns and partition columns: their values, and where they appear in the output."""

from __future__ import annotations

import pyarrow as pa
import pytest

from engine.errors import PlanError, StorageError
from engine.scan.implicit import ImplicitColumns
from engine.scan.projection import ProjectionKind
from engine.scan.tracker import ScanSchemaTracker

ROOT = "/data/sales"
FILES = [
    f"{ROOT}/top.json",
    f"{ROOT}/1995/q1.json",
    f"{ROOT}/1995/Q2/orders.tar.gz",
]
IMPLICIT = ImplicitColumns()


def test_file_column_values() -> None:
    values = IMPLICIT.for_file(ROOT, f"{ROOT}/1995/Q2/orders.tar.gz")
    assert values == {
        "fqn": "/data/sales/1995/Q2/orders.tar.gz",
        "filepath": "/data/sales/1995/Q2",
        "filename": "orders.tar.gz",
        "suffix": "gz",
        "dir0": "1995",
        "dir1": "Q2",
    }


def test_files_at_different_depths() -> None:
    assert IMPLICIT.directories(ROOT, FILES[0]) == []
    assert IMPLICIT.directories(ROOT, FILES[1]) == ["1995"]
    assert IMPLICIT.partition_depth(ROOT, FILES) == 2
    assert IMPLICIT.partition_depth(ROOT, []) == 0


@pytest.mark.parametrize(
    ("root", "file", "dirs"),
    [
        ("file:///data", "file:///data/a/b.csv", ["a"]),
        ("/data/", "/data/./a/b.csv", ["a"]),
        ("/data", "a/b/c.csv", ["a", "b"]),  # a relative file is under an absolute root
        ("/data/b.csv", "/data/b.csv", []),  # the selection is the file itself
    ],
)
def test_path_forms(root: str, file: str, dirs: list[str]) -> None:
    assert IMPLICIT.directories(root, file) == dirs


def test_suffix_of_names_without_an_extension() -> None:
    assert IMPLICIT.for_file("/r", "/r/README")["suffix"] == ""
    assert IMPLICIT.for_file("/r", "/r/.hidden")["suffix"] == ""


def test_a_file_outside_the_root_is_a_storage_error_naming_it() -> None:
    with pytest.raises(
        StorageError, match=r"^/elsewhere/x\.csv: file is not under the selection root"
    ):
        IMPLICIT.for_file("/data", "/elsewhere/x.csv")


def test_names_are_configurable() -> None:
    renamed = ImplicitColumns(filename="source_file", partition_prefix="level")
    values = renamed.for_file("/r", "/r/2024/f.json")
    assert values["source_file"] == "f.json" and values["level0"] == "2024"
    assert "filename" not in values and "dir0" not in values
    assert renamed.partition_index("LEVEL12") == 12
    assert renamed.partition_index("dir0") is None
    assert renamed.partition_index("levelx") is None


@pytest.mark.parametrize(
    "config",
    [
        {"filename": "fqn"},
        {"suffix": ""},
        {"filename": "dir0"},
        {"partition_prefix": ""},
    ],
)
def test_clashing_names_are_rejected(config: dict[str, str]) -> None:
    with pytest.raises(PlanError):
        ImplicitColumns(**config)


def _batch(**columns: list[object]) -> pa.RecordBatch:
    return pa.record_batch(columns)


def test_wildcard_holds_partition_columns_but_not_file_columns() -> None:
    tracker = ScanSchemaTracker(None, partition_depth=IMPLICIT.partition_depth(ROOT, FILES))
    out = tracker.project_batch(
        _batch(a=[1, 2]), file=FILES[1], implicit_values=IMPLICIT.for_file(ROOT, FILES[1])
    )
    assert out.schema.names == ["a", "dir0", "dir1"]
    # the shallower file has no second directory: dir1 is null
    assert out.column("dir0").to_pylist() == ["1995", "1995"]
    assert out.column("dir1").to_pylist() == [None, None]
    assert out.schema.field("dir1").type == pa.string()


def test_wildcard_with_referenced_file_columns_puts_them_last() -> None:
    tracker = ScanSchemaTracker(["*", "filename", "suffix"], partition_depth=1)
    out = tracker.project_batch(
        _batch(a=[1], b=["x"]), file=FILES[1], implicit_values=IMPLICIT.for_file(ROOT, FILES[1])
    )
    assert out.schema.names == ["a", "b", "dir0", "filename", "suffix"]
    assert out.to_pylist() == [
        {"a": 1, "b": "x", "dir0": "1995", "filename": "q1.json", "suffix": "json"}
    ]


def test_file_column_before_the_wildcard_stays_first() -> None:
    tracker = ScanSchemaTracker(["filename", "*"], partition_depth=0)
    out = tracker.project_batch(
        _batch(a=[1]), file=FILES[0], implicit_values=IMPLICIT.for_file(ROOT, FILES[0])
    )
    assert out.schema.names == ["filename", "a"]


def test_explicit_projection_of_implicit_columns() -> None:
    tracker = ScanSchemaTracker(["dir1", "a", "FQN", "dir5"])
    assert tracker.reader_input_schema().names == ("a",)
    out = tracker.project_batch(
        _batch(a=[7]), file=FILES[2], implicit_values=IMPLICIT.for_file(ROOT, FILES[2])
    )
    assert out.to_pylist() == [
        {"dir1": "Q2", "a": 7, "FQN": "/data/sales/1995/Q2/orders.tar.gz", "dir5": None}
    ]
    assert tracker.implicit_schema().names == ["dir1", "FQN", "dir5"]


def test_only_implicit_columns_is_an_empty_projection_that_keeps_them() -> None:
    tracker = ScanSchemaTracker(["filename"])
    assert tracker.projection_type == ProjectionKind.EMPTY
    assert tracker.is_resolved
    out = tracker.project_batch(
        _batch(a=[1, 2, 3]), file=FILES[0], implicit_values=IMPLICIT.for_file(ROOT, FILES[0])
    )
    assert out.to_pylist() == [{"filename": "top.json"}] * 3


def test_implicit_column_wins_over_a_reader_column_of_that_name() -> None:
    tracker = ScanSchemaTracker(None, partition_depth=1)
    out = tracker.project_batch(
        _batch(dir0=["from-data"], a=[1]),
        file=FILES[1],
        implicit_values=IMPLICIT.for_file(ROOT, FILES[1]),
    )
    assert out.schema.names == ["a", "dir0"]
    assert out.column("dir0").to_pylist() == ["1995"]
    assert any("hidden by the implicit column" in w for w in tracker.warnings)


def test_unreferenced_file_column_name_is_an_ordinary_reader_column_in_the_wildcard() -> None:
    tracker = ScanSchemaTracker(None)
    out = tracker.project_batch(
        _batch(filename=["inside"]),
        file=FILES[0],
        implicit_values=IMPLICIT.for_file(ROOT, FILES[0]),
    )
    assert out.to_pylist() == [{"filename": "inside"}]


def test_renamed_implicit_columns_free_the_default_names() -> None:
    renamed = ImplicitColumns(filename="_file")
    tracker = ScanSchemaTracker(["filename", "_file"], implicit_columns=renamed)
    out = tracker.project_batch(
        _batch(filename=["data"]), file=FILES[0], implicit_values=renamed.for_file(ROOT, FILES[0])
    )
    assert out.to_pylist() == [{"filename": "data", "_file": "top.json"}]


def test_implicit_column_with_members_is_a_plan_error() -> None:
    with pytest.raises(PlanError, match="implicit column 'dir0' has no members"):
        ScanSchemaTracker(["dir0.x"])


def test_provided_type_for_a_partition_column_converts_its_text() -> None:
    tracker = ScanSchemaTracker(["dir0"], provided_schema={"dir0": "INT"})
    out = tracker.project_batch(
        _batch(a=[1]), file=FILES[1], implicit_values=IMPLICIT.for_file(ROOT, FILES[1])
    )
    assert out.schema.field("dir0").type == pa.int32()
    assert out.column("dir0").to_pylist() == [1995]
