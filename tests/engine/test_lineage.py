"""Column lineage derived from a plan's expressions (engine/lineage.py)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from engine.lineage import EMPTY, Shape, SourceColumn, column_lineage
from engine.plan import parse_plan

FS = {"fs": {"type": "fs", "root": "/data"}}


def _scan(op_id: int, ref: str | None, path: str = "t") -> dict[str, Any]:
    return {
        "@id": op_id,
        "op": "scan",
        "storageengine": "fs",
        "ref": ref,
        "selection": {"path": path},
    }


def _store(op_id: int, input_id: int) -> dict[str, Any]:
    return {
        "@id": op_id,
        "op": "store",
        "input": input_id,
        "storageengine": "fs",
        "target": {"path": f"out{op_id}"},
    }


def _lineage(*query: dict[str, Any]) -> dict[str, list[str]]:
    plan = parse_plan({"storage": FS, "query": list(query)})
    (store,) = column_lineage(plan).values()
    return {col: sorted(str(s) for s in deps) for col, deps in store.by_column().items()}


def test_project_of_nested_fields_and_computed_values() -> None:
    lineage = _lineage(
        _scan(1, "e"),
        {
            "@id": 2,
            "op": "project",
            "input": 1,
            "projections": [
                {"ref": "output.user_id", "expr": "e.user.id"},
                {"ref": "output.total", "expr": "e.qty * e.price + 1"},
                {"ref": "output.first_tag", "expr": "e.tags[0]"},
                {"ref": "output.one", "expr": "1"},
            ],
        },
        _store(3, 2),
    )
    assert lineage == {
        "user_id": ["1:user.id"],
        "total": ["1:price", "1:qty"],
        "first_tag": ["1:tags"],
        "one": [],
    }


def test_transform_overrides_a_scanned_field_and_later_reads_see_it() -> None:
    lineage = _lineage(
        _scan(1, "e"),
        {
            "@id": 2,
            "op": "transform",
            "input": 1,
            "transforms": [
                {"ref": "e.day", "expr": "e.dir0"},
                {"ref": "e.label", "expr": "concat(e.day, e.kind)"},
            ],
        },
        {
            "@id": 3,
            "op": "project",
            "input": 2,
            "projections": [
                {"ref": "output.day", "expr": "e.day"},
                {"ref": "output.label", "expr": "e.label"},
            ],
        },
        _store(4, 3),
    )
    assert lineage == {"day": ["1:dir0"], "label": ["1:dir0", "1:kind"]}


def test_join_merges_both_sides_and_filter_order_limit_pass_through() -> None:
    lineage = _lineage(
        _scan(1, "o", "orders"),
        _scan(2, "c", "customers"),
        {
            "@id": 3,
            "op": "join",
            "left": 1,
            "right": 2,
            "type": "left",
            "conditions": [{"relationship": "==", "left": "o.cid", "right": "c.id"}],
        },
        {"@id": 4, "op": "filter", "input": 3, "expr": "o.total > 0"},
        {"@id": 5, "op": "order", "input": 4, "orderings": [{"expr": "o.total"}]},
        {"@id": 6, "op": "limit", "input": 5, "last": 10},
        {
            "@id": 7,
            "op": "project",
            "input": 6,
            "projections": [
                {"ref": "output.total", "expr": "o.total"},
                {"ref": "output.name", "expr": "c.name"},
            ],
        },
        _store(8, 7),
    )
    assert lineage == {"total": ["1:total"], "name": ["2:name"]}


def test_union_with_a_constant_and_flatten_with_drop() -> None:
    plan = parse_plan(
        {
            "storage": FS,
            "query": [
                _scan(1, "oe"),
                {
                    "@id": 2,
                    "op": "flatten",
                    "input": 1,
                    "ref": "item",
                    "expr": "oe.items",
                    "drop": True,
                },
                {"@id": 3, "op": "constant", "content": [{"oe": {"id": -1}, "item": {"sku": "X"}}]},
                {"@id": 4, "op": "union", "inputs": [2, 3]},
                _store(5, 4),
            ],
        }
    )
    lineage = column_lineage(plan)["5"]
    assert lineage.columns() == ["oe", "item"]
    assert lineage.sources_of("item", "sku") == {SourceColumn("1", "items.sku")}
    assert lineage.sources_of("oe", "id") == {SourceColumn("1", "id")}
    assert lineage.sources_of("oe") == {SourceColumn("1", ""), SourceColumn("1", "id")}


def test_flatten_drop_removes_a_field_the_plan_named() -> None:
    lineage = _lineage(
        _scan(1, "o"),
        {
            "@id": 2,
            "op": "transform",
            "input": 1,
            "transforms": [{"ref": "x.list", "expr": "o.items"}],
        },
        {
            "@id": 3,
            "op": "project",
            "input": 2,
            "projections": [
                {"ref": "output.list", "expr": "x.list"},
                {"ref": "output.id", "expr": "o.id"},
            ],
        },
        {"@id": 4, "op": "flatten", "input": 3, "ref": "item", "expr": "list", "drop": True},
        _store(5, 4),
    )
    assert lineage == {"id": ["1:id"], "item": ["1:items"]}


def test_segment_collapsingaggregate_carryovers_and_aggregations() -> None:
    lineage = _lineage(
        _scan(1, "c"),
        {"@id": 2, "op": "segment", "input": 1, "ref": "grp", "exprs": ["c.day"]},
        {
            "@id": 3,
            "op": "collapsingaggregate",
            "input": 2,
            "within": "grp",
            "carryovers": ["c.day", "grp"],
            "aggregations": [
                {"ref": "n", "expr": "count(1)"},
                {"ref": "revenue", "expr": "sum(c.amount)"},
            ],
        },
        _store(4, 3),
    )
    assert lineage == {"c": ["1:day"], "grp": ["1:day"], "n": [], "revenue": ["1:amount"]}


def test_windowframe_and_runningaggregate_add_fields_to_the_record() -> None:
    plan = parse_plan(
        {
            "storage": FS,
            "query": [
                _scan(1, "c"),
                {
                    "@id": 2,
                    "op": "windowframe",
                    "input": 1,
                    "start": -1,
                    "end": 0,
                    "ref": {"segment": "w.target", "position": "w.pos"},
                },
                {
                    "@id": 3,
                    "op": "runningaggregate",
                    "input": 2,
                    "aggregations": [{"ref": "spend", "expr": "sum(c.amount)"}],
                },
                _store(4, 3),
            ],
        }
    )
    lineage = column_lineage(plan)["4"]
    assert lineage.columns() == ["c", "w", "spend"]
    assert lineage.sources_of("w") == frozenset()
    assert lineage.sources_of("spend") == {SourceColumn("1", "amount")}
    assert lineage.sources_of("c", "amount") == {SourceColumn("1", "amount")}


def test_a_scan_stored_as_is_is_open_and_answers_for_any_column() -> None:
    plan = parse_plan({"storage": FS, "query": [_scan(1, None), _store(2, 1)]})
    lineage = column_lineage(plan)["2"]
    assert lineage.is_open and lineage.columns() == []
    assert lineage.sources_of("anything") == {SourceColumn("1", "anything")}


def test_project_to_output_itself_merges_a_map_into_the_root() -> None:
    plan = parse_plan(
        {
            "storage": FS,
            "query": [
                _scan(1, "e"),
                {
                    "@id": 2,
                    "op": "project",
                    "input": 1,
                    "projections": [{"ref": "output", "expr": "e.user"}],
                },
                _store(3, 2),
            ],
        }
    )
    lineage = column_lineage(plan)["3"]
    assert lineage.is_open
    assert lineage.sources_of("name") == {SourceColumn("1", "user.name")}


def test_every_store_of_a_plan_gets_its_own_lineage() -> None:
    plan = parse_plan(
        {
            "storage": FS,
            "query": [
                _scan(1, "e"),
                {
                    "@id": 2,
                    "op": "project",
                    "input": 1,
                    "projections": [{"ref": "output.a", "expr": "e.a"}],
                },
                _store(3, 2),
                {
                    "@id": 4,
                    "op": "project",
                    "input": 1,
                    "projections": [{"ref": "output.b", "expr": "e.b"}],
                },
                _store(5, 4),
            ],
        }
    )
    lineage = column_lineage(plan)
    assert lineage["3"].by_column() == {"a": {SourceColumn("1", "a")}}
    assert lineage["5"].by_column() == {"b": {SourceColumn("1", "b")}}


_NAMES = st.text(alphabet="abcdefgh", min_size=1, max_size=4)


@given(st.lists(st.lists(_NAMES, min_size=1, max_size=3), min_size=1, max_size=6, unique_by=tuple))
def test_plain_field_projections_map_to_their_own_path(paths: list[list[str]]) -> None:
    projections = [
        {"ref": f"output.c{i}", "expr": "e." + ".".join(f"`{p}`" for p in path)}
        for i, path in enumerate(paths)
    ]
    plan = parse_plan(
        {
            "storage": FS,
            "query": [
                _scan(1, "e"),
                {"@id": 2, "op": "project", "input": 1, "projections": projections},
                _store(3, 2),
            ],
        }
    )
    lineage = column_lineage(plan)["3"]
    assert lineage.by_column() == {
        f"c{i}": {SourceColumn("1", ".".join(path))} for i, path in enumerate(paths)
    }


_SHAPES = st.recursive(
    st.builds(
        lambda cols: Shape(sources=frozenset(SourceColumn("1", c) for c in cols)),
        st.lists(_NAMES, max_size=2),
    ),
    lambda children: st.builds(
        lambda members: Shape(members=members), st.dictionaries(_NAMES, children, max_size=3)
    ),
    max_leaves=8,
)


@given(_SHAPES, _SHAPES)
def test_merge_is_symmetric_in_what_it_derives_from(a: Shape, b: Shape) -> None:
    assert a.merge(b).everything() == b.merge(a).everything() == a.everything() | b.everything()
    assert EMPTY.merge(a).everything() == a.everything()
