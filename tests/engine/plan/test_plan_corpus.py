"""Every plan of the conformance corpus parses, or is rejected the way cases.json says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.errors import PlanError
from engine.plan import (
    Constant,
    Filter,
    Flatten,
    LogicalPlan,
    Order,
    PlanSyntaxError,
    Project,
    Scan,
    Store,
    Transform,
    parse_plan,
)

CORPUS = (Path(__file__).resolve().parents[3] / ".." / "shared" / "conformance").resolve()


def _cases() -> list[dict]:
    index = CORPUS / "cases.json"
    return json.loads(index.read_text())["cases"] if index.is_file() else []


CASES = {case["id"]: case for case in _cases()}
UNKNOWN_OP = {"U20"}  # op "distinct" is outside seed 000's operator set
ACCEPTED = [
    cid for cid, case in CASES.items() if not case.get("expect_error") and cid not in UNKNOWN_OP
]


def _plan(conformance_dir: Path, case_id: str) -> LogicalPlan:
    return parse_plan(conformance_dir / CASES[case_id]["plan"])


def test_the_corpus_is_there(conformance_dir: Path) -> None:
    assert (conformance_dir / "cases.json").is_file()
    assert {f"U{n:02d}" for n in range(1, 22)} <= set(CASES), (
        f"expected the whole corpus in {conformance_dir}"
    )
    assert len(CASES) >= 60


@pytest.mark.parametrize("case_id", ACCEPTED)
def test_plan_parses(conformance_dir: Path, case_id: str) -> None:
    plan = _plan(conformance_dir, case_id)
    ops = {op.op for op in plan.query}
    assert ops <= set(CASES[case_id]["ops"]) - {"sequence"}
    assert plan.source == str(conformance_dir / CASES[case_id]["plan"])


@pytest.mark.parametrize("case_id", ACCEPTED)
def test_dump_parses_back_equal(conformance_dir: Path, case_id: str) -> None:
    plan = _plan(conformance_dir, case_id)
    assert parse_plan(plan.to_dict()) == plan
    assert parse_plan(plan.to_json()) == plan
    again = parse_plan(plan.to_dict())
    assert again.to_dict() == plan.to_dict()


@pytest.mark.parametrize(
    "case_id", [cid for cid, case in CASES.items() if case.get("expect_error") == "parse"]
)
def test_malformed_plans_are_parse_errors(conformance_dir: Path, case_id: str) -> None:
    with pytest.raises(PlanSyntaxError) as raised:
        _plan(conformance_dir, case_id)
    assert raised.value.kind == "parse"
    assert "invalid JSON at line" in str(raised.value)
    assert CASES[case_id]["plan"] in str(raised.value)


def test_u17_and_u18_point_at_the_fault(conformance_dir: Path) -> None:
    with pytest.raises(PlanSyntaxError, match=r"line 21, column 5"):
        _plan(conformance_dir, "U17")
    with pytest.raises(PlanSyntaxError, match=r"line 2, column 96: unexpected text after the end"):
        _plan(conformance_dir, "U18")


def test_d32_is_a_plan_error_naming_the_projection(conformance_dir: Path) -> None:
    assert CASES["D32"]["expect_error"] == "plan"
    with pytest.raises(PlanError) as raised:
        _plan(conformance_dir, "D32")
    assert not isinstance(raised.value, PlanSyntaxError)
    [issue] = raised.value.issues
    assert (issue.path, issue.op_id) == ("$.query[1].projections[0].ref", "2")
    assert "'foo.dd' must be 'output' or start with 'output.'" in issue.message


def test_u20_distinct_is_an_unknown_op(conformance_dir: Path) -> None:
    with pytest.raises(PlanError) as raised:
        _plan(conformance_dir, "U20")
    [issue] = raised.value.issues
    assert issue.path == "$.query[0].do[2].op"
    assert issue.op_id == "_seq0.2"
    assert issue.message.startswith("unknown op 'distinct'; the operators are scan, constant")


def test_u21_count_distinct_is_known_as_an_aggregate(conformance_dir: Path) -> None:
    plan = _plan(conformance_dir, "U21")
    [aggregate] = [op for op in plan.query if op.op == "collapsingaggregate"]
    [site] = aggregate.expressions()
    assert (site.text, site.context) == ("countDistinct(donuts.type)", "aggregate")
    assert site.problems() == []


def test_u02_sequence_expands_to_the_u01_chain(conformance_dir: Path) -> None:
    final, sequence = _plan(conformance_dir, "U01"), _plan(conformance_dir, "U02")
    assert [op.op for op in sequence.query] == [op.op for op in final.query]
    ids = [op.id for op in sequence.query]
    assert ids == [f"_seq0.{k}" for k in range(9)]
    assert [op.input_ids() for op in sequence.query] == [[], *[[i] for i in ids[:-1]]]
    assert all(op.has_generated_id for op in sequence.query)
    assert sequence.path_of("_seq0.4") == "$.query[0].do[4]"
    assert [op.id for op in sequence.topological_order()] == ids


def test_d34_sequence_input_feeds_the_first_and_its_id_names_the_last(
    conformance_dir: Path,
) -> None:
    plan = _plan(conformance_dir, "D34")
    _scan, first, last, limit, store = plan.query
    assert isinstance(first, Filter) and first.input == "1" and first.id == "_seq1.0"
    assert isinstance(last, Transform) and last.id == "2" and last.input == first.id
    assert limit.input_ids() == ["2"] and plan.inputs_of(limit) == [last]
    assert isinstance(store, Store) and plan.sinks() == [store]
    assert plan.location_of(last).of("@id") == "$.query[1]['@id']"
    assert plan.location_of(first).of("input") == "$.query[1].input"


def test_u03_flatten_reads_name_and_a_number_for_drop(conformance_dir: Path) -> None:
    plan = _plan(conformance_dir, "U03")
    [flatten] = [op for op in plan.query if isinstance(op, Flatten)]
    assert (flatten.ref, flatten.expr, flatten.drop) == ("donuts.t1", "donuts.topping", True)
    assert flatten.to_dict()["ref"] == "donuts.t1" and "name" not in flatten.to_dict()


def test_ids_are_strings_whether_written_as_numbers_or_not(conformance_dir: Path) -> None:
    numbers = _plan(conformance_dir, "U04")  # @id: 1 ... left: 1
    strings = _plan(conformance_dir, "U01")  # @id: "1" ... input: "1"
    assert numbers.operator(1) is numbers.operator("1")
    assert [op.id for op in numbers.query[:3]] == ["1", "2", "3"]
    assert numbers.query[2].input_ids() == ["1", "2"]
    assert strings.operator(9).input_ids() == ["8"]


def test_u14_list_form_storage_is_a_map_by_name(conformance_dir: Path) -> None:
    plan = _plan(conformance_dir, "U14")
    assert list(plan.storage) == ["console", "fs1", "cp"]
    assert plan.storage["fs1"].type == "fs"
    assert plan.storage["fs1"].extra() == {"root": "file:///"}
    assert [type(op) for op in plan.query] == [Constant, Store]
    assert plan.to_dict()["storage"]["fs1"] == {"type": "fs", "root": "file:///"}


def test_u13_a_bare_operator_is_a_plan_of_that_operator(conformance_dir: Path) -> None:
    plan = _plan(conformance_dir, "U13")
    [constant] = plan.query
    assert isinstance(constant, Constant) and constant.id == "_op0"
    assert constant.content[1] == {"c1": 2, "c2": "string 2"}
    assert plan.storage == {} and plan.sinks() == []
    assert plan.path_of(constant) == "$"


def test_u16_null_selection_ref_and_target(conformance_dir: Path) -> None:
    plan = _plan(conformance_dir, "U16")
    scan, store = plan.query
    assert isinstance(scan, Scan) and scan.selection is None and scan.ref is None
    assert (
        isinstance(store, Store) and store.target is None and store.storage_engine == "mock-engine"
    )
    assert store.to_dict()["target"] is None


def test_u19_an_order_without_input_is_ignored_with_a_warning(conformance_dir: Path) -> None:
    plan = _plan(conformance_dir, "U19")
    [order] = plan.ignored_operators()
    assert isinstance(order, Order) and order.id == "_op2"
    assert [op.id for op in plan.topological_order()] == ["1", "2", "_op3"]
    [warning] = plan.warnings
    assert (warning.path, warning.op_id) == ("$.query[2]", "_op2")
    assert "no input" in warning.message


def test_keys_spelled_the_upstream_way(conformance_dir: Path) -> None:
    plan = _plan(conformance_dir, "U08")  # "storageEngine", order "asc" without nullCollation
    store = plan.sinks()[0]
    assert isinstance(store, Store) and store.storage_engine == "queue"
    assert "storageengine" in store.to_dict() and "storageEngine" not in store.to_dict()
    [order] = [op for op in plan.query if isinstance(op, Order)]
    assert order.orderings[0].null_collation == "first"
    assert "nullCollation" not in order.to_dict()["orderings"][0]


def test_order_direction_is_case_insensitive(conformance_dir: Path) -> None:
    plan = _plan(conformance_dir, "U01")  # order: "DESC"
    [order] = [op for op in plan.query if isinstance(op, Order)]
    assert order.orderings[0].order == "desc"


def test_project_ref_output_alone_is_accepted(conformance_dir: Path) -> None:
    plan = _plan(conformance_dir, "U02")
    [project] = [op for op in plan.query if isinstance(op, Project)]
    assert project.projections[0].ref == "output"
