"""The ``drill-dagster`` console script: the engine's commands plus the Dagster ones.

The engine's command line (:mod:`engine.cli`: ``validate``, ``explain``, ``run``, ``sql``,
``functions``) knows nothing of Dagster; this module adds what belongs to the integration
(``scaffold``) and is what the console script runs.

Example::

    $ drill-dagster scaffold my_pipelines
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from drill_dagster.cli_scaffold import add_scaffold_command
from engine import cli as engine_cli

DAGSTER_COMMANDS = (add_scaffold_command,)


def run(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit code."""
    return engine_cli.run(argv, extra_commands=DAGSTER_COMMANDS)


def main() -> None:
    sys.exit(run())


if __name__ == "__main__":
    main()
