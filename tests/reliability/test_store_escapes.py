"""Stores cannot write outside their root, nor lose data there: a target is a literal path, links
planted among a store's own files are refused, a directory swapped for a link during a write is
not followed, parameters are one path component, and a root may have any name.

Every test builds a root beside an ``outside`` directory holding data, and checks that ``outside``
is exactly as it was after the run, whatever the run did.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from reliability_support import scan, to_queue

from engine import run_plan
from engine.errors import DrillError, PlanError, StorageError

EXECUTORS = ["local", pytest.param("spark", marks=pytest.mark.spark)]


def plan_of(root: Path, *ops: dict[str, Any]) -> dict[str, Any]:
    return {
        "storage": {"fs": {"type": "fs", "root": str(root)}, "q": {"type": "queue"}},
        "query": list(ops),
    }


def rows(op_id: int = 1) -> dict[str, Any]:
    return {
        "@id": op_id,
        "op": "constant",
        "content": [{"k": "a", "v": 1}, {"k": "b", "v": 2}, {"k": "a", "v": 3}],
    }


def store(op_id: int, input_id: int, path: str, **target: Any) -> dict[str, Any]:
    return {
        "@id": op_id,
        "op": "store",
        "input": input_id,
        "storageengine": "fs",
        "target": {"path": path, "format": "json", **target},
    }


def snapshot(directory: Path) -> dict[str, str]:
    """Every entry below ``directory`` (links not followed), with file contents."""
    found = {}
    for folder, subdirs, files in os.walk(directory):
        for name in subdirs + files:
            path = Path(folder, name)
            rel = str(path.relative_to(directory))
            if path.is_symlink():
                found[rel] = "-> " + os.readlink(path)
            elif path.is_file():
                found[rel] = path.read_text()
            else:
                found[rel] = "<dir>"
    return found


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    """``root`` beside ``outside``, which holds a dataset ``important`` that must survive."""
    root = tmp_path / "lake"
    outside = tmp_path / "outside"
    root.mkdir()
    (outside / "important").mkdir(parents=True)
    (outside / "important" / "part-0.json").write_text('{"keep": 1}\n')
    return root


def run(plan: dict[str, Any], executor: str, request: pytest.FixtureRequest, **kw: Any) -> Any:
    spark = request.getfixturevalue("spark") if executor == "spark" else None
    return run_plan(plan, executor=executor, spark=spark, **kw)


# ---------------------------------------------------------------- 1: a target is a literal path


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("name", ["ev*l", "ev?l", "ev[l", "ev[i]l"])
def test_a_glob_character_in_a_target_does_not_skip_the_link_check(
    lake: Path, request: pytest.FixtureRequest, executor: str, name: str
) -> None:
    outside = lake.parent / "outside"
    (lake / name).symlink_to("../outside", target_is_directory=True)
    before = snapshot(outside)
    with pytest.raises(StorageError) as caught:
        run(plan_of(lake, rows(), store(2, 1, f"{name}/important")), executor, request)
    assert "symbolic link" in str(caught.value) and "store 2" in str(caught.value)
    assert snapshot(outside) == before


@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_target_holding_glob_characters_is_written_under_that_very_name(
    lake: Path, request: pytest.FixtureRequest, executor: str
) -> None:
    (lake / "a").mkdir()  # a glob would match it; the literal name is another directory
    run(plan_of(lake, rows(), store(2, 1, "[ab]*?/x")), executor, request)
    assert (lake / "[ab]*?" / "x").is_dir() and not (lake / "a" / "x").exists()


# ---------------------------------------------------------------- 2: the store's own files


@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_metadata_directory_linked_out_of_the_root_is_not_written_through(
    lake: Path, request: pytest.FixtureRequest, executor: str
) -> None:
    outside = lake.parent / "outside"
    (lake / "_drill_metadata").symlink_to(outside, target_is_directory=True)
    before = snapshot(outside)
    with pytest.raises(StorageError) as caught:
        run(plan_of(lake, rows(), store(2, 1, "sales")), executor, request)
    assert "symbolic link" in str(caught.value)
    assert snapshot(outside) == before


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("points_to", ["outside/important", "outside/new.lock"])
def test_a_lock_file_linked_out_of_the_root_is_not_opened(
    lake: Path, request: pytest.FixtureRequest, executor: str, points_to: str
) -> None:
    outside = lake.parent / "outside"
    (lake / "out").mkdir()
    (lake / "out" / ".sales.lock").symlink_to(lake.parent / points_to)
    before = snapshot(outside)
    with pytest.raises(StorageError) as caught:
        run(plan_of(lake, rows(), store(2, 1, "out/sales")), executor, request)
    assert "symbolic link" in str(caught.value)
    assert snapshot(outside) == before
    assert not (lake / "out" / "sales").exists()


# ---------------------------------------------------------------- 3: a swap racing the write


def _swap_to_outside(directory: Path) -> None:
    """Replace ``directory`` by a link to ``outside`` (its content moved aside, kept)."""
    directory.rename(directory.with_name(directory.name + "_moved"))
    directory.symlink_to(directory.parent.parent / "outside", target_is_directory=True)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_directory_swapped_for_a_link_while_a_store_writes_is_not_followed(
    lake: Path, request: pytest.FixtureRequest, executor: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store's parent directory becomes a link out of the root after the checks, while the
    partitioned store writes its files: nothing may be written or deleted outside."""
    outside = lake.parent / "outside"
    (lake / "events").mkdir()
    before = snapshot(outside)
    swapped: list[Path] = []

    def swap_then(original: Any) -> Any:
        def write(*args: Any, **kwargs: Any) -> Any:
            if not swapped:
                _swap_to_outside(lake / "events")
                swapped.append(lake / "events")
            return original(*args, **kwargs)

        return write

    if executor == "spark":
        import engine.exec.spark.stores as spark_stores

        monkeypatch.setattr(spark_stores, "_spark_write", swap_then(spark_stores._spark_write))
    else:
        import engine.storage.store as local_store

        monkeypatch.setattr(local_store, "_write_part", swap_then(local_store._write_part))
    plan = plan_of(lake, rows(), store(2, 1, "events/important", partitionBy=["k"]))
    with contextlib.suppress(DrillError):  # refusing is fine; writing outside is not
        run(plan, executor, request)
    assert swapped
    assert snapshot(outside) == before
    # The version went where the checks confirmed: the directory first opened, now moved aside.
    moved = lake / "events_moved" / "important"
    assert sorted(p.name for p in moved.iterdir()) == ["k=a", "k=b"]


