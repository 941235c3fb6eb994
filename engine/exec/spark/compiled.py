"""What the Spark compiler makes of one operator: :class:`Compiled`, its DataFrame and the facts
its readers build on, found while compiling it (from its inputs' facts and its data's types).

A visitor returns its operator's DataFrame, or a :class:`Compiled` when it has facts to tell;
the compiler keeps one per operator id and gives each visitor its inputs'. Nothing else passes
from one visitor to another.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import types as T

from engine.exec.spark.compiler_window import FrameInput, SegmentInput
from engine.exec.spark.metrics import RowCounter
from engine.exec.spark.paths import PendingColumns
from engine.expr import Expr
from engine.plan.field_paths import Member
from engine.plan.parts import Ordering

KeyColumns = Mapping[Expr, "tuple[str, T.DataType]"]
"""Expressions kept as top-level columns: each to the column's name and type."""

Deferred = tuple[tuple[str, RowCounter | None], ...]
"""Row counts a DataFrame carries in columns, observed further on: each column with what
observes it (None once a reader took it: the column only to drop)."""


@dataclass(frozen=True)
class OrderInput:
    """An order's input and keys, for a top-N limit that sorts them itself."""

    input: DataFrame
    keys: list[tuple[Column, str, str]]  # each key's Column, direction and null collation
    tie_break: bool  # whether records that tie keep their input order
    fields: list[bool]  # whether each key reads a record field


@dataclass(frozen=True)
class Compiled:
    """One operator's DataFrame and what its readers need to know of it (all empty: nothing)."""

    df: Any  # the DataFrame (None for an operator not compiled)
    pending: PendingColumns | None = None
    """Its records' select, left to its one reader (``df`` is their base)."""

    keys: KeyColumns = field(default_factory=dict)
    """A window's partition keys kept as top-level columns, so that later windows partition by
    the same attribute and Spark reuses the shuffle."""

    key_order: tuple[Expr, ...] = ()
    """The expressions its records are grouped by, in sequence order (equal values adjacent,
    in order of first appearance), most significant first."""

    seq_members: tuple[Member | None, ...] | None = None
    """The record member each member of its sequence struct equals (see :mod:`spread`)."""

    ordered: bool = False
    """An ``order`` or ``limit`` is at or above it: a file store keeps its order."""

    sorted: bool = False
    """Its DataFrame is in sequence order partition by partition: nothing to sort."""

    deferred: Deferred | None = None
    """Row counts it carries in columns (None: the compiler passes on its input's, if it
    extends their records)."""

    segment: SegmentInput | None = None
    """A segment: what an aggregate fusing with it groups."""

    frame: FrameInput | None = None
    """A windowframe: what an aggregate over its frames aggregates."""

    order: OrderInput | None = None
    """An order (without ``within``): what a top-N limit reading it sorts."""

    store_keys: tuple[Sequence[Ordering], bool] | None = None
    """An order its store sorts: its orderings, and whether ties keep the input order."""

    store_order: Callable[[], list[Column]] | None = None
    """A project a store reads: the columns its store sorts by."""

    unchanged: bool = False
    """A filter with nothing left to test: ``df`` is its input's."""

    ties_differ: bool = False
    """A scan whose records may differ where its order's keys tie (-0.0 ties 0.0): the order
    breaks ties by the scan's order after all."""


NOTHING = Compiled(None)
"""What is known of an operator not compiled here."""


def observed(df: DataFrame, counts: Deferred) -> DataFrame:
    """``df`` with ``counts`` observed and their columns dropped."""
    for column, counter in counts:
        df = (df if counter is None else counter(df, column)).drop(column)
    return df
