"""Operator ids: numbers and strings name the same operator (``1`` is ``"1"``).

Operators written without an ``@id`` (a sink at the end of a plan, the members of a sequence) get a
generated id that starts with ``_op`` or ``_seq`` and never collides with an id the plan spells out.

>>> normalize_op_id(7)
'7'
>>> is_generated_id("_seq2.1"), is_generated_id("7")
(True, False)
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator, WithJsonSchema

_GENERATED = re.compile(r"^_(?:op|seq)\d")


def normalize_op_id(value: Any) -> Any:
    """``1`` and ``"1"`` are the same id; anything else is left for the type check to reject."""
    if isinstance(value, bool):
        raise ValueError(f"an operator id must be a string or an integer, not {str(value).lower()}")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and not value.strip():
        raise ValueError("an operator id must not be empty")
    return value


OpId = Annotated[
    str,
    BeforeValidator(normalize_op_id),
    WithJsonSchema(
        {"type": ["string", "integer"], "description": 'An operator id; 1 and "1" are the same id.'}
    ),
]
"""An operator id or a reference to one, normalised to ``str``."""


def is_generated_id(op_id: str) -> bool:
    """True for ids the parser made up for operators written without ``@id``."""
    return bool(_GENERATED.match(op_id))


class IdAllocator:
    """Hands out generated ids that avoid every id the plan spells out.

    >>> ids = IdAllocator({"_op1"})
    >>> ids.allocate("_op1"), ids.allocate("_op2")
    ('_op1#2', '_op2')
    """

    def __init__(self, taken: set[str]) -> None:
        self._taken = set(taken)

    def allocate(self, wanted: str) -> str:
        candidate, n = wanted, 1
        while candidate in self._taken:
            n += 1
            candidate = f"{wanted}#{n}"
        self._taken.add(candidate)
        return candidate
