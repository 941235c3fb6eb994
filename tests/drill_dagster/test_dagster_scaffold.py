"""`drill-dagster scaffold DIR`: a new plans project that loads in Dagster and materializes."""

from __future__ import annotations

import argparse
import runpy
import sys
from pathlib import Path

import pytest
import yaml
from dagster import DagsterInstance, Definitions, materialize

from drill_dagster.cli import run as cli_run
from drill_dagster.cli_scaffold import add_scaffold_command, scaffold_project
from drill_dagster.resource import default_resources


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="drill-dagster")
    add_scaffold_command(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)


def test_the_console_script_has_the_engines_commands_and_scaffold(tmp_path: Path) -> None:
    plan = tmp_path / "p.json"
    plan.write_text('{query: [{"@id": 1, op: "constant", content: [{a: 1}]}]}')
    assert cli_run(["validate", str(plan)]) == 0
    assert cli_run(["scaffold", str(tmp_path / "proj")]) == 0
    component = tmp_path / "proj" / "src" / "proj" / "defs" / "drill_plans"
    assert (component / "plans" / "greetings.json").is_file()
    assert "drill_dagster.DrillPlansComponent" in (component / "defs.yaml").read_text()


def test_scaffolded_project_loads_and_materializes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "my plans"
    args = _parse(["scaffold", str(directory)])
    assert args.func(args) == 0
    workspace = yaml.safe_load((directory / "workspace.yaml").read_text())
    location = workspace["load_from"][0]["python_file"]
    assert location["relative_path"] == "src/my_plans/definitions.py"
    assert location["working_directory"] == "src"
    # what `dagster dev -w workspace.yaml` does: the definitions file, src on the path
    monkeypatch.syspath_prepend(str(directory / "src"))
    defs = runpy.run_path(str(directory / "src" / "my_plans" / "definitions.py"))["defs"]()
    Definitions.validate_loadable(defs)
    assert "greetings" in {
        k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()
    }
    result = materialize(
        [*defs.assets, *(defs.asset_checks or ())],
        resources={**defs.resources, **default_resources(executor="local")},
        instance=DagsterInstance.ephemeral(),
    )
    (event,) = result.get_asset_materialization_events()
    assert event.materialization.metadata["dagster/row_count"].value == 2
    assert all(e.passed for e in result.get_asset_check_evaluations())


def test_scaffold_never_overwrites_unless_forced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scaffold_project(tmp_path)
    (tmp_path / "pyproject.toml").write_text("# mine\n")
    args = _parse(["scaffold", str(tmp_path)])
    assert args.func(args) == 1
    assert "pyproject.toml exists; use --force" in capsys.readouterr().err
    assert (tmp_path / "pyproject.toml").read_text() == "# mine\n"
    args = _parse(["scaffold", str(tmp_path), "--force"])
    assert args.func(args) == 0
    assert "[tool.dg]" in (tmp_path / "pyproject.toml").read_text()


def test_the_cli_module_does_not_import_dagster() -> None:
    code = "import sys, drill_dagster.cli; print('dagster' in sys.modules)"
    import subprocess

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
