"""The main job: generate the example data if absent, then materialize every example asset through
Dagster for one partition and print a table of assets, rows and locations.

    python examples/demo.py [--executor spark|local] [--day 2024-01-01]

The partitioned plans (``events_cleaned``) run for ``--day`` (the first generated day by default);
the others run over what their inputs hold, all in one Dagster run.

``make demo`` runs it with Spark in local mode (``DRILL_EXECUTOR=local make demo`` skips the JVM).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent
sys.path.insert(0, str(EXAMPLES))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--executor", choices=["spark", "local"], default=os.environ.get("DRILL_EXECUTOR", "spark")
    )
    parser.add_argument("--day", help="the partition to materialize (default: the first day)")
    args = parser.parse_args(argv)

    from generate import generate

    summary = generate(EXAMPLES / "data")
    day = args.day or summary.start
    os.environ.setdefault("DAGSTER_HOME", tempfile.mkdtemp(prefix="drill-dagster-home-"))

    from dagster import DagsterInstance

    from drill_dagster import load_definitions
    from engine.errors import DrillError

    defs = load_definitions(EXAMPLES / "plans", executor=args.executor)
    job = defs.resolve_implicit_global_asset_job_def()
    try:
        with DagsterInstance.get() as instance:  # kept in DAGSTER_HOME: `make dev` shows the run
            result = job.execute_in_process(
                partition_key=day, instance=instance, raise_on_error=False
            )
    except DrillError as err:
        print(err, file=sys.stderr)
        return 1
    rows = []
    for event in result.get_asset_materialization_events():
        mat = event.event_specific_data.materialization
        meta = mat.metadata
        count = meta.get("dagster/row_count")
        uri = meta.get("dagster/uri")
        rows.append(
            (
                mat.asset_key.to_user_string(),
                str(count.value if count is not None else "?"),
                str(uri.value if uri is not None else ""),
            )
        )
    width = max((len(r[0]) for r in rows), default=5)
    print(f"partition {day}, executor {args.executor}")
    print(f"{'asset':<{width}}  {'rows':>8}  location")
    for key, count, uri in sorted(rows):
        print(f"{key:<{width}}  {count:>8}  {uri}")
    if not result.success:
        print("some steps failed; see the messages above", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
