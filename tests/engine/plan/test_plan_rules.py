"""One test per validation rule: each problem names the JSON path as written and the operator id."""

from __future__ import annotations

from typing import Any

import pytest

from engine.errors import PlanError, PlanIssue
from engine.plan import parse_plan

HEAD = {
    "type": "APACHE_DRILL_LOGICAL",
    "version": 1,
    "generator": {"type": "manual", "info": "test"},
}
STORAGE = {"cp": {"type": "classpath"}, "queue": {"type": "queue"}}


def scan(op_id: Any = 1, **extra: Any) -> dict[str, Any]:
    return {
        "@id": op_id,
        "op": "scan",
        "storageengine": "cp",
        "ref": "r",
        "selection": {"path": "/a.json"},
        **extra,
    }


def store(op_id: Any, source: Any, **extra: Any) -> dict[str, Any]:
    return {
        "@id": op_id,
        "op": "store",
        "input": source,
        "storageengine": "queue",
        "target": {"number": 0},
        **extra,
    }


def op(op_id: Any, kind: str, source: Any = 1, **fields: Any) -> dict[str, Any]:
    return {"@id": op_id, "op": kind, "input": source, **fields}


def problems(*query: dict[str, Any], **document: Any) -> list[PlanIssue]:
    """The issues of a plan that must be rejected."""
    with pytest.raises(PlanError) as raised:
        parse_plan(
            {"head": HEAD, "storage": STORAGE, "query": list(query), **document},
            source_name="t.json",
        )
    assert str(raised.value).startswith("t.json: ")
    return raised.value.issues


def only(*query: dict[str, Any], **document: Any) -> PlanIssue:
    [issue] = problems(*query, **document)
    return issue


def test_a_valid_plan_passes() -> None:
    plan = parse_plan(
        {
            "head": HEAD,
            "storage": STORAGE,
            "query": [scan(), op(2, "filter", expr="r.a > 1"), store(3, 2)],
        }
    )
    assert [o.op for o in plan.topological_order()] == ["scan", "filter", "store"]


def test_unknown_op_suggests_the_closest_name() -> None:
    issue = only(scan(), op(2, "fliter", expr="r.a"), store(3, 2))
    assert (issue.path, issue.op_id) == ("$.query[1].op", "2")
    assert issue.message == "unknown op 'fliter' (did you mean 'filter'?)"


def test_op_is_case_insensitive() -> None:
    plan = parse_plan(
        {"head": HEAD, "storage": STORAGE, "query": [scan(op="SCAN"), store(2, 1, op="Store")]}
    )
    assert [o.op for o in plan.query] == ["scan", "store"]


def test_missing_op() -> None:
    issue = only(scan(), {"@id": 2, "input": 1, "expr": "r.a"}, store(3, 2))
    assert (issue.path, issue.op_id) == ("$.query[1]", "2")
    assert issue.message.startswith("missing required field 'op' (one of scan, constant")


def test_missing_required_field() -> None:
    issue = only(scan(), op(2, "filter"), store(3, 2))
    assert (issue.path, issue.op_id, issue.message) == (
        "$.query[1].expr",
        "2",
        "missing required field 'expr'",
    )


def test_missing_field_inside_a_list() -> None:
    issue = only(scan(), op(2, "project", projections=[{"ref": "output.a"}]), store(3, 2))
    assert (issue.path, issue.message) == (
        "$.query[1].projections[0].expr",
        "missing required field 'expr'",
    )


def test_unknown_field_suggests_the_closest_key() -> None:
    issue = only(scan(), op(2, "filter", expr="r.a", exrp="x"), store(3, 2))
    assert (issue.path, issue.op_id) == ("$.query[1].exrp", "2")
    assert issue.message.startswith(
        "unknown field 'exrp' (did you mean 'expr'?); filter takes '@id', 'expr'"
    )


def test_two_spellings_of_one_field() -> None:
    issue = only(scan(), op(2, "flatten", expr="r.a", ref="x", name="y"), store(3, 2))
    assert (issue.path, issue.op_id) == ("$.query[1].name", "2")
    assert "'name' is another spelling of 'ref'" in issue.message


def test_wrong_field_types_are_all_reported() -> None:
    first, last, content = problems(
        scan(),
        op(2, "limit", first="x", last=-1),
        store(3, 2),
        {"@id": 4, "op": "constant", "content": {"a": 1}},
    )
    assert (first.path, first.message) == (
        "$.query[1].first",
        "'first' must be an integer, not the string 'x'",
    )
    assert (last.path, last.message) == (
        "$.query[1].last",
        "'last' must be >= 0, not the number -1",
    )
    assert (content.path, content.op_id) == ("$.query[3].content", "4")
    assert content.message == "'content' must be a list, not an object"


