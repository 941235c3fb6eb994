"""A bad plan or a bad ``drill_project.yaml`` in a code location: what Dagster's own loader shows.

``dagster definitions validate`` loads a copy of the example project the way ``dagster dev`` does;
the message names the file and the JSON path (or YAML key), and no frame of the engine or of the
integration's internals is printed (only the user's ``definitions.py`` line and the one raise).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DEFINITIONS = """\
from pathlib import Path
from drill_dagster import load_definitions
defs = load_definitions(Path(__file__).parent / "plans")
"""


def _validate(project: Path) -> tuple[int, str]:
    (project / "definitions.py").write_text(DEFINITIONS)
    home = project / "dagster_home"
    home.mkdir()
    command = [str(Path(sys.executable).parent / "dagster"), "definitions", "validate"]
    done = subprocess.run(
        [*command, "-f", "definitions.py"],
        cwd=project,
        env={**os.environ, "DAGSTER_HOME": str(home), "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.returncode, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("breakage", "expected"),
    [
        (
            "plan",
            [
                "plans/events_cleaned.json: 1 problem",
                "$.query[1].do[0].op (operator _seq1.0): unknown op 'fliter' "
                "(did you mean 'filter'?)",
            ],
        ),
        (
            "project",
            [
                "plans/drill_project.yaml: 1 problem",
                "plans.events_cleaned.partitions.daily.start: Field required",
            ],
        ),
    ],
)
def test_a_bad_file_fails_the_code_location_with_its_place_not_a_traceback(
    tmp_path: Path, breakage: str, expected: list[str]
) -> None:
    shutil.copytree(EXAMPLES / "plans", tmp_path / "plans")
    if breakage == "plan":
        plan = tmp_path / "plans" / "events_cleaned.json"
        plan.write_text(plan.read_text().replace('"op": "filter"', '"op": "fliter"'))
    else:
        project = tmp_path / "plans" / "drill_project.yaml"
        text = project.read_text().replace('daily: {start: "2024-01-01", end:', "daily: {end:")
        project.write_text(text)
    code, output = _validate(tmp_path)
    assert code == 1
    assert "DrillDefinitionsError" in output
    for line in expected:
        assert line in output, output
    assert "/engine/" not in output and "drill_dagster/plans.py" not in output, output
