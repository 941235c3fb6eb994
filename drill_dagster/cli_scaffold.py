"""``drill-dagster scaffold DIR``: a new plans project that loads in Dagster as is.

It writes a ``dg`` project (what ``create-dagster project`` makes) with one
:class:`~drill_dagster.component.DrillPlansComponent`::

    DIR/pyproject.toml                          [tool.dg]: `dg dev`, `dg check defs`, `dg list defs`
    DIR/workspace.yaml                          `dagster dev -w workspace.yaml` works too
    DIR/src/NAME/definitions.py                 load_from_defs_folder
    DIR/src/NAME/defs/drill_plans/defs.yaml     type: drill_dagster.DrillPlansComponent
    DIR/src/NAME/defs/drill_plans/plans/        greetings.json and drill_project.yaml
    DIR/src/NAME/defs/drill_plans/data/raw/     a few records for the example plan to read

Existing files are never overwritten (``--force`` does). This module imports no Dagster, so the
engine's CLI can register the command cheaply.

>>> import tempfile, pathlib
>>> written = scaffold_project(pathlib.Path(tempfile.mkdtemp()) / "proj")
>>> sorted(p.name for p in written)  # doctest: +NORMALIZE_WHITESPACE
['__init__.py', '__init__.py', 'definitions.py', 'defs.yaml', 'drill_project.yaml',
 'greetings.json', 'greetings.json', 'pyproject.toml', 'workspace.yaml']
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
"""The Dagster code location of this project: every component under defs/."""

from pathlib import Path

from dagster import Definitions, definitions, in_process_executor, load_from_defs_folder


@definitions
def defs():
    # One process per run: a plan's ops share one Spark session and pass DataFrames in memory.
    # Without it (Dagster's multiprocess executor) each op starts a session of its own.
    return Definitions.merge(
        load_from_defs_folder(path_within_project=Path(__file__).parent),
        Definitions(executor=in_process_executor),
    )
'''

DEFS_YAML = """\
# The Drill plans of this folder as Dagster assets; every attribute is optional.
type: drill_dagster.DrillPlansComponent
attributes:
  plans_dir: plans          # relative to this file
  # executor: local         # default: drill_project.yaml's, else spark
  # select: [greetings]     # plan stems, groups or store keys
  # freshness: {fail_window: 24h}
  # translation:            # per store; template variables: store, plan, spec
  #   key_prefix: lake
"""

PYPROJECT = """\
[project]
name = "{name}"
version = "0.1.0"
requires-python = ">=3.11"
dependencies = ["drill-dagster"]

[build-system]
requires = ["setuptools>=69"]
build-backend = "setuptools.build_meta"

[tool.setuptools.packages.find]
where = ["src"]

[tool.dg]
directory_type = "project"

[tool.dg.project]
root_module = "{name}"
"""

WORKSPACE = """\
load_from:
  - python_file:
      relative_path: src/{name}/definitions.py
      working_directory: src
      location_name: {name}
"""


def example_plan_files(directory: Path) -> dict[Path, str]:
    """The example plan, its ``drill_project.yaml`` and its data, under ``directory``."""
    return {
        directory / "plans" / "greetings.json": EXAMPLE_PLAN,
        directory / "plans" / "drill_project.yaml": PROJECT_YAML,
        directory / "data" / "raw" / "greetings.json": EXAMPLE_DATA,
    }


def write_example_plans(directory: Path) -> list[Path]:
    """Write the example plan files under ``directory`` (a component's folder), keeping files
    that exist; returns the files written."""
    written = []
    for path, text in example_plan_files(directory).items():
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            written.append(path)
    return written


def scaffold_project(directory: Path, *, force: bool = False) -> list[Path]:
    """Write a new plans project (a ``dg`` project) into ``directory``; returns the files written.

    Raises :class:`FileExistsError` naming the first file that exists (unless ``force``).
    """
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in directory.resolve().name)
    name = name.lstrip("_0123456789") or "drill_plans"
    package = directory / "src" / name
    files = {
        directory / "pyproject.toml": PYPROJECT.format(name=name),
        directory / "workspace.yaml": WORKSPACE.format(name=name),
        package / "__init__.py": "",
        package / "definitions.py": DEFINITIONS,
        package / "defs" / "__init__.py": "",
        package / "defs" / "drill_plans" / "defs.yaml": DEFS_YAML,
        **example_plan_files(package / "defs" / "drill_plans"),
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
        "scaffold", help="write a new Dagster project with a Drill plans component (dg dev)"
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
    print(f"next: cd {directory} && dg dev   (or: dagster dev -w workspace.yaml)")
    return 0