def test_constant_content_holds_records() -> None:
    issue = only({"@id": 1, "op": "constant", "content": [{"a": 1}, 2]})
    assert (issue.path, issue.message) == (
        "$.query[0].content[1]",
        "'content[1]' must be an object, not the number 2",
    )


def test_bad_id_type() -> None:
    issue, dangling = problems(scan(True), store(2, 1))
    assert dangling.path == "$.query[1].input"
    assert (issue.path, issue.message) == (
        "$.query[0]['@id']",
        "an operator id must be a string or an integer, not true",
    )


def test_dangling_input_reference() -> None:
    issue = only(scan(), op(2, "filter", 7, expr="r.a"), store(3, 2))
    assert (issue.path, issue.op_id) == ("$.query[1].input", "2")
    assert issue.message == "'input' refers to operator '7', which does not exist; known ids: 1, 3"


def test_dangling_join_and_union_references() -> None:
    join = {"@id": 3, "op": "join", "left": 1, "right": 12, "type": "inner"}
    union = {"@id": 4, "op": "union", "inputs": [1, "11"]}
    right, second = problems(scan(), scan(2), join, union, store(5, 3), store(6, 4))
    assert (right.path, right.op_id) == ("$.query[2].right", "3")
    assert right.message.startswith(
        "'right' refers to operator '12', which does not exist (did you mean"
    )
    assert right.message.endswith("known ids: 1, 2, 4, 5, 6")
    assert (second.path, second.op_id) == ("$.query[3].inputs[1]", "4")


def test_duplicate_ids() -> None:
    issue = only(scan(), op("1", "filter", 1, expr="r.a"), store(3, 1))
    assert (issue.path, issue.op_id) == ("$.query[1]['@id']", "1")
    assert issue.message.startswith("duplicate operator id '1' (first used at $.query[0]['@id'])")


def test_cycles_name_the_operators_on_them() -> None:
    issue = only(
        scan(), op(2, "filter", 3, expr="r.a"), op(3, "filter", 2, expr="r.b"), store(4, 3)
    )
    assert (issue.path, issue.op_id) == ("$.query[1].input", "2")
    assert (
        issue.message == "operators 2, 3 form a cycle (2 reads 3, 3 reads 2); a plan must be a DAG"
    )


def test_an_operator_reading_itself_is_a_cycle() -> None:
    issue = only(scan(), op(2, "filter", 2, expr="r.a"), store(3, 2))
    assert issue.message.startswith("operators 2 form a cycle (2 reads 2)")


def test_reading_a_sink() -> None:
    issue = only(scan(), store(2, 1), op(3, "filter", 2, expr="r.a"), store(4, 3))
    assert (issue.path, issue.op_id) == ("$.query[2].input", "3")
    assert "reads operator '2', a store, which is a sink and has no output" in issue.message


def test_undeclared_storage_engine_lists_the_declared_ones() -> None:
    wrong_scan, wrong_store = problems(
        scan(storageengine="cpp"), {**store(2, 1), "storageengine": "console"}
    )
    assert (wrong_scan.path, wrong_scan.op_id) == ("$.query[0].storageengine", "1")
    assert wrong_scan.message == (
        "storage engine 'cpp' is not declared in 'storage' (did you mean 'cp'?); declared: 'cp', 'queue'"
    )
    assert (wrong_store.path, wrong_store.op_id) == ("$.query[1].storageengine", "2")


def test_undeclared_storage_engine_points_at_the_spelling_used() -> None:
    written = {k: v for k, v in store(2, 1).items() if k != "storageengine"}
    issue = only(scan(), {**written, "storageEngine": "nowhere"})
    assert issue.path == "$.query[1].storageEngine"


def test_sink_not_last_in_a_sequence() -> None:
    sequence = {
        "op": "sequence",
        "input": 1,
        "do": [
            {"op": "store", "storageengine": "queue", "target": {}},
            {"op": "filter", "expr": "r.a"},
        ],
    }
    issue = only(scan(), sequence)
    assert (issue.path, issue.op_id) == ("$.query[1].do[0].op", "_seq1.0")
    assert issue.message == "a sink must be the last element of a sequence ('store' is not)"


