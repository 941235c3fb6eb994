"""Print the plan format's JSON Schema: ``python -m engine.plan.schema > plan.schema.json``."""

from __future__ import annotations

import json

from engine.plan.json_schema import plan_json_schema


def render_schema() -> str:
    """The text of ``plan.schema.json``: the schema as sorted, indented JSON and a final newline."""
    return json.dumps(plan_json_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    print(render_schema(), end="")
