"""Drill's UNION type on Spark: a VARIANT column, carried as JSON text where Spark cannot hold one.

A UNION column (a field whose values change kind between records, see :mod:`engine.types`) is a
``VARIANT`` in the plan's DataFrames. Two places cannot hold a variant:

* the Drill data source yields Arrow batches, and Spark's Arrow form of a variant is its binary
  encoding. The source's schema (:func:`storage_schema`) declares each variant as a string field
  marked ``drill.union`` in its metadata; the source yields JSON texts there, and the scan turns
  them into variants with ``parse_json`` (:func:`revive`), which Spark runs natively;
* collecting to Arrow (``toArrow`` fails on variants): :func:`collect_arrow` turns each variant
  into its JSON text with ``to_json`` and the collected column into a ``drill.union`` array, so
  ``to_pylist()`` gives the values back, as the local executor's records do.

>>> from pyspark.sql import types as T
>>> storage_schema(T.StructType([T.StructField("v", T.VariantType())])).simpleString()
'struct<v:string>'
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from engine.exec.spark.collect import to_arrow
from engine.exec.spark.constant_columns import lit
from engine.exec.spark.names import column
from engine.types import UNION, MajorType, from_spark, is_union, union_array

UNION_MARK = "drill.union"


def has_variant(dtype: T.DataType) -> bool:
    """Whether a Spark type holds a VARIANT anywhere."""
    if isinstance(dtype, T.VariantType):
        return True
    if isinstance(dtype, T.StructType):
        return any(has_variant(f.dataType) for f in dtype.fields)
    if isinstance(dtype, T.ArrayType):
        return has_variant(dtype.elementType)
    if isinstance(dtype, T.MapType):
        return has_variant(dtype.valueType)
    return False


def storage_schema(schema: T.StructType) -> T.StructType:
    """``schema`` with every VARIANT field a string field marked as a union (see the module)."""
    return _storage(schema)  # type: ignore[return-value]


def _storage(dtype: T.DataType) -> T.DataType:
    if isinstance(dtype, T.StructType):
        fields = []
        for f in dtype.fields:
            if isinstance(f.dataType, T.VariantType):
                metadata = {**(f.metadata or {}), UNION_MARK: True}
                fields.append(T.StructField(f.name, T.StringType(), f.nullable, metadata))
            else:
                fields.append(T.StructField(f.name, _storage(f.dataType), f.nullable, f.metadata))
        return T.StructType(fields)
    if isinstance(dtype, T.ArrayType):
        return T.ArrayType(_storage(dtype.elementType), dtype.containsNull)
    return T.StringType() if isinstance(dtype, T.VariantType) else dtype


def drill_type_of_storage(field: T.StructField) -> MajorType:
    """The Drill type of a field of a :func:`storage_schema` (a marked string is a UNION)."""
    if (field.metadata or {}).get(UNION_MARK):
        return UNION
    dtype = field.dataType
    if isinstance(dtype, T.StructType) and has_mark(dtype):
        members = {f.name: drill_type_of_storage(f) for f in dtype.fields}
        return MajorType.map(members, from_spark(dtype, nullable=field.nullable).mode)
    if isinstance(dtype, T.ArrayType) and has_mark(dtype.elementType):
        element = drill_type_of_storage(T.StructField("element", dtype.elementType, True))
        return MajorType.list_of(element)
    return from_spark(dtype, nullable=field.nullable)


def has_mark(dtype: T.DataType) -> bool:
    if isinstance(dtype, T.StructType):
        return any((f.metadata or {}).get(UNION_MARK) or has_mark(f.dataType) for f in dtype.fields)
    if isinstance(dtype, T.ArrayType):
        return has_mark(dtype.elementType)
    return False


def revive(column: Column, target: T.DataType) -> Column:
    """A column of :func:`storage_schema` type with its JSON texts parsed into ``target``'s
    variants (a column without variants is returned as it is)."""
    if not has_variant(target):
        return column
    if isinstance(target, T.VariantType):
        return F.parse_json(column)
    if isinstance(target, T.StructType):
        members = [revive(column[f.name], f.dataType).alias(f.name) for f in target.fields]
        return F.when(column.isNull(), lit(None)).otherwise(F.struct(*members))
    if isinstance(target, T.ArrayType):
        return F.transform(column, lambda element: revive(element, target.elementType))
    raise TypeError(f"a variant inside {target.simpleString()} is not supported")


def as_text(column: Column, dtype: T.DataType) -> Column:
    """``column`` of type ``dtype`` with every variant replaced by its JSON text."""
    if not has_variant(dtype):
        return column
    if isinstance(dtype, T.VariantType):
        return F.to_json(column)
    if isinstance(dtype, T.StructType):
        members = [as_text(column[f.name], f.dataType).alias(f.name) for f in dtype.fields]
        return F.when(column.isNull(), lit(None)).otherwise(F.struct(*members))
    if isinstance(dtype, T.ArrayType):
        return F.transform(column, lambda element: as_text(element, dtype.elementType))
    raise TypeError(f"a variant inside {dtype.simpleString()} is not supported")


def marked_texts(df: DataFrame) -> DataFrame:
    """``df`` with every variant as its JSON text, in a field marked ``drill.union``: what a
    parquet store writes, as the local executor's files hold a UNION (Spark keeps the mark in
    the schema it writes in the footer, see :mod:`engine.storage.formats.parquet_unions`)."""
    columns = []
    for field, stored in zip(df.schema.fields, storage_schema(df.schema).fields, strict=True):
        text = as_text(column(field.name), field.dataType)
        if isinstance(stored.dataType, T.StructType | T.ArrayType):
            text = text.cast(nullable_spark_type(stored.dataType))  # the members' marks
        columns.append(text.alias(field.name, metadata=dict(stored.metadata or {})))
    return df.select(*columns)


def nullable_spark_type(dtype: T.DataType) -> T.DataType:
    """``dtype`` with every member and element nullable, their metadata kept (a cast to it then
    only adds what the metadata says).

    >>> nullable_spark_type(T.ArrayType(T.LongType(), False)).simpleString(), nullable_spark_type(
    ...     T.ArrayType(T.LongType(), False)).containsNull
    ('array<bigint>', True)
    """
    if isinstance(dtype, T.StructType):
        return T.StructType(
            [
                T.StructField(f.name, nullable_spark_type(f.dataType), True, f.metadata)
                for f in dtype.fields
            ]
        )
    if isinstance(dtype, T.ArrayType):
        return T.ArrayType(nullable_spark_type(dtype.elementType), True)
    return dtype


def collect_arrow(df: DataFrame, collect: Any = None) -> pa.Table:
    """``df`` collected as an Arrow table, variants as ``drill.union`` columns. ``collect``
    turns the (variant-free) DataFrame into a table (:func:`engine.exec.spark.collect.to_arrow`
    by default: ``DataFrame.toArrow``, or rows for records deeper than Arrow IPC allows)."""
    schema = df.schema
    collect = collect or to_arrow
    if not has_variant(schema):
        return collect(df)
    texts = df.select(*[as_text(column(f.name), f.dataType).alias(f.name) for f in schema.fields])
    table = collect(texts)
    columns = [
        _to_union(table.column(i).combine_chunks(), f.dataType) for i, f in enumerate(schema.fields)
    ]
    return pa.Table.from_arrays(columns, names=[f.name for f in schema.fields])


def _to_union(array: pa.Array, dtype: T.DataType) -> pa.Array:
    if not has_variant(dtype):
        return array
    if isinstance(dtype, T.VariantType):
        if is_union(array.type):
            return array
        return pa.ExtensionArray.from_storage(union_array([]).type, array.cast(pa.string()))
    mask = array.is_null() if array.null_count else None
    if isinstance(dtype, T.StructType):
        children = [_to_union(array.field(i), f.dataType) for i, f in enumerate(dtype.fields)]
        fields = [pa.field(f.name, c.type) for f, c in zip(dtype.fields, children)]
        return pa.StructArray.from_arrays(children, fields=fields, mask=mask)
    if isinstance(dtype, T.ArrayType):
        values = _to_union(array.values, dtype.elementType)
        offsets = array.offsets
        return pa.ListArray.from_arrays(offsets, values, mask=mask)
    return array


# ---------------------------------------------------------------- expressions over a union

_NUMBER_SCHEMAS = ("BIGINT", "INT", "SMALLINT", "TINYINT", "DOUBLE", "FLOAT", "DECIMAL")


def narrow_variants(args: list[Any]) -> list[Any]:
    """Function arguments (``Typed``) with each VARIANT narrowed to the kind of the other
    arguments' type: its value where it has that kind (a string where a string is compared),
    null elsewhere; as the local executor narrows a UNION."""
    from engine.exec.spark.paths import Typed
    from engine.exec.spark.spark_functions import ArgumentError, family

    like = next((a.dtype for a in args if not isinstance(a.dtype, T.VariantType)), None)
    kind = family(like) if like is not None else "null"
    narrowed = []
    for arg in args:
        if not isinstance(arg.dtype, T.VariantType):
            narrowed.append(arg)
            continue
        schema = F.schema_of_variant(arg.column)
        if kind == "string":
            test, dtype = schema == lit("STRING"), T.StringType()
        elif kind == "bool":
            test, dtype = schema == lit("BOOLEAN"), T.BooleanType()
        elif kind == "number":
            test = lit(False)
            for name in _NUMBER_SCHEMAS:
                test = test | schema.startswith(name)
            dtype = T.DoubleType()
        else:
            raise ArgumentError("a UNION value is only compared or combined with a typed value")
        value = F.when(test, F.try_variant_get(arg.column, "$", dtype.simpleString()))
        narrowed.append(Typed(value, dtype))
    return narrowed
