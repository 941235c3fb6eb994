"""The example's PostgreSQL database for ``make demo``: a throwaway server holding the CRM's
customers, for the plans that read it (``plans/business_customers.json``).

:func:`start_database` starts the server where the plans' ``jdbc`` engine says it listens
(``postgresql://127.0.0.1:55432/shop``), on this machine only, with a fresh random password
put in the environment variable the engine's ``password_env`` names, and loads
``raw/customers.csv`` into the table ``crm.customers``. Where it cannot (no PostgreSQL
installed, the port taken), it returns why in one line, and the demo skips those plans. The
caller stops the server (:meth:`~postgres_server.PostgresServer.stop`): nothing is left running
or on disk.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from postgres_server import PostgresServer, binaries_missing, port_in_use, start_server


@dataclass(frozen=True)
class DemoDatabase:
    """Where the plans' ``jdbc`` engine connects: port, database, password variable."""

    port: int
    database: str
    password_env: str


def plans_using(plans: Path, engine_type: str) -> list[str]:
    """The names of the plans in ``plans`` with a storage engine of ``engine_type``."""
    found = []
    for path in sorted(plans.glob("*.json")):
        storage = json.loads(path.read_text()).get("storage") or {}
        if any(isinstance(e, dict) and e.get("type") == engine_type for e in storage.values()):
            found.append(path.stem)
    return found


def demo_database(plans: Path) -> DemoDatabase | None:
    """The database the plans' ``jdbc`` engines name (they all name the same one), or None."""
    for name in plans_using(plans, "jdbc"):
        storage = json.loads((plans / f"{name}.json").read_text())["storage"]
        for engine in storage.values():
            if engine.get("type") == "jdbc":
                url = urlsplit(engine["url"])
                return DemoDatabase(url.port or 5432, url.path.lstrip("/"), engine["password_env"])
    return None


def seed(server: PostgresServer, raw: Path) -> int:
    """Load ``raw/customers.csv`` into ``crm.customers``; the number of rows loaded."""
    import pyarrow as pa
    from pyarrow import csv

    types = {
        "customer_id": pa.int64(),
        "name": pa.string(),
        "segment": pa.string(),
        "country": pa.string(),
        "signup_date": pa.date32(),
    }
    table = csv.read_csv(
        raw / "customers.csv", convert_options=csv.ConvertOptions(column_types=types)
    )
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE SCHEMA IF NOT EXISTS crm")
        cur.adbc_ingest("customers", table, mode="replace", db_schema_name="crm")
        cur.execute("ALTER TABLE crm.customers ADD PRIMARY KEY (customer_id)")
    return table.num_rows


def start_database(plans: Path, raw: Path) -> tuple[PostgresServer | None, str | None]:
    """The running, seeded server the plans read, or None and why it could not start."""
    wanted = demo_database(plans)
    if wanted is None:
        return None, None
    missing = binaries_missing()
    if missing is not None:
        return None, missing
    if port_in_use(wanted.port):
        return None, f"127.0.0.1:{wanted.port}, where the plans' database listens, is taken"
    server = start_server(port=wanted.port, database=wanted.database)
    try:
        seed(server, raw)
    except BaseException:
        server.stop()
        raise
    os.environ[wanted.password_env] = server.password
    return server, None
