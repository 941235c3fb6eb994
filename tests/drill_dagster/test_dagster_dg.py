"""The real `dg` commands on a scratch project: scaffold the component, check it, list it.

The component is found through the `dagster_dg_cli.registry_modules` entry point declared in
pyproject.toml. Entry points are read from installed distributions' metadata, so the test
installs that metadata (a `.dist-info` with the pyproject's entry points) in a scratch directory
on PYTHONPATH, beside the code of this checkout: what `pip install` of the package registers.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DG = Path(sys.executable).with_name("dg")

PYPROJECT = """\
[project]
name = "scratch"
version = "0.1.0"
requires-python = ">=3.11"
dependencies = ["drill-dagster"]

[tool.dg]
directory_type = "project"

[tool.dg.project]
root_module = "scratch"
"""

DEFINITIONS = """\
from pathlib import Path

from dagster import definitions, load_from_defs_folder


@definitions
def defs():
    return load_from_defs_folder(path_within_project=Path(__file__).parent)
"""


def _entry_point_metadata(site: Path) -> None:
    """A distribution's metadata whose entry points are those pyproject.toml declares."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    info = site / "drill_dagster_checkout-0.0.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: drill-dagster-checkout\nVersion: 0.0.0\n"
    )
    lines = []
    for group, entries in project["entry-points"].items():
        lines.append(f"[{group}]")
        lines += [f"{name} = {target}" for name, target in entries.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")


def _dg(project: Path, env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [str(DG), *args], cwd=project, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"dg {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.mark.skipif(shutil.which(str(DG)) is None, reason="dg (dagster-dg-cli) not installed")
def test_dg_scaffolds_checks_and_lists_the_component(tmp_path: Path) -> None:
    project = tmp_path / "scratch"
    (project / "src" / "scratch" / "defs").mkdir(parents=True)
    (project / "pyproject.toml").write_text(PYPROJECT)
    (project / "src" / "scratch" / "__init__.py").write_text("")
    (project / "src" / "scratch" / "defs" / "__init__.py").write_text("")
    (project / "src" / "scratch" / "definitions.py").write_text(DEFINITIONS)
    site = tmp_path / "site"
    _entry_point_metadata(site)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), str(ROOT), str(project / "src")]),
        "DAGSTER_DISABLE_TELEMETRY": "1",
        "NO_COLOR": "1",
    }

    components = _dg(project, env, "list", "components", "--json")
    assert "drill_dagster.DrillPlansComponent" in {
        c["key"] for c in json.loads(components)["items"]
    }

    _dg(project, env, "scaffold", "defs", "drill_dagster.DrillPlansComponent", "my_plans")
    folder = project / "src" / "scratch" / "defs" / "my_plans"
    assert (folder / "plans" / "greetings.json").is_file()
    assert "plans_dir: plans" in (folder / "defs.yaml").read_text()

    # a user's change in defs.yaml: keys and groups through `translation`
    (folder / "defs.yaml").write_text(
        (folder / "defs.yaml").read_text()
        + "  translation:\n    key_prefix: lake\n    group_name: 'g_{{ plan.name }}'\n"
    )
    assert "validated successfully" in _dg(project, env, "check", "defs")
    listed = json.loads(_dg(project, env, "list", "defs", "--json"))
    assets = {a["asset_key"]: a for a in listed["assets"]}
    assert "lake/greetings" in assets, sorted(assets)
    assert assets["lake/greetings"]["group_name"] == "g_greetings"
    assert assets["lake/greetings"]["source"].endswith("my_plans/plans/greetings.json")
