"""A plan's outline: what its Dagster definitions need of it, without the parsed plan.

Building a plan's definitions needs its operators (kind, id, inputs, JSON), the planner's notes,
the column lineage of its stores and its storage engines; a step that runs needs the parsed plan
itself. The outline holds the first, as plain values with a JSON round trip, so that a code
location whose plan files have not changed builds its definitions from outlines kept on disk
(:mod:`drill_dagster.outline_cache`) and parses a plan only when one of its steps runs.

>>> from engine.plan import parse_plan
>>> logical = parse_plan({"storage": {"fs": {"type": "fs", "root": "/d"}}, "query": [
...     {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "e", "selection": {"path": "ev"}},
...     {"@id": 2, "op": "filter", "input": 1, "expr": "e.n > 1"},
...     {"@id": 3, "op": "store", "input": 2, "storageengine": "fs", "target": {"path": "out"}}]})
>>> outline = PlanOutline.of(logical)
>>> [(o.id, o.op, o.inputs) for o in outline.topological_order()]
[('1', 'scan', ()), ('2', 'filter', ('1',)), ('3', 'store', ('2',))]
>>> PlanOutline.from_json(outline.to_json()) == outline
True
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.errors import DrillError
from engine.lineage import SourceColumn, column_lineage
from engine.plan import LogicalPlan, Operator, Scan, Store
from engine.plan.operators import ordered_operator_dict

# One encoder, not one per call: json.dumps builds a new one each time.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
_IGNORED_KEYS = frozenset({"memo"})


def canonical_json(value: Any) -> str:
    """``value`` as JSON with sorted keys and no whitespace: the same for equal documents (what
    a store's code version hashes).

    >>> canonical_json({"b": [1, {"y": 2, "x": 1}], "a": "t"})
    '{"a":"t","b":[1,{"x":1,"y":2}]}'
    """
    return _CANONICAL.encode(value)


@dataclass(frozen=True, slots=True)
class OperatorOutline:
    """One operator: its id, kind (``op``), the ids it reads, its JSON as pydantic writes it
    (``text``: what the graph description shows), its canonical JSON without ``memo`` texts
    (``canonical``: what code versions hash), the storage engine and the selection or target
    of a scan or store, its memo, and what the planner does to it (``note``), if anything."""

    id: str
    op: str
    inputs: tuple[str, ...]
    text: str
    canonical: str
    engine: str | None = None
    mapping: Mapping[str, Any] | None = None
    memo: str | None = None
    note: str | None = None

    @property
    def input_names(self) -> tuple[str, ...]:
        """The names of the operator op's inputs, in the order of ``inputs``."""
        if self.op == "join":
            return ("left", "right")
        if self.op == "union":
            return tuple(f"input_{i}" for i in range(len(self.inputs)))
        return ("upstream",) * min(1, len(self.inputs))

    def to_dict(self) -> dict[str, Any]:
        """The operator as plan JSON (:meth:`engine.plan.Operator.to_dict`)."""
        return ordered_operator_dict(self.id, self.op, json.loads(self.text))


@dataclass(frozen=True, slots=True)
class LineageOutline:
    """A store's column lineage (:class:`engine.lineage.StoreLineage`): the scanned columns each
    column it names is computed from, and whether it may write more columns (``is_open``)."""

    columns: tuple[tuple[str, tuple[SourceColumn, ...]], ...]
    is_open: bool

    def by_column(self) -> dict[str, tuple[SourceColumn, ...]]:
        return dict(self.columns)


@dataclass(frozen=True)
class PlanOutline:
    """What a plan's definitions need of it: its operators (document order) and their
    topological order, its storage engines (as plan JSON), its generator's info, the lineage of
    each store and whether any scan declares a schema."""

    operators: tuple[OperatorOutline, ...]
    order: tuple[str, ...]
    storage: Mapping[str, Mapping[str, Any]]
    generator: str | None
    lineage: Mapping[str, LineageOutline]
    declares_schema: bool
    _by_id: dict[str, OperatorOutline] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_id", {op.id: op for op in self.operators})

    @classmethod
    def of(cls, logical: LogicalPlan) -> PlanOutline:
        """The outline of a parsed plan."""
        from engine.planner.changes import structural_notes

        try:
            notes = structural_notes(logical)
        except DrillError:  # the run says it, naming the plan
            notes = {}
        operators = tuple(_operator(op, notes.get(op.id)) for op in logical.query)
        lineage = {
            store_id: LineageOutline(
                tuple(
                    (name, tuple(sorted(sources))) for name, sources in found.by_column().items()
                ),
                found.is_open,
            )
            for store_id, found in column_lineage(logical).items()
        }
        return cls(
            operators=operators,
            order=tuple(op.id for op in logical.topological_order()),
            storage={name: engine.to_dict() for name, engine in logical.storage.items()},
            generator=logical.head.generator.info or None,
            lineage=lineage,
            declares_schema=any(
                isinstance(op, Scan) and "schema" in (op.selection or {}) for op in logical.query
            ),
        )

    def operator(self, op_id: str) -> OperatorOutline:
        return self._by_id[op_id]

    def topological_order(self) -> list[OperatorOutline]:
        """Every operator after the ones it reads (as :meth:`LogicalPlan.topological_order`)."""
        return [self._by_id[op_id] for op_id in self.order]

    def ancestors(self, op_id: str) -> frozenset[str]:
        """``op_id`` and the ids of every operator it reads from, directly or not."""
        found: set[str] = set()
        pending = [op_id]
        while pending:
            current = pending.pop()
            if current not in found:
                found.add(current)
                pending.extend(self._by_id[current].inputs)
        return frozenset(found)

    def to_json(self) -> dict[str, Any]:
        """The outline as JSON values (:meth:`from_json` reads them back)."""
        return {
            "operators": [
                [
                    o.id,
                    o.op,
                    list(o.inputs),
                    o.text,
                    o.canonical,
                    o.engine,
                    o.mapping,
                    o.memo,
                    o.note,
                ]
                for o in self.operators
            ],
            "order": list(self.order),
            "storage": self.storage,
            "generator": self.generator,
            "lineage": {
                store_id: [
                    [
                        [name, [[s.scan_id, s.column] for s in sources]]
                        for name, sources in found.columns
                    ],
                    found.is_open,
                ]
                for store_id, found in self.lineage.items()
            },
            "declares_schema": self.declares_schema,
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> PlanOutline:
        """An outline from :meth:`to_json`'s values."""
        return cls(
            operators=tuple(
                OperatorOutline(i, op, tuple(inputs), text, canonical, engine, mapping, memo, note)
                for i, op, inputs, text, canonical, engine, mapping, memo, note in value[
                    "operators"
                ]
            ),
            order=tuple(value["order"]),
            storage=value["storage"],
            generator=value["generator"],
            lineage={
                store_id: LineageOutline(
                    tuple(
                        (name, tuple(SourceColumn(scan, column) for scan, column in sources))
                        for name, sources in columns
                    ),
                    is_open,
                )
                for store_id, (columns, is_open) in value["lineage"].items()
            },
            declares_schema=value["declares_schema"],
        )


def _operator(op: Operator, note: str | None) -> OperatorOutline:
    text = op.model_dump_json(by_alias=True, exclude_unset=True)
    document = json.loads(text)
    document["@id"] = op.id
    document["op"] = op.op
    canonical = canonical_json(document)
    if '"memo"' in canonical:  # rarely: walk the document only when a memo may be in it
        canonical = canonical_json(_without_memos(document))
    mapping = op.selection if isinstance(op, Scan) else op.target if isinstance(op, Store) else None
    return OperatorOutline(
        id=op.id,
        op=op.op,
        inputs=tuple(op.input_ids()),
        text=text,
        canonical=canonical,
        engine=op.__dict__.get("storage_engine"),
        mapping=mapping,
        memo=op.memo,
        note=note,
    )


def _without_memos(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_memos(v) for k, v in value.items() if k not in _IGNORED_KEYS}
    if isinstance(value, list):
        return [_without_memos(v) for v in value]
    return value
