"""Golden files: the expected text of a parser, printer, rule or explain output, kept in git.

Run the tests with ``UPDATE_GOLDEN=1`` to rewrite the files from the current output, then read
the diff before committing it.
"""

from __future__ import annotations

import os
from pathlib import Path


def assert_golden(path: Path, text: str) -> None:
    """Assert that ``path`` holds ``text`` (or write it there under ``UPDATE_GOLDEN=1``)."""
    if os.environ.get("UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"missing golden file {path}: run with UPDATE_GOLDEN=1 to create it"
    assert text == path.read_text(encoding="utf-8"), (
        f"{path} differs; if the change is intended, rerun with UPDATE_GOLDEN=1 and read the diff"
    )
