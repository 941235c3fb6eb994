"""The scan's projection list: kinds, path syntax, merging of overlapping paths, member queries."""

from __future__ import annotations

import pytest

from engine.errors import PlanError
from engine.scan.projection import (
    ProjectedColumn,
    ProjectionKind,
    ScanProjection,
    parse_path,
)


@pytest.mark.parametrize("spec", [None, "*", "**", ["*"], ["**"]])
def test_wildcard_forms(spec: object) -> None:
    projection = ScanProjection.parse(spec)  # type: ignore[arg-type]
    assert projection.kind == ProjectionKind.WILDCARD
    assert projection.columns == ()
    assert projection.is_projected("anything.at.all")
    assert projection.projected_members("m") is None


def test_empty_projection_projects_nothing() -> None:
    projection = ScanProjection.parse([])
    assert projection.kind == ProjectionKind.EMPTY
    assert not projection.is_projected("a")
    assert projection.projected_members("m") == ()


def test_explicit_projection_keeps_order_and_spelling() -> None:
    projection = ScanProjection.parse(["b", "A", "c"])
    assert projection.kind == ProjectionKind.EXPLICIT
    assert projection.names == ("b", "A", "c")
    assert projection.is_projected("a")  # names are case-insensitive, as in Drill
    assert not projection.is_projected("d")


def test_wildcard_with_extra_columns_remembers_where_it_expands() -> None:
    projection = ScanProjection.parse(["filename", "*", "m.x"])
    assert projection.kind == ProjectionKind.WILDCARD
    assert projection.wildcard_index == 1
    # the wildcard covers every member of m: the explicit m.x does not narrow it
    assert projection.columns == (ProjectedColumn("filename"), ProjectedColumn("m"))


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("a", ("a",)),
        ("m.x", ("m", "x")),
        ("m.y.z", ("m", "y", "z")),
        ("arr[0]", ("arr",)),
        ("columns[1]", ("columns",)),
        ("m.arr[2].c", ("m", "arr")),
        ("`a.b`.c", ("a.b", "c")),
        ("my col", ("my col",)),
        ("m.*", ("m", "*")),
    ],
)
def test_parse_path(text: str, path: tuple[str, ...]) -> None:
    assert parse_path(text) == path


@pytest.mark.parametrize("text", ["", "a..b", "a.", ".a", "arr[0", "``", "a.`b"])
def test_bad_paths_are_plan_errors_naming_the_reference(text: str) -> None:
    with pytest.raises(PlanError, match="column reference"):
        ScanProjection.parse([text])


def test_map_member_projection() -> None:
    projection = ScanProjection.parse(["m.x", "m.y.z", "a"])
    assert projection.names == ("m", "a")
    assert projection.projected_members("m") == ("x", "y")
    assert projection.projected_members("m.y") == ("z",)
    assert projection.projected_members("m.x") is None  # x is projected whole
    assert projection.projected_members("q") == ()
    assert projection.is_projected("m")
    assert projection.is_projected(("m", "x", "deeper"))
    assert not projection.is_projected("m.w")
    assert not projection.is_projected("m.y.w")


@pytest.mark.parametrize(
    "items", [["m", "m.x"], ["m.x", "m"], ["m.x", "M"], ["m.x", "m.*"], ["m.x.y", "m.x", "m"]]
)
def test_overlapping_paths_merge_to_the_whole_map(items: list[str]) -> None:
    projection = ScanProjection.parse(items)
    assert projection.columns == (ProjectedColumn("m"),)
    assert projection.projected_members("m") is None
    assert projection.is_projected("m.anything")


def test_member_merge_keeps_deepest_whole_path() -> None:
    projection = ScanProjection.parse(["m.x.y", "m.x", "m.z.w"])
    column = projection.column("m")
    assert column == ProjectedColumn(
        "m", (ProjectedColumn("x"), ProjectedColumn("z", (ProjectedColumn("w"),)))
    )
    assert column.path_strings() == ["m.x", "m.z.w"]


def test_index_projects_the_whole_array_and_duplicates_merge() -> None:
    projection = ScanProjection.parse(["arr[0]", "arr[3].b", "ARR"])
    assert projection.columns == (ProjectedColumn("arr"),)


def test_pre_split_paths_are_accepted() -> None:
    projection = ScanProjection.parse([("m", "a.b"), ("c",)])
    assert projection.projected_members("m") == ("a.b",)
    assert projection.is_projected(("m", "a.b"))
    assert not projection.is_projected(("m", "a"))


def test_a_bare_string_other_than_the_wildcard_is_rejected() -> None:
    with pytest.raises(PlanError, match="must be a list"):
        ScanProjection.parse("a")
