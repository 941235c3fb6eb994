"""Fewer py4j round trips for what PySpark asks the JVM while a plan's DataFrames are built.

Building a DataFrame is a few hundred small py4j calls, each a round trip to the JVM (0.1-0.3 ms
here), and two kinds of them are avoidable:

* **Lookups.** PySpark calls a SQL function (``F.sum``) by looking up the class
  ``org.apache.spark.sql.functions`` by name and then its static method ``sum``: two reflection
  round trips before the call itself, at every call. The answers never change while the JVM
  lives, and py4j remembers them from its next release on (py4j/py4j#596, merged May 2026);
  pyspark 4.3 pins py4j below that release, so the same memo goes on the py4j classes in use. It
  remembers classes, packages and methods only: a static field is read from the JVM each time.
* **Lists.** py4j passes a Python list (the Columns of a ``select``, a ``struct``) as a new
  ``java.util.ArrayList`` and one ``add`` per element. Here the elements go ten at a time through
  ``java.util.List.of`` into the same ``ArrayList``: two calls for up to ten elements. Lists with
  a ``None`` (``List.of`` takes no null) or of one element go the old way.

:func:`fewer_round_trips` installs both for the whole process, the user's own PySpark code
included (py4j's behaviour is otherwise unchanged); :func:`restore_py4j` takes them out. The
executor installs them only where the session opts in (``spark.drill.py4jShortcuts``, see
:mod:`engine.exec.spark.settings`): by default the engine patches nothing. A warm benchmark run
of q3 (``spark_queries``, scale 0.1) asks the JVM 674 times without them and 396 times with both
(the compiler's own literals and column names are made once either way:
:mod:`engine.exec.spark.constant_columns`).

>>> from py4j.java_gateway import JavaClass
>>> original = JavaClass.__getattr__
>>> fewer_round_trips()
>>> fewer_round_trips()  # once is enough: the second call changes nothing
>>> restore_py4j()
>>> JavaClass.__getattr__ is original
True
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from py4j import protocol
from py4j.java_collections import ListConverter
from py4j.java_gateway import JavaClass, JavaMember, JavaPackage, JVMView

_MEMO = "_drill_remembered"
_CHUNK = 10  # java.util.List.of has fixed-arity overloads up to ten elements


_ORIGINALS: dict[tuple[type, str], Any] = {}  # (class, attribute) -> py4j's own function
_LOCK = threading.Lock()


def fewer_round_trips() -> None:
    """Remember py4j lookups and pass lists in chunks, for the whole process (idempotent; see
    the module)."""
    with _LOCK:
        for cls, kinds in (
            (JVMView, (JavaClass, JavaPackage)),
            (JavaPackage, (JavaClass, JavaPackage)),
            (JavaClass, (JavaClass, JavaMember)),
        ):
            if not getattr(cls.__getattr__, _MEMO, False):
                _ORIGINALS[(cls, "__getattr__")] = cls.__getattr__
                cls.__getattr__ = _remembering(cls.__getattr__, kinds)  # type: ignore[method-assign]
        if not getattr(ListConverter.convert, _MEMO, False):
            _ORIGINALS[(ListConverter, "convert")] = ListConverter.convert
            ListConverter.convert = _chunked(ListConverter.convert)  # type: ignore[method-assign]


def restore_py4j() -> None:
    """py4j's own lookups and list conversion again (what it remembered is forgotten with the
    objects holding it: a memo lives in each JVM view, package and class)."""
    with _LOCK:
        for (cls, name), original in _ORIGINALS.items():
            setattr(cls, name, original)
        _ORIGINALS.clear()


def _remembering(lookup: Callable[[Any, str], Any], kinds: tuple[type, ...]) -> Any:
    def remembered(self: Any, name: str) -> Any:
        memo = self.__dict__.get(_MEMO)
        if memo is not None and name in memo:
            return memo[name]
        found = lookup(self, name)
        if isinstance(found, kinds):  # a field's value (JavaObject, int, ...) is not remembered
            if memo is None:
                memo = self.__dict__[_MEMO] = {}
            memo[name] = found
        return found

    setattr(remembered, _MEMO, True)
    return remembered


def _chunked(one_by_one: Callable[[Any, Any, Any], Any]) -> Any:
    def convert(self: Any, values: Any, gateway_client: Any) -> Any:
        items = list(values)
        if len(items) < 2 or any(item is None for item in items):
            return one_by_one(self, items, gateway_client)
        of = JavaMember("of", None, protocol.STATIC_PREFIX + "java.util.List", gateway_client)
        java_list = JavaClass("java.util.ArrayList", gateway_client)(of(*items[:_CHUNK]))
        for start in range(_CHUNK, len(items), _CHUNK):
            chunk = items[start : start + _CHUNK]
            if len(chunk) == 1:
                java_list.add(chunk[0])
            else:
                java_list.addAll(of(*chunk))
        return java_list

    setattr(convert, _MEMO, True)
    return convert
