"""A plan step written in SQL: a ``.sql`` file whose header comment names its store.

::

    -- store: lake.daily_revenue
    -- format: parquet
    -- storage lake: {"type": "fs", "root": "../data/lake"}
    SELECT order_day, sum(total_usd) AS revenue
    FROM lake.orders_enriched
    GROUP BY order_day

Header lines are the ``-- key: value`` comments before the statement:

* ``store: <engine>.<path>``: the store target (required for an asset); ``format``, ``partitionBy``
  (comma-separated) and ``mode`` go into the target as in a plan;
* ``storage <name>: {...}``: a storage engine (JSON); engines of the plans beside the file are
  known without it, and their store targets are tables (``FROM orders_enriched``);
* ``case: upper|preserve``: how unquoted output names are spelled (default ``preserve``).

>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> _ = (d / "data").mkdir(); _ = (d / "data" / "a.json").write_text('{"x": 1}\\n{"x": 5}\\n')
>>> _ = (d / "big.sql").write_text('''-- storage fs: {"type": "fs", "root": "data"}
... -- store: fs.big
... select x from fs.`a.json` where x > 2
... ''')
>>> plan = sql_file_to_plan(d / "big.sql")
>>> plan["query"][-1]["target"], plan["storage"]["fs"]["root"]
({'path': 'big'}, 'data')
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.errors import DrillError, SqlError
from engine.metadata import MetadataRepository

_HEADER = re.compile(r"^\s*--\s*(?P<key>[A-Za-z_][\w ]*?)\s*:\s*(?P<value>.*?)\s*$")
_TARGET_KEYS = ("format", "partitionBy", "mode")


@dataclass
class SqlFile:
    """A ``.sql`` plan step: its header settings and the statement."""

    path: Path
    sql: str
    store: dict[str, Any] | None = None
    storage: dict[str, dict[str, Any]] = field(default_factory=dict)
    case: str = "preserve"
    header_lines: int = 0


def read_sql_file(path: Path) -> SqlFile:
    """Read ``path`` and its header (see the module docstring)."""
    text = Path(path).read_text()
    lines = text.splitlines()
    settings: dict[str, str] = {}
    storage: dict[str, dict[str, Any]] = {}
    count = 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            count = number
            continue
        match = _HEADER.match(line)
        if match is None:
            break
        count = number
        key, value = match.group("key").strip(), match.group("value")
        if key.lower().startswith("storage "):
            name = key.split(None, 1)[1].strip()
            try:
                config = json.loads(value)
            except ValueError as err:
                raise _header_error(path, number, f"storage {name}: not JSON ({err})") from None
            if not isinstance(config, dict) or "type" not in config:
                raise _header_error(path, number, f"storage {name}: give a JSON object with a type")
            storage[name] = config
        else:
            settings[key] = value
    known = {"store", "case", *_TARGET_KEYS}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise _header_error(
            path,
            None,
            f"unknown header key {unknown[0]!r}; known: {', '.join(sorted(known))}, storage <name>",
        )
    store = None
    if "store" in settings:
        engine, _, target_path = settings["store"].partition(".")
        if not engine or not target_path:
            raise _header_error(path, None, "store: write <engine>.<path>, e.g. lake.daily_revenue")
        target: dict[str, Any] = {"path": target_path.strip("`")}
        for key in _TARGET_KEYS:
            if key in settings:
                value: Any = settings[key]
                if key == "partitionBy":
                    value = [v.strip() for v in value.split(",") if v.strip()]
                target[key] = value
        store = {"engine": engine, "target": target}
    case = settings.get("case", "preserve").lower()
    sql = "\n".join(lines[count:])
    return SqlFile(Path(path), sql, store, storage, case, count)


def sql_file_to_plan(path: Path, *, classpath: Sequence[Path | str] = ()) -> dict[str, Any]:
    """The logical plan of a ``.sql`` step; tables resolve through a repository over the plans
    beside it (their engines and store targets) and the header's engines."""
    from engine.sql.translate import plan_statement

    step = read_sql_file(path)
    repository = repository_beside(step.path, step.storage, classpath=classpath)
    try:
        return plan_statement(
            step.sql,
            repository,
            case=step.case,
            store=step.store,
            storage_extra=step.storage,
        )
    except SqlError as err:
        raise err.with_source(str(path), line_offset=step.header_lines) from None


def repository_beside(
    path: Path,
    storage: dict[str, dict[str, Any]],
    *,
    classpath: Sequence[Path | str] = (),
) -> MetadataRepository:
    """A repository over the JSON plans in ``path``'s directory, plus ``storage``."""
    from engine.plan import parse_plan

    plans = []
    for sibling in sorted(path.parent.iterdir()):
        if sibling.suffix in (".json", ".hjson") and sibling.is_file():
            try:
                plans.append(parse_plan(sibling))
            except DrillError:
                continue  # reported where that plan is loaded
    repository = MetadataRepository.from_plans(plans, classpath=classpath, base_dir=path.parent)
    return repository.with_storage(storage) if storage else repository


def _header_error(path: Path, line: int | None, message: str) -> SqlError:
    text = Path(path).read_text() if line else ""
    return SqlError(message, sql=text, line=line, column=1 if line else None, source=str(path))
