"""How long ``drill-dagster validate`` of one plan takes against ``python -c "import pydantic"``.

Both are fresh processes of the project's interpreter, alternating, medians of ``--repeat``
rounds after a warm-up (files in the page cache). The target: validate <= 3x the import. Wall time
and CPU time (user + system of the child) are both reported; on a busy machine the CPU ratio is the
steadier one. The project's sources are byte-compiled first (as ``make venv`` does), as an
installed package's are.

    .venv/bin/python benchmarks/cli_start.py --repeat 15
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLAN = ROOT / "examples" / "plans" / "customer_summary.json"
CONTENDERS = {
    "validate": [sys.executable, "-m", "drill_dagster.cli", "validate", str(PLAN)],
    "import pydantic": [sys.executable, "-c", "import pydantic"],
}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _time(command: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one run of ``command``."""
    started, cpu = time.perf_counter(), _cpu()
    # Run from this checkout: `-m` puts the working directory first on the path, so the code
    # measured is this checkout's, not an installed (or editable-installed) copy elsewhere.
    subprocess.run(command, check=True, capture_output=True, cwd=ROOT)
    return time.perf_counter() - started, _cpu() - cpu


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args(argv)
    packages = [str(ROOT / "engine"), str(ROOT / "drill_dagster")]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *packages], check=True)
    for command in CONTENDERS.values():
        _time(command)  # warm-up
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in CONTENDERS}
    for _ in range(args.repeat):
        for name, command in CONTENDERS.items():
            times[name].append(_time(command))
    wall = {name: statistics.median(t[0] for t in values) for name, values in times.items()}
    cpu = {name: statistics.median(t[1] for t in values) for name, values in times.items()}
    print(f"{'':<16} {'wall':>8} {'cpu':>8}")
    for name in CONTENDERS:
        print(f"{name:<16} {wall[name]:7.3f}s {cpu[name]:7.3f}s")
    ratios = (wall["validate"] / wall["import pydantic"], cpu["validate"] / cpu["import pydantic"])
    print(f"{'ratio':<16} {ratios[0]:8.2f} {ratios[1]:8.2f}   (target <= 3)")


if __name__ == "__main__":
    main()
