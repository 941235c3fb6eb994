"""``parse_plan``: read a plan document, expand its sequences and validate all of it at once.

Every problem found is collected; one :class:`~engine.errors.PlanError` names the file and, for each
problem, the JSON path in the document as written and the operator id.

>>> parse_plan('{"op": "constant", "content": [{"c1": 1}]}').query[0].id
'_op0'
>>> parse_plan('{"op": "scna"}')
Traceback (most recent call last):
...
engine.errors.PlanError: plan: 1 problem
  $.op (operator _op0): unknown op 'scna' (did you mean 'scan'?)
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from engine.errors import PlanError, PlanIssue
from engine.plan.document import Head, StorageConfig
from engine.plan.issues import describe_json, issues_from_validation, suggest
from engine.plan.logical_plan import LogicalPlan
from engine.plan.operators import OP_NAMES, OPERATORS, Operator
from engine.plan.paths import Location, json_path
from engine.plan.sequence import RawOperator, expand_query, explicit_ids
from engine.plan.source import PlanSource, read_document
from engine.plan.store_targets import check_store_targets
from engine.plan.validate import PlacedOperator, check_operators

DOCUMENT_KEYS = ("head", "storage", "query")
STORAGE_KEYS = ("storage", "engines")  # seed 000 calls it "the engines clause"
_ALIASES = {"storageEngine": "storageengine", "storage_engine": "storageengine", "id": "@id"}
_FLATTEN_ALIASES = {**_ALIASES, "name": "ref"}
MAX_NESTING = 256  # JSON levels; deeper values cannot be serialized or explained, only crash

M = TypeVar("M", bound=BaseModel)


def parse_plan(source: PlanSource, *, source_name: str | None = None) -> LogicalPlan:
    """Parse and validate a logical plan.

    ``source`` is a :class:`~pathlib.Path`, a path string, JSON text (relaxed JSON allowed) or a dict.
    A document that is a single operator (``{"op": "constant", ...}``) is a plan of that operator.
    Raises :class:`~engine.errors.PlanError` listing every problem; a syntax error is a
    :class:`~engine.errors.PlanSyntaxError`.
    """
    document, name, text = read_document(source, source_name=source_name)
    # A text with fewer brackets than the limit cannot nest deeper: no walk over the document.
    shallow = text is not None and text.count("{") + text.count("[") < MAX_NESTING
    too_deep = None if shallow else _too_deep(document)
    if too_deep is not None:
        raise PlanError(
            PlanIssue(
                f"the value here is nested more than {MAX_NESTING} levels deep; "
                "flatten it or read such data from a file",
                json_path("$", *too_deep),
            ),
            source=name,
        )
    return _Builder(name).build(document)


def _too_deep(document: Any) -> tuple[str | int, ...] | None:
    """The path (first components) of a value nested past :data:`MAX_NESTING`, or None."""
    # Level by level, containers only: no paths are built unless the document is too deep.
    level = [document] if isinstance(document, (dict, list)) else []
    depth = 0
    while level:
        if depth >= MAX_NESTING:
            return _deep_path(document)
        below: list[Any] = []
        for value in level:
            children = value.values() if isinstance(value, dict) else value
            below.extend(child for child in children if isinstance(child, (dict, list)))
        level = below
        depth += 1
    return None


def _deep_path(document: Any) -> tuple[str | int, ...] | None:
    stack: list[tuple[Any, int, tuple[str | int, ...]]] = [(document, 0, ())]
    while stack:
        value, depth, path = stack.pop()
        if depth > MAX_NESTING:
            return path[:4]
        if isinstance(value, dict):
            stack.extend((v, depth + 1, (*path, str(k))[:4]) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, depth + 1, (*path, i)[:4]) for i, v in enumerate(value))
    return None


class _Builder:
    def __init__(self, source: str | None) -> None:
        self.source = source
        self.issues: list[PlanIssue] = []
        self.engine_names: list[
            str
        ] = []  # declared engines, including ones whose settings are wrong

    def build(self, document: Any) -> LogicalPlan:
        if not isinstance(document, dict):
            raise PlanError(
                f"a plan must be a JSON object with 'head', 'storage' and 'query', not {describe_json(document)}",
                source=self.source,
            )
        if "op" in document and "query" not in document:
            head, storage = Head(), {}
            raw = expand_query([document], self.issues, taken=explicit_ids([document]))
            for op in raw:  # the document itself is the operator
                op.location = _rebase(op.location, "$.query[0]", "$")
        else:
            head = self._head(document)
            storage = self._storage(document)
            raw = self._query(document)
        placed = [self._operator(op) for op in raw]
        self.issues.extend(check_operators(placed, self.engine_names or list(storage)))
        self.issues.extend(check_store_targets(placed, storage))
        if self.issues:
            raise PlanError(self.issues, source=self.source)
        # Built without a second validation: the head, the engines and the operators were just
        # validated one by one (where each problem is reported with its path).
        plan = LogicalPlan.model_construct(
            head=head,
            storage=storage,
            query=[entry.model for entry in placed if entry.model is not None],
            source=self.source,
        )
        return plan._set_locations({entry.op_id: entry.location for entry in placed})

    # --- the document around the operators ------------------------------------------------------

    def _head(self, document: dict[str, Any]) -> Head:
        for key in document:
            if key not in (*DOCUMENT_KEYS, *STORAGE_KEYS):
                self.issues.append(
                    PlanIssue(
                        f"unknown field '{key}'{suggest(key, DOCUMENT_KEYS)}; a plan has 'head', 'storage' and 'query'",
                        json_path("$", key),
                    )
                )
        if (
            "head" not in document
        ):  # hand-written plans may leave it out; upstream files always have it
            return Head()
        return self._validate(Head, document["head"], Location("$.head"), None) or Head()

    def _storage(self, document: dict[str, Any]) -> dict[str, StorageConfig]:
        present = [key for key in STORAGE_KEYS if key in document]
        if len(present) > 1:
            self.issues.append(
                PlanIssue(
                    "give the storage engines once, as 'storage' (not also 'engines')", "$.engines"
                )
            )
        if not present:
            return {}
        key = present[0]
        engines = document[key]
        base = json_path("$", key)
        if engines is None:
            return {}
        if isinstance(engines, list):
            return self._storage_list(engines, base)
        if not isinstance(engines, dict):
            self.issues.append(
                PlanIssue(
                    f"'{key}' must map engine names to engine settings, not {describe_json(engines)}",
                    base,
                )
            )
            return {}
        storage: dict[str, StorageConfig] = {}
        for name, config in engines.items():
            self.engine_names.append(name)
            validated = self._validate(StorageConfig, config, Location(json_path(base, name)), None)
            if validated is not None:
                storage[name] = validated
        return storage

    def _storage_list(self, engines: list[Any], base: str) -> dict[str, StorageConfig]:
        # The pre-2013-03-16 form: [{type, name, ...}] (constant2.json and the branch plans).
        storage: dict[str, StorageConfig] = {}
        for i, config in enumerate(engines):
            path = json_path(base, i)
            if not isinstance(config, dict):
                self.issues.append(
                    PlanIssue(
                        f"a storage engine must be an object, not {describe_json(config)}", path
                    )
                )
                continue
            name = config.get("name")
            if not isinstance(name, str) or not name:
                self.issues.append(
                    PlanIssue(
                        "missing required field 'name' (in the list form every engine is named)",
                        path,
                    )
                )
                continue
            if name in storage:
                self.issues.append(
                    PlanIssue(f"storage engine '{name}' is declared twice", json_path(path, "name"))
                )
                continue
            settings = {k: v for k, v in config.items() if k != "name"}
            validated = self._validate(StorageConfig, settings, Location(path), None)
            if validated is not None:
                storage[name] = validated
        return storage

    def _query(self, document: dict[str, Any]) -> list[RawOperator]:
        query = document.get("query")
        if query is None:
            self.issues.append(
                PlanIssue("missing required field 'query' (the list of operators)", "$")
            )
            return []
        if not isinstance(query, list):
            self.issues.append(
                PlanIssue(
                    f"'query' must be a list of operators, not {describe_json(query)}", "$.query"
                )
            )
            return []
        return expand_query(query, self.issues, taken=explicit_ids(query))

    # --- one operator -----------------------------------------------------------------------------

    def _operator(self, raw: RawOperator) -> PlacedOperator:
        op = raw.body.get("op")
        location = _with_alias_paths(raw.location, raw.body)
        if op is None:
            self.issues.append(
                PlanIssue(
                    f"missing required field 'op' (one of {', '.join(OP_NAMES)})",
                    location.path,
                    raw.op_id,
                )
            )
            return PlacedOperator(raw.op_id, None, location)
        if not isinstance(op, str):
            self.issues.append(
                PlanIssue(
                    f"'op' must be a string, not {describe_json(op)}", location.of("op"), raw.op_id
                )
            )
            return PlacedOperator(raw.op_id, None, location)
        cls = OPERATORS.get(op.lower())
        if cls is None:
            hint = suggest(op.lower(), OP_NAMES) or f"; the operators are {', '.join(OP_NAMES)}"
            self.issues.append(PlanIssue(f"unknown op '{op}'{hint}", location.of("op"), raw.op_id))
            return PlacedOperator(raw.op_id, None, location)
        lowered = op.lower()
        body = raw.body if op == lowered else {**raw.body, "op": lowered}
        model = self._validate(cls, body, location, raw.op_id)
        return PlacedOperator(raw.op_id, model, location)

    def _validate(
        self, model: type[M], value: Any, location: Location, op_id: str | None
    ) -> M | None:
        if not isinstance(value, dict):
            what = (
                "an operator"
                if issubclass(model, Operator)
                else f"'{location.path.rsplit('.', 1)[-1]}'"
            )
            self.issues.append(
                PlanIssue(
                    f"{what} must be a JSON object, not {describe_json(value)}",
                    location.path,
                    op_id,
                )
            )
            return None
        try:
            return model.model_validate(value)
        except ValidationError as exc:
            self.issues.extend(issues_from_validation(exc, model, location, op_id))
            return None


def _with_alias_paths(location: Location, body: dict[str, Any]) -> Location:
    """Point the canonical key at the spelling the author used (``storageEngine``, flatten's ``name``)."""
    spelled = _FLATTEN_ALIASES if str(body.get("op")).lower() == "flatten" else _ALIASES
    moved = None  # a copy only when an alias is used: most operators use none
    for key, canonical in spelled.items():
        if key in body and canonical not in body and canonical not in (moved or location.moved):
            moved = moved if moved is not None else dict(location.moved)
            moved[canonical] = json_path(location.path, key)
    return location if moved is None else Location(location.path, moved)


def _rebase(location: Location, old: str, new: str) -> Location:
    def swap(path: str) -> str:
        return new + path[len(old) :] if path.startswith(old) else path

    return Location(swap(location.path), {key: swap(path) for key, path in location.moved.items()})
