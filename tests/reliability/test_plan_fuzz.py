"""Bad plans: every mutant of every real plan is valid or rejected with the place named.

The base plans are the conformance corpus and ``examples/plans``; :mod:`plan_mutations` breaks
them (fields deleted or retyped, ids swapped, cycles, broken and hostile expressions, unknown
functions, ops and storage engines, escaping paths, thousands of operators, deep nesting). The
outcome is always one of:

* a valid plan, which ``explain`` renders and whose storage engines, selections and targets are
  either accepted or rejected with a ``DrillError`` before anything runs;
* a :class:`PlanError` naming the plan and, per problem, a JSON path (``$...``);
* an :class:`ExpressionSyntaxError` with a line and column.

Never another exception, never a hang (each example is bounded in wall-clock time).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from plan_mutations import Mutant, base_documents, base_plan_files, mutated_plans
from reliability_support import time_bound

from engine.cli import EXIT_USER_ERROR, run
from engine.errors import DrillError, ExpressionSyntaxError, PlanError
from engine.explain import explain_logical
from engine.plan import LogicalPlan, parse_plan
from engine.plan.operators import Scan, Store
from engine.run import build_engines

BASES = base_documents()
SOURCE = "mutant.json"
PER_EXAMPLE_SECONDS = 20.0  # generous: 2 shared cores; a hang is minutes, not seconds

FUZZ = settings(
    max_examples=2000,
    deadline=None,  # wall-clock bound below; hypothesis' deadline flakes on a loaded machine
    derandomize=True,  # the same 2,000 mutants in every CI run
    database=None,
    # No shrinking: a mutant prints as its base plan and mutations, and shrinking megabyte-sized
    # documents takes minutes.
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def test_every_base_plan_is_valid() -> None:
    """The fuzzer starts from plans that validate, so every rejection is the mutation's."""
    assert len(BASES) == len(base_plan_files()) - 3 >= 24
    for name, document in BASES:
        parse_plan(copy.deepcopy(document), source_name=name)


def check_rejection(err: DrillError) -> None:
    """A rejection names the place: the plan and a JSON path, or an expression's line/column."""
    if isinstance(err, ExpressionSyntaxError):
        assert err.line >= 1 and err.column >= 1, err
        return
    assert isinstance(err, PlanError), f"{type(err).__name__} is not a plan rejection: {err}"
    assert str(err).startswith(SOURCE), str(err)
    assert err.issues
    for issue in err.issues:
        assert issue.path.startswith("$"), issue
        assert issue.message.strip(), issue


def check_valid(plan: LogicalPlan, tmp_root: Path) -> None:
    """A valid mutant explains, and its paths are accepted or rejected before anything runs."""
    explain_logical(plan)
    json.loads(explain_logical(plan, fmt="json"))
    try:
        engines = build_engines(plan, base_dir=tmp_root, classpath=[tmp_root])
        for op in plan.query:
            if isinstance(op, Scan):
                engines[op.storage_engine].check_selection(op.selection)
            elif isinstance(op, Store):
                engines[op.storage_engine].check_target(op.target)
    except DrillError as err:
        assert str(err).strip()


def outcome(document: Any, tmp_root: Path) -> str:
    """Parse a mutant (as a dict and as JSON text); ``valid`` or ``rejected``."""
    with time_bound(PER_EXAMPLE_SECONDS, "validating a mutant"):
        try:
            plan = parse_plan(document, source_name=SOURCE)
        except (PlanError, ExpressionSyntaxError) as err:
            check_rejection(err)
            return "rejected"
        check_valid(plan, tmp_root)
        return "valid"


@FUZZ
@given(mutant=mutated_plans(BASES))
def test_mutated_plans_are_valid_or_rejected_with_the_place(
    mutant: Mutant, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outcome(mutant.document, tmp_path_factory.getbasetemp())


@settings(FUZZ, max_examples=300)
@given(mutant=mutated_plans(BASES))
def test_mutated_plan_text_is_valid_or_rejected_with_the_place(
    mutant: Mutant, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The same through the text reader (relaxed JSON), where the nesting limit is the parser's."""
    try:
        text = json.dumps(mutant.document)
    except (RecursionError, ValueError):
        text = "[" * 100_000 + "]" * 100_000  # deeper than any encoder: the reader must cope
    outcome(text, tmp_path_factory.getbasetemp())


# ------------------------------------------------------------------ the same through the CLI and Dagster


def confine_roots(document: Any) -> Any:
    """Point every ``fs`` root at ``data`` beside the plan file, so that running a mutant writes
    only inside the test's directory (the corpus plans use ``file:///``)."""
    storage = document.get("storage") if isinstance(document, dict) else None
    if isinstance(storage, dict):
        for config in storage.values():
            if isinstance(config, dict) and "root" in config:
                config["root"] = "data"
    return document


def write_mutant(directory: Path, mutant: Mutant) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "data").mkdir(exist_ok=True)
    path = directory / "plan.json"
    try:
        path.write_text(json.dumps(confine_roots(mutant.document)))
    except (RecursionError, ValueError):
        path.write_text("[" * 100_000)
    return path


SAMPLE = settings(
    FUZZ,
    max_examples=40,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)


@SAMPLE
@given(mutant=mutated_plans(BASES))
def test_cli_rejects_mutants_with_exit_1_and_a_message(
    mutant: Mutant,
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``validate``, ``explain`` and ``run``: exit 0, or exit 1 with the message on stderr and no
    traceback; a run of a valid mutant is bounded in time."""
    directory = tmp_path_factory.mktemp("cli")
    monkeypatch.chdir(directory)
    plan = write_mutant(directory, mutant)
    capsys.readouterr()
    for command in ("validate", "explain", "run"):
        with time_bound(
            120 if command == "run" else PER_EXAMPLE_SECONDS, f"drill-dagster {command}"
        ):
            code = run([command, str(plan)])
        err = capsys.readouterr().err
        assert "Traceback" not in err and "internal error" not in err, err
        assert code in (0, EXIT_USER_ERROR), (command, code, err)
        if code == EXIT_USER_ERROR:
            assert err.strip(), command
            assert str(plan) in err or command == "run", err
        if command == "validate" and code == EXIT_USER_ERROR:
            break  # explain and run say the same; validate has shown the place


@settings(SAMPLE, max_examples=25)
@given(mutant=mutated_plans(BASES))
def test_load_definitions_names_the_plan_file_of_a_bad_mutant(
    mutant: Mutant, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from drill_dagster import load_definitions
    from drill_dagster.errors import DrillDefinitionsError

    directory = tmp_path_factory.mktemp("defs")
    plan = write_mutant(directory, mutant)
    with time_bound(PER_EXAMPLE_SECONDS * 3, "load_definitions"):
        try:
            load_definitions(directory)
        except DrillDefinitionsError as err:
            assert str(plan) in str(err), str(err)
