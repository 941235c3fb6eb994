"""Small pieces of the Dagster layer: slices, schema metadata, lineage metadata, checks, doctests."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pyarrow as pa
import pytest
from dagster import AssetKey, TableColumnDep
from hypothesis import given
from hypothesis import strategies as st

import drill_dagster
from drill_dagster.checks import parse_type_contract, schema_problems
from drill_dagster.metadata import (
    column_schema,
    column_type,
    lineage_metadata,
    next_schema_version,
)
from drill_dagster.partitions import slices_for_keys
from drill_dagster.plans import location_parts, safe_name
from drill_dagster.project import PartitionsConfig
from engine.lineage import column_lineage
from engine.plan import parse_plan


def _modules() -> list[str]:
    return sorted(i.name for i in pkgutil.walk_packages(drill_dagster.__path__, "drill_dagster."))


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"


def test_slices_per_key_for_ranges_and_one_slice_without_partitions() -> None:
    daily = PartitionsConfig(daily="2024-01-01", param="day")
    assert slices_for_keys(daily, None, {"env": "x"})[0].params == {"env": "x"}
    slices = slices_for_keys(daily, ["2024-01-01", "2024-01-02"], {"day": "ignored"})
    assert [(s.params["day"], s.partition_keys, s.label) for s in slices] == [
        ("2024-01-01", ("2024-01-01",), "partition 2024-01-01"),
        ("2024-01-02", ("2024-01-02",), "partition 2024-01-02"),
    ]
    ranged = PartitionsConfig(
        static=["a", "b", "c"], range="params", start_param="lo", end_param="hi"
    )
    (whole,) = slices_for_keys(ranged, ["a", "b", "c"])
    assert (
        whole.params == {"partition": "a", "lo": "a", "hi": "c"}
        and whole.label == "partitions a..c"
    )


def test_column_schema_describes_nested_lists_of_maps_and_modes() -> None:
    item = pa.struct([pa.field("sku", pa.string()), pa.field("qty", pa.int32())])
    schema = pa.schema(
        [
            pa.field("tags", pa.list_(pa.field("element", pa.string(), nullable=False))),
            pa.field("items", pa.list_(pa.field("element", item, nullable=False))),
            pa.field("when", pa.timestamp("us")),
            pa.field("odd", pa.dictionary(pa.int8(), pa.string())),
        ]
    )
    columns = {c.name: c for c in column_schema(schema).columns}
    assert list(columns) == ["tags", "items", "items.sku", "items.qty", "when", "odd"]
    assert columns["tags"].type == "REPEATED VARCHAR"
    assert column_type(columns["tags"]) == ("VARCHAR", "REPEATED")
    assert columns["tags"].description is None and not columns["tags"].tags  # the type once
    assert columns["items"].type == "REPEATED MAP" and columns["items.qty"].type == "INT"
    assert columns["when"].type == "TIMESTAMP"
    assert columns["odd"].description.startswith("Arrow type dictionary")


def test_lineage_of_a_stored_scan_record_is_traced_member_by_member() -> None:
    plan = parse_plan(
        {
            "storage": {"fs": {"type": "fs", "root": "/d"}},
            "query": [
                {
                    "@id": 1,
                    "op": "scan",
                    "storageengine": "fs",
                    "ref": "e",
                    "selection": {"path": "x"},
                },
                {
                    "@id": 2,
                    "op": "store",
                    "input": 1,
                    "storageengine": "fs",
                    "target": {"path": "y"},
                },
            ],
        }
    )
    schema = pa.schema(
        [pa.field("e", pa.struct([pa.field("a", pa.int64()), pa.field("b", pa.string())]))]
    )
    lineage = lineage_metadata(column_lineage(plan)["2"], schema, {"1": AssetKey("x")}.get)
    assert lineage.deps_by_column == {
        "e": [TableColumnDep(AssetKey("x"), "a"), TableColumnDep(AssetKey("x"), "b")]
    }


def test_schema_contract_problems() -> None:
    schema = column_schema(
        pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("n", pa.string())])
    )
    assert schema_problems(schema, {"id": "REQUIRED BIGINT", "n": "string"}, exact=True) == []
    assert schema_problems(schema, {"id": "OPTIONAL BIGINT", "m": "INT"}, exact=True) == [
        "column 'id' is REQUIRED BIGINT, not OPTIONAL BIGINT",
        "column 'm' is missing",
        "columns not in the contract: n",
    ]
    with pytest.raises(ValueError, match="unknown Drill type 'BIGNIT'"):
        parse_type_contract("BIGNIT")


@given(st.lists(st.sampled_from(["a", "b"]), min_size=1, max_size=8))
def test_schema_version_counts_changes(fingerprints: list[str]) -> None:
    previous = None
    changes = 0
    for i, fingerprint in enumerate(fingerprints):
        version = next_schema_version(previous, fingerprint)
        changes += i > 0 and fingerprints[i - 1] != fingerprint
        assert version == 1 + changes
        previous = {"drill/schema_version": version, "drill/schema_fingerprint": fingerprint}


def test_names_and_locations() -> None:
    assert safe_name("events-cleaned.v2") == "events_cleaned_v2"
    assert location_parts("/a/./b/../c/${day}/*.json") == ("a", "c")


def test_shared_op_definitions_by_kind_inputs_checks_pool_and_tags() -> None:
    from drill_dagster.assets import shared_op
    from drill_dagster.outline import PlanOutline

    plan = parse_plan(
        {
            "storage": {"q": {"type": "queue"}},
            "query": [
                {"@id": 1, "op": "constant", "content": [{"a": 1}]},
                {"@id": 2, "op": "filter", "input": 1, "expr": "a > 0"},
                {"@id": 3, "op": "filter", "input": 2, "expr": "a > 1"},
                {"@id": 4, "op": "union", "inputs": [2, 3]},
            ],
        }
    )
    _, first, second, union = PlanOutline.of(plan).operators
    assert shared_op(first, False) is shared_op(second, False)
    assert shared_op(first, False).name == "drill_filter"
    assert shared_op(union, False).name == "drill_union_of_2"
    tagged = shared_op(first, False, tags={"team": "a"})
    assert tagged is not shared_op(first, False) and tagged.tags["team"] == "a"
    # Two pools with one safe name still make two names: one definition per name.
    dashed, underscored = shared_op(first, False, pool="x-y"), shared_op(first, False, pool="x_y")
    assert dashed.name != underscored.name
    assert (dashed.pool, underscored.pool) == ("x-y", "x_y")
