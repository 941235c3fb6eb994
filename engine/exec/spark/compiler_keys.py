"""What the compiler's visitors share of field paths: which leading sort keys of an input an
operator's output keeps (the keys it neither writes over nor drops), and reading a field through
columns left pending.

>>> reads_field("l.l_orderkey"), reads_field("revenue"), reads_field("a.b + 1")
(True, True, False)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.exec.spark.paths import (
    PendingColumns,
    Typed,
)
from engine.expr import Expr, FieldRef, field_refs
from engine.plan.expressions import parse_cached
from engine.plan.field_paths import Path, writable_path
from engine.plan.field_paths import overlaps as _overlap
from engine.plan.field_paths import path_of as _path_of
from engine.plan.field_paths import under as _under
from engine.plan.operators import (
    Segment,
    Transform,
)
from engine.plan.traits import traits


def keeps_key(op: Any, expr: Expr) -> bool:
    """Whether ``op``'s output keeps ``expr``'s value of its input in the same column."""
    if not traits(op.op).extends_records:
        return False
    if isinstance(op, Transform):
        written = [writable_path(t.ref, "transform ref") for t in op.transforms]
    elif isinstance(op, Segment):
        written = [writable_path(op.ref, "segment ref")]
    else:
        written = [writable_path(a.ref, "aggregation ref") for a in op.aggregations]
    return bool(unwritten_keys([expr], written))


def reads_field(text: str) -> bool:
    """Whether an expression reads a column or a record's member by name, and nothing else."""
    tree = parse_cached(text)
    return isinstance(tree, FieldRef) and all(isinstance(p, str) for p in tree.path)


def unwritten_keys(leading: Sequence[Expr], written: Sequence[Path]) -> list[Expr]:
    """The leading keys before the first that reads a path in ``written``."""
    kept: list[Expr] = []
    for expr in leading:
        if any(_overlap(_path_of(r), w) for r in field_refs(expr) for w in written):
            break
        kept.append(expr)
    return kept


def leading_carried(
    leading: Sequence[Expr], carried: Sequence[Path], written: Sequence[Path]
) -> list[Expr]:
    """The leading keys before the first that reads a path outside ``carried`` (a record's values
    carried over as they are) or in ``written``."""
    kept: list[Expr] = []
    for expr in unwritten_keys(leading, written):
        refs = field_refs(expr)
        if not refs or not all(any(_under(_path_of(r), c) for c in carried) for r in refs):
            break
        kept.append(expr)
    return kept


def read_pending_field(pending: PendingColumns, ref: FieldRef) -> Typed:
    """A field read through pending columns (a ``compile_typed`` resolver)."""
    return pending.read(ref.path)
