"""The command line: `ok` per plan, every problem with its place, exit codes, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cli import EXIT_INTERNAL_ERROR, EXIT_OK, EXIT_USER_ERROR, run

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "plans"

BROKEN = """{
  "storage": {"lake": {"type": "fs", "root": "data"}},
  "query": [
    {"@id": 1, "op": "scan", "storageengine": "lake", "ref": "e", "selection": {"path": "events"}},
    {"@id": 2, "op": "filter", "input": 9, "expr": "e.kind == 'purchase'"},
    {"@id": 3, "op": "project", "input": 1,
     "projections": [{"ref": "output.total", "expr": "sum(e.cart.total) +"}]},
    {"@id": 4, "op": "store", "input": 3, "storageengine": "laek", "target": {"path": "out"}}
  ]
}"""


def test_validate_prints_ok_for_every_example_plan(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["validate", str(EXAMPLES)]) == EXIT_OK
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(list(EXAMPLES.glob("*.json"))) >= 5
    assert all(line.endswith(": ok") for line in out)


def test_validate_reports_every_problem_with_file_path_and_operator(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = tmp_path / "broken.json"
    plan.write_text(BROKEN)
    assert run(["validate", str(plan)]) == EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert f"{plan}: 3 problems" in err
    assert "$.query[1].input (operator 2): 'input' refers to operator '9'" in err
    assert "$.query[2].projections[0].expr (operator 3)" in err
    assert "at line 1, column 20" in err
    assert "$.query[3].storageengine (operator 4)" in err
    assert "did you mean 'lake'?" in err
    assert "Traceback" not in err


def test_validate_continues_after_a_bad_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "a.json"
    bad.write_text("{query: [ {op: 'scan'")
    good = EXAMPLES / "sessions.json"
    assert run(["validate", str(bad), str(good)]) == EXIT_USER_ERROR
    captured = capsys.readouterr()
    assert f"{good}: ok" in captured.out
    assert f"{bad}: invalid JSON" in captured.err


def test_missing_plan_file_is_a_user_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["validate", "no/such/plan.json"]) == EXIT_USER_ERROR
    assert "no/such/plan.json" in capsys.readouterr().err


def test_empty_directory_is_a_user_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["validate", str(tmp_path)]) == EXIT_USER_ERROR
    assert "no plan files" in capsys.readouterr().err


def test_explain_text_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    plan = EXAMPLES / "order_items.json"
    assert run(["explain", "--logical", str(plan)]) == EXIT_OK
    text = capsys.readouterr().out
    assert "store 8" in text and "└─ project 7" in text and "├─ flatten 2" in text
    assert run(["explain", "--logical", "--format", "json", str(plan)]) == EXIT_OK
    doc = json.loads(capsys.readouterr().out)
    assert doc["roots"] == ["8"]
    assert [op["@id"] for op in doc["operators"]][-1] == "8"


def test_explain_shows_the_physical_fragments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A copy away from examples/data: no statistics, so the planner assumes parallel inputs
    # (with the generated data present the small inputs give a single fragment).
    plan = tmp_path / "order_items.json"
    plan.write_text((EXAMPLES / "order_items.json").read_text())
    assert run(["explain", str(plan)]) == EXIT_OK
    text = capsys.readouterr().out
    assert "fragment 0 (" in text and "fragment 1 (" in text
    assert "(store 8)" in text and "(flatten 2)" in text
    assert run(["explain", "--format", "json", str(plan)]) == EXIT_OK
    doc = json.loads(capsys.readouterr().out)
    assert doc["fragments"][0]["id"] == 0
    assert doc["physical"]["head"]["type"] == "APACHE_DRILL_PHYSICAL"
    assert {op["logical"] for op in doc["physical"]["graph"]} >= {"2", "8"}


def test_functions_lists_the_registry(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["functions"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "count_distinct" in out and "aliases: countDistinct" in out
    assert "add (+)" in out


def test_internal_error_is_reported_as_a_bug(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def explode(*args: object, **kwargs: object) -> None:
        raise ZeroDivisionError("boom")

    monkeypatch.setattr("engine.plan.parse_plan", explode)
    assert run(["validate", str(EXAMPLES / "sessions.json")]) == EXIT_INTERNAL_ERROR
    err = capsys.readouterr().err
    assert "internal error: ZeroDivisionError: boom" in err
    assert "This is a bug in drill-dagster, not in your plan" in err


def test_console_script_has_no_traceback_for_a_bad_plan(tmp_path: Path) -> None:
    plan = tmp_path / "broken.json"
    plan.write_text(BROKEN)
    script = Path(sys.executable).with_name("drill-dagster")
    done = subprocess.run([str(script), "validate", str(plan)], capture_output=True, text=True)
    assert done.returncode == EXIT_USER_ERROR
    assert "3 problems" in done.stderr
    assert "Traceback" not in done.stderr


def test_run_fills_plan_parameters(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "2024-01-01").mkdir()
    (tmp_path / "2024-01-01" / "e.json").write_text('{"a": 1}\n')
    plan = tmp_path / "p.json"
    plan.write_text(
        json.dumps(
            {
                "storage": {"fs": {"type": "fs", "root": str(tmp_path)}, "q": {"type": "queue"}},
                "query": [
                    {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "e",
                     "selection": {"path": "${day}", "format": "json"}},
                    {"@id": 2, "op": "store", "input": 1, "storageengine": "q", "target": {}},
                ],
            }
        )
    )  # fmt: skip
    args = ["run", str(plan), "--executor", "local"]
    assert run([*args, "--param", "day=2024-01-01"]) == EXIT_OK
    assert json.loads(capsys.readouterr().out) == {"e": {"a": 1}}
    assert run(args) != EXIT_OK
    assert "day" in capsys.readouterr().err


def test_run_on_spark_shows_no_java_stack_trace_when_spark_gives_up_code_generation(
    tmp_path: Path,
) -> None:
    # Forty transforms make a stage whose generated Java method is too long to compile: Spark
    # logs that with a stack trace and runs the stage interpreted. The run succeeds, and the
    # user sees the records only.
    (tmp_path / "t.json").write_text('{"a": 1}\n{"a": 2}\n')
    query: list[dict[str, object]] = [
        {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "t", "selection": {"path": "t.json"}}
    ]
    for i in range(40):
        query.append({"@id": i + 2, "op": "transform", "input": i + 1,
                      "transforms": [{"ref": f"t.c{i}", "expr": f"t.a + {i}"}]})  # fmt: skip
    query.append({"@id": 100, "op": "store", "input": 41, "storageengine": "q", "target": {}})
    storage = {"fs": {"type": "fs", "root": str(tmp_path)}, "q": {"type": "queue"}}
    plan = tmp_path / "many.json"
    plan.write_text(json.dumps({"storage": storage, "query": query}))
    script = Path(sys.executable).with_name("drill-dagster")
    done = subprocess.run(
        [str(script), "run", str(plan), "--executor", "spark"], capture_output=True, text=True
    )
    assert done.returncode == EXIT_OK, done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["t"]["c39"] for r in records] == [40, 41]
    assert "CodeGenerator" not in done.stderr and "\tat " not in done.stderr, done.stderr[:2000]


def test_validate_loads_no_executor_dataset_or_dagster_code(tmp_path: Path) -> None:
    # What makes `drill-dagster validate` start fast: it parses and checks, and imports nothing
    # that only running a plan needs (nor the relaxed-JSON reader, for a strict JSON plan).
    plan = tmp_path / "p.json"
    plan.write_text('{"query": [{"@id": 1, "op": "constant", "content": [{"a": 1}]}]}')
    heavy = ("pandas", "pyarrow.dataset", "pyspark", "dagster", "engine.exec", "engine.storage")
    heavy += ("hjson", "engine.plan.json_schema")
    # nor what only a misspelled name (difflib) or an internal error (traceback) needs
    heavy += ("difflib", "traceback")
    code = (
        "import sys; from drill_dagster.cli import run; code = run(['validate', sys.argv[1]]); "
        f"print(code, [m for m in {heavy!r} if m in sys.modules])"
    )
    done = subprocess.run([sys.executable, "-c", code, str(plan)], capture_output=True, text=True)
    assert done.stdout.split("\n")[-2] == "0 []", done.stdout + done.stderr


def test_validate_reads_relaxed_json(tmp_path: Path) -> None:
    plan = tmp_path / "p.json"
    plan.write_text('{query: [{"@id": 1, op: "constant", content: [{a: 1}]}]}  // relaxed')
    done = subprocess.run(
        [sys.executable, "-m", "drill_dagster.cli", "validate", str(plan)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and "ok" in done.stdout, done.stdout + done.stderr
