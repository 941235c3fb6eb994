"""The overhead benchmark: a Dagster materialization of one example plan against
``engine.run_plan`` of the same plan, on the same already-running SparkSession.

The example data is generated into a temporary project (the example plans copied beside it), one
SparkSession is started, and then, alternating, ``--repeat`` times after a warm-up:

* ``run_plan``: ``engine.run_plan(plan, executor="spark", spark=session, params=...)``;
* ``dagster``: a job of the plan's stores (resolved once, as a code location holds it)
  executed in process: one op per operator, DataFrames in memory, metadata (schema, lineage,
  explain, operator counters), its ``drill`` resource finding the running session; a persistent
  ``DagsterInstance`` in a temporary ``DAGSTER_HOME``;
* ``materialize``: ``dagster.materialize`` of the same assets, which builds the job on every call.

Both write the same store (overwriting it). Overhead = median(dagster) - median(run_plan); target
<= 1 s. Run from the repository root::

    .venv/bin/python benchmarks/dagster_overhead.py                         # orders_enriched
    .venv/bin/python benchmarks/dagster_overhead.py --plan events_cleaned   # one day partition
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
DAY = "2024-01-01"


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("examples_generate", EXAMPLES / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", default="orders_enriched", help="an example plan's name")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--days", type=int, default=7)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="drill-overhead-") as tmp:
        root = Path(tmp)
        os.environ["DAGSTER_HOME"] = str(root / "dagster_home")
        (root / "dagster_home").mkdir()
        shutil.copytree(EXAMPLES / "plans", root / "plans")
        _generator().generate(root / "data", days=args.days)

        from dagster import (
            AssetSelection,
            DagsterInstance,
            Definitions,
            define_asset_job,
            materialize,
        )

        from drill_dagster import load_definitions
        from engine import run_plan
        from engine.exec.spark.session import SparkConfig, create_session

        spark = create_session(SparkConfig())
        defs = load_definitions(root / "plans", executor="spark")
        plan_path = root / "plans" / f"{args.plan}.json"
        config = defs.resolve_asset_graph()
        keys = [
            key
            for key in config.get_all_asset_keys()
            if config.get(key).is_materializable and _plan_of(config.get(key)) == plan_path
        ]
        partitioned = any(config.get(key).partitions_def is not None for key in keys)
        params = {"day": DAY} if partitioned else {}
        instance = DagsterInstance.get()

        def by_engine() -> None:
            run_plan(plan_path, executor="spark", spark=spark, params=params)

        def by_dagster() -> None:
            result = materialize(
                [*defs.assets],  # type: ignore[list-item]
                selection=AssetSelection.assets(*keys),
                resources=defs.resources,
                instance=instance,
                partition_key=DAY if partitioned else None,
            )
            assert result.success

        # The plan's stores as one job, resolved once as a code location holds it (load_definitions
        # makes jobs only for scheduled plans).
        job_def = define_asset_job(f"{args.plan}_job", selection=AssetSelection.assets(*keys))
        job = Definitions.merge(defs, Definitions(jobs=[job_def])).resolve_job_def(job_def.name)

        def by_job() -> None:
            result = job.execute_in_process(
                instance=instance, partition_key=DAY if partitioned else None
            )
            assert result.success

        contenders: dict[str, Callable[[], None]] = {
            "run_plan": by_engine,
            "dagster": by_job,
            "materialize": by_dagster,
        }
        for fn in contenders.values():  # warm-up: JVM code paths, Python workers, imports
            fn()
        times: dict[str, list[float]] = {name: [] for name in contenders}
        for _ in range(args.repeat):
            for name, fn in contenders.items():
                start = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - start)
        spark.stop()

    medians = {name: statistics.median(values) for name, values in times.items()}
    overhead = medians["dagster"] - medians["run_plan"]
    label = f"{args.plan}" + (f" (partition {DAY})" if partitioned else "")
    print(f"{label} on local Spark, median of {args.repeat} (after a warm-up)")
    for name, value in medians.items():
        spread = f"{min(times[name]):.2f}-{max(times[name]):.2f}"
        print(f"  {name:<11} {value:6.2f} s   (range {spread})")
    print(f"  dagster / run_plan: {medians['dagster'] / medians['run_plan']:.2f}")
    extra = medians["materialize"] - medians["run_plan"]
    print(f"  materialize() each time (job rebuilt per call): overhead {extra:.2f} s")
    print(f"  overhead: {overhead:.2f} s (target <= 1 s: {'met' if overhead <= 1 else 'NOT met'})")
    return 0


def _plan_of(node: Any) -> Path | None:
    references = node.metadata.get("dagster/code_references")
    if references is None:
        return None
    return Path(references.code_references[0].file_path)


if __name__ == "__main__":
    sys.exit(main())
