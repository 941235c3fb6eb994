"""Shared test fixtures: where the conformance corpus lives, and one SparkSession per test session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

# Timing depends on the machine's load (CI shares two cores with Spark): no per-example deadline.
settings.register_profile("drill", deadline=None)
settings.load_profile("drill")

CACHE_DIR_ENV = "DRILL_DAGSTER_CACHE_DIR"  # drill_dagster.outline_cache's: no import of it here

REPO_ROOT = Path(__file__).resolve().parents[1]
CONFORMANCE_DIR = (REPO_ROOT / ".." / "shared" / "conformance").resolve()


def conformance_path(*parts: str) -> Path:
    """A path inside the conformance corpus (``../shared/conformance`` beside the repository)."""
    return CONFORMANCE_DIR.joinpath(*parts)


@pytest.fixture(scope="session", autouse=True)
def kept_plan_outlines(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Plan outlines that loads keep (:mod:`drill_dagster.outline_cache`) go to a directory of
    the test session, for the processes the tests start too, not to the user's cache."""
    directory = tmp_path_factory.mktemp("plan-outlines")
    before = os.environ.get(CACHE_DIR_ENV)
    os.environ[CACHE_DIR_ENV] = str(directory)
    yield directory
    if before is None:
        os.environ.pop(CACHE_DIR_ENV, None)
    else:
        os.environ[CACHE_DIR_ENV] = before


@pytest.fixture(scope="session")
def conformance_dir() -> Path:
    if not CONFORMANCE_DIR.is_dir():
        pytest.fail(
            f"conformance corpus not found at {CONFORMANCE_DIR} (shared/ must sit beside the repo)"
        )
    return CONFORMANCE_DIR


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory):
    """One local SparkSession for the whole test session (Spark start-up costs ~10 s). Its
    catalog's warehouse is a temporary directory, not ``spark-warehouse/`` in the working
    directory (the catalog engine's tests create databases)."""
    from engine.exec.spark.session import SparkConfig, create_session

    warehouse = str(tmp_path_factory.mktemp("spark-warehouse"))
    config = SparkConfig(
        master="local[2]", shuffle_partitions=2, conf={"spark.sql.warehouse.dir": warehouse}
    )
    session = create_session(config)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def postgres():
    """One PostgreSQL server for the test session (Debian's binaries; see tests/support/postgres)."""
    from tests.support.postgres import binaries_missing, start_server

    missing = binaries_missing()
    if missing is not None:
        pytest.skip(missing)
    server = start_server()
    yield server
    server.stop()
