"""SQL results checked against DuckDB: the same parquet files, our plan on an executor and DuckDB.

:func:`tables` writes each table (rows and an Arrow schema) as parquet under ``root``, registers it
in a :class:`MetadataRepository` and as a DuckDB view; :func:`check` runs one query both ways and
compares the records as multisets (in order where the query has an ORDER BY).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, settings

from engine.metadata import MetadataRepository
from engine.run import run_plan
from engine.sql import sql_to_plan

Table = tuple[pa.Schema, Sequence[Sequence[Any]]]


def tables(
    root: Path, data: Mapping[str, Table]
) -> tuple[MetadataRepository, duckdb.DuckDBPyConnection]:
    """Each table of ``data`` as ``root/<name>.parquet``, registered in a repository and DuckDB."""
    repo = MetadataRepository({"fs": {"type": "fs", "root": str(root)}})
    con = duckdb.connect()
    for name, (schema, rows) in data.items():
        columns = list(zip(*rows)) if rows else [[] for _ in schema]
        arrays = [pa.array(list(c), f.type) for c, f in zip(columns, schema)]
        path = root / f"{name}.parquet"
        pq.write_table(pa.Table.from_arrays(arrays, schema=schema), path)
        repo.register_table(name, "fs", {"path": path.name})
        con.execute(f"create view {name} as select * from read_parquet('{path}')")
    return repo, con


def examples(count: int, *, spark: bool = False) -> settings:
    """Hypothesis settings of a differential test: ``count`` examples, no deadline (the time
    depends on the machine's load), and, ``spark``, the session-wide Spark fixture allowed."""
    slow = [HealthCheck.too_slow]
    return settings(
        max_examples=count,
        deadline=None,
        suppress_health_check=[*slow, HealthCheck.function_scoped_fixture] if spark else slow,
    )


_SIX = decimal.Decimal("0.000001")


def _value(v: Any) -> Any:
    """Numbers as exact decimal text: a DECIMAL exactly (at most 6 digits after the point, else
    rounded half up to 6), a float rounded to 6 digits (DuckDB's ``/`` and ``avg`` of decimals
    give doubles), so that ``2.50`` and ``2.5`` match and ``2.51`` and ``2.5`` do not."""
    if isinstance(v, float) and math.isfinite(v):
        v = decimal.Decimal(repr(round(v, 6)))
    if isinstance(v, int) and not isinstance(v, bool):
        v = decimal.Decimal(v)
    if isinstance(v, decimal.Decimal):
        exponent = v.as_tuple().exponent
        if isinstance(exponent, int) and exponent < -6:
            v = v.quantize(_SIX, rounding=decimal.ROUND_HALF_UP)
        return "n:" + format(v.normalize() + 0, "f")
    if isinstance(v, dt.date):
        return v.isoformat()
    return v


def normal(records: list[dict[str, Any]], ordered: bool) -> list[str]:
    """Records as comparable texts (numbers as exact decimal text, dates as text)."""
    texts = [json.dumps([_value(v) for v in r.values()]) for r in records]
    return texts if ordered else sorted(texts)


def duckdb_records(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    cursor = con.execute(sql)
    # Two result columns may share a name (b1.y, b2.y): each kept, under a name of its own.
    names = [f"{c[0]}#{i}" for i, c in enumerate(cursor.description)]
    return [dict(zip(names, r)) for r in cursor.fetchall()]


def check(
    sql: str,
    repo: MetadataRepository,
    con: duckdb.DuckDBPyConnection,
    *,
    ordered: bool = False,
    **run: Any,
) -> list[dict[str, Any]]:
    """Run ``sql`` as our plan (``run``: ``executor``, ``spark``) and in DuckDB; assert equal."""
    ours = run_plan(sql_to_plan(sql, repo), **run).records()
    theirs = duckdb_records(con, sql)
    assert normal(ours, ordered) == normal(theirs, ordered), f"{sql}\nours {ours}\nduckdb {theirs}"
    return ours