def test_dagger_keys_are_not_allowed_inside_a_sequence() -> None:
    sequence = {
        "@id": 5,
        "op": "sequence",
        "input": 1,
        "do": [{"@id": 9, "op": "filter", "input": 1, "expr": "r.a"}],
    }
    at_id, at_input = problems(scan(), sequence, store(6, 5))
    assert (at_id.path, at_id.op_id) == ("$.query[1].do[0]['@id']", "5")
    assert at_id.message.startswith("'@id' is not allowed inside a sequence (†)")
    assert at_input.path == "$.query[1].do[0].input"


def test_sequence_elements_after_the_first_read_one_input() -> None:
    sequence = {
        "op": "sequence",
        "input": 1,
        "do": [{"op": "filter", "expr": "r.a"}, scan(None) | {"@id": None}],
    }
    del sequence["do"][1]["@id"]
    issue = only(scan(), sequence)
    assert (issue.path, issue.op_id) == ("$.query[1].do[1].op", "_seq1.1")
    assert "'scan' is a source and can only be the first element of a sequence" in issue.message


def test_no_join_inside_a_sequence() -> None:
    sequence = {"op": "sequence", "input": 1, "do": [{"op": "join", "left": 1, "right": 1}]}
    issue = only(scan(), sequence)
    assert issue.path == "$.query[1].do[0].op"
    assert issue.message.startswith("'join' reads several inputs and cannot be part of a sequence")


def test_a_sequence_starting_with_a_single_input_operator_needs_an_input() -> None:
    issue = only(scan(), {"op": "sequence", "do": [{"op": "filter", "expr": "r.a"}]})
    assert issue.path == "$.query[1]"
    assert issue.message.startswith("the sequence starts with 'filter', which reads an input")


def test_a_sequence_starting_with_a_source_takes_no_input() -> None:
    issue = only(scan(), {"op": "sequence", "input": 1, "do": [{"op": "constant", "content": []}]})
    assert issue.path == "$.query[1].input"
    assert "starts with 'constant', which reads none" in issue.message


def test_a_sequence_needs_operators() -> None:
    issue = only(scan(), {"@id": 4, "op": "sequence", "input": 1, "do": []})
    assert (issue.path, issue.op_id) == ("$.query[1].do", "4")
    assert issue.message == "'do' must list the operators of the sequence, not an empty list"


def test_unknown_key_on_a_sequence() -> None:
    issue = only(
        scan(),
        {"op": "sequence", "input": 1, "sequence": [], "do": [{"op": "filter", "expr": "r.a"}]},
    )
    assert issue.path == "$.query[1].sequence"
    assert issue.message.startswith("unknown field 'sequence' in a sequence")


def test_nested_sequences_chain() -> None:
    inner = {"op": "sequence", "do": [{"op": "filter", "expr": "r.a"}, {"op": "limit", "last": 3}]}
    outer = {
        "@id": 7,
        "op": "sequence",
        "input": 1,
        "do": [inner, {"op": "transform", "transforms": [{"ref": "x", "expr": "1"}]}],
    }
    plan = parse_plan({"head": HEAD, "storage": STORAGE, "query": [scan(), outer, store(8, 7)]})
    assert [(o.op, o.id, o.input_ids()) for o in plan.query[1:4]] == [
        ("filter", "_seq1.0.0", ["1"]),
        ("limit", "_seq1.0.1", ["_seq1.0.0"]),
        ("transform", "7", ["_seq1.0.1"]),
    ]
    assert plan.path_of("_seq1.0.1") == "$.query[1].do[0].do[1]"


def test_project_ref_must_be_under_output() -> None:
    issue = only(
        scan(),
        op(
            2,
            "project",
            projections=[{"ref": "output.a", "expr": "r.a"}, {"ref": "outputs.b", "expr": "r.b"}],
        ),
        store(3, 2),
    )
    assert (issue.path, issue.op_id) == ("$.query[1].projections[1].ref", "2")
    assert issue.message.startswith(
        "project ref 'outputs.b' must be 'output' or start with 'output.'"
    )


def test_aggregate_outside_an_aggregating_operator() -> None:
    issue = only(scan(), op(2, "filter", expr="sum(r.a) > 1"), store(3, 2))
    assert (issue.path, issue.op_id) == ("$.query[1].expr", "2")
    assert "aggregate function 'sum' is only allowed in collapsingaggregate" in issue.message


