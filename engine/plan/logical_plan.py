"""The validated logical plan: head, storage engines and a DAG of operators (sequences expanded).

Build one with :func:`engine.plan.parse_plan`; it validates everything and says where a problem is.
Two plans are equal when their head, storage and operators are; ``source`` (the file) is not compared.

>>> from engine.plan import parse_plan
>>> plan = parse_plan('''{head: {type: "APACHE_DRILL_LOGICAL", version: 1},
...   storage: {q: {type: "queue"}},
...   query: [{"@id": 1, op: "constant", content: [{a: 1}]},
...           {op: "store", input: 1, storageengine: "q", target: {number: 0}}]}''')
>>> [op.id for op in plan.topological_order()], [op.id for op in plan.sinks()]
(['1', '_op1'], ['_op1'])
>>> parse_plan(plan.to_dict()) == plan
True
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, InstanceOf, PrivateAttr

from engine.errors import PlanError, PlanIssue
from engine.plan.document import Head, StorageConfig
from engine.plan.graph import topological_ids
from engine.plan.operators import Operator, OperatorKind, SingleInputOperator
from engine.plan.paths import Location


class LogicalPlan(BaseModel):
    """A logical plan. ``query`` lists the operators in document order, sequences expanded."""

    # Built on first use: the parser makes plans with model_construct, so `validate` never needs
    # this model's validator.
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    head: Head = Field(default_factory=Head)
    storage: dict[str, StorageConfig] = Field(default_factory=dict)
    query: list[InstanceOf[Operator]] = Field(default_factory=list)
    source: str | None = Field(default=None, exclude=True)

    _by_id: dict[str, Operator] = PrivateAttr(default_factory=dict)
    _locations: dict[str, Location] = PrivateAttr(default_factory=dict)
    # The plan is frozen: its dependency order is worked out once (loading a thousand plans
    # into Dagster asks for it several times per plan).
    _order: list[str] | None = PrivateAttr(default=None)

    def model_post_init(self, context: Any, /) -> None:
        by_id = self._by_id  # private attributes are slow to reach
        for op in self.query:
            by_id.setdefault(op.id, op)

    def _all_locations(self) -> dict[str, Location]:
        # Where each operator was written: the parser's locations, else (a plan built in code)
        # its place in ``query``. Filled on first use: the parser and ``with_query`` set them all.
        private = self.__pydantic_private__
        locations = private["_locations"]
        if not private["_by_id"].keys() <= locations.keys():
            for i, op in enumerate(self.query):
                locations.setdefault(op.id, Location(f"$.query[{i}]"))
        return locations

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LogicalPlan):
            return NotImplemented
        return (self.head, self.storage, self.query) == (other.head, other.storage, other.query)

    __hash__ = None  # type: ignore[assignment]

    def _set_locations(self, locations: dict[str, Location]) -> LogicalPlan:
        # Called once by the parser, before the plan is handed out.
        self._locations.update(locations)
        return self

    def with_query(self, query: list[Operator]) -> LogicalPlan:
        """The same plan with its operators replaced (same ids; e.g. parameters substituted)."""
        # Built without validation: the head, the storage engines and the operators are
        # validated models already (planner rules make many such plans for each plan loaded).
        plan = LogicalPlan.model_construct(
            head=self.head, storage=dict(self.storage), query=list(query), source=self.source
        )
        return plan._set_locations(dict(self._all_locations()))

    # --- looking operators up -------------------------------------------------------------------

    def operator(self, op_id: str | int) -> Operator:
        """The operator with this id (``1`` and ``"1"`` are the same id)."""
        key = str(op_id)
        # pydantic reaches a private attribute through __getattr__ (slow on this hot path)
        by_id = self.__pydantic_private__["_by_id"]
        if key not in by_id:
            known = ", ".join(by_id) or "none"
            raise PlanError(f"the plan has no operator '{key}' (ids: {known})", source=self.source)
        return by_id[key]

    def inputs_of(self, op: Operator | str | int) -> list[Operator]:
        """The operators ``op`` reads, in order (join: left then right)."""
        return [self.operator(ref) for ref in self._resolve(op).input_ids()]

    def consumers_of(self, op: Operator | str | int) -> list[Operator]:
        """The operators that read ``op``'s output, in document order."""
        op_id = self._resolve(op).id
        return [other for other in self.query if op_id in other.input_ids()]

    def ancestors(self, op: Operator | str | int) -> frozenset[str]:
        """The ids of ``op`` and of every operator it reads from, directly or not."""
        found: set[str] = set()
        pending = [self._resolve(op).id]
        while pending:
            current = pending.pop()
            if current not in found:
                found.add(current)
                pending.extend(self.operator(current).input_ids())
        return frozenset(found)

    def sinks(self) -> list[Operator]:
        """The stores, in document order; each one is a result of the plan."""
        return [op for op in self.query if op.kind is OperatorKind.SINK]

    def sources(self) -> list[Operator]:
        """The scans and constants, in document order."""
        return [op for op in self.query if op.kind is OperatorKind.SOURCE]

    def ignored_operators(self) -> list[Operator]:
        """Operators with no input that nothing reads: they cannot run and are left out of the DAG."""
        return [op for op in self.query if isinstance(op, SingleInputOperator) and op.input is None]

    def topological_order(self) -> list[Operator]:
        """Every operator after the ones it reads (document order among equals), ignored ones left out."""
        private = self.__pydantic_private__
        order = private["_order"]
        if order is None:
            ignored = {op.id for op in self.ignored_operators()}
            graph = {op.id: op.input_ids() for op in self.query if op.id not in ignored}
            try:
                order = private["_order"] = topological_ids(graph)
            except ValueError as exc:
                raise PlanError(
                    f"the operators do not form a DAG: {exc}", source=self.source
                ) from None
        by_id = private["_by_id"]
        return [by_id[op_id] for op_id in order]

    def location_of(self, op: Operator | str | int) -> Location:
        """Where the operator was written in the source document."""
        return self._all_locations()[self._resolve(op).id]

    def path_of(self, op: Operator | str | int) -> str:
        """The JSON path of the operator in the source document, e.g. ``$.query[0].do[2]``."""
        return self.location_of(op).path

    @property
    def warnings(self) -> list[PlanIssue]:
        """Things that are legal but probably not meant: operators that can never run or whose output is lost."""
        found = [
            PlanIssue(
                f"this {op.op} has no input and no operator reads it: it is ignored",
                self.path_of(op),
                op.id,
            )
            for op in self.ignored_operators()
        ]
        if self.sinks():
            read = {ref for op in self.query for ref in op.input_ids()}
            found += [
                PlanIssue(
                    f"no operator reads the output of this {op.op}: it is lost",
                    self.path_of(op),
                    op.id,
                )
                for op in self.query
                if op.kind is not OperatorKind.SINK
                and op.id not in read
                and op not in self.ignored_operators()
            ]
        return found

    # --- dumping ----------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The plan as a JSON document (sequences stay expanded); :func:`parse_plan` reads it back equal."""
        return {
            "head": self.head.model_dump(mode="json", by_alias=True),
            "storage": {name: config.to_dict() for name, config in self.storage.items()},
            "query": [op.to_dict() for op in self.query],
        }

    def to_json(self, *, indent: int | None = 2) -> str:
        """:meth:`to_dict` as JSON text."""
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)

    def _resolve(self, op: Operator | str | int) -> Operator:
        return op if isinstance(op, Operator) else self.operator(op)
