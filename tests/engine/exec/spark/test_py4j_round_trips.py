"""Fewer py4j round trips (the ``spark.drill.py4jShortcuts`` opt-in): classes, packages and static
methods are looked up once (fields and names the JVM does not know every time), and lists pass
ten elements a call. Each test installs them and takes them out again."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from py4j.protocol import Py4JError
from py4j_calls import counted
from pyspark.sql import functions as F

from engine.exec.spark.py4j_round_trips import fewer_round_trips, restore_py4j


@pytest.fixture
def jvm(spark: Any) -> Iterator[Any]:
    fewer_round_trips()
    try:
        yield spark.sparkContext._jvm
    finally:
        restore_py4j()


def test_a_sql_function_costs_the_call_alone_once_looked_up(jvm: Any) -> None:
    F.sum(F.col("x"))  # the first call looks the class and the method up
    with counted() as counts:
        column = F.sum(F.col("x"))
    assert counts.calls == 2  # col and sum: no reflection round trips
    assert str(column) == "Column<'sum(x)'>"


def test_classes_and_static_methods_are_the_same_objects_again(jvm: Any) -> None:
    functions = getattr(jvm, "org.apache.spark.sql.functions")
    assert getattr(jvm, "org.apache.spark.sql.functions") is functions
    assert functions.col is functions.col
    assert jvm.java.lang.Math is jvm.java.lang.Math  # a package walk too
    assert jvm.java.lang.Math.max(1, 0) == 1
    with counted() as counts:
        assert jvm.java.lang.Math.max(2, 3) == 3
    assert counts.calls == 1


def test_a_static_field_is_read_from_the_jvm_each_time(jvm: Any) -> None:
    assert jvm.java.lang.Integer.MAX_VALUE == 2**31 - 1
    with counted() as counts:
        assert jvm.java.lang.Integer.MAX_VALUE == 2**31 - 1
    assert counts.calls == 1  # the field's value, not the class


def test_a_name_the_jvm_does_not_know_is_asked_again(jvm: Any) -> None:
    for _ in range(2):
        with counted() as counts, pytest.raises(Py4JError, match="does not exist"):
            jvm.java.lang.Math.no_such_method_here  # noqa: B018
        assert counts.calls == 1


def test_the_shortcuts_are_installed_once() -> None:
    from py4j.java_collections import ListConverter
    from py4j.java_gateway import JavaClass

    original = JavaClass.__getattr__, ListConverter.convert
    fewer_round_trips()
    try:
        installed = JavaClass.__getattr__, ListConverter.convert
        fewer_round_trips()
        assert (JavaClass.__getattr__, ListConverter.convert) == installed
    finally:
        restore_py4j()
    assert (JavaClass.__getattr__, ListConverter.convert) == original


@pytest.mark.parametrize(
    ("size", "calls"), [(0, 1), (1, 2), (2, 2), (10, 2), (11, 3), (21, 5), (25, 6)]
)
def test_a_list_passes_ten_elements_a_call(jvm: Any, size: int, calls: int) -> None:
    """Two calls for up to ten elements (List.of, then the ArrayList), two more for each ten
    after (List.of, addAll; one add for a last one); fewer than two go one by one."""
    values = [f"v{i}" for i in range(size)]
    jvm.java.util.ArrayList(["looked", "up"])
    with counted() as counts:
        java_list = jvm.java.util.ArrayList(values)  # one call of its own, the copy
    assert counts.calls == 1 + calls
    assert list(java_list) == values


def test_lists_keep_their_elements_kinds_nulls_and_nesting(jvm: Any) -> None:
    values = [1, "two", 3.5, True, None, [4, [5]], {"k": 6}]
    java_list = jvm.java.util.ArrayList(values)
    assert java_list.getClass().getName() == "java.util.ArrayList"
    assert java_list.get(4) is None
    assert java_list.get(5).toString() == "[4, [5]]" and java_list.get(6)["k"] == 6
    without_null = jvm.java.util.ArrayList([1, "two", [4, [5]], (7, 8)])
    assert [without_null.get(i) for i in (0, 1)] == [1, "two"]
    assert without_null.get(2).toString() == "[4, [5]]"
    assert without_null.get(3).toString() == "[7, 8]"
    without_null.add(9)  # a mutable ArrayList, as before
    assert without_null.size() == 5
