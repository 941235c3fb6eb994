"""How long ``drill-dagster validate`` of one plan takes against ``python -c "import pydantic"``.

Both are fresh processes of the project's interpreter, alternating, medians of ``--repeat``
rounds after a warm-up (files in the page cache). The target: validate <= 3x the import.

    .venv/bin/python benchmarks/cli_start.py --repeat 15
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

PLAN = Path(__file__).resolve().parents[1] / "examples" / "plans" / "customer_summary.json"
CONTENDERS = {
    "validate": [sys.executable, "-m", "drill_dagster.cli", "validate", str(PLAN)],
    "import pydantic": [sys.executable, "-c", "import pydantic"],
}


def _time(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args(argv)
    for command in CONTENDERS.values():
        _time(command)  # warm-up
    times: dict[str, list[float]] = {name: [] for name in CONTENDERS}
    for _ in range(args.repeat):
        for name, command in CONTENDERS.items():
            times[name].append(_time(command))
    medians = {name: statistics.median(values) for name, values in times.items()}
    for name, median in medians.items():
        print(f"{name:<16} {median:6.3f} s")
    print(f"ratio            {medians['validate'] / medians['import pydantic']:6.2f} (target <= 3)")


if __name__ == "__main__":
    main()
