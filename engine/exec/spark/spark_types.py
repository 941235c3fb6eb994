"""Drill types as Spark's: the nullable types both executors give a scan's columns, the Spark
schema of a scan, and Arrow batches cast exactly to what Spark expects of a Python data source."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa
from pyspark.sql.types import StructField, StructType

from engine.exec.spark.unions import drill_type_of_storage, nullable_spark_type
from engine.types import DataMode, MajorType, MinorType, align, to_arrow_field, to_spark

# ---------------------------------------------------------------- types


def nullable_type(t: MajorType) -> MajorType:
    """``t`` as Spark's file sources hold it: nullable at every level (REPEATED X -> LIST<X>).

    >>> from engine.types import BIGINT
    >>> str(nullable_type(MajorType.map({"a": BIGINT.with_mode(DataMode.REPEATED)}, DataMode.REQUIRED)))
    'MAP<a: LIST<BIGINT>>'
    """
    if t.mode == DataMode.REPEATED:
        return MajorType.list_of(nullable_type(t.with_mode(DataMode.OPTIONAL)))
    if t.minor == MinorType.MAP:
        return MajorType.map({name: nullable_type(child) for name, child in t.fields})
    if t.minor == MinorType.LIST and t.element is not None:
        return MajorType.list_of(nullable_type(t.element))
    return t.with_mode(DataMode.OPTIONAL)


def spark_schema_of(types: Mapping[str, MajorType]) -> StructType:
    """The Spark schema of output columns with these Drill types (every field nullable).

    >>> from engine.types import VARCHAR
    >>> spark_schema_of({"a": VARCHAR}).simpleString()
    'struct<a:string>'
    """
    return StructType(
        [StructField(name, nullable_spark_type(to_spark(t)), True) for name, t in types.items()]
    )


def committed_schema(spark_schema: StructType, implicit: Sequence[str]) -> pa.Schema:
    """The table columns of a declared Spark schema as the Arrow schema a tracker commits."""
    return pa.schema(
        [
            to_arrow_field(f.name, drill_type_of_storage(f))
            for f in spark_schema.fields
            if f.name not in implicit
        ]
    )


def conform_batch(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """``batch`` with exactly the fields of ``target`` (matched by name, missing ones null).

    >>> target = pa.schema([("a", pa.int64()), ("b", pa.struct([("c", pa.string())]))])
    >>> conform_batch(pa.record_batch({"a": pa.array([1], pa.int32())}), target).to_pylist()
    [{'a': 1, 'b': None}]
    """
    positions = {name.lower(): i for i, name in enumerate(batch.schema.names)}
    arrays = []
    for target_field in target:
        index = positions.get(target_field.name.lower())
        if index is None:
            arrays.append(pa.nulls(batch.num_rows, target_field.type))
        else:
            arrays.append(_conform(batch.column(index), target_field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=target)


def _conform(array: pa.Array, target: pa.DataType) -> pa.Array:
    if pa.types.is_time(array.type) and pa.types.is_timestamp(target):
        # Drill's TIME is Spark's TIMESTAMP_NTZ on 1970-01-01: the same microseconds.
        return array.cast(pa.time64("us")).view(pa.int64()).cast(target)
    return align(array, target)
