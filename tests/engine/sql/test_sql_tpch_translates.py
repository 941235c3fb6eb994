"""Each of the 22 TPC-H query texts translates to a valid logical plan.

The texts are DuckDB's ``tpch_queries()`` as ``make tpch-data`` writes them (``.tpch/sf*/queries``;
the test skips when they are not generated). The tables are described by one-row parquet files
of TPC-H's column types: translation needs the columns, not the data.
"""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.expr import FieldRef, parse_expression
from engine.metadata import MetadataRepository
from engine.plan import parse_plan
from engine.sql import sql_to_plan

ROOT = Path(__file__).resolve().parents[3]
QUERIES = sorted((ROOT / ".tpch").glob("sf*/queries"))

# Column types: I INTEGER, L BIGINT, S VARCHAR, D DATE, M DECIMAL(15, 2).
SCHEMAS = {
    "customer": "c_custkey L c_name S c_address S c_nationkey I c_phone S c_acctbal M "
    "c_mktsegment S c_comment S",
    "lineitem": "l_orderkey L l_partkey L l_suppkey L l_linenumber L l_quantity M "
    "l_extendedprice M l_discount M l_tax M l_returnflag S l_linestatus S l_shipdate D "
    "l_commitdate D l_receiptdate D l_shipinstruct S l_shipmode S l_comment S",
    "nation": "n_nationkey I n_name S n_regionkey I n_comment S",
    "orders": "o_orderkey L o_custkey L o_orderstatus S o_totalprice M o_orderdate D "
    "o_orderpriority S o_clerk S o_shippriority I o_comment S",
    "part": "p_partkey L p_name S p_mfgr S p_brand S p_type S p_size I p_container S "
    "p_retailprice M p_comment S",
    "partsupp": "ps_partkey L ps_suppkey L ps_availqty L ps_supplycost M ps_comment S",
    "region": "r_regionkey I r_name S r_comment S",
    "supplier": "s_suppkey L s_name S s_address S s_nationkey I s_phone S s_acctbal M s_comment S",
}
TYPES = {
    "I": (pa.int32(), 1),
    "L": (pa.int64(), 1),
    "S": (pa.string(), "x"),
    "D": (pa.date32(), dt.date(1995, 1, 1)),
    "M": (pa.decimal128(15, 2), decimal.Decimal("1.00")),
}


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> MetadataRepository:
    root = tmp_path_factory.mktemp("tpch_schemas")
    repo = MetadataRepository({"tpch": {"type": "fs", "root": str(root)}})
    for name, text in SCHEMAS.items():
        words = text.split()
        arrays = {}
        for column, letter in zip(words[::2], words[1::2]):
            dtype, value = TYPES[letter]
            arrays[column] = pa.array([value], dtype)
        pq.write_table(pa.table(arrays), root / f"{name}.parquet")
        repo.register_table(name, "tpch", {"path": f"{name}.parquet"})
    return repo


@pytest.mark.skipif(not QUERIES, reason="no TPC-H query texts: run `make tpch-data`")
@pytest.mark.parametrize("number", range(1, 23))
def test_tpch_query_translates(repo, number) -> None:
    sql = (QUERIES[0] / f"q{number:02d}.sql").read_text().strip().rstrip(";")
    plan = sql_to_plan(sql, repo)
    parse_plan(plan)
    assert plan["query"][-1]["op"] == "store"


@pytest.mark.skipif(not QUERIES, reason="no TPC-H query texts: run `make tpch-data`")
@pytest.mark.parametrize("number", [2, 4, 17, 20, 21, 22])
def test_subqueries_join_on_fields_of_their_own(repo, number) -> None:
    # A decorrelated subquery's keys are top-level fields of the joined records (`$s2_k0`), not
    # members of one map (`$s2.k0`): a join on a member compares an extraction, and Spark then
    # shuffles the subquery's aggregate again to meet it (q17, q20, q21 at scale 1).
    sql = (QUERIES[0] / f"q{number:02d}.sql").read_text().strip().rstrip(";")
    plan = parse_plan(sql_to_plan(sql, repo))
    operands = [
        parse_expression(side)
        for op in plan.query
        if op.op == "join"
        for condition in op.conditions
        for side in (condition.left, condition.right)
    ]
    subquery_fields = [e for e in operands if isinstance(e, FieldRef) and e.path[0][0] == "$"]
    assert subquery_fields, "no join on a subquery's fields"
    assert all(len(e.path) == 1 for e in subquery_fields), [str(e) for e in subquery_fields]
