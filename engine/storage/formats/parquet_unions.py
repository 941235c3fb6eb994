"""UNION columns in parquet files written by Spark: JSON text marked in Spark's own schema.

A parquet file holds a Drill UNION (:mod:`engine.types`) as its JSON text. pyarrow, which writes
the local executor's files, records the ``drill.union`` extension type in the file's Arrow
schema; Spark, which writes the Spark executor's, cannot, and marks the field in the schema it
keeps in the footer instead (``org.apache.spark.sql.parquet.row.metadata``, field metadata
``{"drill.union": true}``). :func:`arrow_schema_of` reads either as ``drill.union`` columns, and
:func:`with_unions` makes the text arrays read from such a file ``drill.union`` arrays (the text
taken as it is, not encoded again).

>>> import pyarrow as pa
>>> from engine.types import UNION_ARROW
>>> marked = pa.schema([("v", pa.string()), ("n", pa.int64())])
>>> spark = ('{"type":"struct","fields":[{"name":"v","type":"string","nullable":true,'
...          '"metadata":{"drill.union":true}},'
...          '{"name":"n","type":"long","nullable":true,"metadata":{}}]}')
>>> schema = unions_marked(marked, spark)
>>> schema.field("v").type == UNION_ARROW, schema.field("n").type
(True, DataType(int64))
>>> with_unions(pa.table({"v": ['{"a":1}', '"x"', None], "n": [1, 2, 3]}), schema)["v"].to_pylist()
[{'a': 1}, 'x', None]
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from engine.types import UNION_ARROW, is_union

SPARK_SCHEMA_KEY = b"org.apache.spark.sql.parquet.row.metadata"
UNION_MARK = "drill.union"


def arrow_schema_of(metadata: pq.FileMetaData) -> pa.Schema:
    """The Arrow schema of a parquet file from its footer, UNION columns as ``drill.union``."""
    schema = metadata.schema.to_arrow_schema()
    spark = (metadata.metadata or {}).get(SPARK_SCHEMA_KEY)
    if spark is None or UNION_MARK.encode() not in spark:
        return schema
    return unions_marked(schema, spark.decode())


def unions_marked(schema: pa.Schema, spark_schema: str) -> pa.Schema:
    """``schema`` with the fields that Spark's schema (its JSON) marks as unions typed
    ``drill.union``."""
    try:
        spark = json.loads(spark_schema)
    except ValueError:
        return schema
    fields = {f["name"]: f for f in spark.get("fields", []) if isinstance(f, dict)}
    return pa.schema([_field(f, fields.get(f.name)) for f in schema])


def _field(field: pa.Field, spark: dict[str, Any] | None) -> pa.Field:
    if spark is None:
        return field
    if (spark.get("metadata") or {}).get(UNION_MARK) and pa.types.is_string(field.type):
        return field.with_type(UNION_ARROW)
    return field.with_type(_type(field.type, spark.get("type")))


def _type(dtype: pa.DataType, spark: Any) -> pa.DataType:
    if not isinstance(spark, dict):
        return dtype
    if pa.types.is_struct(dtype) and spark.get("type") == "struct":
        members = {f["name"]: f for f in spark.get("fields", []) if isinstance(f, dict)}
        return pa.struct([_field(f, members.get(f.name)) for f in dtype])
    if pa.types.is_list(dtype) and spark.get("type") == "array":
        element = spark.get("elementType")
        if isinstance(element, str) and pa.types.is_string(dtype.value_type):
            return dtype  # a list of plain texts
        return pa.list_(dtype.value_field.with_type(_type(dtype.value_type, element)))
    return dtype


def with_unions(data: pa.Table | pa.RecordBatch, schema: pa.Schema) -> Any:
    """``data`` (read from a file of ``schema``, :func:`arrow_schema_of`) with its union texts as
    ``drill.union`` arrays; the same object where nothing is a union."""
    changed = False
    columns = []
    for name, column in zip(data.schema.names, data.columns, strict=True):
        target = schema.field(name).type if name in schema.names else column.type
        if target.equals(column.type):
            columns.append(column)
            continue
        changed = True
        if isinstance(column, pa.ChunkedArray):
            column = pa.chunked_array([_union_texts(c, target) for c in column.chunks], target)
        else:
            column = _union_texts(column, target)
        columns.append(column)
    if not changed:
        return data
    fields = [pa.field(n, c.type) for n, c in zip(data.schema.names, columns, strict=True)]
    return type(data).from_arrays(columns, schema=pa.schema(fields))


def _union_texts(array: pa.Array, target: pa.DataType) -> pa.Array:
    if is_union(target) and pa.types.is_string(array.type):
        return pa.ExtensionArray.from_storage(UNION_ARROW, array)
    if pa.types.is_struct(target) and pa.types.is_struct(array.type):
        children = [
            _union_texts(array.field(i), target.field(i).type) for i in range(array.type.num_fields)
        ]
        mask = array.is_null() if array.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if pa.types.is_list(target) and pa.types.is_list(array.type):
        values = _union_texts(array.flatten(), target.value_type)
        offsets = array.offsets
        if array.offset or offsets[0].as_py():
            offsets = pc.subtract(offsets, offsets[0])
        mask = array.is_null() if array.null_count else None
        return pa.ListArray.from_arrays(offsets, values, type=target, mask=mask)
    return array
