"""The example code location: every plan in ``examples/plans`` as Dagster assets.

``dagster dev -w workspace.yaml`` (at the repository root) loads this file. Paths are relative to
it, so it works from any working directory. Partitions, schedules and checks of the plans are in
``examples/plans/drill_project.yaml``.
"""

from __future__ import annotations

from pathlib import Path

from dagster import Definitions, in_process_executor

from drill_dagster import load_definitions

EXAMPLES = Path(__file__).resolve().parent

# One process per run: a plan's ops share one Spark session and pass DataFrames in memory.
defs = Definitions.merge(
    load_definitions(EXAMPLES / "plans"), Definitions(executor=in_process_executor)
)
