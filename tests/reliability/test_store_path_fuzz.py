"""A plan-level fuzz of store targets and parameters: whatever the target and the parameter
values (glob characters, ``..``, separators, unicode, NUL) and whatever links are planted under
the root, a store writes nothing outside its root and loses no dataset it was not told to write.

Each example builds a fresh root beside ``outside`` (a dataset that must survive), with a dataset
``keep`` inside and some links planted: out of the root (``ev*l``, ``link``, one on the store's
own lock and metadata files) and inside it (``alias -> keep``). A run may succeed or fail with
the engine's own error; after it, ``outside`` and every dataset of the root but the one the
target names are exactly as before, and a target written holds the rows stored.
"""

from __future__ import annotations

import json
import os
import posixpath
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_store_escapes import plan_of, rows, snapshot, store

from engine import run_plan
from engine.errors import DrillError

COMPONENTS = st.sampled_from(
    [
        "a",
        "keep",
        "alias",
        "link",
        "ev*l",
        "ev?l",
        "ev[l",
        "[ab]",
        "*",
        "**",
        "?",
        "..",
        ".",
        "",
        "ü",
        "日本",
        "a b",
        "x=1",
        "_hidden",
        ".dot",
        "${p}",
        "${q}",
    ]
)
FIRST = st.sampled_from(["ev*l", "ev?l", "ev[l", "link", "alias", "keep", "a", "${p}", "/"])
TARGETS = (
    st.tuples(FIRST, st.lists(COMPONENTS, max_size=3)).map(lambda t: "/".join([t[0], *t[1]]))
    | st.lists(COMPONENTS, min_size=1, max_size=4).map("/".join)
    | st.text(alphabet="ab*?[]./\\ü ${}pq", min_size=1, max_size=12)
)
VALUES = st.sampled_from(["..", ".", "", "a/b", "../keep", "keep", "x\x00", "ü", "*", "ok"]) | (
    st.text(alphabet="ab./*?[ü", max_size=6)
)
PLANTS = st.sets(st.sampled_from(["ev*l", "ev?l", "ev[l", "link", "lock", "metadata", "alias"]))


def build(base: Path, plants: set[str]) -> tuple[Path, Path]:
    root, outside = base / "lake", base / "outside"
    (outside / "important").mkdir(parents=True)
    (outside / "important" / "part-0.json").write_text('{"keep": 1}\n')
    root.mkdir()
    run_plan(plan_of(root, rows(), store(2, 1, "keep")))
    for name in {"ev*l", "ev?l", "ev[l", "link"} & plants:
        (root / name).symlink_to("../outside", target_is_directory=True)
    if "alias" in plants:
        (root / "alias").symlink_to("keep", target_is_directory=True)
    if "lock" in plants:
        (root / ".a.lock").symlink_to(outside / "a.lock")
    if "metadata" in plants:
        (root / "_drill_metadata" / "a").mkdir(parents=True)
        (root / "_drill_metadata" / "a" / "b.json").symlink_to(outside / "b.json")
    return root, outside


def datasets(root: Path) -> dict[str, dict[str, str]]:
    """Every dataset directory below ``root`` (a directory holding a data file), by location."""
    found: dict[str, dict[str, str]] = {}
    for folder, subdirs, files in os.walk(root):
        subdirs[:] = [d for d in subdirs if not d.startswith(".") and d != "_drill_metadata"]
        if any(f.endswith(".json") for f in files):
            rel = os.path.relpath(folder, root)
            found[rel] = {f: Path(folder, f).read_text() for f in files if f.endswith(".json")}
    return found


def written_location(root: Path, target: str, params: dict[str, str]) -> str | None:
    """Where a successful store of ``target`` must have written, relative to the root."""
    for name, value in params.items():
        target = target.replace("${" + name + "}", value)
    rel = posixpath.normpath(target.lstrip("/") or ".")
    real = os.path.realpath(root / rel)
    return os.path.relpath(real, os.path.realpath(root))


def check_one(
    target: str, params: dict[str, str], plants: set[str], executor: str, spark: Any = None
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root, outside = build(Path(tmp), plants)
        before_outside = snapshot(outside)
        before = datasets(root)
        plan = plan_of(root, rows(), store(2, 1, target))
        try:
            run_plan(plan, executor=executor, params=params, spark=spark)
            ok = True
        except DrillError:
            ok = False
        assert snapshot(outside) == before_outside, (target, params)
        after = datasets(root)
        written = written_location(root, target, params) if ok else None
        for location, files in before.items():
            if location != written:
                assert after.get(location) == files, (target, params, location)
        if ok:
            assert written is not None and not written.startswith(".."), (target, params)
            assert stored_values(root / written) == [1, 2, 3], (target, params)


def stored_values(dataset: Path) -> list[int]:
    """The ``v`` of every row of the JSON files of a dataset (its name is literal: no glob)."""
    values = []
    for folder, subdirs, files in os.walk(dataset):
        subdirs[:] = [d for d in subdirs if not d.startswith((".", "_"))]
        for name in files:
            if name.endswith(".json") and not name.startswith((".", "_")):
                lines = Path(folder, name).read_text().splitlines()
                values += [json.loads(line)["v"] for line in lines if line.strip()]
    return sorted(values)


def _fuzz(max_examples: int) -> Any:
    return settings(
        max_examples=max_examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )


@_fuzz(25)
@given(target=TARGETS, p=VALUES, q=VALUES, plants=PLANTS)
def test_store_targets_and_parameters_stay_in_the_root(
    target: str, p: str, q: str, plants: set[str]
) -> None:
    check_one(target, {"p": p, "q": q}, plants, "local")


@pytest.mark.slow
@_fuzz(600)
@given(target=TARGETS, p=VALUES, q=VALUES, plants=PLANTS)
def test_store_targets_and_parameters_stay_in_the_root_at_length(
    target: str, p: str, q: str, plants: set[str]
) -> None:
    check_one(target, {"p": p, "q": q}, plants, "local")


@pytest.mark.slow
@pytest.mark.spark
@_fuzz(60)
@given(target=TARGETS, p=VALUES, q=VALUES, plants=PLANTS)
def test_spark_store_targets_and_parameters_stay_in_the_root(
    spark: Any, target: str, p: str, q: str, plants: set[str]
) -> None:
    check_one(target, {"p": p, "q": q}, plants, "spark", spark)
