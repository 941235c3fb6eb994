"""The conformance corpus (``../shared/conformance``) and the project's own cases in the same format
(``cases_extra/``: the seed's examples the corpus lacks) as pytest parameters, and one runner for
both executors: each case passes, or is a strict xfail naming why (``KNOWN_FAILURES``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conformance_compare import read_jsonl, records_match

from engine import PlanError, parse_plan, run_plan
from engine.plan import PlanSyntaxError

CORPUS = (Path(__file__).resolve().parents[2] / ".." / "shared" / "conformance").resolve()
EXTRA = Path(__file__).resolve().parent / "cases_extra"
PARSE_ONLY = {"U16"}

# Cases an executor cannot pass yet, with the reason. Strict: a case that starts passing fails the
# suite until it is removed from here.
KNOWN_FAILURES: dict[str, dict[str, str]] = {
    "local": {},
    "spark": {},
    "connect": dict.fromkeys(
        ["X01", "X02", "X04"],
        "filtering inside UNION values is refused through Spark Connect (a clear NestedFilterError)",
    ),
}

# Out-of-scope cases whose plan uses an operator outside the target set: the plan must be rejected
# with a PlanError naming the operator and its JSON path. U20's branch-only `distinct` also numbers
# segments in hash order, against R-SEG-ORDER, so its expected output is not ours to match.
REJECTED_OPERATORS: dict[str, tuple[str, str]] = {"U20": ("distinct", "$.query[0].do[2].op")}


def load_cases() -> list[dict[str, Any]]:
    """Every case of the corpus, then of ``cases_extra``; ``root`` is the directory its paths
    (plan, expected, classpath root) are relative to."""
    cases = []
    for root in (CORPUS, EXTRA):
        index = json.loads((root / "cases.json").read_text())
        for case in index["cases"]:
            cases.append({**case, "root": root, "classpath": root / index["classpath_root"]})
    return cases


def case_params(executor: str) -> list[Any]:
    params = []
    for case in load_cases():
        reason = KNOWN_FAILURES[executor].get(case["id"])
        marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
        params.append(pytest.param(case, id=case["id"], marks=marks))
    return params


def check_case(case: dict[str, Any], *, executor: str, **run_options: Any) -> None:
    plan_path = case["root"] / case["plan"]
    if case.get("expect_error") == "parse":
        with pytest.raises(PlanSyntaxError):
            parse_plan(plan_path)
        return
    if case.get("expect_error") == "plan":
        with pytest.raises(PlanError) as raised:
            parse_plan(plan_path)
        assert not isinstance(raised.value, PlanSyntaxError)
        return
    if case["id"] in REJECTED_OPERATORS:
        op, path = REJECTED_OPERATORS[case["id"]]
        with pytest.raises(PlanError) as rejected:
            parse_plan(plan_path)
        assert [(i.path, f"unknown op '{op}'" in i.message) for i in rejected.value.issues] == [
            (path, True)
        ]
        assert path in str(rejected.value) and str(plan_path) in str(rejected.value)
        return
    plan = parse_plan(plan_path)
    if case["id"] in PARSE_ONLY:
        return
    result = run_plan(
        plan,
        executor=executor,
        classpath=[case["classpath"]],
        console_stream=_Discard(),
        **run_options,
    )
    expected = read_jsonl(case["root"] / case["expected"])
    actual = result.records()
    assert len(actual) == case["expected_count"], (
        f"{len(actual)} records, expected {case['expected_count']}"
    )
    assert records_match(actual, expected, ordered=case["compare"] == "ordered"), (
        "records differ:\n  got      "
        + "\n           ".join(json.dumps(r, sort_keys=True) for r in actual)
        + "\n  expected "
        + "\n           ".join(json.dumps(r, sort_keys=True) for r in expected)
    )


class _Discard:
    """A console stream that keeps nothing (the records are checked through the result)."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass
