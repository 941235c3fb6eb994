"""The example project: its generator, its plans, and every plan run on the local executor.

The plans run in lineage order on freshly generated data in a temporary project (the plans copied
next to a ``data`` directory, so their ``../data/...`` roots resolve). Every expected number is
computed here, independently of the engine, from the generated files with the standard library
and pyarrow.
"""

from __future__ import annotations

import contextlib
import csv
import doctest
import importlib.util
import io
import json
import math
import shutil
import sys
from collections import Counter, defaultdict
from datetime import UTC, date, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import run_plan
from engine.cli import run as cli_run
from engine.plan.operators import OP_NAMES

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
PLANS = EXAMPLES / "plans"
DAYS = 4
SCALE = 0.5
TOP_LINES = 250
SESSION_GAP_S = 1800
IN_STORE_LINES = [("SKU-0107", 4, 12299), ("SKU-0010", 1, 1299)]

# Plan -> the plans whose stores it reads (the lineage chain the README describes).
LINEAGE = {
    "events_cleaned": set(),
    "sessions": {"events_cleaned"},
    "daily_activity": {"sessions"},
    "orders_enriched": set(),
    "order_items": {"orders_enriched"},
    "customer_summary": {"sessions", "orders_enriched"},
}
"""The plans over the generated files, each with the plans whose stores it reads."""

TABLE_PLANS = ("business_customers",)
"""The plans that read and write tables (PostgreSQL, the Spark catalog): tests/drill_dagster/
test_example_tables.py runs them against a real server."""


