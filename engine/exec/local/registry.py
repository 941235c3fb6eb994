"""Creators of local runtime operators, one per logical operator (seed 001: a creator per operator).

An operator module registers its creator with :func:`creator`; the executor looks them up by ``op``.
A creator receives the plan operator, its already-created inputs and the :class:`ExecContext`, and
returns a :class:`~engine.exec.protocol.BatchOperator` whose constructor does no schema work.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.exec.protocol import BatchOperator
from engine.plan.operators import Operator

DEFAULT_BATCH_ROWS = 65_536
DEFAULT_MAX_BUFFERED_BYTES = 2 * 2**30
DEFAULT_BATCH_BYTES = 16 * 2**20


@dataclass
class ExecContext:
    """What operators of one run share: storage engines, limits and parameters (what they found
    out is the run's: :class:`~engine.exec.local.executor.LocalRun`)."""

    engines: dict[str, Any] = field(default_factory=dict)  # name -> engine.storage StorageEngine
    classpath: list[Path] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    batch_rows: int = DEFAULT_BATCH_ROWS
    batch_bytes: int = DEFAULT_BATCH_BYTES  # a scan's batches of narrow records, up to 8x the rows
    max_buffered_bytes: int = DEFAULT_MAX_BUFFERED_BYTES

    def engine(self, name: str) -> Any:
        return self.engines[name]


Creator = Callable[[Any, list[BatchOperator], ExecContext], BatchOperator]
CREATORS: dict[str, Creator] = {}


def creator(op: str) -> Callable[[Creator], Creator]:
    """Register the creator of the local operator for logical ``op``."""

    def register(function: Creator) -> Creator:
        CREATORS[op] = function
        return function

    return register


def local_operators() -> frozenset[str]:
    """The logical operators (``op`` names) the local executor implements."""
    _load_operator_modules()
    return frozenset(CREATORS)


def create(op: Operator, inputs: list[BatchOperator], ctx: ExecContext) -> BatchOperator:
    _load_operator_modules()
    try:
        make = CREATORS[op.op]
    except KeyError:
        from engine.errors import PlanningError

        raise PlanningError(
            f"operator {op.id}: the local executor has no '{op.op}' operator"
        ) from None
    return make(op, inputs, ctx)


@functools.cache
def _load_operator_modules() -> None:
    """Import every operator module once, so their creators are registered."""
    import importlib
    import pkgutil

    import engine.exec.local as package

    for info in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{info.name}")
