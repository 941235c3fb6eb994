"""The daily loop in a real browser, against ``make dev``'s stack (``make test-ui``).

A copy of the example project with its own generated data runs under ``scripts/dev.py`` (a warm
Spark Connect server and ``dagster dev``, on free ports, with a temporary ``DAGSTER_HOME``).
Headless Chromium (Debian's ``chromium``, driven by playwright: no browser download) then:

1. materializes ``orders_enriched`` with the asset page's Materialize button;
2. after bad signup dates land in the CRM export, materializes it again: the store op (where Spark runs
   the plan) fails, the ops before it succeeded;
3. with the file repaired, clicks "Re-execute > From failure" on the failed run's page: the new
   run succeeds;
4. checks the asset page: its column schema, its row count and its code version.

Screenshots of the lineage, the re-executed run and the asset page go to ``DRILL_UI_SCREENSHOTS``
(``make screenshot``: ``docs/``) or the test's temporary directory.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dev_stack import DevStack, example_project, materialize_examples

pytestmark = pytest.mark.ui

CHROMIUM = os.environ.get("DRILL_CHROMIUM", "/usr/bin/chromium")
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ASSET = "orders_enriched"
GROUPS = ("sources", "ingest", "behaviour", "sales")  # examples/plans/drill_project.yaml
BAD_DATE = "2023-13-45"  # to_date() fails on it when the store runs the plan
RUN_TIMEOUT = 600  # seconds; a run takes 10-20 s warm on a quiet machine, minutes under load
UI_TIMEOUT = 120_000  # milliseconds


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevStack]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no Chromium at {CHROMIUM}: apt-get install -y chromium")
    root = tmp_path_factory.mktemp("ui")
    project = example_project(root)
    home = root / "dagster_home"
    home.mkdir()
    if os.environ.get("DRILL_UI_SCREENSHOTS"):
        materialize_examples(project, home)  # the lineage screenshot shows every asset's rows
    with DevStack(project, home) as running:
        assert running.spark_remote, running.log_tail()
        yield running
    remote = running.spark_remote
    assert remote is not None
    host, port = remote.removeprefix("sc://").split(":")
    with socket.socket() as sock:
        assert sock.connect_ex((host, int(port))) != 0, "Spark Connect still listens"


@pytest.fixture(scope="module")
def page(stack: DevStack) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        try:
            yield browser.new_page(viewport={"width": 1600, "height": 900})
        finally:
            browser.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    wanted = os.environ.get("DRILL_UI_SCREENSHOTS")
    return Path(wanted) if wanted else tmp_path_factory.mktemp("screenshots")


def _open(page: Any, stack: DevStack, path: str) -> None:
    # a fresh DAGSTER_HOME greets the first visitor with a dialog over the page: seen already
    stack.graphql("mutation { setNuxSeen }")
    page.goto(f"{stack.url}{path}", wait_until="domcontentloaded", timeout=UI_TIMEOUT)


def _materialize(page: Any, stack: DevStack) -> str:
    """Click the asset page's Materialize button; the id of the run it launched."""
    known = set(stack.run_ids())
    _open(page, stack, f"/assets/{ASSET}")
    button = page.get_by_role("button").filter(has_text=re.compile(r"^\s*Materialize\s*$"))
    button.wait_for(timeout=UI_TIMEOUT)
    button.click()
    return stack.new_run(known)


def _failed_steps(run: dict[str, Any]) -> list[str]:
    return [s["stepKey"] for s in run["stepStats"] if s["status"] == "FAILURE"]


def test_materialize_fail_repair_and_reexecute_from_failure(
    stack: DevStack, page: Any, shots: Path
) -> None:
    try:
        daily_loop(stack, page, shots)
    except BaseException:
        page.screenshot(path=str(_shot(shots, "failure.png")))  # what the browser showed
        raise


