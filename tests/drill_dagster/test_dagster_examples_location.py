"""workspace.yaml's code location (examples/definitions.py) loads every example plan."""

from __future__ import annotations

import runpy
from pathlib import Path

import yaml
from dagster import Definitions

from drill_dagster.plans import plan_files, safe_name

REPO = Path(__file__).resolve().parents[2]


def test_workspace_loads_the_example_plans_from_any_directory(monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    workspace = yaml.safe_load((REPO / "workspace.yaml").read_text())
    entry = workspace["load_from"][0]["python_file"]
    assert (REPO / entry["relative_path"]) == REPO / "examples" / "definitions.py"
    monkeypatch.chdir(tmp_path)  # paths are relative to the definitions file, not the cwd
    defs = runpy.run_path(str(REPO / "examples" / "definitions.py"))["defs"]
    Definitions.validate_loadable(defs)
    graphs = {a.node_def.name for a in defs.assets if hasattr(a, "node_def")}
    assert graphs == {safe_name(p.stem) for p in plan_files(REPO / "examples" / "plans")}
    graph = defs.resolve_asset_graph()
    upstream = {key for node in graph.asset_nodes for key in node.parent_keys}
    produced = {key for node in graph.asset_nodes if node.is_materializable for key in [node.key]}
    assert upstream & produced, "some example plan reads another plan's store"


def test_the_components_layout_loads_the_same_assets(monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from dagster.components import load_from_defs_folder

    project = REPO / "examples" / "components"
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(project / "src"))  # what dg does for a src layout
    defs = load_from_defs_folder(path_within_project=project / "src" / "drill_examples")
    workspace_defs = runpy.run_path(str(REPO / "examples" / "definitions.py"))["defs"]
    keys = defs.resolve_asset_graph().get_all_asset_keys()
    assert keys == workspace_defs.resolve_asset_graph().get_all_asset_keys()
    assert defs.resolve_asset_graph().asset_check_keys == (
        workspace_defs.resolve_asset_graph().asset_check_keys
    )
