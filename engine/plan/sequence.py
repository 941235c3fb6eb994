"""Expanding ``sequence`` operators into plain operators (seed 000, "Sequence").

A sequence's ``input`` feeds its first operator and its ``@id`` names its last; every other member
gets a generated id and reads the member before it. Operators inside a sequence take no ``@id`` or
``input`` of their own (the † rule). Every element after the first reads one input; only the last
may be a sink.

Works on the raw JSON so that every problem keeps the path of the document the author wrote.

>>> ops = expand_query([{"@id": 5, "op": "sequence", "input": 1, "do": [
...     {"op": "filter", "expr": "a > 1"}, {"op": "limit", "last": 2}]}], [], taken={"1"})
>>> [(op.body["@id"], op.body["input"], op.location.path) for op in ops]
[('_seq0.0', '1', '$.query[0].do[0]'), ('5', '_seq0.0', '$.query[0].do[1]')]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.errors import PlanIssue
from engine.plan.ids import IdAllocator, normalize_op_id
from engine.plan.issues import suggest
from engine.plan.operators import OPERATORS, OperatorKind
from engine.plan.paths import Location, json_path

ID_KEYS = ("@id", "id")
SEQUENCE_KEYS = ("op", "@id", "id", "memo", "input", "do")


@dataclass
class RawOperator:
    """One operator of the expanded query, still raw JSON: ``body`` has its ``@id`` (and ``input``)."""

    body: dict[str, Any]
    location: Location
    op_id: str

    @property
    def op_name(self) -> str | None:
        op = self.body.get("op")
        return op.lower() if isinstance(op, str) else None


def raw_op_id(entry: dict[str, Any]) -> str | None:
    """The entry's ``@id`` as a string, or None when absent or not a valid id."""
    for key in ID_KEYS:
        if key in entry:
            try:
                value = normalize_op_id(entry[key])
            except ValueError:
                return None
            return value if isinstance(value, str) else None
    return None


def expand_query(
    entries: list[Any], issues: list[PlanIssue], *, taken: set[str], base: str = "$.query"
) -> list[RawOperator]:
    """The operators of ``query`` with sequences expanded; problems are appended to ``issues``."""
    allocator = IdAllocator(taken)
    out: list[RawOperator] = []
    for i, entry in enumerate(entries):
        path = json_path(base, i)
        if not isinstance(entry, dict):
            issues.append(
                PlanIssue(f"an operator must be a JSON object, not {_json_kind(entry)}", path)
            )
            continue
        op = entry.get("op")
        if isinstance(op, str) and op.lower() == "sequence":
            _Expander(allocator, issues, out).expand(entry, path, prefix=f"_seq{i}")
            continue
        op_id = raw_op_id(entry) or allocator.allocate(f"_op{i}")
        body = _with_id(entry, op_id)
        out.append(RawOperator(body, Location(path), op_id))
    return out


def explicit_ids(entries: list[Any]) -> set[str]:
    """The ids the query spells out (its operators' and its sequences' ``@id``)."""
    return {op_id for e in entries if isinstance(e, dict) and (op_id := raw_op_id(e)) is not None}


def _with_id(entry: dict[str, Any], op_id: str) -> dict[str, Any]:
    # Keep an id pydantic must reject (a list, a bool) so the author hears about it.
    if any(key in entry for key in ID_KEYS) and raw_op_id(entry) is None:
        return dict(entry)
    body = {key: value for key, value in entry.items() if key not in ID_KEYS}
    return {"@id": op_id, **body}


