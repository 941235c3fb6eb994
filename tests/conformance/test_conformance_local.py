"""The whole conformance corpus on the local executor."""

from __future__ import annotations

from typing import Any

import pytest
from corpus import case_params, check_case


@pytest.mark.parametrize("case", case_params("local"))
def test_case(case: dict[str, Any]) -> None:
    check_case(case, executor="local")