def test_nested_aggregate() -> None:
    aggregations = [
        {"ref": "ok", "expr": "sum(r.a) / count(r.a)"},
        {"ref": "bad", "expr": "sum(count(r.a))"},
    ]
    issue = only(scan(), op(2, "collapsingaggregate", aggregations=aggregations), store(3, 2))
    assert (issue.path, issue.op_id) == ("$.query[1].aggregations[1].expr", "2")
    assert "aggregate 'count' nested inside aggregate 'sum'" in issue.message


def test_running_aggregates_are_checked_in_the_running_context() -> None:
    aggregations = [
        {"ref": "n", "expr": "row_number()"},
        {"ref": "d", "expr": "count_distinct(r.a)"},
    ]
    issue = only(scan(), op(2, "runningaggregate", aggregations=aggregations), store(3, 2))
    assert issue.path == "$.query[1].aggregations[1].expr"
    assert "count_distinct" in issue.message


def test_windowframe_needs_a_bound() -> None:
    issue = only(scan(), op(2, "windowframe"), store(3, 2))
    assert (issue.path, issue.op_id) == ("$.query[1]", "2")
    assert issue.message.startswith("windowframe needs 'start', 'end' or both")


def test_windowframe_start_after_end() -> None:
    issue = only(scan(), op(2, "windowframe", start=2, end=-1), store(3, 2))
    assert (issue.path, issue.op_id) == ("$.query[1]", "2")
    assert issue.message == "windowframe start (2) must be less than or equal to end (-1)"


def test_windowframe_with_one_bound_is_fine() -> None:
    plan = parse_plan(
        {
            "head": HEAD,
            "storage": STORAGE,
            "query": [scan(), op(2, "windowframe", end=0), store(3, 2)],
        }
    )
    frame = plan.operator(2)
    assert (frame.start, frame.end, frame.segment_ref, frame.position_ref) == (
        None,
        0,
        "ref.segment",
        "ref.position",
    )


def test_expression_syntax_error_shows_line_column_and_caret() -> None:
    issue = only(scan(), op(2, "filter", expr="r.a >"), store(3, 2))
    assert (issue.path, issue.op_id) == ("$.query[1].expr", "2")
    lines = issue.message.splitlines()
    assert lines[0].startswith("expression syntax error: ") and "line 1, column 6" in lines[0]
    assert lines[1].strip() == "r.a >" and lines[2].strip() == "^"


def test_unknown_function() -> None:
    issue = only(scan(), op(2, "filter", expr="lowr(r.a) == 'x'"), store(3, 2))
    assert (issue.path, issue.op_id) == ("$.query[1].expr", "2")
    assert "unknown function 'lowr'" in issue.message and "lower" in issue.message


def test_expressions_in_every_operator_are_checked() -> None:
    join = {
        "@id": 3,
        "op": "join",
        "left": 1,
        "right": 2,
        "conditions": [{"relationship": "==", "left": "r.a", "right": "r.b +"}],
    }
    order = op(4, "order", 3, orderings=[{"expr": "(r.a"}])
    segment = op(5, "segment", 4, ref="s", exprs=["r.a", "nope(1)"])
    paths = [issue.path for issue in problems(scan(), scan(2), join, order, segment, store(6, 5))]
    assert paths == [
        "$.query[2].conditions[0].right",
        "$.query[3].orderings[0].expr",
        "$.query[4].exprs[1]",
    ]


def test_names_must_be_field_paths() -> None:
    issue = only(scan(), op(2, "segment", ref="a b", exprs=[]), store(3, 2))
    assert (issue.path, issue.op_id) == ("$.query[1].ref", "2")
    assert issue.message.startswith("'a b' is not a field name")


def test_join_type_right_is_rejected_with_advice() -> None:
    join = {"@id": 3, "op": "join", "left": 1, "right": 2, "type": "RIGHT"}
    issue = only(scan(), scan(2), join, store(4, 3))
    assert (issue.path, issue.op_id) == ("$.query[2].type", "3")
    assert (
        issue.message
        == "join type 'right' is not supported: swap 'left' and 'right' and use 'left'"
    )


def test_join_relationship_must_be_a_comparison() -> None:
    join = {
        "@id": 3,
        "op": "join",
        "left": 1,
        "right": 2,
        "conditions": [{"relationship": "=~", "left": "a", "right": "b"}],
    }
    issue = only(scan(), scan(2), join, store(4, 3))
    assert issue.path == "$.query[2].conditions[0].relationship"
    assert issue.message.startswith("'relationship' must be one of '==', '!='")