class _Expander:
    def __init__(
        self, allocator: IdAllocator, issues: list[PlanIssue], out: list[RawOperator]
    ) -> None:
        self.allocator = allocator
        self.issues = issues
        self.out = out

    def expand(
        self,
        sequence: dict[str, Any],
        path: str,
        *,
        prefix: str,
        feed: tuple[str, str] | None = None,
        last_id: tuple[str, str] | None = None,
    ) -> tuple[str, str] | None:
        """Expand one sequence; ``feed`` is (input id, its path), ``last_id`` (id, its path) names the last.

        Returns (id, path) of the last operator, which feeds whatever follows the sequence.
        """
        seq_id = raw_op_id(sequence)
        if feed is None and "input" in sequence:
            feed = self._sequence_input(sequence, path)
        if last_id is None and seq_id is not None:
            key = next(k for k in ID_KEYS if k in sequence)
            last_id = (seq_id, json_path(path, key))
        elif last_id is None and any(key in sequence for key in ID_KEYS):
            key = next(k for k in ID_KEYS if k in sequence)
            self.issues.append(
                PlanIssue("an operator id must be a string or an integer", json_path(path, key))
            )
        self._check_envelope(sequence, path, seq_id)
        members = sequence.get("do")
        if members is None:
            self.issues.append(
                PlanIssue(
                    "missing required field 'do' (the operators of the sequence)", path, seq_id
                )
            )
            return None
        if not isinstance(members, list) or not members:
            what = "an empty list" if isinstance(members, list) else _json_kind(members)
            self.issues.append(
                PlanIssue(
                    f"'do' must list the operators of the sequence, not {what}",
                    json_path(path, "do"),
                    seq_id,
                )
            )
            return None
        previous = feed
        for k, member in enumerate(members):
            member_path = json_path(path, "do", k)
            is_last = k == len(members) - 1
            if not isinstance(member, dict):
                self.issues.append(
                    PlanIssue(
                        f"an operator must be a JSON object, not {_json_kind(member)}", member_path
                    )
                )
                continue
            name = member.get("op").lower() if isinstance(member.get("op"), str) else None
            if name == "sequence":
                body = self._strip_dagger_keys(member, member_path, None)
                previous = self.expand(
                    body,
                    member_path,
                    prefix=f"{prefix}.{k}",
                    feed=previous,
                    last_id=last_id if is_last else None,
                )
                continue
            if is_last and last_id is not None:
                op_id, id_path = last_id
            else:
                op_id, id_path = self.allocator.allocate(f"{prefix}.{k}"), member_path
            body = self._strip_dagger_keys(member, member_path, op_id)
            kind = OPERATORS[name].kind if name in OPERATORS else None
            self._check_position(name, kind, k, is_last, member_path, op_id)
            moved = {"@id": id_path}
            if kind in (OperatorKind.SINGLE_INPUT, OperatorKind.SINK, None):
                if previous is not None:
                    body["input"] = previous[0]
                    moved["input"] = previous[1]
                elif k == 0 and kind is not None:
                    self.issues.append(
                        PlanIssue(
                            f"the sequence starts with '{name}', which reads an input: give the sequence an "
                            f"'input', or start it with a scan or a constant",
                            path,
                            seq_id,
                        )
                    )
            elif k == 0 and feed is not None and kind is OperatorKind.SOURCE:
                self.issues.append(
                    PlanIssue(
                        f"the sequence has an input but starts with '{name}', which reads none: "
                        "remove the sequence's 'input' or put a single-input operator first",
                        feed[1],
                        seq_id,
                    )
                )
            self.out.append(
                RawOperator({"@id": op_id, **body}, Location(member_path, moved), op_id)
            )
            # A misplaced sink has no output: the next member then reads nothing (already reported).
            previous = None if kind is OperatorKind.SINK else (op_id, member_path)
        return previous

    def _sequence_input(self, sequence: dict[str, Any], path: str) -> tuple[str, str] | None:
        input_path = json_path(path, "input")
        try:
            value = normalize_op_id(sequence["input"])
        except ValueError as exc:
            self.issues.append(PlanIssue(str(exc), input_path, raw_op_id(sequence)))
            return None
        if not isinstance(value, str):
            self.issues.append(
                PlanIssue(
                    f"'input' must name an operator id, not {_json_kind(value)}",
                    input_path,
                    raw_op_id(sequence),
                )
            )
            return None
        return value, input_path

    def _check_envelope(self, sequence: dict[str, Any], path: str, seq_id: str | None) -> None:
        for key in sequence:
            if key not in SEQUENCE_KEYS:
                suggestion = suggest(key, SEQUENCE_KEYS)
                self.issues.append(
                    PlanIssue(
                        f"unknown field '{key}' in a sequence{suggestion}; a sequence takes "
                        "'@id', 'input', 'memo' and 'do'",
                        json_path(path, key),
                        seq_id,
                    )
                )
        memo = sequence.get("memo")
        if memo is not None and not isinstance(memo, str):
            self.issues.append(
                PlanIssue("'memo' must be a string", json_path(path, "memo"), seq_id)
            )

    def _strip_dagger_keys(
        self, member: dict[str, Any], member_path: str, op_id: str | None
    ) -> dict[str, Any]:
        body = {}
        for key, value in member.items():
            if key in (*ID_KEYS, "input"):
                self.issues.append(
                    PlanIssue(
                        f"'{key}' is not allowed inside a sequence (†): the sequence's 'input' feeds its "
                        "first operator and the sequence's '@id' names its last",
                        json_path(member_path, key),
                        op_id,
                    )
                )
                continue
            body[key] = value
        return body

    def _check_position(
        self,
        name: str | None,
        kind: OperatorKind | None,
        k: int,
        is_last: bool,
        member_path: str,
        op_id: str,
    ) -> None:
        op_path = json_path(member_path, "op")
        if kind is OperatorKind.SINK and not is_last:
            self.issues.append(
                PlanIssue(
                    f"a sink must be the last element of a sequence ('{name}' is not)",
                    op_path,
                    op_id,
                )
            )
        elif kind is OperatorKind.MULTI_INPUT:
            self.issues.append(
                PlanIssue(
                    f"'{name}' reads several inputs and cannot be part of a sequence: write it outside the "
                    "sequence with its own '@id' and inputs",
                    op_path,
                    op_id,
                )
            )
        elif kind is OperatorKind.SOURCE and k > 0:
            self.issues.append(
                PlanIssue(
                    f"'{name}' is a source and can only be the first element of a sequence: every element "
                    "after the first must read one input",
                    op_path,
                    op_id,
                )
            )


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
