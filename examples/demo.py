"""The main job: generate the example data if absent, then materialize every example asset through
Dagster for one partition and print a table of assets, rows and locations.

    python examples/demo.py [--executor spark|local] [--day 2024-01-01]

The partitioned plans (``events_cleaned``) run for ``--day`` (the first generated day by default);
the others run over what their inputs hold, all in one Dagster run.

``business_customers`` reads the CRM's customers from PostgreSQL and writes the Spark catalog
table ``analytics.business_customers``: the demo starts a throwaway PostgreSQL server for it
(``demo_database.py``: Debian's ``postgresql``, on 127.0.0.1:55432, loaded from
``customers.csv``) and stops it at the end. Where PostgreSQL is not installed, or with the local
executor (catalog tables are written by Spark), the demo skips that plan and says so in a line.

``make demo`` runs it with Spark in local mode (``DRILL_EXECUTOR=local make demo`` skips the JVM).
"""

from __future__ import annotations

import argparse
import os
import signal
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

    from demo_database import plans_using, start_database
    from generate import generate

    summary = generate(EXAMPLES / "data")
    day = args.day or summary.start
    os.environ.setdefault("DAGSTER_HOME", tempfile.mkdtemp(prefix="drill-dagster-home-"))
    # SIGTERM and SIGHUP end the demo as Ctrl-C does: the database it started is stopped.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.default_int_handler)
    server, skipped = None, {}
    plans = EXAMPLES / "plans"
    if args.executor == "local":
        for name in plans_using(plans, "catalog"):
            skipped[name] = "it writes a Spark catalog table (run with --executor spark)"
    if not all(name in skipped for name in plans_using(plans, "jdbc")):
        server, why = start_database(plans, EXAMPLES / "data" / "raw")
        if why is not None:
            for name in plans_using(plans, "jdbc"):
                skipped.setdefault(name, f"it reads PostgreSQL, not started: {why}")
    try:
        for name, why in skipped.items():
            print(f"skipping {name}: {why}")
        return _materialize(args.executor, day, set(skipped))
    finally:
        if server is not None:
            server.stop()


def _materialize(executor: str, day: str, skipped: set[str]) -> int:
    """Materialize every asset of the example plans but those of the ``skipped`` plans."""
    from dagster import AssetsDefinition, DagsterInstance

    from drill_dagster import load_definitions
    from engine.errors import DrillError

    defs = load_definitions(EXAMPLES / "plans", executor=executor)
    job = defs.resolve_implicit_global_asset_job_def()
    keys = [
        key
        for a in defs.assets or ()
        if isinstance(a, AssetsDefinition) and a.is_executable and a.node_def.name not in skipped
        for key in a.keys
    ]
    try:
        with DagsterInstance.get() as instance:  # kept in DAGSTER_HOME: `make dev` shows the run
            result = job.execute_in_process(
                partition_key=day, instance=instance, raise_on_error=False, asset_selection=keys
            )
    except DrillError as err:
        print(err, file=sys.stderr)
        return 1
    rows = []
    for event in result.get_asset_materialization_events():
        mat = event.event_specific_data.materialization
        meta = mat.metadata
        count = meta.get("dagster/row_count")
        uri = meta.get("dagster/uri") or meta.get("dagster/table_name")
        rows.append(
            (
                mat.asset_key.to_user_string(),
                str(count.value if count is not None else "?"),
                str(uri.value if uri is not None else ""),
            )
        )
    width = max((len(r[0]) for r in rows), default=5)
    print(f"partition {day}, executor {executor}")
    print(f"{'asset':<{width}}  {'rows':>8}  location")
    for key, count, uri in sorted(rows):
        print(f"{key:<{width}}  {count:>8}  {uri}")
    if not result.success:
        print("some steps failed; see the messages above", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
