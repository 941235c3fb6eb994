"""The benchmark's data set, deterministic for a ``scale`` factor (1.0: about 1M lineitems).

Layout under ``root``::

    lineitem/part-00.parquet ...      l_orderkey, l_linenumber, l_quantity, l_extendedprice,
                                      l_discount, l_tax, l_returnflag, l_linestatus, l_shipdate,
                                      l_shipmode
    orders/part-00.parquet ...        o_orderkey, o_custkey, o_orderstatus, o_totalprice,
                                      o_orderdate, o_orderpriority, o_shippriority
    customer/part-00.parquet          c_custkey, c_name, c_mktsegment, c_nationkey, c_acctbal
    events/2024-01-01/part-0.json ... {event_id, user_id, ts, kind, amount, device: {os, version},
                                       items: [{sku, qty, price}]} one JSON object per line
    prospects.csv                     name,segment (a header line; some rows repeat customers)

>>> import tempfile
>>> root = generate(Path(tempfile.mkdtemp()), scale=0.001)
>>> sorted(p.name for p in root.iterdir())
['_generated.json', 'customer', 'events', 'lineitem', 'orders', 'prospects.csv']
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

LINEITEMS = 1_000_000
ORDERS = 250_000
CUSTOMERS = 25_000
EVENTS = 400_000
USERS = 20_000
PROSPECTS = 100_000
DAYS = 7
FILES = 4
SEGMENTS = np.array(["AUTOMOBILE", "BUILDING", "FURNITURE", "HOUSEHOLD", "MACHINERY"])
PRIORITIES = np.array(["1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW"])
SHIPMODES = np.array(["AIR", "FOB", "MAIL", "RAIL", "REG AIR", "SHIP", "TRUCK"])
KINDS = np.array(["view", "view", "view", "add_to_cart", "purchase", "heartbeat"])
OSES = ["ios", "android", "web"]
START = dt.date(1992, 1, 1)
DAYS_SPAN = 2400  # order dates from 1992-01-01 to mid 1998
EVENT_START = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
MANIFEST = "_generated.json"


def generate(directory: Path, *, scale: float = 1.0, seed: int = 42) -> Path:
    """Write the data set under ``directory/sf<scale>`` (kept if already there); returns that root."""
    root = directory / f"sf{scale:g}"
    if (root / MANIFEST).exists():
        return root
    staging = directory / f".sf{scale:g}.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    counts = {
        "customer": _customers(staging, rng, max(10, int(CUSTOMERS * scale))),
        "orders": 0,
        "lineitem": 0,
    }
    counts["orders"], counts["lineitem"] = _orders_and_lineitems(
        staging, rng, max(20, int(ORDERS * scale)), counts["customer"], LINEITEMS / ORDERS
    )
    counts["events"] = _events(
        staging, rng, max(50, int(EVENTS * scale)), max(5, int(USERS * scale))
    )
    counts["prospects"] = _prospects(
        staging, rng, max(20, int(PROSPECTS * scale)), counts["customer"]
    )
    (staging / MANIFEST).write_text(json.dumps({"scale": scale, "seed": seed, "rows": counts}))
    shutil.rmtree(root, ignore_errors=True)
    staging.rename(root)
    return root


def _write_parquet(directory: Path, table: pa.Table, files: int) -> None:
    directory.mkdir()
    step = -(-table.num_rows // files)
    for i in range(files):
        pq.write_table(table.slice(i * step, step), directory / f"part-{i:02d}.parquet")


def _dates(days: np.ndarray) -> pa.Array:
    return pa.array(np.datetime64(START) + days.astype("timedelta64[D]"), pa.date32())


def _customers(root: Path, rng: np.random.Generator, n: int) -> int:
    keys = np.arange(1, n + 1)
    table = pa.table(
        {
            "c_custkey": pa.array(keys, pa.int64()),
            "c_name": pa.array([f"Customer#{k:09d}" for k in keys]),
            "c_mktsegment": pa.array(SEGMENTS[rng.integers(0, len(SEGMENTS), n)]),
            "c_nationkey": pa.array(rng.integers(0, 25, n), pa.int64()),
            "c_acctbal": pa.array(np.round(rng.uniform(-999.99, 9999.99, n), 2)),
        }
    )
    _write_parquet(root / "customer", table, 1)
    return n


def _orders_and_lineitems(
    root: Path, rng: np.random.Generator, n: int, customers: int, per_order: float
) -> tuple[int, int]:
    keys = np.arange(1, n + 1) * 4  # sparse keys, as in TPC-H
    order_days = rng.integers(0, DAYS_SPAN, n)
    lines = rng.integers(1, int(2 * per_order), n)  # 1 .. 7 lines, mean about per_order
    total = int(lines.sum())
    owner = np.repeat(np.arange(n), lines)
    line_numbers = np.arange(total) - np.repeat(np.cumsum(lines) - lines, lines) + 1
    quantity = rng.integers(1, 51, total).astype("float64")
    price = np.round(quantity * rng.uniform(900.0, 2000.0, total), 2)
    discount = rng.integers(0, 11, total) / 100.0
    tax = rng.integers(0, 9, total) / 100.0
    ship_days = order_days[owner] + rng.integers(1, 122, total)
    cutoff = (dt.date(1995, 6, 17) - START).days
    returned = np.where(rng.random(total) < 0.5, "R", "A")
    returnflag = np.where(ship_days > cutoff, "N", returned)
    linestatus = np.where(ship_days > cutoff, "O", "F")
    lineitem = pa.table(
        {
            "l_orderkey": pa.array(keys[owner], pa.int64()),
            "l_linenumber": pa.array(line_numbers, pa.int64()),
            "l_quantity": pa.array(quantity),
            "l_extendedprice": pa.array(price),
            "l_discount": pa.array(discount),
            "l_tax": pa.array(tax),
            "l_returnflag": pa.array(returnflag),
            "l_linestatus": pa.array(linestatus),
            "l_shipdate": _dates(ship_days),
            "l_shipmode": pa.array(SHIPMODES[rng.integers(0, len(SHIPMODES), total)]),
        }
    )
    revenue = np.bincount(owner, weights=price * (1 + tax) * (1 - discount), minlength=n)
    orders = pa.table(
        {
            "o_orderkey": pa.array(keys, pa.int64()),
            # a third of the customers never order (TPC-H's rule), so left joins find no match
            "o_custkey": pa.array(_ordering_customers(rng, n, customers), pa.int64()),
            "o_orderstatus": pa.array(np.where(order_days > cutoff - 60, "O", "F")),
            "o_totalprice": pa.array(np.round(revenue, 2)),
            "o_orderdate": _dates(order_days),
            "o_orderpriority": pa.array(PRIORITIES[rng.integers(0, len(PRIORITIES), n)]),
            "o_shippriority": pa.array(np.zeros(n, dtype="int64"), pa.int64()),
        }
    )
    _write_parquet(root / "orders", orders, FILES)
    _write_parquet(root / "lineitem", lineitem, FILES)
    return n, total


def _ordering_customers(rng: np.random.Generator, n: int, customers: int) -> np.ndarray:
    keys = rng.integers(1, customers + 1, n)
    # some orders point at customers missing from the customer table (a left join keeps them)
    return np.where(rng.random(n) < 0.05, keys + customers, keys)


def _events(root: Path, rng: np.random.Generator, n: int, users: int) -> int:
    per_day = -(-n // DAYS)
    event_id = 0
    for day in range(DAYS):
        count = min(per_day, n - event_id)
        directory = root / "events" / (EVENT_START + dt.timedelta(days=day)).strftime("%Y-%m-%d")
        directory.mkdir(parents=True)
        user = rng.integers(1, users + 1, count)
        # visits: bursts of events a few seconds to minutes apart, sometimes hours apart
        second = np.sort(rng.integers(0, 86_400, count))
        kind = KINDS[rng.integers(0, len(KINDS), count)]
        item_counts = rng.integers(0, 4, count)
        base = int((EVENT_START + dt.timedelta(days=day)).timestamp())
        halves = [[], []]
        for i in range(count):
            record = {
                "event_id": event_id + i,
                "user_id": int(user[i]),
                "ts": base + int(second[i]),
                "kind": str(kind[i]),
                "amount": round(float(rng.uniform(1, 500)), 2),
                "device": {"os": OSES[i % 3], "version": f"{i % 7}.{i % 3}"},
                "items": [
                    {"sku": f"sku-{int(s)}", "qty": int(q), "price": round(float(p), 2)}
                    for s, q, p in zip(
                        rng.integers(0, 5000, item_counts[i]),
                        rng.integers(1, 5, item_counts[i]),
                        rng.uniform(1, 200, item_counts[i]),
                    )
                ],
            }
            halves[i * 2 // max(1, count)].append(json.dumps(record))
        for part, lines in enumerate(halves):
            (directory / f"part-{part}.json").write_text("\n".join(lines) + "\n" if lines else "")
        event_id += count
    return n


def _prospects(root: Path, rng: np.random.Generator, n: int, customers: int) -> int:
    known = rng.integers(1, customers + 1, n)
    lines = ["name,segment"]
    for i in range(n):
        if i % 3 == 0:  # a customer already known, in their segment or another
            name = f"Customer#{int(known[i]):09d}"
        else:
            name = f"Prospect#{int(rng.integers(0, n // 2 + 1)):09d}"
        lines.append(f"{name},{SEGMENTS[int(known[i]) % len(SEGMENTS)]}")
    (root / "prospects.csv").write_text("\n".join(lines) + "\n")
    return n
