"""The conformance corpus's comparison rules (``../shared/conformance/README.md``).

- map key order is ignored, arrays are ordered;
- numbers compare by value (``3 == 3.0``), floats with a relative tolerance of 1e-9, a DECIMAL
  exactly with the number written (``Decimal("7.9900")`` is ``7.99``);
- ``"k": null`` equals an absent ``k``;
- ``ordered`` compares sequences, ``unordered`` multisets.
"""

from __future__ import annotations

import decimal
import json
import math
from collections.abc import Iterable
from typing import Any

REL_TOL = 1e-9


def normalize(value: Any) -> Any:
    """A canonical form: null members dropped, numbers as floats, maps with sorted keys."""
    if isinstance(value, dict):
        return {k: normalize(v) for k, v in sorted(value.items()) if v is not None}
    if isinstance(value, list | tuple):
        return [normalize(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return float(value)
    return value


def values_equal(left: Any, right: Any) -> bool:
    """Whether two normalized JSON values are equal under the corpus rules."""
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(values_equal(left[k], right[k]) for k in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(values_equal(a, b) for a, b in zip(left, right))
    if isinstance(left, float) and isinstance(right, float):
        return math.isclose(left, right, rel_tol=REL_TOL, abs_tol=0.0) or left == right
    if isinstance(left, decimal.Decimal) or isinstance(right, decimal.Decimal):
        return _exact(left) == _exact(right)
    return type(left) is type(right) and left == right


def _exact(value: Any) -> Any:
    """A number as the decimal it is written as (a float by its shortest text)."""
    if isinstance(value, float):
        return decimal.Decimal(repr(value))
    return value


def _sort_key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def records_match(actual: Iterable[Any], expected: Iterable[Any], *, ordered: bool) -> bool:
    got = [normalize(r) for r in actual]
    want = [normalize(r) for r in expected]
    if len(got) != len(want):
        return False
    if not ordered:
        got.sort(key=_sort_key)
        want.sort(key=_sort_key)
    return all(values_equal(a, b) for a, b in zip(got, want))


def read_jsonl(path) -> list[Any]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
