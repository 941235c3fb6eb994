"""Running a benchmark plan, checking that ours and the hand-written query agree, and reading
the timed rounds: their paired ratios, spread and confidence intervals, pooled over runs.

>>> same_records([{"a": 1.0}], [{"a": 1.0 + 1e-12}], ordered=True)
True
>>> same_records([{"a": 1}, {"a": 2}], [{"a": 2}, {"a": 1}], ordered=False)
True
"""

from __future__ import annotations

import json
import math
import random
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


def ratio_interval(
    ours: list[float], theirs: list[float], *, confidence: float = 0.9, resamples: int = 2000
) -> tuple[float, float]:
    """A bootstrap interval of :func:`median_ratio`: the rounds resampled with replacement
    ``resamples`` times (a fixed seed: the same rounds give the same interval), the central
    ``confidence`` of the medians. A query whose interval holds the target is not decided by
    these rounds either way.

    >>> ratio_interval([1.0] * 9, [1.0] * 9)
    (1.0, 1.0)
    >>> low, high = ratio_interval([1.0, 1.1, 1.2, 1.3, 1.4], [1.0] * 5)
    >>> 1.0 <= low < 1.2 < high <= 1.4
    True
    """
    return _interval([round_ratios(ours, theirs)], confidence, resamples)


def median_interval(
    runs: list[tuple[list[float], list[float]]],
    *,
    confidence: float = 0.9,
    resamples: int = 2000,
) -> tuple[float, float]:
    """A bootstrap interval of the median over queries of their :func:`median_ratio`, given each
    query's ``(ours, theirs)`` rounds: each query's rounds resampled on their own.

    >>> median_interval([([1.0] * 5, [1.0] * 5), ([2.0] * 5, [1.0] * 5), ([3.0] * 5, [1.0] * 5)])
    (2.0, 2.0)
    """
    return _interval([round_ratios(o, t) for o, t in runs], confidence, resamples)


def _interval(ratios: list[list[float]], confidence: float, resamples: int) -> tuple[float, float]:
    pick = random.Random(0).choices
    estimates = sorted(
        statistics.median(statistics.median(pick(r, k=len(r))) for r in ratios)
        for _ in range(resamples)
    )
    tail = (1 - confidence) / 2
    return estimates[int(tail * (resamples - 1))], estimates[round((1 - tail) * (resamples - 1))]


def verdict(
    median: tuple[float, float],
    queries: dict[str, tuple[float, float]],
    *,
    median_target: float = 1.0,
    max_target: float | None = 1.10,
) -> str:
    """Whether the rounds meet the target (median ratio <= ``median_target``, none above
    ``max_target``; None: no limit per query), given the interval of the median and of each
    query's ratio: "met" and "not met" only where the intervals say so; else which queries the
    rounds leave undecided.

    >>> verdict((0.9, 0.98), {"q1": (0.95, 1.05)})
    'met'
    >>> verdict((0.98, 1.03), {"q1": (1.12, 1.2), "q2": (1.0, 1.02)})
    'not met: q1 above 1.10'
    >>> verdict((1.02, 1.04), {"q1": (1.0, 1.05)})
    'not met: the median above 1.0'
    >>> verdict((0.97, 1.02), {"q1": (1.05, 1.15)})
    'undecided at this noise: the median, q1'
    """
    limit = math.inf if max_target is None else max_target
    above = [name for name, (low, _) in queries.items() if low > limit]
    if median[0] > median_target or above:
        parts = [f"the median above {median_target:.1f}"] if median[0] > median_target else []
        parts += [f"{', '.join(above)} above {limit:.2f}"] if above else []
        return "not met: " + "; ".join(parts)
    open_ = ["the median"] if median[1] > median_target else []
    open_ += [name for name, (_, high) in queries.items() if high > limit]
    return "met" if not open_ else "undecided at this noise: " + ", ".join(open_)


def pooled_runs(records: list[dict[str, Any]]) -> dict[str, dict[str, list[float]]]:
    """Each query's timed rounds (``{"ours": [...], "handwritten": [...]}``) over several
    ``--record`` files of ``spark_queries.py``, in file order; only the queries every file
    holds.

    >>> a = {"queries": {"q1": {"runs": {"ours": [1.0], "handwritten": [2.0]}}}}
    >>> b = {"queries": {"q1": {"runs": {"ours": [3.0], "handwritten": [4.0]}}, "q2": {}}}
    >>> pooled_runs([a, b])
    {'q1': {'ours': [1.0, 3.0], 'handwritten': [2.0, 4.0]}}
    """
    return pooled_rounds(
        [{name: query.get("runs", {}) for name, query in r["queries"].items()} for r in records]
    )


def pooled_rounds(
    files: list[dict[str, dict[str, list[float]]]],
) -> dict[str, dict[str, list[float]]]:
    """The rounds of several runs together (each ``{query: {contender: [seconds, ...]}}``), in
    order; only the queries every run holds, with the contenders of the first.

    >>> first, second = {"q1": {"ours": [1.0], "peer": [2.0]}}, {"q1": {"ours": [3.0], "peer": [4.0]}}
    >>> pooled_rounds([first, second])
    {'q1': {'ours': [1.0, 3.0], 'peer': [2.0, 4.0]}}
    """
    names = [name for name in files[0] if all(name in f for f in files)]
    return {
        name: {label: [t for f in files for t in f[name][label]] for label in files[0][name]}
        for name in names
    }
