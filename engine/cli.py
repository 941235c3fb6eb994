"""The ``drill-dagster`` command line: validate, explain and run logical plans.

Every mistake in a plan is reported as a message on stderr with exit code 1, never as a traceback. An
unexpected internal error says so, with a hint to file an issue, and exits 2.

Example::

    $ drill-dagster validate examples/plans
    examples/plans/daily_activity.json: ok
    ...
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from engine.errors import DrillError

PLAN_SUFFIXES = (".json", ".plan")
AddCommand = Callable[[Any], None]
"""Adds one subcommand to the subparsers it is given: how a package built on the engine
(``drill_dagster``) extends the command line without the engine importing it."""
EXIT_OK, EXIT_USER_ERROR, EXIT_INTERNAL_ERROR = 0, 1, 2


def _plan_files(paths: Sequence[str]) -> Iterator[Path]:
    """The plan files named on the command line; a directory stands for the plans directly inside it."""
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            yield from sorted(p for p in path.iterdir() if p.suffix in PLAN_SUFFIXES)
        else:
            yield path


def cmd_validate(args: argparse.Namespace) -> int:
    from engine.plan import parse_plan

    status = EXIT_OK
    files = list(_plan_files(args.plans))
    if not files:
        print(f"no plan files (*.json, *.plan) in {' '.join(args.plans)}", file=sys.stderr)
        return EXIT_USER_ERROR
    for path in files:
        try:
            parse_plan(path)
        except DrillError as err:
            print(str(err), file=sys.stderr)
            status = EXIT_USER_ERROR
        else:
            print(f"{path}: ok")
    return status


def cmd_explain(args: argparse.Namespace) -> int:
    from engine.explain import explain, explain_logical
    from engine.plan import parse_plan

    spark = None
    if args.spark:
        from engine.exec.spark.session import create_session

        spark = create_session()
    try:
        for path in _plan_files(args.plans):
            plan = parse_plan(path)
            if args.logical:
                print(explain_logical(plan, fmt=args.format))
                continue
            text = explain(
                plan,
                fmt=args.format,
                spark=spark,
                classpath=args.classpath,
                base_dir=path.resolve().parent,
            )
            print(text)
    finally:
        if spark is not None:
            spark.stop()
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    """Run plans; on Spark with progress on stderr (live on a terminal, else one line per
    fragment). A Spark session already active in this process is used and left running."""
    files = list(_plan_files(args.plans))
    if args.executor != "spark":
        for path in files:
            _run_one(path, args, spark=None)
        return EXIT_OK
    from pyspark.sql import SparkSession

    from engine.exec.spark.session import SparkConfig, create_session

    spark = SparkSession.getActiveSession()
    own = spark is None
    if own:
        # A Spark Connect server's catalog is the server's: nothing to start with.
        catalog = {} if args.remote else _catalog_settings(files)
        conf = {**catalog, **dict(item.split("=", 1) for item in args.conf)}
        spark = create_session(SparkConfig(master=args.master, remote=args.remote, conf=conf))
        if catalog:
            from engine.exec.spark.catalog_tables import keep_derby_log

            keep_derby_log(spark, conf)
    try:
        for path in files:
            _run_one(path, args, spark=spark)
    finally:
        if own:
            spark.stop()
    return EXIT_OK


def _catalog_settings(files: list[Path]) -> dict[str, str]:
    """Hive support for a session this command starts, when a plan has a catalog engine with a
    warehouse (:func:`engine.storage.catalog.session_settings`); ``--conf`` wins."""
    from engine.plan import parse_plan
    from engine.storage.catalog import session_settings
    from engine.storage.engines import plan_engines

    for path in files:
        try:
            plan = parse_plan(path)
            if any(c.type == "catalog" for c in plan.storage.values()):
                engines = plan_engines(plan, base_dir=path.parent, classpath=())
                return session_settings(engines)
        except (DrillError, OSError, ValueError):
            continue  # the run reports it
    return {}


def _run_one(path: Path, args: argparse.Namespace, *, spark: object) -> None:
    import io

    from engine.run import run_plan
    from engine.storage.formats.json import to_json_line

    def run() -> object:
        return run_plan(
            path,
            executor=args.executor,
            classpath=args.classpath,
            console_stream=io.StringIO(),  # printed below, once, with the queue records
            max_buffered_bytes=args.max_buffered_bytes,
            spark=spark,
            params=dict(item.split("=", 1) for item in args.param),
        )

    if spark is None:
        result = run()
    else:
        from engine.exec.spark.progress import SparkProgress

        print(f"{path}: running on Spark", file=sys.stderr)
        with SparkProgress(spark, stream=sys.stderr) as progress:
            result = run()
        progress.summary(result.metrics)
    for record in result.records():
        print(to_json_line(record))
    for store in result.stores:
        print(
            f"{path}: store {store.operator_id} wrote {store.row_count} rows to {store.location}",
            file=sys.stderr,
        )


def _conf_item(text: str) -> str:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return text


def cmd_sql(args: argparse.Namespace) -> int:
    """``sql``: SQL -> logical plan; print its records, or ``--explain`` it, or save ``--to-plan``."""
    import io
    import json
    import os

    from engine.metadata import MetadataRepository
    from engine.plan import parse_plan
    from engine.sql import sql_to_plan
    from engine.sql.sql_file import repository_beside

    # Drill's default engines: `cp` (the classpath roots) and `dfs` (the working directory).
    storage = {"cp": {"type": "classpath"}, "dfs": {"type": "fs", "root": os.getcwd()}}
    if args.plans:
        beside = repository_beside(Path(args.plans) / "_.sql", {}, classpath=args.classpath)
        # The plans' own engines win over the defaults of the same name.
        repository = beside.with_storage(
            {k: v for k, v in storage.items() if k not in beside.storage}
        )
    else:
        repository = MetadataRepository(storage, classpath=args.classpath)
    plan = sql_to_plan(args.statement, repository, case=args.case)
    logical = parse_plan(plan)
    if args.to_plan:
        Path(args.to_plan).write_text(json.dumps(plan, indent=2) + "\n")
        print(f"wrote {args.to_plan}", file=sys.stderr)
    if args.explain:
        from engine.explain import explain_logical

        print(explain_logical(logical, fmt="text"))
        return EXIT_OK
    if args.to_plan:
        return EXIT_OK
    from engine.run import run_plan
    from engine.storage.formats.json import to_json_line

    result = run_plan(
        logical, executor=args.executor, classpath=args.classpath, console_stream=io.StringIO()
    )
    for record in result.records():
        print(to_json_line(record))
    return EXIT_OK


def cmd_functions(args: argparse.Namespace) -> int:
    from engine.expr.functions import FUNCTIONS

    for spec in sorted(FUNCTIONS.values(), key=lambda f: f.name):
        arity = (
            str(spec.min_args)
            if spec.max_args == spec.min_args
            else (
                f"{spec.min_args}+" if spec.max_args is None else f"{spec.min_args}-{spec.max_args}"
            )
        )
        kinds = ",".join(sorted(k.value for k in spec.kinds))
        names = spec.name + (f" ({spec.symbol})" if spec.symbol else "")
        aliases = f" aliases: {', '.join(spec.aliases)}" if spec.aliases else ""
        print(f"{names:<28} {kinds:<26} args {arity:<4} {spec.doc}{aliases}")
    return EXIT_OK


def build_parser(extra_commands: Sequence[AddCommand] = ()) -> argparse.ArgumentParser:
    """The engine's commands, plus ``extra_commands`` (each adds its subparser)."""
    parser = argparse.ArgumentParser(
        prog="drill-dagster",
        description="Run Apache Drill logical plans on Spark and present them in Dagster.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    validate = sub.add_parser("validate", help="check plans; print 'ok' per plan or every problem")
    validate.add_argument(
        "plans", nargs="+", metavar="PLAN", help="plan files or directories of plans"
    )
    validate.set_defaults(func=cmd_validate)

    explain = sub.add_parser(
        "explain", help="show how a plan runs: fragments, pushed projections and filters"
    )
    explain.add_argument("plans", nargs="+", metavar="PLAN")
    explain.add_argument("--format", choices=["text", "json", "markdown"], default="text")
    explain.add_argument(
        "--spark", action="store_true", help="also show the Spark plans (starts a local session)"
    )
    explain.add_argument(
        "--logical", action="store_true", help="show the logical operator DAG as written instead"
    )
    explain.add_argument(
        "--classpath",
        action="append",
        default=[],
        metavar="DIR",
        help="a data root for `classpath` storage engines (repeatable)",
    )
    explain.set_defaults(func=cmd_explain)

    run_cmd = sub.add_parser("run", help="run plans; print sink records as JSON lines")
    run_cmd.add_argument("plans", nargs="+", metavar="PLAN")
    run_cmd.add_argument("--executor", choices=["local", "spark"], default="spark")
    run_cmd.add_argument("--master", default="local[*]", help="Spark master URL (spark executor)")
    run_cmd.add_argument("--remote", help="Spark Connect URL, e.g. sc://127.0.0.1:15002")
    run_cmd.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        type=_conf_item,
        help="any Spark setting (repeatable)",
    )
    run_cmd.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        type=_conf_item,
        help="a value for ${NAME} in scan selections and store targets, e.g. day=2024-01-01",
    )
    run_cmd.add_argument(
        "--classpath",
        action="append",
        default=[],
        metavar="DIR",
        help="a data root for `classpath` storage engines (repeatable)",
    )
    run_cmd.add_argument(
        "--max-buffered-bytes",
        type=int,
        default=None,
        metavar="N",
        help="memory (bytes) each blocking operator of the local executor may hold (default 2 GiB)",
    )
    run_cmd.set_defaults(func=cmd_run)
    for add_command in extra_commands:
        add_command(sub)

    sql = sub.add_parser("sql", help="run a SQL query (or explain it, or save it as a plan)")
    sql.add_argument("statement", metavar="SQL", help="one SQL statement, in quotes")
    sql.add_argument("--explain", action="store_true", help="print the plan instead of running it")
    sql.add_argument("--to-plan", metavar="FILE", help="write the logical plan JSON to FILE")
    sql.add_argument("--executor", choices=["local", "spark"], default="local")
    sql.add_argument("--classpath", action="append", default=[], metavar="DIR")
    sql.add_argument(
        "--plans", metavar="DIR", help="a plans directory: its engines and store targets as tables"
    )
    sql.add_argument(
        "--case",
        choices=["preserve", "upper"],
        default="preserve",
        help="spelling of unquoted output names (upper: as Drill's early SQL layer)",
    )
    sql.set_defaults(func=cmd_sql)

    functions = sub.add_parser("functions", help="list the functions expressions may call")
    functions.set_defaults(func=cmd_functions)
    return parser


def run(argv: Sequence[str] | None = None, extra_commands: Sequence[AddCommand] = ()) -> int:
    """Run the CLI and return its exit code (the console script calls :func:`main`)."""
    args = build_parser(extra_commands).parse_args(argv)
    try:
        return args.func(args)
    except DrillError as err:
        print(str(err), file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # an engine bug, not the user's mistake
        import traceback  # only here: a command that succeeds does not load it

        print(
            f"internal error: {type(err).__name__}: {err}\n"
            "This is a bug in drill-dagster, not in your plan. Please file an issue with the plan "
            "and the details below.\n" + traceback.format_exc(),
            file=sys.stderr,
        )
        return EXIT_INTERNAL_ERROR


def main() -> None:
    # The command owns its process: what the imports built lives until exit, so the garbage
    # collector need not walk it again, during the command or when the process ends.
    gc.freeze()
    sys.exit(run())


if __name__ == "__main__":
    main()
