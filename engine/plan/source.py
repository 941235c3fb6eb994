"""Reading a plan document: a file, JSON text or a dict, in Drill's relaxed JSON.

Upstream plans were read by Jackson with unquoted field names and comments allowed. Strict JSON is
tried first; anything else goes through ``hjson``, which accepts both. A syntax error becomes a
:class:`PlanSyntaxError` naming the file, line and column.

>>> load_document('{op: "constant", content: [{a: 1.5}]}')[0]
{'op': 'constant', 'content': [{'a': 1.5}]}
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.errors import PlanError, PlanIssue, PlanSyntaxError

PlanSource = Path | str | dict[str, Any]
"""What :func:`engine.plan.parse_plan` reads: a path, JSON text, or an already-loaded document."""


def load_document(source: PlanSource, *, source_name: str | None = None) -> tuple[Any, str | None]:
    """The JSON document and the name to use in messages (the file path unless ``source_name``)."""
    document, name, _ = read_document(source, source_name=source_name)
    return document, name


def read_document(
    source: PlanSource, *, source_name: str | None = None
) -> tuple[Any, str | None, str | None]:
    """:func:`load_document`, and the text the document was parsed from (None for a dict)."""
    if isinstance(source, dict):
        return source, source_name, None
    if isinstance(source, Path):
        name = source_name or str(source)
        text = read_text(source, source_name)
        return _parse_text(text, name), name, text
    if isinstance(source, str):
        path = _as_existing_file(source)
        if path is not None:
            name = source_name or source
            text = read_text(path, name)
            return _parse_text(text, name), name, text
        if _looks_like_a_path(source):
            raise PlanError(f"plan file not found: {source}", source=source_name)
        return _parse_text(source, source_name), source_name, source
    raise PlanError(
        f"cannot read a plan from a {type(source).__name__}: pass a path, JSON text or a dict",
        source=source_name,
    )


def _as_existing_file(text: str) -> Path | None:
    if "\n" in text or text.lstrip().startswith(("{", "[")):
        return None
    try:
        path = Path(text)
        return path if path.is_file() else None
    except (OSError, ValueError):  # names too long for the file system, NUL bytes
        return None


def _looks_like_a_path(text: str) -> bool:
    stripped = text.strip()
    return "\n" not in stripped and (
        stripped.endswith((".json", ".plan", ".hjson")) or ("/" in stripped and " " not in stripped)
    )


def read_text(path: Path, name: str | None) -> str:
    """The text of a plan file; a PlanError (or PlanSyntaxError) naming it when it cannot be read."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PlanError(f"plan file not found: {path}", source=name) from None
    except UnicodeDecodeError as exc:
        raise PlanSyntaxError(
            f"the plan file is not UTF-8 text ({exc.reason})", source=name
        ) from None
    except OSError as exc:
        raise PlanError(f"cannot read the plan file {path}: {exc.strerror}", source=name) from None


def _parse_text(text: str, name: str | None) -> Any:
    if not text.strip():
        raise PlanSyntaxError("the plan is empty", source=name)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        strict_error = exc
    except RecursionError:
        raise PlanSyntaxError("the plan is nested too deeply", source=name) from None
    import hjson  # only relaxed documents need it, and importing it costs a CLI call ~0.1 s

    try:
        document = hjson.loads(text, parse_float=_RelaxedFloat, object_pairs_hook=dict)
    except hjson.HjsonDecodeError as exc:
        if _is_strict_fault(text, strict_error.pos):
            reason, line, column = strict_error.msg, strict_error.lineno, strict_error.colno
        else:
            reason, line, column = exc.msg, exc.lineno, exc.colno
        raise PlanSyntaxError(_syntax_issue(text, reason, line, column), source=name) from None
    except RecursionError:
        raise PlanSyntaxError("the plan is nested too deeply", source=name) from None
    return _restore_floats(document)


def _is_strict_fault(text: str, position: int) -> bool:
    """Did strict JSON stop at a real fault, rather than at a relaxed feature (a bare key, a comment)?

    hjson reads a bad strict document as far as it can and often reports the fault later than it is;
    strict JSON's position is the better one unless the document uses relaxed syntax before it.
    """
    char = text[position : position + 1]
    return bool(char) and not (char.isalpha() or char in "@_$/#'}]")


def _syntax_issue(text: str, reason: str, line: int, column: int) -> PlanIssue:
    if reason.startswith("Extra data"):
        reason = (
            "unexpected text after the end of the document (is there one closing bracket too many?)"
        )
    lines = text.splitlines() or [""]
    shown = lines[line - 1] if 0 < line <= len(lines) else ""
    caret = " " * max(column - 1, 0) + "^"
    return PlanIssue(
        f"invalid JSON at line {line}, column {column}: {reason}\n  {shown}\n  {caret}"
    )


class _RelaxedFloat:
    """A fractional number as hjson read it.

    hjson turns ``1.00`` into the integer ``1`` (it checks ``int(x) == x``); this token compares
    unequal to every int so the value stays a float, and :func:`_restore_floats` unwraps it.
    """

    def __init__(self, text: str) -> None:
        self.value = float(text)

    def __int__(self) -> int:
        return (
            int(self.value) if self.value == self.value and abs(self.value) != float("inf") else 0
        )

    def __eq__(self, other: object) -> bool:
        return False

    __hash__ = None  # type: ignore[assignment]


def _restore_floats(value: Any) -> Any:
    if isinstance(value, _RelaxedFloat):
        return value.value
    if isinstance(value, dict):
        return {key: _restore_floats(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_restore_floats(item) for item in value]
    return value
