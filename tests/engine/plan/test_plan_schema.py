"""The committed plan.schema.json is the schema the models generate, and it describes every operator."""

from __future__ import annotations

import json
from pathlib import Path

from engine.plan import OPERATORS, plan_json_schema
from engine.plan.schema import render_schema

REPO = Path(__file__).resolve().parents[3]


def test_committed_schema_is_in_sync() -> None:
    committed = REPO / "plan.schema.json"
    assert committed.is_file(), (
        "plan.schema.json is missing: run `python -m engine.plan.schema > plan.schema.json`"
    )
    assert json.loads(committed.read_text()) == plan_json_schema(), (
        "plan.schema.json is out of date: run `python -m engine.plan.schema > plan.schema.json`"
    )
    assert committed.read_text() == render_schema()


def test_query_items_are_discriminated_on_op() -> None:
    items = plan_json_schema()["properties"]["query"]["items"]
    assert items["discriminator"]["propertyName"] == "op"
    assert set(items["discriminator"]["mapping"]) == {*OPERATORS, "sequence"}


def test_every_operator_requires_op_and_not_id() -> None:
    defs = plan_json_schema()["$defs"]
    for name in ("Scan", "Filter", "Store", "Sequence", "WindowFrame"):
        assert defs[name]["required"][0] == "op"
        assert "@id" not in defs[name]["required"]
        assert defs[name]["additionalProperties"] is False
    assert defs["Filter"]["properties"]["@id"]["type"] == ["string", "integer"]


def test_upstream_spellings_are_in_the_schema() -> None:
    defs = plan_json_schema()["$defs"]
    assert {"storageengine", "storageEngine"} <= set(defs["Store"]["properties"])
    assert defs["Store"]["anyOf"] == [
        {"required": ["storageengine"]},
        {"required": ["storageEngine"]},
    ]
    assert {"ref", "name"} <= set(defs["Flatten"]["properties"])
    assert "DESC" in defs["Ordering"]["properties"]["order"]["enum"]
    assert "nullCollation" in defs["Ordering"]["properties"]
