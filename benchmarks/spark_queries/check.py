"""Running a benchmark plan, checking that ours and the hand-written query agree, and the spread
of the timed rounds.

>>> same_records([{"a": 1.0}], [{"a": 1.0 + 1e-12}], ordered=True)
True
>>> same_records([{"a": 1}, {"a": 2}], [{"a": 2}, {"a": 1}], ordered=False)
True
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from engine.run import RunResult, run_plan

PLANS = Path(__file__).resolve().parent / "plans"


def load_plan(name: str, data: Path, out: Path) -> dict[str, Any]:
    """Plan ``name`` reading ``data`` and storing under ``out``."""
    plan = json.loads((PLANS / f"{name}.json").read_text())
    plan["storage"]["data"]["root"] = str(data)
    plan["storage"]["out"]["root"] = str(out)
    return plan


def run_ours(spark: Any, name: str, data: Path, out: Path) -> RunResult:
    """Plan ``name`` on the Spark executor, storing under ``out``."""
    return run_plan(load_plan(name, data, out), executor="spark", spark=spark)


def stored_rows(result: RunResult) -> list[dict[str, Any]]:
    """The records the plan's store wrote, in file order."""
    (store,) = result.stores
    files = sorted(store.files) if store.files else [store.location]
    return [row for f in files for row in pq.read_table(f).to_pylist()]


def written_rows(directory: Path) -> list[dict[str, Any]]:
    """The records Spark wrote to ``directory``, in part-file order."""
    files = sorted(p for p in directory.glob("part-*") if p.suffix == ".parquet")
    return [row for f in files for row in pq.read_table(f).to_pylist()]


def same_records(
    ours: list[dict[str, Any]], theirs: list[dict[str, Any]], *, ordered: bool
) -> bool:
    """Equal records (floats to 1e-9 relative: sums may add in another order)."""
    if len(ours) != len(theirs):
        return False
    if not ordered:
        ours, theirs = sorted(ours, key=_sort_key), sorted(theirs, key=_sort_key)
    return all(_same(a, b) for a, b in zip(ours, theirs))


def _sort_key(row: dict[str, Any]) -> str:
    return json.dumps(
        {k: round(v, 6) if isinstance(v, float) else v for k, v in row.items()},
        sort_keys=True,
        default=str,
    )


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return a == b


def round_ratios(ours: list[float], theirs: list[float]) -> list[float]:
    """The rounds' own ratios ``ours[i] / theirs[i]`` (each round runs both, back to back).

    >>> round_ratios([1.0, 3.0], [2.0, 2.0])
    [0.5, 1.5]
    """
    return [a / b for a, b in zip(ours, theirs, strict=True)]


def median_ratio(ours: list[float], theirs: list[float]) -> float:
    """The median of the rounds' ratios: the paired estimate, which a slow spell of the machine
    that slows both runs of a round leaves as it is (a ratio of the two medians takes each run
    from a different round).

    >>> median_ratio([1.0, 2.0, 9.0], [1.0, 1.0, 1.0])
    2.0
    """
    return statistics.median(round_ratios(ours, theirs))


def round_spread(ours: list[float], theirs: list[float]) -> tuple[float, float]:
    """The 25th and 75th percentiles of the rounds' ratios ``ours[i] / theirs[i]`` (one round:
    its ratio twice).

    >>> round_spread([1.0, 2.0, 3.0, 4.0], [1.0, 1.0, 1.0, 1.0])
    (1.25, 3.75)
    """
    ratios = round_ratios(ours, theirs)
    if len(ratios) < 2:
        return ratios[0], ratios[0]
    low, _, high = statistics.quantiles(ratios, n=4)
    return low, high
