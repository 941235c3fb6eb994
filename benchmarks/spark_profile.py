"""Where a Spark benchmark run's time goes: ours against hand-written, phase by phase.

For each query of ``spark_queries`` (after a warm-up), alternates the hand-written query, our run,
and our run without observations (``OperatorMetrics.observe`` returning its DataFrame as it is),
and splits our run's wall time into phases by wrapping the functions that do them: planning
(statistics, optimize, physical), Spark's write job, the store's commit around it, and the rest
(compiling DataFrames on the driver, collecting metrics). Also counts py4j calls per run.

Run from the repository root::

    .venv/bin/python benchmarks/spark_profile.py --scale 0.1 --data-dir /tmp/sparkperf_data_a
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import py4j.java_gateway
from spark_queries.check import run_ours
from spark_queries.data import generate
from spark_queries.handwritten import QUERIES

import engine.exec.spark.executor as executor
import engine.exec.spark.stores as stores
from engine.exec.spark.metrics import OperatorMetrics
from engine.exec.spark.session import SparkConfig, create_session

PHASES: dict[str, float] = defaultdict(float)
CALLS = [0]


def _timed(owner: Any, name: str, phase: str) -> None:
    original = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            PHASES[phase] += time.perf_counter() - start

    setattr(owner, name, wrapper)


def _count_py4j() -> None:
    original = py4j.java_gateway.GatewayClient.send_command

    def send_command(self: Any, command: str, *args: Any, **kwargs: Any) -> Any:
        CALLS[0] += 1
        return original(self, command, *args, **kwargs)

    py4j.java_gateway.GatewayClient.send_command = send_command  # type: ignore[method-assign]


@contextmanager
def _no_observations() -> Iterator[None]:
    original = OperatorMetrics.observe
    OperatorMetrics.observe = lambda self, operator_id, df: df  # type: ignore[method-assign]
    try:
        yield
    finally:
        OperatorMetrics.observe = original  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=0.1)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--query", action="append", choices=sorted(QUERIES))
    parser.add_argument("--data-dir", type=Path, default=Path("/tmp/drill-bench/spark_queries"))
    args = parser.parse_args(argv)
    data = generate(args.data_dir, scale=args.scale)
    out = args.data_dir / "profile-out"
    spark = create_session(SparkConfig(master="local[2]", shuffle_partitions=8))
    _timed(executor.SparkPlanRun, "__init__", "plan")
    _timed(stores, "_spark_write", "write job")
    _timed(stores, "_store_fs", "store total")
    _count_py4j()

    def ours() -> None:
        run_ours(spark, name, data, out / "ours")

    def bare() -> None:
        with _no_observations():
            run_ours(spark, name, data, out / "bare")

    def hand() -> None:
        QUERIES[name](spark, data, out / "hand" / name)

    contenders: list[tuple[str, Callable[[], None]]] = [
        ("hand", hand),
        ("ours", ours),
        ("no-observe", bare),
    ]
    print(
        f"{'query':24s} {'hand':>6s} {'ours':>6s} {'noobs':>6s} | ours: {'plan':>5s} "
        f"{'compile':>7s} {'write':>6s} {'commit':>6s} py4j"
    )
    for name in args.query or list(QUERIES):
        times: dict[str, list[float]] = defaultdict(list)
        phases: dict[str, list[float]] = defaultdict(list)
        for _label, run in contenders:  # warm-up
            run()
        for round_ in range(args.repeat):
            order = contenders if round_ % 2 == 0 else contenders[::-1]
            for label, run in order:
                PHASES.clear()
                CALLS[0] = 0
                start = time.perf_counter()
                run()
                total = time.perf_counter() - start
                times[label].append(total)
                if label == "ours":
                    for phase, value in PHASES.items():
                        phases[phase].append(value)
                    phases["total"].append(total)
                    phases["py4j"].append(CALLS[0])
        med = {k: statistics.median(v) for k, v in times.items()}
        ph = {k: statistics.median(v) for k, v in phases.items()}
        commit = ph["store total"] - ph["write job"]
        compile_ = ph["total"] - ph["store total"] - ph["plan"]
        print(
            f"{name:24s} {med['hand']:6.3f} {med['ours']:6.3f} {med['no-observe']:6.3f} | "
            f"{ph['plan']:10.3f} {compile_:7.3f} {ph['write job']:6.3f} {commit:6.3f} "
            f"{int(ph['py4j'])}",
            flush=True,
        )
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
