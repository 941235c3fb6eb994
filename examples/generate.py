"""Generate the example project's raw data: a small, realistic, deterministic web shop.

Layout under ``--out`` (default ``examples/data``)::

    raw/events/2024-01-01/part-0.json   click events, nested JSON lines, one directory per day
    raw/events/2024-01-01/part-1.json
    ...
    raw/customers.csv                   customer_id,name,segment,country,signup_date (a header line)
    raw/orders/orders-2024-01-01.parquet  one file per day
    raw/_generated.json                 what was generated (parameters and counts; hidden from scans)

An event is ``{id, ts, kind, user: {id, country, device: {os, version}}, cart: {total, items:
[{sku, qty, price_cents}]}}``. ``kind`` is ``view``, ``add_to_cart``, ``purchase`` or
``heartbeat``; ``cart`` is present on ``add_to_cart`` and ``purchase`` events only, its ``total``
is the sum of ``qty * price_cents``. Like real trackers, some records lack optional fields:
anonymous visitors have no ``user.id`` (a few no ``user`` at all), and ``user.country``,
``user.device`` or ``user.device.version`` are missing on some records; countries arrive in mixed
case. Every purchase of a known user is an order (same items and total, ``order_id`` from
100001); a few buyers are guest checkouts that never made it to ``customers.csv``.

The same ``--seed``, ``--days`` and ``--scale`` give byte-identical files. Generating is atomic
(written beside, then renamed) and idempotent: existing data is kept unless ``--force``.

    python examples/generate.py [--out examples/data] [--days 7] [--seed 42] [--scale 1.0] [--force]

>>> import tempfile
>>> out = Path(tempfile.mkdtemp())
>>> summary = generate(out, days=2, scale=0.05)
>>> summary.created, sorted(p.name for p in (out / "raw").iterdir())
(True, ['_generated.json', 'customers.csv', 'events', 'orders'])
>>> generate(out, days=2, scale=0.05).created  # already there: kept
False
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import shutil
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

DEFAULT_OUT = Path(__file__).resolve().parent / "data"
DEFAULT_START = date(2024, 1, 1)
DEFAULT_DAYS = 7
DEFAULT_SEED = 42
EVENTS_PER_DAY = 3000
USERS = 800
PARTS_PER_DAY = 2
FIRST_ORDER_ID = 100_001
MANIFEST = "_generated.json"

# A visit's events: heartbeats and add-to-carts among views; a purchase of the cart, or not.
P_HEARTBEAT = 0.1
P_ADD = P_HEARTBEAT + 0.16
P_PURCHASE = 0.45
COUNTRIES = ("US", "DE", "FR", "GB", "NL", "BR", "JP", "IN")
COUNTRY_WEIGHTS = (0.34, 0.16, 0.12, 0.12, 0.06, 0.08, 0.07, 0.05)
DEVICES = {
    "ios": ("17.1", "17.2", "17.3"),
    "android": ("13", "14"),
    "web": ("chrome-120", "firefox-121", "safari-17"),
}
SEGMENTS = ("consumer", "smb", "enterprise")
SEGMENT_WEIGHTS = (0.7, 0.22, 0.08)
FIRST_NAMES = (
    "Ada", "Alan", "Grace", "Linus", "Barbara", "Edsger", "Frances", "Ken", "Margaret", "Dennis",
    "Radia", "Donald", "Katherine", "Tim", "Hedy", "Guido", "Sophie", "John", "Anita", "Bjarne",
)  # fmt: skip
LAST_NAMES = (
    "Lovelace", "Turing", "Hopper", "Torvalds", "Liskov", "Dijkstra", "Allen", "Thompson",
    "Hamilton", "Ritchie", "Perlman", "Knuth", "Johnson", "Berners-Lee", "Lamarr", "van Rossum",
    "Wilson", "O'Neil", "Borg", "Stroustrup",
)  # fmt: skip
SKUS = tuple(f"SKU-{n:04d}" for n in range(1, 121))

# Shares of records that lack an optional field (real trackers drop them).
P_NO_USER = 0.01
P_ANONYMOUS = 0.04
P_NO_COUNTRY = 0.03
P_NO_DEVICE = 0.05
P_NO_VERSION = 0.06
P_LOWER_COUNTRY = 0.2
P_GUEST = 0.06  # users who buy without being in customers.csv

ITEM_TYPE = pa.struct([("sku", pa.string()), ("qty", pa.int64()), ("price_cents", pa.int64())])
ORDER_SCHEMA = pa.schema(
    [
        ("order_id", pa.int64()),
        ("customer_id", pa.int64()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("total_cents", pa.int64()),
        ("items", pa.list_(ITEM_TYPE)),
    ]
)


@dataclass
class Summary:
    """What :func:`generate` did: where, with which parameters, and how many records of each."""

    out: Path
    created: bool
    days: int
    seed: int
    scale: float
    start: str
    events: int = 0
    customers: int = 0
    orders: int = 0
    event_files: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for key in ("out", "created"):  # the manifest is the same wherever the data is
            data.pop(key)
        return data


@dataclass(frozen=True)
class _User:
    id: int
    country: str
    os: str
    version: str
    guest: bool


def generate(
    out: Path | str = DEFAULT_OUT,
    *,
    days: int = DEFAULT_DAYS,
    seed: int = DEFAULT_SEED,
    scale: float = 1.0,
    start: date = DEFAULT_START,
    force: bool = False,
) -> Summary:
    """Write the raw data under ``out/raw`` (see the module docstring); keep it if it exists.

    >>> import tempfile
    >>> s = generate(Path(tempfile.mkdtemp()), days=1, scale=0.1, seed=7)
    >>> (s.days, s.events > 0, s.orders > 0, len(s.event_files))
    (1, True, True, 2)
    """
    if days < 1:
        raise ValueError(f"days must be at least 1, not {days}")
    if scale <= 0:
        raise ValueError(f"scale must be positive, not {scale}")
    out = Path(out)
    raw = out / "raw"
    summary = Summary(out, created=False, days=days, seed=seed, scale=scale, start=str(start))
    if (raw / MANIFEST).exists() and not force:
        existing = json.loads((raw / MANIFEST).read_text())
        for key in ("events", "customers", "orders", "event_files"):
            setattr(summary, key, existing.get(key, getattr(summary, key)))
        for key in ("days", "seed", "scale", "start"):
            setattr(summary, key, existing.get(key, getattr(summary, key)))
        return summary

    out.mkdir(parents=True, exist_ok=True)
    staging = out / f".raw.tmp-{seed}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    rng = random.Random(seed)
    users = _users(rng, max(20, round(USERS * scale)))
    summary.customers = _write_customers(rng, staging / "customers.csv", users, start)
    next_order = FIRST_ORDER_ID
    for offset in range(days):
        day = start + timedelta(days=offset)
        events = _day_events(rng, day, users, max(10, round(_day_volume(day) * scale)))
        summary.events += len(events)
        summary.event_files += _write_events(staging / "events" / day.isoformat(), events)
        orders = _orders(events, users, next_order)
        next_order += len(orders["order_id"])
        summary.orders += len(orders["order_id"])
        _write_orders(staging / "orders" / f"orders-{day.isoformat()}.parquet", orders)
    summary.created = True
    (staging / MANIFEST).write_text(json.dumps(summary.to_json(), indent=2) + "\n")
    if raw.exists():
        shutil.rmtree(raw)
    staging.rename(raw)
    return summary


def _day_volume(day: date) -> int:
    """More traffic at the weekend, as shops see."""
    return round(EVENTS_PER_DAY * (1.25 if day.weekday() >= 5 else 1.0))


def _users(rng: random.Random, count: int) -> list[_User]:
    users = []
    for user_id in range(1, count + 1):
        os = rng.choice(sorted(DEVICES))
        users.append(
            _User(
                id=user_id,
                country=rng.choices(COUNTRIES, COUNTRY_WEIGHTS)[0],
                os=os,
                version=rng.choice(DEVICES[os]),
                guest=rng.random() < P_GUEST,
            )
        )
    return users


def _write_customers(rng: random.Random, path: Path, users: list[_User], start: date) -> int:
    rows = 0
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["customer_id", "name", "segment", "country", "signup_date"])
        for user in users:
            if user.guest:
                continue
            name = f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"
            if rng.random() < 0.03:
                name += ", Jr."  # a comma inside a value: the writer quotes it
            signup = start - timedelta(days=rng.randint(-3, 900))
            writer.writerow(
                [
                    user.id,
                    name,
                    rng.choices(SEGMENTS, SEGMENT_WEIGHTS)[0],
                    user.country,
                    signup.isoformat(),
                ]
            )
            rows += 1
    return rows


def _day_events(
    rng: random.Random, day: date, users: list[_User], count: int
) -> list[dict[str, Any]]:
    """``count`` events of one day: visits of a few events each, in time order."""
    midnight = datetime(day.year, day.month, day.day, tzinfo=UTC)
    stamped: list[tuple[int, dict[str, Any]]] = []
    while len(stamped) < count:
        stamped += _visit(rng, rng.choice(users), rng.randrange(86_400_000))
    stamped = sorted(stamped[:count], key=lambda pair: pair[0])
    events = []
    for number, (millis, body) in enumerate(stamped, start=1):
        ts = midnight + timedelta(milliseconds=millis)
        event: dict[str, Any] = {
            "id": f"ev-{day:%Y%m%d}-{number:06d}",
            "ts": ts.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z",
        }
        event.update(body)
        events.append(event)
    return events


def _visit(rng: random.Random, user: _User, start_ms: int) -> list[tuple[int, dict[str, Any]]]:
    """One visit: views, some add-to-carts, maybe a purchase of the cart at the end; a few
    seconds to minutes apart (never past midnight: a day directory holds its day only)."""
    anonymous = rng.random() < P_ANONYMOUS
    length = rng.choices(range(1, 13), (8, 10, 12, 12, 11, 10, 9, 8, 7, 6, 4, 3))[0]
    items: list[dict[str, Any]] = []
    kinds = []
    for _ in range(length):
        roll = rng.random()
        kinds.append(
            "heartbeat" if roll < P_HEARTBEAT else "add_to_cart" if roll < P_ADD else "view"
        )
    if "add_to_cart" in kinds and rng.random() < P_PURCHASE:
        kinds.append("purchase")
    visit = []
    millis = start_ms
    for kind in kinds:
        if millis >= 86_400_000:
            break
        body: dict[str, Any] = {"kind": kind}
        user_record = _user_record(rng, user, anonymous)
        if user_record is not None:
            body["user"] = user_record
        if kind == "add_to_cart":
            _add_item(rng, items)
        if kind in ("add_to_cart", "purchase"):
            body["cart"] = {
                "total": sum(i["qty"] * i["price_cents"] for i in items),
                "items": [dict(i) for i in items],
            }
        visit.append((millis, body))
        millis += rng.randint(2_000, 240_000)
    return visit


def _add_item(rng: random.Random, items: list[dict[str, Any]]) -> None:
    sku = rng.choice(SKUS)
    qty = rng.choice((1, 1, 1, 2, 3))
    for item in items:
        if item["sku"] == sku:
            item["qty"] += qty
            return
    price = (int(sku[4:]) * 37 % 120 + 3) * 100 - 1  # a stable price per SKU: 2.99 .. 122.99
    items.append({"sku": sku, "qty": qty, "price_cents": price})


def _user_record(rng: random.Random, user: _User, anonymous: bool) -> dict[str, Any] | None:
    if rng.random() < P_NO_USER:
        return None
    record: dict[str, Any] = {}
    if not anonymous:
        record["id"] = user.id
    if rng.random() >= P_NO_COUNTRY:
        lower = rng.random() < P_LOWER_COUNTRY
        record["country"] = user.country.lower() if lower else user.country
    if rng.random() >= P_NO_DEVICE:
        device = {"os": user.os}
        if rng.random() >= P_NO_VERSION:
            device["version"] = user.version
        record["device"] = device
    return record


def _write_events(directory: Path, events: list[dict[str, Any]]) -> list[str]:
    directory.mkdir(parents=True)
    size = -(-len(events) // PARTS_PER_DAY)
    names = []
    for part in range(PARTS_PER_DAY):
        path = directory / f"part-{part}.json"
        chunk = events[part * size : (part + 1) * size]
        path.write_text("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in chunk))
        names.append(path.relative_to(directory.parent.parent).as_posix())
    return names


def _orders(events: list[dict[str, Any]], users: list[_User], first_id: int) -> dict[str, list]:
    columns: dict[str, list] = {name: [] for name in ORDER_SCHEMA.names}
    for event in events:
        user_id = event.get("user", {}).get("id")
        if event["kind"] != "purchase" or user_id is None:
            continue
        columns["order_id"].append(first_id + len(columns["order_id"]))
        columns["customer_id"].append(user_id)
        columns["ts"].append(datetime.fromisoformat(event["ts"].replace("Z", "+00:00")))
        columns["total_cents"].append(event["cart"]["total"])
        columns["items"].append(event["cart"]["items"])
    return columns


def _write_orders(path: Path, columns: dict[str, list]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns, schema=ORDER_SCHEMA), path)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; see the module docstring."""
    parser = argparse.ArgumentParser(description="Generate the example project's raw data.")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="data directory")
    parser.add_argument("--days", type=int, default=DEFAULT_DAYS, help="days of events")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="random seed")
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies every volume")
    parser.add_argument("--start", type=date.fromisoformat, default=DEFAULT_START)
    parser.add_argument("--force", action="store_true", help="regenerate existing data")
    args = parser.parse_args(argv)
    try:
        summary = generate(
            args.out,
            days=args.days,
            seed=args.seed,
            scale=args.scale,
            start=args.start,
            force=args.force,
        )
    except ValueError as err:
        parser.error(str(err))
    raw = summary.out / "raw"
    if not summary.created:
        print(
            f"{raw}: data exists (days={summary.days}, seed={summary.seed}, "
            f"scale={summary.scale}); kept. Use --force to regenerate."
        )
    else:
        print(
            f"{raw}: {summary.events} events over {summary.days} days, "
            f"{summary.customers} customers, {summary.orders} orders"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
