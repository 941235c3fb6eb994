"""The example code location: every plan in ``examples/plans`` as Dagster assets.

``dagster dev -w workspace.yaml`` (at the repository root) loads this file. Paths are relative to
it, so it works from any working directory. Partitions, schedules and checks of the plans are in
``examples/plans/drill_project.yaml``.
"""

from __future__ import annotations

from pathlib import Path

from drill_dagster import load_definitions

EXAMPLES = Path(__file__).resolve().parent

defs = load_definitions(EXAMPLES / "plans")