def _race(lake: Path, stores: int) -> None:
    """``stores`` partitioned stores while another thread keeps swapping their parent directory
    for a link out of the root and back."""
    outside = lake.parent / "outside"
    events, moved = lake / "events", lake / "events_moved"
    events.mkdir()
    before = snapshot(outside)
    stop = threading.Event()

    def flip() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                events.rename(moved)
                events.symlink_to(outside, target_is_directory=True)
                time.sleep(0.001)
                events.unlink()
                moved.rename(events)

    flipper = threading.Thread(target=flip, daemon=True)
    flipper.start()
    plan = plan_of(lake, rows(), store(2, 1, "events/important", partitionBy=["k"]))
    try:
        for _ in range(stores):
            with contextlib.suppress(DrillError):
                run_plan(plan)
    finally:
        stop.set()
        flipper.join()
    assert snapshot(outside) == before


def test_stores_racing_a_thread_that_swaps_their_directory_never_write_outside(
    lake: Path,
) -> None:
    _race(lake, 8)


@pytest.mark.slow
def test_stores_racing_a_thread_that_swaps_their_directory_at_length(lake: Path) -> None:
    _race(lake, 300)


# ---------------------------------------------------------------- 4: parameters


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("value", ["../orders", "..", ".", "", "a/b", "/orders", "x\x00y"])
def test_a_parameter_value_is_one_path_component(
    lake: Path, request: pytest.FixtureRequest, executor: str, value: str
) -> None:
    run(plan_of(lake, rows(), store(2, 1, "orders")), executor, request)
    orders = snapshot(lake / "orders")
    plan = plan_of(lake, rows(), store(2, 1, "events/${day}"))
    with pytest.raises(PlanError) as caught:
        run(plan, executor, request, params={"day": value})
    assert "parameter 'day'" in str(caught.value) and "store 2" in str(caught.value)
    assert snapshot(lake / "orders") == orders
    assert not (lake / "events").exists()


def test_a_parameter_value_may_hold_any_other_character(lake: Path) -> None:
    day = "2024-01-02 *?[x] ü"
    run_plan(plan_of(lake, rows(), store(2, 1, "events/${day}")), params={"day": day})
    assert (lake / "events" / day).is_dir()


# ---------------------------------------------------------------- 6: any root name


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("name", ["lake[1]", "lake*", "lake?", "la[ke"])
def test_a_root_whose_name_holds_glob_characters_is_a_root_like_any_other(
    tmp_path: Path, request: pytest.FixtureRequest, executor: str, name: str
) -> None:
    root = tmp_path / name
    root.mkdir()
    (tmp_path / "lake1").mkdir()  # what a glob of the root's name would match instead
    run(plan_of(root, rows(), store(2, 1, "sales")), executor, request)
    result = run(plan_of(root, scan(1, "sales"), to_queue(2, 1)), executor, request)
    assert sorted(r["r"]["v"] for r in result.records()) == [1, 2, 3]
    assert list((tmp_path / "lake1").iterdir()) == []


