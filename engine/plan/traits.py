"""What each logical operator preserves of its input, whatever its parameters: one table.

Analyses that walk a plan (the planner's rules, the executors' row counts and order needs) ask
:func:`traits` of an operator instead of keeping sets of operator names of their own, so a new
operator is described once, here (``tests/engine/test_operator_coverage.py`` checks every
operator has a row).

>>> traits("filter").keeps_partitions, traits("filter").one_to_one
(True, False)
>>> sorted(operators_where(lambda t: t.extends_records))
['runningaggregate', 'segment', 'transform']
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class OperatorTraits:
    """What an operator keeps of its input's records (all False: nothing is promised)."""

    one_to_one: bool = False
    """Exactly one output record per input record: its row count is always its input's."""

    extends_records: bool = False
    """Each output record is its input record in the same place, with members added or replaced
    (no record dropped, moved or renamed away): what an input record carries passes on."""

    record_wise: bool = False
    """Each output record is one input record, whole or reshaped by expressions over that record
    alone, and no record is added: the input's size bounds the output's."""

    keeps_partitions: bool = False
    """Each output record is made where its input record is, in its input's order: a partition
    of the input stays a partition of the output, in the same order."""

    passes_order: bool = False
    """Its output order is built from its inputs' orders: an order its readers observe is one
    its inputs must keep."""

    orders: bool = False
    """Its output comes in an order a reader may rely on whatever its input's (an order sorts; a
    limit keeps its input's first records, in their order): everything above it is ordered."""

    keeps_names: bool = False
    """Its records keep their input's top-level names (plus any it names itself)."""

    projects: bool = False
    """Its output members are expressions over its input record (a select): a name of its output
    need not mean what the same name of its input meant."""


_TRAITS: dict[str, OperatorTraits] = {
    "scan": OperatorTraits(),
    "constant": OperatorTraits(),
    "join": OperatorTraits(passes_order=True),
    "union": OperatorTraits(passes_order=True),
    "store": OperatorTraits(),
    "project": OperatorTraits(
        one_to_one=True, record_wise=True, keeps_partitions=True, passes_order=True, projects=True
    ),
    "order": OperatorTraits(one_to_one=True, record_wise=True, orders=True, keeps_names=True),
    "filter": OperatorTraits(
        record_wise=True, keeps_partitions=True, passes_order=True, keeps_names=True
    ),
    "transform": OperatorTraits(
        one_to_one=True,
        extends_records=True,
        record_wise=True,
        keeps_partitions=True,
        passes_order=True,
        keeps_names=True,
        projects=True,
    ),
    "limit": OperatorTraits(record_wise=True, orders=True, keeps_names=True),
    "segment": OperatorTraits(one_to_one=True, extends_records=True, keeps_names=True),
    "windowframe": OperatorTraits(keeps_names=True),
    "collapsingaggregate": OperatorTraits(),
    "runningaggregate": OperatorTraits(one_to_one=True, extends_records=True, keeps_names=True),
    "flatten": OperatorTraits(keeps_partitions=True, passes_order=True, keeps_names=True),
}


def traits(op: str) -> OperatorTraits:
    """The traits of operator kind ``op`` (its ``op`` name); a kind without a row promises
    nothing."""
    return _TRAITS.get(op, _NONE)


def operators_where(test: Callable[[OperatorTraits], bool]) -> frozenset[str]:
    """The operator kinds whose traits pass ``test``."""
    return frozenset(op for op, row in _TRAITS.items() if test(row))


def described_operators() -> frozenset[str]:
    """The operator kinds the table has a row for."""
    return frozenset(_TRAITS)


_NONE = OperatorTraits()