def test_an_input_is_required_outside_a_sequence_when_something_reads_the_operator() -> None:
    issue = only(scan(), {"@id": 2, "op": "filter", "expr": "r.a"}, store(3, 2))
    assert (issue.path, issue.op_id) == ("$.query[1]", "2")
    assert issue.message.startswith("missing required field 'input'")


def test_a_store_without_input() -> None:
    issue = only(scan(), {"@id": 2, "op": "store", "storageengine": "queue", "target": {}})
    assert (issue.path, issue.op_id) == ("$.query[1]", "2")


def test_document_level_problems() -> None:
    unknown = only(scan(), store(2, 1), hed={})
    assert (unknown.path, unknown.op_id) == ("$.hed", None)
    assert unknown.message.startswith("unknown field 'hed' (did you mean 'head'?)")
    head = only(scan(), store(2, 1), head={"type": "physical", "version": 1})
    assert head.path == "$.head.type"
    engine = only(
        scan(), store(2, 1), storage={"cp": {"typ": "classpath"}, "queue": {"type": "queue"}}
    )
    assert (engine.path, engine.message) == ("$.storage.cp.type", "missing required field 'type'")


def test_list_form_storage_needs_names() -> None:
    unnamed, undeclared = problems(
        scan(), store(2, 1), storage=[{"type": "classpath", "name": "cp"}, {"type": "queue"}]
    )
    assert unnamed.path == "$.storage[1]"
    assert unnamed.message.startswith("missing required field 'name'")
    assert undeclared.message.endswith("declared: 'cp'")


def test_list_form_storage_names_once() -> None:
    issue = only(
        scan(),
        store(2, 1),
        storage=[
            {"type": "classpath", "name": "cp"},
            {"type": "queue", "name": "queue"},
            {"type": "fs", "name": "cp"},
        ],
    )
    assert (issue.path, issue.message) == (
        "$.storage[2].name",
        "storage engine 'cp' is declared twice",
    )


def test_seed_engines_wording_is_accepted() -> None:
    document = {"head": HEAD, "engines": STORAGE, "query": [scan(), store(2, 1)]}
    assert list(parse_plan(document).storage) == ["cp", "queue"]


def test_all_problems_are_collected_in_one_error() -> None:
    issues = problems(
        scan(storageengine="nowhere"),
        op(2, "fliter", expr="r.a"),
        op(3, "filter", 2),
        op(4, "windowframe", 3),
        store(5, 9),
    )
    assert [(i.path, i.op_id) for i in issues] == [
        ("$.query[1].op", "2"),
        ("$.query[2].expr", "3"),
        ("$.query[3]", "4"),
        ("$.query[0].storageengine", "1"),
        ("$.query[4].input", "5"),
    ]


def test_not_an_object() -> None:
    with pytest.raises(
        PlanError,
        match=r"a plan must be a JSON object with 'head', 'storage' and 'query', not a list",
    ):
        parse_plan("[1, 2]")
    issue = only(scan(), "filter")  # type: ignore[arg-type]
    assert (issue.path, issue.message) == (
        "$.query[1]",
        "an operator must be a JSON object, not a string",
    )


def test_dangling_sequence_input_points_at_the_sequence() -> None:
    sequence = {"@id": 4, "op": "sequence", "input": 9, "do": [{"op": "filter", "expr": "r.a"}]}
    issue = only(scan(), sequence, store(5, 4))
    assert (issue.path, issue.op_id) == ("$.query[1].input", "4")
    assert issue.message.startswith("'input' refers to operator '9', which does not exist")


def test_named_expressions_expose_their_parsed_tree() -> None:
    plan = parse_plan(
        {
            "head": HEAD,
            "storage": STORAGE,
            "query": [
                scan(),
                op(2, "transform", transforms=[{"ref": "q", "expr": "r.a + 1"}]),
                store(3, 2),
            ],
        }
    )
    [named] = plan.operator(2).transforms
    assert named.parsed.name == "add"


def test_head_and_storage_may_be_left_out() -> None:
    plan = parse_plan({"query": [{"@id": 1, "op": "constant", "content": [{"a": 1}]}]})
    assert plan.head.type == "APACHE_DRILL_LOGICAL" and plan.storage == {}


def test_query_is_required() -> None:
    with pytest.raises(PlanError) as raised:
        parse_plan({"head": HEAD, "storage": STORAGE})
    [issue] = raised.value.issues
    assert (issue.path, issue.message) == (
        "$",
        "missing required field 'query' (the list of operators)",
    )
