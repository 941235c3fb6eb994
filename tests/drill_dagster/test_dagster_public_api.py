"""drill_dagster uses Dagster's public API only: private modules change without notice."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "drill_dagster"
PRIVATE = re.compile(r"^\s*(from|import)\s+dagster(_\w+)?\._\w+", re.MULTILINE)


def test_no_module_imports_a_private_dagster_module() -> None:
    found = [
        f"{path.relative_to(PACKAGE.parent)}: {match.group(0).strip()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for match in PRIVATE.finditer(path.read_text(encoding="utf-8"))
    ]
    assert not found, "private Dagster imports:\n" + "\n".join(found)
