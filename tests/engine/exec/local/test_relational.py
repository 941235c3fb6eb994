"""The local filter, project and transform operators, on nested and multi-batch inputs."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow as pa
import pytest

from engine import run_plan
from engine.errors import ExecutionError
from engine.exec.local.relational import FilterOperator, ProjectOperator, TransformOperator
from engine.exec.protocol import BatchSource, FragmentExecutor, IterOutcome
from engine.plan.operators import Filter, Project, Transform

CORPUS = Path(__file__).resolve().parents[4] / ".." / "shared" / "conformance"


def batches(*groups: list[dict]) -> BatchSource:
    return BatchSource("1", [pa.RecordBatch.from_pylist(group) for group in groups])


def records(operator) -> list[dict]:
    return FragmentExecutor(operator).run().to_pylist()


def outputs(operator) -> list[list[dict]]:
    """The batches an operator emits, one list of records each."""
    out = []
    try:
        while operator.next() is not IterOutcome.NONE:
            out.append(operator.batch.to_pylist())
    finally:
        operator.close()
    return out


def strip_nulls(value):
    if isinstance(value, dict):
        return {k: strip_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [strip_nulls(v) for v in value]
    return value


# ---------------------------------------------------------------- filter


def filter_op(expr: str, source: BatchSource) -> FilterOperator:
    return FilterOperator(Filter(id="2", expr=expr), source)


def test_filter_keeps_true_rows_and_drops_false_and_null() -> None:
    source = batches([{"a": {"x": 5}}, {"a": {"x": 3}}, {"a": None}, {"a": {"x": 4}}])
    assert records(filter_op("a.x > 3", source)) == [{"a": {"x": 5}}, {"a": {"x": 4}}]


def test_filter_appendix_a_across_batches_with_schema_changes() -> None:
    source = batches(
        [{"a": {"b": 1, "x": 5}, "c": 1}],
        [{"a": [{"b": 1}, {"z": {"x": 4}}, {"q": 3, "x": 5}], "c": 2}],
        [{"a": {"b": 2, "x": [1, 2, 3, 4, 5]}, "c": 3}, {"a": {"b": 3, "x": [1, 2]}, "c": 4}],
    )
    emitted = outputs(filter_op("a.x > 3", source))
    assert [strip_nulls(r) for batch in emitted for r in batch] == [
        {"a": {"b": 1, "x": 5}, "c": 1},
        {"a": [{"q": 3, "x": 5}], "c": 2},
        {"a": {"b": 2, "x": [4, 5]}, "c": 3},
    ]


def test_filter_passes_a_first_empty_batch_only() -> None:
    source = batches([{"a": 1}], [{"a": 2}], [{"a": 9}], [{"a": 1}])
    assert outputs(filter_op("a > 5", source)) == [[], [{"a": 9}]]


def test_filter_error_names_the_operator() -> None:
    operator = filter_op("a > 'x'", batches([{"a": 1}]))
    with pytest.raises(
        ExecutionError, match=r"operator 2 \(filter\).*cannot compare BIGINT with VARCHAR"
    ):
        records(operator)


def test_filter_constructor_does_no_schema_work() -> None:
    class Untouchable(BatchSource):
        def produce(self):  # pragma: no cover - must not run
            raise AssertionError("the constructor pulled from its input")

    operator = filter_op("a > 1", Untouchable("1", []))
    assert operator.schema is None


# ---------------------------------------------------------------- project


def project_op(source: BatchSource, *projections: tuple[str, str]) -> ProjectOperator:
    op = Project(id="3", projections=[{"ref": ref, "expr": expr} for ref, expr in projections])
    return ProjectOperator(op, source)


def test_project_keeps_only_projected_values_with_output_stripped() -> None:
    source = batches([{"r": {"a": 1, "b": {"c": "x"}}, "z": 0}])
    out = records(project_op(source, ("output.a", "r.a"), ("output.deep.c", "r.b.c")))
    assert out == [{"a": 1, "deep": {"c": "x"}}]


def test_project_output_alone_merges_a_map_into_the_root_d31() -> None:
    source = batches([{"r": {"a": {"b": 1, "c": 2}, "d": 3}}])
    out = records(
        project_op(source, ("output", "r.a"), ("output.dd", "r.d"), ("output.zz", "r.nothere"))
    )
    assert out == [{"b": 1, "c": 2, "dd": 3, "zz": None}]


def test_project_later_projections_override_earlier_ones() -> None:
    source = batches([{"r": {"m": {"x": 1, "y": 2}, "v": 9}}])
    out = records(
        project_op(
            source,
            ("output.m", "r.m"),
            ("output.m.x", "r.v"),
            ("output.k", "1"),
            ("output.k", "'two'"),
        )
    )
    assert out == [{"m": {"x": 9, "y": 2}, "k": "two"}]


def test_project_a_plain_value_at_output_is_kept_under_output() -> None:
    out = records(project_op(batches([{"a": 2}]), ("output", "a * 10")))
    assert out == [{"output": 20}]


def test_project_output_output_nests_the_map_u01() -> None:
    out = records(project_op(batches([{"donuts": {"ppu": 0.5}}]), ("output.output", "donuts")))
    assert out == [{"output": {"ppu": 0.5}}]


def test_project_over_batches_with_different_schemas() -> None:
    source = batches([{"r": {"a": 1}}], [{"r": {"a": "one", "b": [1]}}], [{"q": 1}])
    emitted = outputs(project_op(source, ("output.a", "r.a"), ("output.n", "isnotnull(r.b)")))
    assert emitted == [
        [{"a": 1, "n": False}],
        [{"a": "one", "n": True}],
        [{"a": None, "n": False}],
    ]


def test_project_keeps_the_record_count_when_nothing_is_projected() -> None:
    out = records(project_op(batches([{"a": 1}, {"a": 2}]), ("output", "missing")))
    assert out == [{}, {}]


# ---------------------------------------------------------------- transform


def transform_op(source: BatchSource, *transforms: tuple[str, str]) -> TransformOperator:
    op = Transform(id="4", transforms=[{"ref": ref, "expr": expr} for ref, expr in transforms])
    return TransformOperator(op, source)


def test_transform_keeps_the_record_and_later_transforms_see_earlier_results() -> None:
    source = batches([{"t": {"id": 2, "name": "bob"}}])
    out = records(
        transform_op(source, ("t.big", "t.id * 100"), ("t.bigger", "t.big + 1"), ("q", "t.name"))
    )
    assert out == [{"t": {"id": 2, "name": "bob", "big": 200, "bigger": 201}, "q": "bob"}]


def test_transform_overwrites_an_existing_value() -> None:
    source = batches([{"t": {"id": 2, "m": {"k": 1}}}])
    out = records(transform_op(source, ("t.id", "t.id + 1"), ("t.m", "'flat'")))
    assert out == [{"t": {"id": 3, "m": "flat"}}]


def test_transform_into_a_null_map_creates_it() -> None:
    source = batches([{"t": {"id": 1}}, {"t": None}])
    out = records(transform_op(source, ("t.x", "1")))
    assert out == [{"t": {"id": 1, "x": 1}}, {"t": {"id": None, "x": 1}}]


def test_transform_over_batches_with_a_schema_change() -> None:
    source = batches([{"a": 1}], [{"a": 2.5, "b": "x"}])
    emitted = outputs(transform_op(source, ("c", "a * 2")))
    assert emitted == [[{"a": 1, "c": 2}], [{"a": 2.5, "b": "x", "c": 5.0}]]


def test_transform_error_names_the_operator() -> None:
    with pytest.raises(ExecutionError, match=r"operator 4 \(transform\)"):
        records(transform_op(batches([{"a": "x"}]), ("b", "a + 1")))


# ---------------------------------------------------------------- whole plans


def _plan(*query: dict) -> dict:
    store = {
        "@id": 99,
        "op": "store",
        "input": query[-1]["@id"],
        "storageengine": "q",
        "target": {"number": 0},
    }
    return {"storage": {"q": {"type": "queue"}}, "query": [*query, store]}


def test_plan_filter_transform_project_on_nested_constant() -> None:
    plan = _plan(
        {"@id": 1, "op": "constant", "content": [
            {"o": {"id": 1, "lines": [{"sku": "a", "q": 1}, {"sku": "b", "q": 7}]}},
            {"o": {"id": 2, "lines": [{"sku": "c", "q": 2}]}},
        ]},
        {"@id": 2, "op": "filter", "input": 1, "expr": "o.lines.q > 5"},
        {"@id": 3, "op": "transform", "input": 2, "transforms": [{"ref": "o.n", "expr": "o.id * 10"}]},
        {"@id": 4, "op": "project", "input": 3, "projections": [
            {"ref": "output", "expr": "o"}, {"ref": "output.lines", "expr": "o.lines.sku"}]},
    )  # fmt: skip
    assert run_plan(plan, executor="local").records() == [{"id": 1, "lines": ["b"], "n": 10}]


@pytest.mark.parametrize("case", ["D01", "D25", "D31", "D34", "T14", "T15", "U15", "U19"])
def test_conformance_cases_of_these_operators(case: str) -> None:
    spec = {c["id"]: c for c in json.loads((CORPUS / "cases.json").read_text())["cases"]}[case]
    result = run_plan(
        CORPUS / spec["plan"],
        executor="local",
        classpath=[CORPUS / "data"],
        console_stream=io.StringIO(),
    )
    lines = (CORPUS / spec["expected"]).read_text().splitlines()
    expected = [json.loads(line) for line in lines if line.strip()]
    assert [strip_nulls(r) for r in result.records()] == [strip_nulls(r) for r in expected]
