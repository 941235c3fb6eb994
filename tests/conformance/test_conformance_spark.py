"""The whole conformance corpus on the Spark executor, compared exactly as on the local one."""

from __future__ import annotations

from typing import Any

import pytest
from corpus import case_params, check_case


@pytest.mark.parametrize("case", case_params("spark"))
def test_case(case: dict[str, Any], spark: Any) -> None:
    check_case(case, executor="spark", spark=spark)