# ---------------------------------------------------------------- 7: Dagster's allowed roots


def _project(tmp_path: Path, root: str, yaml_text: str = "executor: local\n") -> Path:
    plans = tmp_path / "project" / "plans"
    plans.mkdir(parents=True)
    plan = plan_of(Path(root), rows(), store(2, 1, "sales"))
    (plans / "copy.json").write_text(json.dumps(plan))
    (plans / "drill_project.yaml").write_text(yaml_text)
    return plans


def test_a_plan_root_outside_the_allowed_directories_is_refused_at_load_time(
    tmp_path: Path,
) -> None:
    from drill_dagster import load_definitions
    from drill_dagster.errors import DrillDefinitionsError

    etc = tmp_path / "etc"  # a stand-in for /etc
    etc.mkdir()
    (etc / "passwd").write_text("root:x:0:0\n")
    plans = _project(tmp_path, str(etc))
    with pytest.raises(DrillDefinitionsError) as caught:
        load_definitions(plans)
    message = str(caught.value)
    assert str(plans / "copy.json") in message and "$.storage.fs.root" in message, message
    assert "allowed_roots" in message
    assert snapshot(etc) == {"passwd": "root:x:0:0\n"}


def test_the_default_allows_the_project_directory_and_the_file_may_allow_more(
    tmp_path: Path,
) -> None:
    from drill_dagster import load_definitions
    from drill_dagster.errors import DrillDefinitionsError

    inside = _project(tmp_path / "a", "../data/lake")
    assert load_definitions(inside).resolve_all_asset_specs()
    elsewhere = tmp_path / "b" / "lake"
    allowed = _project(tmp_path / "b", str(elsewhere), f"allowed_roots: ['{elsewhere}']\n")
    assert load_definitions(allowed).resolve_all_asset_specs()
    # The argument wins over the file: here it allows only the project's own data directory.
    with pytest.raises(DrillDefinitionsError):
        load_definitions(allowed, allowed_roots=[tmp_path / "b" / "project" / "data"])
    # A link inside an allowed directory does not widen it.
    outside = tmp_path / "c" / "outside"
    outside.mkdir(parents=True)
    (tmp_path / "c" / "project").mkdir(parents=True)
    (tmp_path / "c" / "project" / "out").symlink_to(outside, target_is_directory=True)
    with pytest.raises(DrillDefinitionsError):
        load_definitions(_project(tmp_path / "c", "../out"))


# ---------------------------------------------------------------- 5: hard links, and the README

README = Path(__file__).resolve().parents[2] / "README.md"


def reliability_rows() -> list[str]:
    text = README.read_text()
    table = text[text.index("## Errors and reliability") :].split("\n## ")[0]
    return [line for line in table.splitlines() if line.startswith("| ") and "---" not in line]


def test_a_hard_link_to_a_file_outside_is_read_as_the_readme_says(lake: Path) -> None:
    """Roots are trusted directories: a hard link is the file itself, and is read."""
    secret = lake.parent / "outside" / "important" / "part-0.json"
    os.link(secret, lake / "linked.json")
    result = run_plan(plan_of(lake, scan(1, "linked.json"), to_queue(2, 1)))
    assert result.records() == [{"r": {"keep": 1}}]
    row = next(r for r in reliability_rows() if "hard link" in r)
    assert "roots are trusted directories" in row


def test_every_reliability_row_names_a_test_file_that_exists() -> None:
    here = Path(__file__).resolve().parent
    tests = Path(__file__).resolve().parents[1]
    for row in reliability_rows()[1:]:
        named = [c.strip(" `") for c in row.strip("|").split("|")[-1].split(",")]
        for name in named:
            assert name.endswith(".py"), row
            assert (here / name).exists() or list(tests.rglob(name)), f"{name} in: {row}"


def test_a_plan_may_let_a_parameter_span_directories_and_each_is_checked(lake: Path) -> None:
    plan = plan_of(lake, rows(), store(2, 1, "events/${day:path}"))
    run_plan(plan, params={"day": "2024/01/02"})
    assert (lake / "events" / "2024" / "01" / "02").is_dir()
    for value in ("../orders", "2024/../../x", "a//b", "x\x00"):
        with pytest.raises(PlanError, match="parameter 'day' as a path"):
            run_plan(plan, params={"day": value})
