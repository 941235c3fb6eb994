"""Scans resolved once per process: remembered only over settled files, by path, size and
modification time; a changed, fresh or missing file, or a failed resolution, resolves again."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from engine.exec.spark import scan_resolution
from engine.exec.spark.resolved_scans import SETTLED_SECONDS, ResolvedScans
from engine.exec.spark.scan_resolution import resolve_scan
from engine.storage.engines import create_engine

NOW = 1_800_000_000.0


def settled(path: Path, *, age: float = 60.0) -> Path:
    """``path`` as if last written ``age`` seconds before NOW."""
    os.utime(path, (NOW - age, NOW - age))
    return path


class Resolver:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        return f"resolution {self.calls}"


@pytest.fixture
def scans() -> ResolvedScans[str]:
    return ResolvedScans(clock=lambda: NOW)


def test_settled_files_resolve_once(tmp_path: Path, scans: ResolvedScans[str]) -> None:
    files = [tmp_path / "a.json", tmp_path / "b.json"]
    for f in files:
        f.touch()
        settled(f)
    resolve = Resolver()
    assert scans.get("scan", files, resolve) == "resolution 1"
    assert scans.get("scan", files, resolve) == "resolution 1"
    assert resolve.calls == 1


def test_another_request_over_the_same_files_resolves_again(
    tmp_path: Path, scans: ResolvedScans[str]
) -> None:
    (tmp_path / "a.json").touch()
    files = [settled(tmp_path / "a.json")]
    resolve = Resolver()
    scans.get("scan with projection [a]", files, resolve)
    assert scans.get("scan with projection [b]", files, resolve) == "resolution 2"


def test_a_file_changed_in_size_or_time_resolves_again(
    tmp_path: Path, scans: ResolvedScans[str]
) -> None:
    path = tmp_path / "a.json"
    path.write_text("{}\n")
    settled(path)
    resolve = Resolver()
    scans.get("scan", [path], resolve)
    path.write_text('{"x": 1}\n')
    settled(path)  # same time, new size
    assert scans.get("scan", [path], resolve) == "resolution 2"
    settled(path, age=30)  # same size, new time
    assert scans.get("scan", [path], resolve) == "resolution 3"


def test_fresh_files_are_read_every_time(tmp_path: Path, scans: ResolvedScans[str]) -> None:
    path = tmp_path / "a.json"
    path.touch()
    settled(path, age=SETTLED_SECONDS / 2)  # its next write may keep size and time
    resolve = Resolver()
    scans.get("scan", [path], resolve)
    scans.get("scan", [path], resolve)
    assert resolve.calls == 2


def test_a_missing_file_or_a_failure_is_not_remembered(
    tmp_path: Path, scans: ResolvedScans[str]
) -> None:
    resolve = Resolver()
    scans.get("scan", [tmp_path / "missing.json"], resolve)
    scans.get("scan", [tmp_path / "missing.json"], resolve)
    assert resolve.calls == 2

    def failing() -> str:
        raise ValueError("bad record")

    with pytest.raises(ValueError):
        scans.get("scan", [], failing)
    assert scans.get("scan", [], resolve) == "resolution 3"


def test_the_oldest_resolution_makes_room() -> None:
    small: ResolvedScans[str] = ResolvedScans(capacity=2, clock=lambda: NOW)
    resolve = Resolver()
    for request in ("a", "b", "a", "c"):  # "a" used again: "b" is the oldest
        small.get(request, [], resolve)
    assert small.get("a", [], resolve) == "resolution 1"
    assert small.get("b", [], resolve) == "resolution 4"


def test_resolve_scan_samples_settled_files_once_per_process(tmp_path: Path) -> None:
    """The real scan: a file whose bytes change but whose size and time do not is not read again
    (that is the rule); a new time reads it."""
    path = tmp_path / "events.json"
    path.write_text('{"x": 12}\n')
    old = os.stat(path).st_mtime - 60
    os.utime(path, (old, old))
    engine = create_engine("fs", {"type": "fs", "root": str(tmp_path)})
    scan_resolution._RESOLVED.clear()
    first = resolve_scan(engine, {"path": "events.json"})
    assert str(first.output_types["x"]) == "BIGINT"

    path.write_text('{"x":"a"}\n')  # the same size
    os.utime(path, (old, old))
    assert resolve_scan(engine, {"path": "events.json"}) is first

    os.utime(path, (old + 1, old + 1))
    assert str(resolve_scan(engine, {"path": "events.json"}).output_types["x"]) == "VARCHAR"


def test_resolve_scan_reads_fresh_files_every_time(tmp_path: Path) -> None:
    path = tmp_path / "events.json"
    path.write_text(json.dumps({"x": 1}) + "\n")
    engine = create_engine("fs", {"type": "fs", "root": str(tmp_path)})
    first = resolve_scan(engine, {"path": "events.json"})
    path.write_text(json.dumps({"x": "a"}) + "\n")
    second = resolve_scan(engine, {"path": "events.json"})
    assert (str(first.output_types["x"]), str(second.output_types["x"])) == ("BIGINT", "VARCHAR")
