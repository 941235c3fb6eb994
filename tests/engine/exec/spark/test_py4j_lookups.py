"""Remembered py4j lookups: classes, packages and static methods are asked for once; fields and
names the JVM does not know are asked for every time."""

from __future__ import annotations

from typing import Any

import pytest
from py4j.protocol import Py4JError
from py4j_calls import counted
from pyspark.sql import functions as F

from engine.exec.spark.py4j_lookups import remember_lookups


@pytest.fixture
def jvm(spark: Any) -> Any:
    remember_lookups()
    return spark.sparkContext._jvm


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


def test_remembering_is_installed_once() -> None:
    from py4j.java_gateway import JavaClass

    remember_lookups()
    installed = JavaClass.__getattr__
    remember_lookups()
    assert JavaClass.__getattr__ is installed
