"""Property: any valid plan dumps to a document that parses back to an equal plan."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.plan import parse_plan

HEAD = {
    "type": "APACHE_DRILL_LOGICAL",
    "version": 1,
    "generator": {"type": "manual", "info": "property"},
}
STORAGE = {"cp": {"type": "classpath"}, "queue": {"type": "queue", "encoding": "RECORD"}}
FIELDS = st.sampled_from(["r.a", "r.b", "r.c.d", "x", "`odd name`.y"])
SCALARS = st.sampled_from(
    ["r.a > 1", "r.a + r.b * 2", "lower(r.s) == 'x'", "(3 < 4)", "isnull(r.c)", "r.b"]
)
AGGREGATES = st.sampled_from(["sum(r.a)", "count(1)", "max(r.b) - min(r.b)", "countDistinct(r.s)"])
RUNNING = st.sampled_from(["sum(r.a)", "count(1)", "row_number()"])
CASED = st.sampled_from(["asc", "desc", "DESC", "Asc"])


def _named(values: st.SearchStrategy[str]) -> st.SearchStrategy[list[dict[str, str]]]:
    return st.lists(st.fixed_dictionaries({"ref": FIELDS, "expr": values}), min_size=1, max_size=2)


def _projections() -> st.SearchStrategy[list[dict[str, str]]]:
    refs = st.sampled_from(["output", "output.a", "output.b.c"])
    return st.lists(st.fixed_dictionaries({"ref": refs, "expr": SCALARS}), min_size=1, max_size=2)


@st.composite
def single_input_body(draw: st.DrawFn) -> dict[str, Any]:
    """A single-input operator without @id/input."""
    kind = draw(
        st.sampled_from(
            [
                "filter",
                "transform",
                "project",
                "order",
                "limit",
                "segment",
                "windowframe",
                "collapse",
                "running",
                "flatten",
            ]
        )
    )
    if kind == "filter":
        return {"op": "filter", "expr": draw(SCALARS)}
    if kind == "transform":
        return {"op": "transform", "transforms": draw(_named(SCALARS))}
    if kind == "project":
        return {"op": "project", "projections": draw(_projections())}
    if kind == "order":
        ordering = {"order": draw(CASED), "expr": draw(SCALARS)}
        if draw(st.booleans()):
            ordering["nullCollation"] = draw(st.sampled_from(["first", "last", "LAST"]))
        return {
            "op": "order",
            "orderings": [ordering],
            **({"within": "seg"} if draw(st.booleans()) else {}),
        }
    if kind == "limit":
        first = draw(st.integers(0, 5))
        return {
            "op": "limit",
            "first": first,
            **({"last": first + draw(st.integers(0, 5))} if draw(st.booleans()) else {}),
        }
    if kind == "segment":
        return {"op": "segment", "ref": "seg", "exprs": draw(st.lists(SCALARS, max_size=2))}
    if kind == "windowframe":
        start = draw(st.none() | st.integers(-3, 0))
        end = draw(st.integers(0, 3)) if start is None or draw(st.booleans()) else None
        body: dict[str, Any] = {"op": "windowframe", "start": start, "end": end}
        if draw(st.booleans()):
            body["ref"] = {"segment": "w.seg", "position": "w.pos"}
        return {key: value for key, value in body.items() if value is not None}
    if kind == "collapse":
        return {
            "op": "collapsingaggregate",
            "within": "seg",
            "carryovers": ["r.a"],
            "aggregations": draw(_named(AGGREGATES)),
        }
    if kind == "running":
        return {"op": "runningaggregate", "aggregations": draw(_named(RUNNING))}
    ref_key = draw(st.sampled_from(["ref", "name"]))
    return {
        "op": "flatten",
        ref_key: draw(FIELDS),
        "expr": draw(FIELDS),
        "drop": draw(st.sampled_from([True, False, 0, 1])),
    }


@st.composite
def plans(draw: st.DrawFn) -> dict[str, Any]:
    """A valid plan document: sources, operators reading earlier ones, sequences, and stores."""
    as_id = st.sampled_from([int, str])
    query: list[dict[str, Any]] = []
    readable: list[int] = []
    next_id = 1
    for _ in range(draw(st.integers(1, 3))):
        if draw(st.booleans()):
            body = {
                "op": "scan",
                "storageengine": "cp",
                "ref": "r",
                "selection": {"path": "/designed/x.json"},
            }
        else:
            body = {"op": "constant", "content": [{"a": draw(st.integers(-5, 5)), "b": 1.5}]}
        query.append({"@id": draw(as_id)(next_id), **body})
        readable.append(next_id)
        next_id += 1
    for _ in range(draw(st.integers(0, 5))):
        shape = draw(st.sampled_from(["single", "single", "join", "union", "sequence"]))
        if shape == "single":
            body = {
                "@id": draw(as_id)(next_id),
                "input": draw(as_id)(draw(st.sampled_from(readable))),
                **draw(single_input_body()),
            }
        elif shape == "join":
            left, right = draw(st.sampled_from(readable)), draw(st.sampled_from(readable))
            conditions = [
                {
                    "relationship": draw(st.sampled_from(["==", "<", "!="])),
                    "left": "r.a",
                    "right": "r.b",
                }
            ]
            body = {
                "@id": next_id,
                "op": "join",
                "left": left,
                "right": right,
                "type": draw(st.sampled_from(["inner", "LEFT", "outer"])),
                "conditions": conditions,
            }
        elif shape == "union":
            inputs = draw(st.lists(st.sampled_from(readable), min_size=1, max_size=3))
            body = {
                "@id": str(next_id),
                "op": "union",
                "inputs": inputs,
                "distinct": draw(st.booleans()),
            }
        else:
            members = draw(st.lists(single_input_body(), min_size=1, max_size=3))
            body = {
                "@id": next_id,
                "op": "sequence",
                "input": draw(st.sampled_from(readable)),
                "do": members,
            }
        query.append(body)
        readable.append(next_id)
        next_id += 1
    for _ in range(draw(st.integers(1, 2))):
        engine_key = draw(st.sampled_from(["storageengine", "storageEngine"]))
        sink = {
            "op": "store",
            "input": draw(st.sampled_from(readable)),
            engine_key: "queue",
            "target": {"number": 0},
        }
        if draw(st.booleans()):
            sink = {"@id": next_id, **sink}
        query.append(sink)
        next_id += 1
    return {"head": HEAD, "storage": STORAGE, "query": query}


@settings(max_examples=60, deadline=None)
@given(plans())
def test_dump_parses_back_to_an_equal_plan(document: dict[str, Any]) -> None:
    plan = parse_plan(document)
    dumped = plan.to_dict()
    again = parse_plan(dumped)
    assert again == plan
    assert again.to_dict() == dumped
    assert parse_plan(json.dumps(dumped)) == plan
    assert len(plan.topological_order()) == len(plan.query)


def _ids_as_strings(value: Any, key: str | None = None) -> Any:
    if isinstance(value, dict):
        return {k: _ids_as_strings(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_ids_as_strings(v, key) for v in value]
    if (
        key in ("@id", "input", "left", "right", "inputs")
        and isinstance(value, int)
        and not isinstance(value, bool)
    ):
        return str(value)
    return value


@settings(max_examples=30, deadline=None)
@given(plans())
def test_numeric_and_string_ids_are_the_same_plan(document: dict[str, Any]) -> None:
    assert parse_plan(_ids_as_strings(document)) == parse_plan(document)
