"""``drill-dagster scaffold DIR``: a new plans project that loads in Dagster as is.

It writes::

    DIR/plans/greetings.json        an example plan (scan -> filter -> project -> store)
    DIR/plans/drill_project.yaml    partitions, schedules and checks, documented
    DIR/data/raw/greetings.json     a few records for the example plan to read
    DIR/definitions.py              defs = load_definitions(<this dir>/plans)
    DIR/workspace.yaml              `dagster dev -w DIR/workspace.yaml` shows the assets

Existing files are never overwritten (``--force`` does). This module imports no Dagster, so the
engine's CLI can register the command cheaply.

>>> import tempfile, pathlib
>>> written = scaffold_project(pathlib.Path(tempfile.mkdtemp()) / "proj")
>>> sorted(p.name for p in written)
['definitions.py', 'drill_project.yaml', 'greetings.json', 'greetings.json', 'workspace.yaml']
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXAMPLE_PLAN = """\
{
  // A Drill logical plan; relaxed JSON: comments and unquoted keys are fine.
  head: {type: "APACHE_DRILL_LOGICAL", version: 1,
         generator: {type: "manual", info: "Greetings, cleaned (scaffolded example)"}},
  storage: {
    raw: {type: "fs", root: "../data/raw"},
    lake: {type: "fs", root: "../data/lake"}
  },
  query: [
    {"@id": 1, op: "scan", storageengine: "raw", ref: "g",
     selection: {path: "greetings.json", format: "json"}, memo: "raw greetings"},
    {"@id": 2, op: "filter", input: 1, expr: "g.count > 0"},
    {"@id": 3, op: "project", input: 2, projections: [
      {ref: "output.language", expr: "g.language"},
      {ref: "output.greeting", expr: "upper(g.text)"},
      {ref: "output.count", expr: "g.count"}
    ]},
    {"@id": 4, op: "store", input: 3, storageengine: "lake", memo: "greetings in parquet",
     target: {path: "greetings", format: "parquet"}}
  ]
}
"""

EXAMPLE_DATA = """\
{"language": "en", "text": "hello", "count": 3}
{"language": "fr", "text": "bonjour", "count": 2}
{"language": "de", "text": "hallo", "count": 0}
"""

PROJECT_YAML = """\
# Settings of the plans in this directory; every key is optional.
# Plans are named by file stem, stores by target path (or "@<id>").
executor: spark            # spark (local[*] by default) or local (in-process, small data)
spark_config: {}           # plain Spark settings, e.g. spark.master or spark.remote
plans:
  greetings:
    group: greetings
    # partitions:          # a partition key reaches the plan as ${day} in selections/targets
    #   daily: {start: "2024-01-01"}
    #   param: day
    # schedule: {cron: "0 3 * * *"}   # or {from_partitions: true}
    stores:
      greetings:
        checks:
          columns: {language: VARCHAR, greeting: VARCHAR, count: BIGINT}
          row_count: {min: 1}
"""

DEFINITIONS = '''\
"""The Dagster code location of this plans project."""

from pathlib import Path

from dagster import Definitions, in_process_executor

from drill_dagster import load_definitions

# One process per run: a plan's ops share one Spark session and pass DataFrames in memory.
# Without it (Dagster's multiprocess executor) each op starts a session of its own.
defs = Definitions.merge(
    load_definitions(Path(__file__).parent / "plans"),
    Definitions(executor=in_process_executor),
)
'''

WORKSPACE = """\
load_from:
  - python_file:
      relative_path: definitions.py
      working_directory: .
      location_name: {name}
"""


def scaffold_project(directory: Path, *, force: bool = False) -> list[Path]:
    """Write a new plans project into ``directory``; returns the files written.

    Raises :class:`FileExistsError` naming the first file that exists (unless ``force``).
    """
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in directory.resolve().name)
    files = {
        directory / "plans" / "greetings.json": EXAMPLE_PLAN,
        directory / "plans" / "drill_project.yaml": PROJECT_YAML,
        directory / "data" / "raw" / "greetings.json": EXAMPLE_DATA,
        directory / "definitions.py": DEFINITIONS,
        directory / "workspace.yaml": WORKSPACE.format(name=name or "drill_plans"),
    }
    if not force:
        for path in files:
            if path.exists():
                raise FileExistsError(f"{path} exists; use --force to overwrite it")
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return list(files)


def add_scaffold_command(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register ``scaffold DIR [--force]`` on the ``drill-dagster`` command line."""
    command = subparsers.add_parser(
        "scaffold", help="write a new plans project that loads in Dagster (dagster dev)"
    )
    command.add_argument("directory", metavar="DIR", help="where to write the project")
    command.add_argument("--force", action="store_true", help="overwrite existing files")
    command.set_defaults(func=cmd_scaffold)


def cmd_scaffold(args: argparse.Namespace) -> int:
    """The ``scaffold`` command: 0 when written, 1 when a file exists."""
    directory = Path(args.directory)
    try:
        written = scaffold_project(directory, force=args.force)
    except FileExistsError as err:
        print(str(err), file=sys.stderr)
        return 1
    for path in written:
        print(f"wrote {path}")
    print(f"next: cd {directory} && dagster dev -w workspace.yaml")
    return 0
