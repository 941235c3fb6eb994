"""Generate the TPC-H tables, the 22 query texts and their official answers at one scale factor.

Runs in its own small virtualenv (``make tpch-data`` creates ``.venv-tpch`` with
``duckdb==1.5.5`` and ``duckdb-extension-tpch==1.5.5``): the extension is loaded from the
package's file, never downloaded. It writes, under ``<out>/sf<scale>/``:

- ``<table>.parquet`` for the 8 tables (DECIMAL(15,2) money columns, DATE dates, BIGINT keys),
- ``queries/q01.sql`` ... ``q22.sql``: ``tpch_queries()`` as DuckDB gives them,
- ``answers/q01.csv`` ...: ``tpch_answers()`` (``|``-separated, a header line; only published for
  scale factors 0.01, 0.1 and 1),

then ``done`` last, so that a half-written directory is never taken for a complete one.

    .venv-tpch/bin/python scripts/tpch_data.py --sf 0.01 --out .tpch
"""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

import duckdb
import duckdb_extension_tpch

TABLES = ("customer", "lineitem", "nation", "orders", "part", "partsupp", "region", "supplier")


def extension_path() -> Path:
    """The tpch extension shipped in the ``duckdb-extension-tpch`` package."""
    base = Path(os.path.dirname(duckdb_extension_tpch.__file__)) / "extensions"
    found = sorted(base.glob(f"v{duckdb.__version__}/tpch.duckdb_extension"))
    if not found:
        raise SystemExit(f"no tpch extension for duckdb {duckdb.__version__} under {base}")
    return found[0]


def generate(sf: float, out: Path) -> Path:
    target = out / f"sf{sf:g}"
    if (target / "done").exists():
        return target
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    (partial / "queries").mkdir(parents=True)
    (partial / "answers").mkdir()
    con = duckdb.connect()
    con.execute(f"LOAD '{extension_path()}'")
    con.execute(f"CALL dbgen(sf={sf})")
    for table in TABLES:
        con.execute(f"COPY {table} TO '{partial / (table + '.parquet')}' (FORMAT parquet)")
    for number, text in con.execute("SELECT query_nr, query FROM tpch_queries()").fetchall():
        (partial / "queries" / f"q{number:02d}.sql").write_text(text)
    answers = con.execute(
        "SELECT query_nr, answer FROM tpch_answers() WHERE abs(scale_factor - ?) < 1e-9", [sf]
    ).fetchall()
    for number, answer in answers:
        (partial / "answers" / f"q{number:02d}.csv").write_text(answer)
    (partial / "done").write_text(f"duckdb {duckdb.__version__}, sf {sf:g}\n")
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sf", type=float, default=0.01, help="scale factor (default 0.01)")
    parser.add_argument("--out", type=Path, default=Path(".tpch"), help="cache directory")
    args = parser.parse_args()
    print(generate(args.sf, args.out))


if __name__ == "__main__":
    main()