def _load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("examples_generate", EXAMPLES / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being created
    spec.loader.exec_module(module)
    return module


generate_module = _load_generator()


def _plan_json(name: str) -> dict[str, Any]:
    return json.loads((PLANS / f"{name}.json").read_text())


def _ops(operators: list[dict[str, Any]]) -> list[str]:
    found = []
    for op in operators:
        found.append(op["op"])
        found += _ops(op.get("do", []))
    return found


def _read_events(raw: Path) -> list[dict[str, Any]]:
    events = []
    for path in sorted((raw / "events").glob("*/*.json")):
        for line in path.read_text().splitlines():
            event = json.loads(line)
            event["_dir"] = path.parent.name
            events.append(event)
    return events


def _customers(raw: Path) -> dict[int, dict[str, str]]:
    with (raw / "customers.csv").open(newline="") as handle:
        return {int(row["customer_id"]): row for row in csv.DictReader(handle)}


def _epoch_s(ts: str) -> int:
    moment = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    return math.floor(moment.timestamp())


def _cleaned(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """events_cleaned's rows, computed in Python from the raw events."""
    rows = []
    for e in events:
        user = e.get("user") or {}
        if user.get("id") is None or e["kind"] == "heartbeat":
            continue
        rows.append(
            {
                "event_id": e["id"],
                "user_id": user["id"],
                "ts": e["ts"],
                "day": e["_dir"],
                "kind": e["kind"],
                "country": (user.get("country") or "unknown").upper(),
                "amount_usd": (e.get("cart") or {}).get("total", 0) / 100.0,
            }
        )
    return rows


def _sessions(cleaned: list[dict[str, Any]]) -> dict[str, str]:
    """event id -> session id (``user-n``): a new session after 30 minutes of silence."""
    by_user: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in cleaned:
        by_user[row["user_id"]].append(row)
    session_of = {}
    for user_id, rows in by_user.items():
        rows.sort(key=lambda r: (r["ts"], r["event_id"]))
        number, previous = 0, None
        for row in rows:
            now = _epoch_s(row["ts"])
            if previous is None or now - previous > SESSION_GAP_S:
                number += 1
            session_of[row["event_id"]] = f"{user_id}-{number}"
            previous = now
    return session_of


# ------------------------------------------------------------------------------ the generator


def test_generator_writes_the_documented_layout(tmp_path: Path) -> None:
    summary = generate_module.generate(tmp_path, days=3, scale=0.2)
    raw = tmp_path / "raw"
    days = ["2024-01-01", "2024-01-02", "2024-01-03"]
    assert sorted(p.name for p in (raw / "events").iterdir()) == days
    assert all((raw / "events" / d / "part-0.json").is_file() for d in days)
    assert sorted(p.name for p in (raw / "orders").iterdir()) == [
        f"orders-{d}.parquet" for d in days
    ]
    with (raw / "customers.csv").open() as handle:
        assert handle.readline().strip() == "customer_id,name,segment,country,signup_date"
    events = _read_events(raw)
    assert summary.events == len(events)
    assert all(e["ts"].startswith(e["_dir"]) for e in events)  # a day directory holds its day
    assert {e["kind"] for e in events} == {"view", "add_to_cart", "purchase", "heartbeat"}
    orders = pq.read_table(raw / "orders")
    assert orders.schema.names == ["order_id", "customer_id", "ts", "total_cents", "items"]
    assert summary.orders == orders.num_rows > 0
    assert summary.customers == len(_customers(raw))
    manifest = json.loads((raw / "_generated.json").read_text())
    assert (manifest["days"], manifest["events"]) == (3, len(events))


def test_generator_leaves_optional_fields_out_of_some_records(tmp_path: Path) -> None:
    generate_module.generate(tmp_path, days=2, scale=0.5)
    events = _read_events(tmp_path / "raw")
    users = [e["user"] for e in events if "user" in e]
    assert 0 < len(users) < len(events)  # some records have no user at all
    assert any("id" not in u for u in users)  # anonymous visitors
    assert any("country" not in u for u in users)
    assert any("device" not in u for u in users)
    assert any("version" not in u["device"] for u in users if "device" in u)
    assert any(u.get("country", "").islower() for u in users)  # mixed case, as trackers send


@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(seed=st.integers(0, 2**32 - 1))
def test_generated_carts_and_orders_agree(
    tmp_path_factory: pytest.TempPathFactory, seed: int
) -> None:
    out = tmp_path_factory.mktemp("gen")
    generate_module.generate(out, days=1, scale=0.1, seed=seed)
    events = _read_events(out / "raw")
    for e in events:
        assert ("cart" in e) == (e["kind"] in ("add_to_cart", "purchase"))
        if "cart" in e:
            items = e["cart"]["items"]
            assert items and e["cart"]["total"] == sum(i["qty"] * i["price_cents"] for i in items)
    purchases = [e for e in events if e["kind"] == "purchase" and "id" in e.get("user", {})]
    orders = pq.read_table(out / "raw" / "orders").to_pylist()
    assert [(o["customer_id"], o["total_cents"], o["items"]) for o in orders] == [
        (e["user"]["id"], e["cart"]["total"], e["cart"]["items"]) for e in purchases
    ]
    assert [o["ts"] for o in orders] == [
        datetime.fromisoformat(e["ts"].replace("Z", "+00:00")).astimezone(UTC) for e in purchases
    ]


def test_generator_is_deterministic_and_idempotent(tmp_path: Path) -> None:
    first = generate_module.generate(tmp_path / "a", days=2, scale=0.1, seed=3)
    generate_module.generate(tmp_path / "b", days=2, scale=0.1, seed=3)
    files = sorted(
        p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file()
    )
    assert files
    for relative in files:
        assert (tmp_path / "a" / relative).read_bytes() == (tmp_path / "b" / relative).read_bytes()

    marker = tmp_path / "a" / "raw" / "customers.csv"
    marker.write_text("customer_id\n")  # a local edit survives a second run without --force
    again = generate_module.generate(tmp_path / "a", days=5, seed=99)
    assert not again.created and (again.days, again.events) == (2, first.events)
    assert marker.read_text() == "customer_id\n"
    forced = generate_module.generate(tmp_path / "a", days=2, scale=0.1, seed=3, force=True)
    assert (
        forced.created
        and marker.read_bytes() == (tmp_path / "b" / "raw" / "customers.csv").read_bytes()
    )
    other = generate_module.generate(tmp_path / "c", days=2, scale=0.1, seed=4)
    assert other.events == first.events  # the volume depends on the days, not the seed
    assert (tmp_path / "c" / "raw" / "customers.csv").read_bytes() != marker.read_bytes()


def test_generator_docstring_examples() -> None:
    result = doctest.testmod(generate_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_generator_command_line(tmp_path: Path) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert generate_module.main(["--out", str(tmp_path), "--days", "1", "--scale", "0.1"]) == 0
        assert generate_module.main(["--out", str(tmp_path), "--days", "1"]) == 0
    first, second = out.getvalue().splitlines()
    assert "events over 1 days" in first
    assert "kept. Use --force to regenerate." in second
    with pytest.raises(SystemExit), contextlib.redirect_stderr(io.StringIO()):
        generate_module.main(["--out", str(tmp_path / "x"), "--days", "0"])


# ------------------------------------------------------------------------------------ the plans


def test_plans_validate() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli_run(["validate", str(PLANS)]) == 0
    assert sorted(out.getvalue().splitlines()) == [
        f"{PLANS / name}.json: ok" for name in sorted([*LINEAGE, *TABLE_PLANS])
    ]


def test_plans_use_every_operator() -> None:
    used = {op for name in LINEAGE for op in _ops(_plan_json(name)["query"])}
    assert set(OP_NAMES) - used == set()


def test_plans_form_the_documented_lineage() -> None:
    stores = {}
    reads: dict[str, set[str]] = {}
    for name in LINEAGE:
        plan = _plan_json(name)
        lake = {k for k, v in plan["storage"].items() if v["root"] == "../data/lake"}
        reads[name] = {
            op["selection"]["path"]
            for op in plan["query"]
            if op["op"] == "scan" and op["storageengine"] in lake
        }
        for op in plan["query"]:
            if op["op"] == "store":
                stores[op["target"]["path"]] = name
    assert {name: {stores[p] for p in paths} for name, paths in reads.items()} == LINEAGE


def _lineage_order() -> list[str]:
    done: list[str] = []
    while len(done) < len(LINEAGE):
        done += sorted(n for n, deps in LINEAGE.items() if n not in done and deps <= set(done))
    return done


# ----------------------------------------------------------------------- running the plans


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated dataset and the example plans, every plan run once in lineage order."""
    root = tmp_path_factory.mktemp("example_project")
    shutil.copytree(PLANS, root / "plans")
    generate_module.generate(root / "data", days=DAYS, scale=SCALE)
    for name in _lineage_order():
        # events_cleaned is partitioned by day (drill_project.yaml): one run per day directory
        days = _days() if name == "events_cleaned" else [None]
        for day in days:
            params = {"day": day} if day else {}
            result = run_plan(root / "plans" / f"{name}.json", executor="local", params=params)
            assert [s.format for s in result.stores] == ["parquet"]
    return root


def _days() -> list[str]:
    return [f"2024-01-0{d}" for d in range(1, DAYS + 1)]


@pytest.fixture(scope="module")
def raw_events(project: Path) -> list[dict[str, Any]]:
    return _read_events(project / "data" / "raw")


@pytest.fixture(scope="module")
def cleaned(raw_events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return _cleaned(raw_events)


def _lake(project: Path, path: str) -> list[dict[str, Any]]:
    return pq.read_table(project / "data" / "lake" / path).to_pylist()


def test_events_cleaned(project: Path, cleaned: list[dict[str, Any]]) -> None:
    lake = project / "data" / "lake" / "events_cleaned"
    assert sorted(p.name for p in lake.iterdir()) == [f"day={d}" for d in _days()]
    table = ds.dataset(lake, format="parquet", partitioning="hive").to_table()
    rows = {r["event_id"]: r for r in table.to_pylist()}
    assert len(rows) == table.num_rows == len(cleaned)
    for expected in cleaned:
        row = rows[expected["event_id"]]
        assert (row["user_id"], row["kind"], row["country"], str(row["day"])) == (
            expected["user_id"],
            expected["kind"],
            expected["country"],
            expected["day"],
        )
        assert row["amount_usd"] == pytest.approx(expected["amount_usd"])
        assert row["ts"] == datetime.fromisoformat(expected["ts"].replace("Z", "+00:00"))
    assert {r["country"] for r in rows.values()} >= {"US", "UNKNOWN"}
    assert any(r["os"] == "unknown" for r in rows.values())


def test_events_cleaned_runs_one_day_partition(
    project: Path, cleaned: list[dict[str, Any]], tmp_path: Path
) -> None:
    """Its selection is ``events/${day}`` (how a Dagster partition key reaches it): a run reads one
    day directory and overwrites exactly that day's partition."""
    assert _plan_json("events_cleaned")["query"][0]["selection"]["path"] == "events/${day}"
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "raw").symlink_to(project / "data" / "raw")
    shutil.copytree(PLANS, tmp_path / "plans")
    path = tmp_path / "plans" / "events_cleaned.json"
    for day in ("2024-01-02", "2024-01-03", "2024-01-02"):
        result = run_plan(path, executor="local", params={"day": day})
        assert result.stores[0].row_count == sum(r["day"] == day for r in cleaned)
    lake = tmp_path / "data" / "lake" / "events_cleaned"
    assert sorted(p.name for p in lake.iterdir()) == ["day=2024-01-02", "day=2024-01-03"]
    assert len(list((lake / "day=2024-01-02").iterdir())) == 1  # replaced, not appended


def test_sessions(project: Path, cleaned: list[dict[str, Any]]) -> None:
    rows = _lake(project, "user_sessions")
    session_of = _sessions(cleaned)
    assert len(rows) == len(cleaned)
    assert {r["event_id"]: r["session_id"] for r in rows} == session_of
    per_user = Counter(r["user_id"] for r in cleaned)
    last = {r["user_id"]: r for r in rows}  # rows come out in (user, time) order
    assert {u: r["events_so_far"] for u, r in last.items()} == per_user
    spend = defaultdict(float)
    for r in cleaned:
        spend[r["user_id"]] += r["amount_usd"]
    for user, row in last.items():
        assert row["spend_so_far"] == pytest.approx(spend[user], abs=0.01)
    previous = None
    for row in rows:  # a session starts after more than 30 minutes of silence, not before
        gap = row["seconds_since_previous"]
        if previous is None or previous["user_id"] != row["user_id"]:
            assert (gap, row["session_number"], row["events_so_far"]) == (None, 1, 1)
        elif previous["session_id"] == row["session_id"]:
            assert 0 <= gap <= SESSION_GAP_S
        else:
            assert gap > SESSION_GAP_S
            assert row["session_number"] == previous["session_number"] + 1
        previous = row


def test_daily_activity(project: Path, cleaned: list[dict[str, Any]]) -> None:
    session_of = _sessions(cleaned)
    expected: dict[tuple[str, str], dict[str, Any]] = {}
    users: dict[tuple[str, str], set] = defaultdict(set)
    sessions: dict[tuple[str, str], set] = defaultdict(set)
    for r in cleaned:
        key = (r["day"], r["country"])
        entry = expected.setdefault(key, {"events": 0, "purchases": 0, "revenue_usd": 0.0})
        entry["events"] += 1
        users[key].add(r["user_id"])
        sessions[key].add(session_of[r["event_id"]])
        if r["kind"] == "purchase":
            entry["purchases"] += 1
            entry["revenue_usd"] += r["amount_usd"]
    rows = _lake(project, "daily_activity")
    assert [(str(r["day"]), r["country"]) for r in rows] == sorted(expected)
    for row in rows:
        key = (str(row["day"]), row["country"])
        want = expected[key]
        assert (row["events"], row["purchases"]) == (want["events"], want["purchases"])
        assert (row["users"], row["sessions"]) == (len(users[key]), len(sessions[key]))
        assert row["revenue_usd"] == pytest.approx(want["revenue_usd"], abs=0.006)


def test_orders_enriched(project: Path) -> None:
    raw = project / "data" / "raw"
    orders = pq.read_table(raw / "orders").to_pylist()
    customers = _customers(raw)
    rows = {r["order_id"]: r for r in _lake(project, "orders_enriched")}
    assert len(rows) == len(orders)
    guests = 0
    for order in orders:
        row = rows[order["order_id"]]
        customer = customers.get(order["customer_id"])
        guests += customer is None
        assert row["segment"] == (customer["segment"] if customer else "guest")
        assert row["customer_name"] == (customer["name"] if customer else None)
        assert row["signup_date"] == (
            date.fromisoformat(customer["signup_date"]) if customer else None
        )
        assert row["total_usd"] == pytest.approx(order["total_cents"] / 100)
        assert (row["items"], row["ts"], row["day"]) == (
            order["items"],
            order["ts"],
            order["ts"].date(),
        )
    assert 0 < guests < len(orders)


def test_order_items(project: Path) -> None:
    orders = pq.read_table(project / "data" / "raw" / "orders").to_pylist()
    lines = [
        (-(i["qty"] * i["price_cents"]), o["order_id"], i["sku"])
        for o in orders
        for i in o["items"]
    ]
    lines += [
        (-(qty * price), 900_001 + n, sku) for n, (sku, qty, price) in enumerate(IN_STORE_LINES)
    ]
    top = sorted(lines)[:TOP_LINES]
    rows = _lake(project, "top_order_items")
    assert len(rows) == min(TOP_LINES, len(lines))
    assert [(r["order_id"], r["sku"]) for r in rows] == [(o, s) for _, o, s in top]
    assert [r["line_total_usd"] for r in rows] == pytest.approx([-v / 100 for v, _, _ in top])
    assert rows[0]["segment"] == "in_store"  # the pop-up's big sale tops the list


def test_customer_summary(project: Path, cleaned: list[dict[str, Any]]) -> None:
    orders = pq.read_table(project / "data" / "raw" / "orders").to_pylist()
    rows = _lake(project, "customer_summary")
    active = Counter(r["user_id"] for r in cleaned)
    assert {r["user_id"]: r["events"] for r in rows} == active
    bought = Counter(o["customer_id"] for o in orders)
    assert {r["user_id"]: r["orders"] for r in rows if r["orders"]} == bought
    assert sum(r["revenue_usd"] for r in rows) == pytest.approx(
        sum(o["total_cents"] for o in orders) / 100, abs=0.01 * len(rows)
    )
    assert [r["revenue_usd"] for r in rows] == sorted(
        (r["revenue_usd"] for r in rows), reverse=True
    )
    assert {r["segment"] for r in rows if not r["orders"]} == {"visitor"}
