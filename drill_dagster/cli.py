"""The ``drill-dagster`` console script: the engine's commands plus the Dagster ones.

The engine's command line (:mod:`engine.cli`: ``validate``, ``explain``, ``run``, ``sql``,
``functions``) knows nothing of Dagster; this module adds what belongs to the integration
(``scaffold``; ``run --pipes``, :mod:`drill_dagster.pipes`) and is what the console script runs.

Example::

    $ drill-dagster scaffold my_pipelines
    $ drill-dagster run --pipes plans/events_cleaned.json   # launched by a Dagster Pipes client
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Sequence
from typing import Any

from drill_dagster.cli_scaffold import add_scaffold_command


def add_pipes_option(subparsers: Any) -> None:
    """``run --pipes``: report the stores' materializations to Dagster through Pipes."""
    run_cmd = subparsers.choices["run"]
    run_cmd.add_argument(
        "--pipes",
        action="store_true",
        help="report each store's materialization, metadata and checks to the Dagster Pipes "
        "client that launched this command (PipesSubprocessClient, EMR, Databricks ...)",
    )
    engine_run = run_cmd.get_default("func")

    def run_or_pipes(args: argparse.Namespace) -> int:
        if not args.pipes:
            return engine_run(args)
        from drill_dagster.pipes import run_with_pipes  # Dagster is imported only here

        return run_with_pipes(args)

    run_cmd.set_defaults(func=run_or_pipes)


DAGSTER_COMMANDS = (add_scaffold_command, add_pipes_option)


def run(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit code."""
    from engine import cli as engine_cli  # main() loads it first, with the collector paused

    return engine_cli.run(argv, extra_commands=DAGSTER_COMMANDS)


def main() -> None:
    # The console script owns its process. The engine's modules, classes and tables (tens of
    # thousands of objects) live until it exits: the garbage collector does not run while they
    # load, and once frozen it does not walk them again, during the command or at exit.
    gc.disable()
    import engine.cli  # noqa: F401

    gc.freeze()
    gc.enable()
    sys.exit(run())


if __name__ == "__main__":
    main()