def daily_loop(stack: DevStack, page: Any, shots: Path) -> None:
    """Materialize, break, fail, repair, re-execute from failure, then read the asset page."""
    csv = stack.project.raw / "customers.csv"
    good = csv.read_text()

    first = stack.wait_run(_materialize(page, stack), RUN_TIMEOUT)
    assert first["status"] == "SUCCESS", (first, stack.log_tail())

    header, *rows = good.splitlines()
    csv.write_text(
        "\n".join([header, *(r.rsplit(",", 1)[0] + f",{BAD_DATE}" for r in rows)]) + "\n"
    )
    broken = stack.wait_run(_materialize(page, stack), RUN_TIMEOUT)
    assert broken["status"] == "FAILURE", broken
    (failed,) = _failed_steps(broken)
    assert "store_5" in failed, broken  # the plan runs (and meets the bad dates) at its store
    succeeded = [s["stepKey"] for s in broken["stepStats"] if s["status"] == "SUCCESS"]
    assert any("scan_1" in step for step in succeeded), broken

    csv.write_text(good)
    known = set(stack.run_ids())
    _open(page, stack, f"/runs/{broken['runId']}")
    page.get_by_text("Re-execute all (*)").wait_for(timeout=UI_TIMEOUT)
    # the caret beside "Re-execute all (*)" opens the other re-execution choices; both
    # buttons stay disabled until the run's logs have loaded (a click waits for that)
    menu = page.locator("button:has(> [aria-label='arrow_drop_down'])")
    menu.first.click(timeout=UI_TIMEOUT)
    page.get_by_text("From failure", exact=True).click(timeout=UI_TIMEOUT)
    again = stack.wait_run(stack.new_run(known), RUN_TIMEOUT)
    assert again["parentRunId"] == broken["runId"], again
    assert again["status"] == "SUCCESS", (again, stack.log_tail())
    ran = {s["stepKey"] for s in again["stepStats"]}
    assert failed in ran, again
    assert not any("scan_1" in step for step in ran), again  # only from the failure on

    _open(page, stack, f"/runs/{again['runId']}")
    page.get_by_text("Success", exact=True).first.wait_for(timeout=UI_TIMEOUT)
    page.wait_for_timeout(2_000)
    page.screenshot(path=str(_shot(shots, "run.png")))

    rows = _latest_row_count(stack)
    _open(page, stack, f"/assets/{ASSET}")
    for column in ("order_id", "customer_name", "signup_date", "total_usd"):
        page.get_by_text(column, exact=True).first.wait_for(timeout=UI_TIMEOUT)
    page.get_by_text("Row count", exact=True).wait_for(timeout=UI_TIMEOUT)
    page.get_by_text(f"{rows:,}", exact=True).first.wait_for(timeout=UI_TIMEOUT)
    page.wait_for_timeout(1_000)
    page.screenshot(path=str(_shot(shots, "asset.png")))
    # the code version is in the definition's "Compute details", folded at first
    page.get_by_text("Compute details", exact=True).click(timeout=UI_TIMEOUT)
    page.get_by_text("Code version", exact=True).wait_for(timeout=UI_TIMEOUT)
    page.get_by_text(_code_version(stack), exact=True).first.wait_for(timeout=UI_TIMEOUT)

    _lineage(page, stack, _shot(shots, "lineage.png"))


def _latest_row_count(stack: DevStack) -> int:
    query = """
    query Asset($key: AssetKeyInput!) {
      assetOrError(assetKey: $key) {
        ... on Asset { assetMaterializations(limit: 1) {
          metadataEntries { label ... on IntMetadataEntry { intValue } } } }
      }
    }"""
    asset = stack.graphql(query, {"key": {"path": [ASSET]}})["assetOrError"]
    (latest,) = asset["assetMaterializations"]
    (count,) = [
        e["intValue"] for e in latest["metadataEntries"] if e["label"] == "dagster/row_count"
    ]
    assert count > 0
    return count


def _code_version(stack: DevStack) -> str:
    query = """
    query Node($key: AssetKeyInput!) {
      assetNodeOrError(assetKey: $key) { ... on AssetNode { opVersion } }
    }"""
    version = stack.graphql(query, {"key": {"path": [ASSET]}})["assetNodeOrError"]["opVersion"]
    assert version, "the asset has no code version"
    return version


def _lineage(page: Any, stack: DevStack, out: Path) -> None:
    """The global asset lineage, every group expanded and the graph fitted to the view."""
    _open(page, stack, "/asset-groups")
    page.locator(f'div[data-tooltip="{GROUPS[0]}"]').first.wait_for(timeout=UI_TIMEOUT)
    page.get_by_text("Hide navigation").first.click()
    for group in GROUPS:
        page.locator(f'div[data-tooltip="{group}"]').first.click()
        page.wait_for_timeout(1_000)
    # the expanded groups are remembered: a reload lays them out fitted to the view
    page.reload(wait_until="domcontentloaded", timeout=UI_TIMEOUT)
    page.get_by_text("events_cleaned", exact=True).first.wait_for(timeout=UI_TIMEOUT)
    page.wait_for_timeout(3_000)  # let the zoom-to-fit animation settle
    page.screenshot(path=str(out))


def _shot(directory: Path, name: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    return directory / name
