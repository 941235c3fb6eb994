"""Reading plans: paths, text and dicts, strict and relaxed JSON, and syntax errors that say where."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.errors import PlanError
from engine.plan import Constant, PlanSyntaxError, parse_plan
from engine.plan.source import load_document

RELAXED = """
// a comment, unquoted keys and a trailing comma
{
  head: {type: "APACHE_DRILL_LOGICAL", version: 1, generator: {type: "manual", info: "na"}},
  storage: {queue: {type: "queue"}},  /* block comment */
  query: [
    {@id: 1, op: "constant", content: [{price: 1.00, count: 3, big: 1e3, neg: -0.5}]},
    {@id: 2, op: "store", input: 1, storageengine: "queue", target: {number: 0}},
  ]
}
"""


def test_relaxed_json_is_accepted() -> None:
    plan = parse_plan(RELAXED)
    constant = plan.operator(1)
    assert isinstance(constant, Constant)
    assert [op.id for op in plan.query] == ["1", "2"]


def test_relaxed_json_keeps_fractional_numbers_as_floats() -> None:
    [record] = parse_plan(RELAXED).operator(1).content  # type: ignore[attr-defined]
    assert record == {"price": 1.0, "count": 3, "big": 1000.0, "neg": -0.5}
    assert (
        type(record["price"]) is float
        and type(record["count"]) is int
        and type(record["big"]) is float
    )


def test_the_same_plan_from_a_path_a_path_string_text_and_a_dict(tmp_path: Path) -> None:
    file = tmp_path / "plan.json"
    file.write_text(RELAXED)
    from_path = parse_plan(file)
    from_string = parse_plan(str(file))
    from_text = parse_plan(RELAXED)
    from_dict = parse_plan(from_text.to_dict())
    assert from_path == from_string == from_text == from_dict
    assert from_path.source == str(file) and from_string.source == str(file)
    assert from_text.source is None and parse_plan(RELAXED, source_name="mine").source == "mine"


def test_a_syntax_error_names_the_file_line_and_column(tmp_path: Path) -> None:
    file = tmp_path / "broken.json"
    file.write_text('{\n  head: {type: "APACHE_DRILL_LOGICAL"},\n  query: [ {op: "scan",, } ]\n}\n')
    with pytest.raises(PlanSyntaxError) as raised:
        parse_plan(file)
    text = str(raised.value)
    assert text.startswith(f"{file}: invalid JSON at line 3, column ")
    assert 'query: [ {op: "scan",, } ]' in text and text.rstrip().endswith("^")
    assert raised.value.kind == "parse"


def test_a_syntax_error_in_text_uses_the_source_name() -> None:
    with pytest.raises(PlanSyntaxError, match=r"^inline: invalid JSON at line 1, column 9"):
        parse_plan('{"a": 1 "b": 2}', source_name="inline")


def test_an_empty_plan_is_a_syntax_error() -> None:
    with pytest.raises(PlanSyntaxError, match="the plan is empty"):
        parse_plan("   \n")


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(PlanError, match=r"plan file not found: .*nope\.json"):
        parse_plan(missing)
    with pytest.raises(PlanError, match=r"plan file not found: .*nope\.json"):
        parse_plan(str(missing))


def test_a_file_that_is_not_utf8(tmp_path: Path) -> None:
    file = tmp_path / "latin1.json"
    file.write_bytes(b'{"memo": "caf\xe9"}')
    with pytest.raises(PlanSyntaxError, match="not UTF-8"):
        parse_plan(file)


def test_a_source_of_another_type_is_refused() -> None:
    with pytest.raises(PlanError, match="cannot read a plan from a int"):
        parse_plan(42)  # type: ignore[arg-type]


def test_strict_json_is_read_by_the_json_module() -> None:
    document, name = load_document(json.dumps({"a": [1, 2.0]}), source_name="x")
    assert document == {"a": [1, 2.0]} and name == "x"


def test_a_dict_is_not_modified() -> None:
    document = {"op": "sequence", "do": [{"op": "constant", "content": []}]}
    snapshot = json.dumps(document)
    plan = parse_plan(document)
    assert json.dumps(document) == snapshot
    assert plan.query[0].id == "_seq0.0"
