"""JSON paths into the plan document the author wrote, so every problem says where it is.

>>> json_path("$.query[2]", "do", 1, "expr")
'$.query[2].do[1].expr'
>>> json_path("$.query[0]", "@id")
"$.query[0]['@id']"
>>> Location("$.query[3].do[1]", {"input": "$.query[3].input"}).of("input")
'$.query[3].input'
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def json_path(base: str, *parts: str | int) -> str:
    """``base`` extended by keys (``.key`` or ``['odd key']``) and list indexes (``[i]``)."""
    out = base
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _IDENTIFIER.match(part):
            out += f".{part}"
        else:
            escaped = part.replace("\\", "\\\\").replace("'", "\\'")
            out += f"['{escaped}']"
    return out


@dataclass(frozen=True)
class Location:
    """Where an operator sits in the source document.

    ``moved`` names keys whose value came from elsewhere: a sequence member's ``input`` is written as the
    sequence's ``input`` (or is the previous member), its ``@id`` as the sequence's ``@id``.
    """

    path: str
    moved: dict[str, str] = field(default_factory=dict)

    def of(self, key: str, *rest: str | int) -> str:
        """The path of ``key`` (and anything below it) of this operator."""
        if key in self.moved:
            return json_path(self.moved[key], *rest)
        return json_path(self.path, key, *rest)

    def below(self, suffix: str) -> str:
        """The path of an operator-relative suffix such as ``projections[0].expr``."""
        if not suffix:
            return self.path
        return f"{self.path}{suffix}" if suffix.startswith("[") else f"{self.path}.{suffix}"
