"""The Drill <-> Arrow <-> Spark type mapping round-trips, for every shape of type."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import types as t
from engine.expr.coercion import numeric_common
from engine.types import DataMode, MajorType, MinorType

SCALARS = [m for m in MinorType if m not in (MinorType.MAP, MinorType.LIST)]
NAMES = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=6)


def _normal(mode: DataMode) -> st.SearchStrategy[DataMode]:
    return st.sampled_from([DataMode.REQUIRED, DataMode.OPTIONAL, mode])


def drill_types() -> st.SearchStrategy[MajorType]:
    scalar = st.builds(
        MajorType,
        st.sampled_from([m for m in SCALARS if m not in (MinorType.NULL, MinorType.DECIMAL)]),
        _normal(DataMode.REPEATED),
    )
    decimals = st.builds(
        lambda precision, scale, mode: MajorType.decimal(precision, min(scale, precision), mode),
        st.integers(1, 38),
        st.integers(0, 38),
        _normal(DataMode.REPEATED),
    )
    scalar = scalar | decimals

    def nested(children: st.SearchStrategy[MajorType]) -> st.SearchStrategy[MajorType]:
        maps = st.builds(
            lambda fields, mode: MajorType.map(fields, mode),
            st.dictionaries(NAMES, children, min_size=1, max_size=4),
            _normal(DataMode.REPEATED),
        )
        # A LIST holds nullable elements or other lists; a list of non-null scalars is REPEATED.
        lists = st.builds(
            lambda element, mode: MajorType.list_of(element, mode),
            children.filter(lambda c: c.mode == DataMode.OPTIONAL or c.minor == MinorType.LIST),
            st.sampled_from([DataMode.REQUIRED, DataMode.OPTIONAL]),
        )
        return maps | lists

    return st.recursive(scalar, nested, max_leaves=8)


@given(drill_types())
def test_arrow_round_trip(typ: MajorType) -> None:
    field = t.to_arrow_field("c", typ)
    assert t.from_arrow_field(field) == typ


@settings(deadline=None)  # the first call imports pyspark's types (VARIANT's module included)
@given(drill_types())
def test_spark_round_trip(typ: MajorType) -> None:
    spark_type = t.to_spark(typ)
    assert t.from_spark(spark_type, nullable=typ.mode != DataMode.REQUIRED) == typ


def test_repeated_is_a_list_of_non_null_elements() -> None:
    repeated = MajorType(MinorType.BIGINT, DataMode.REPEATED)
    assert t.to_arrow(repeated) == pa.list_(pa.field("element", pa.int64(), nullable=False))
    assert str(repeated) == "REPEATED BIGINT"


def test_arrow_aliases_widen_to_drill_types() -> None:
    assert t.from_arrow(pa.int16()) == t.INT
    assert t.from_arrow(pa.large_string()) == t.VARCHAR
    assert t.from_arrow(pa.timestamp("ns")) == t.TIMESTAMP
    assert t.from_arrow(pa.decimal128(10, 2)) == MajorType.decimal(10, 2)
    with pytest.raises(TypeError, match="no Drill type"):
        t.from_arrow(pa.dictionary(pa.int8(), pa.string()))


def test_type_names_and_numeric_widening() -> None:
    assert t.type_from_name("bigint") == MinorType.BIGINT
    assert t.type_from_name("Boolean") == MinorType.BIT
    assert t.type_from_name("nonsense") is None
    assert numeric_common(t.INT, t.FLOAT8) == t.FLOAT8
    assert numeric_common(t.BIGINT, t.INT) == t.BIGINT
    assert numeric_common(t.MajorType.decimal(5, 2), t.BIGINT) == t.MajorType.decimal(21, 2)
    assert t.merge_modes(DataMode.REQUIRED, DataMode.OPTIONAL) == DataMode.OPTIONAL
    assert t.merge_modes(DataMode.REQUIRED) == DataMode.REQUIRED


def test_map_member_lookup_and_printing() -> None:
    m = MajorType.map({"a": t.BIGINT, "b": MajorType.map({"c": t.VARCHAR})})
    assert m.field("a") == t.BIGINT
    assert m.field("zz") is None
    assert str(m) == "MAP<a: BIGINT, b: MAP<c: VARCHAR>>"


def test_union_is_json_text_in_arrow_and_a_variant_in_spark() -> None:
    from pyspark.sql import types as st_

    values = [["x", 1], "solo", {"t": [True, None]}, None, 2.5]
    array = t.union_array(values)
    assert array.type == t.UNION_ARROW and t.from_arrow(array.type) == t.UNION
    assert array.storage.to_pylist()[:2] == ['["x",1]', '"solo"']
    assert array.to_pylist() == values
    assert pa.record_batch({"m": pa.StructArray.from_arrays([array], ["u"])}).to_pylist()[1] == {
        "m": {"u": "solo"}
    }
    assert isinstance(t.to_spark(t.UNION), st_.VariantType)
    assert str(t.UNION) == "UNION" and t.type_from_name("union") is None
