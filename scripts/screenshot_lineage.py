"""Take the README's lineage screenshot in a real browser: ``docs/lineage.png``.

1. materializes the examples for one partition (``examples/demo.py``, local executor unless
   ``--executor spark``) into a temporary ``DAGSTER_HOME``, so the graph shows row counts and
   fresh materializations (``--no-materialize`` skips it);
2. starts ``dagster dev -w workspace.yaml`` bound to 127.0.0.1 on a free port, in its own process
   group, and waits for ``/server_info`` and for the code location to load;
3. opens the global asset lineage in headless Chromium (Debian's ``chromium``, driven by
   playwright with ``executable_path``: playwright's own browser downloads are not needed) and
   saves the PNG;
4. stops dagster with SIGTERM to its process group (SIGKILL only if it does not exit).

Setup once, then run from the repository root::

    apt-get install -y chromium && .venv/bin/pip install -e '.[screenshot]'
    .venv/bin/python scripts/screenshot_lineage.py [--out docs/lineage.png] [--chromium /usr/bin/chromium]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
GROUPS = ("sources", "ingest", "behaviour", "sales")  # examples/plans/drill_project.yaml
ASSETS_QUERY = '{"query": "{ assetNodes { assetKey { path } } }"}'


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def fetch(url: str, body: str | None = None) -> Any:
    data = body.encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def wait_for_assets(url: str, server: subprocess.Popen[bytes], log: Path, timeout: float) -> int:
    """Wait until the server answers and the code location has loaded its assets."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            fetch(f"{url}/server_info")
            nodes = (fetch(f"{url}/graphql", ASSETS_QUERY).get("data") or {}).get("assetNodes")
            if nodes:
                return len(nodes)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"dagster dev did not come up; its log:\n{log.read_text()}")
        time.sleep(0.5)


def _dismiss_welcome(page: Any) -> None:
    """Close the 'Join the Dagster community' dialog a fresh DAGSTER_HOME shows, if it comes."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    with contextlib.suppress(PlaywrightTimeout):
        page.get_by_text("Skip", exact=True).first.click(timeout=10_000)


def stop(server: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the server's process group, then SIGKILL if it does not exit in 30 s."""
    if server.poll() is not None:
        return
    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=10)


def screenshot(url: str, path: str, out: Path, chromium: str, width: int, height: int) -> None:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.goto(f"{url}{path}", wait_until="networkidle", timeout=120_000)
            out.parent.mkdir(parents=True, exist_ok=True)
            failed = out.with_suffix(".failed.png")
            try:
                # with several groups the graph starts collapsed: one node per group
                page.locator(f'div[data-tooltip="{GROUPS[0]}"]').first.wait_for(timeout=90_000)
                _dismiss_welcome(page)
                page.get_by_text("Hide navigation").first.click()
                for group in GROUPS:
                    page.locator(f'div[data-tooltip="{group}"]').first.click()
                    page.wait_for_timeout(1_000)
                # the expanded groups are remembered: a reload lays them out fitted to the view
                page.reload(wait_until="networkidle", timeout=120_000)
                _dismiss_welcome(page)
                page.get_by_text("events_cleaned", exact=True).first.wait_for(timeout=90_000)
            except PlaywrightTimeout:
                page.screenshot(path=str(failed))
                raise SystemExit(
                    f"no asset graph at {url}{path} in time; what the page showed: {failed}"
                ) from None
            page.wait_for_timeout(3_000)  # let the zoom-to-fit animation settle
            page.screenshot(path=str(out))
        finally:
            browser.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "lineage.png")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    parser.add_argument("--executor", choices=["local", "spark"], default="local")
    parser.add_argument("--no-materialize", action="store_true")
    parser.add_argument("--size", default="1600x900", help="viewport WIDTHxHEIGHT")
    parser.add_argument("--page", default="/asset-groups", help="the UI page to capture")
    parser.add_argument("--timeout", type=float, default=180.0)
    args = parser.parse_args(argv)
    if not Path(args.chromium).exists():
        raise SystemExit(f"no Chromium at {args.chromium}: apt-get install -y chromium")
    width, height = (int(n) for n in args.size.split("x"))

    with tempfile.TemporaryDirectory(prefix="drill-screenshot-") as home:
        env = {**os.environ, "DAGSTER_HOME": home, "PYTHONUNBUFFERED": "1"}
        if not args.no_materialize:
            demo = [sys.executable, str(ROOT / "examples" / "demo.py"), "--executor", args.executor]
            subprocess.run(demo, cwd=ROOT, env=env, check=True)
        port = free_port()
        log_path = Path(home) / "dagster-dev.log"
        command = [str(BIN / "dagster"), "dev", "-w", "workspace.yaml"]
        command += ["-h", "127.0.0.1", "-p", str(port)]
        with log_path.open("w") as log:
            server = subprocess.Popen(
                command,
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: SIGTERM reaches every child
            )
            try:
                url = f"http://127.0.0.1:{port}"
                count = wait_for_assets(url, server, log_path, args.timeout)
                screenshot(url, args.page, args.out, args.chromium, width, height)
            finally:
                stop(server)
    print(f"{args.out}: lineage of {count} assets ({args.out.stat().st_size // 1024} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
