"""Run a plan: ``run_plan(plan, executor=...) -> RunResult``.

>>> result = run_plan({"storage": {"q": {"type": "queue"}}, "query": [
...     {"@id": 1, "op": "constant", "content": [{"a": 1}, {"a": 5}]},
...     {"@id": 2, "op": "filter", "input": 1, "expr": "a > 2"},
...     {"@id": 3, "op": "store", "input": 2, "storageengine": "q", "target": {"number": 0}}]},
...     executor="local")
>>> result.records()
[{'a': 5}]
>>> result.stores[0].operator_id, result.stores[0].row_count
('3', 1)
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from engine.errors import PlanError, RootEscapeError, StorageError
from engine.exec.result import RunResult, collect_result
from engine.plan import LogicalPlan, parse_plan
from engine.plan.operators import Scan, Store
from engine.storage.engines import plan_engines as build_engines

EXECUTORS = ("local", "spark")


def run_plan(
    plan: LogicalPlan | Path | str | Mapping[str, Any],
    *,
    executor: str = "local",
    classpath: Sequence[Path | str] = (),
    params: Mapping[str, Any] | None = None,
    spark: Any = None,
    console_stream: Any = None,
    optimize: bool = True,
    max_buffered_bytes: int | None = None,
) -> RunResult:
    """Parse (if needed), validate and run ``plan`` on ``executor`` (``local`` or ``spark``).

    The plan runs as the planner rewrites it (:func:`engine.planner.optimize`: pushdowns, folding)
    unless ``optimize`` is False; the result names the operators of ``plan`` either way.
    ``max_buffered_bytes`` bounds what each blocking operator of the local executor (order,
    segment, union distinct, join's right side, aggregates) may hold in memory; past it the run
    stops with an error rather than drop rows. The default is 2 GiB; Spark spills instead and
    ignores it. Errors are the engine's own: :class:`~engine.errors.PlanError` for the plan,
    :class:`~engine.errors.ExecutionError` naming fragment and operator for the run.
    """
    if max_buffered_bytes is not None and max_buffered_bytes < 1:
        raise PlanError(f"max_buffered_bytes must be positive, not {max_buffered_bytes}")
    if executor not in EXECUTORS:
        raise PlanError(f"unknown executor {executor!r}; choose one of {', '.join(EXECUTORS)}")
    base_dir = None
    if isinstance(plan, Path) or (isinstance(plan, str) and _is_file(plan)):
        base_dir = Path(plan).resolve().parent
    logical = plan if isinstance(plan, LogicalPlan) else parse_plan(plan)
    logical = apply_params(logical, params or {})
    engines = build_engines(
        logical,
        base_dir=base_dir,
        classpath=[Path(p) for p in classpath],
        console_stream=console_stream,
    )
    check_paths(logical, engines)
    if executor == "spark":
        from engine.exec.spark.executor import run_spark

        return run_spark(
            logical, engines=engines, params=dict(params or {}), spark=spark, optimize=optimize
        )
    planned = logical
    if optimize:
        from engine.planner import Statistics
        from engine.planner import optimize as optimize_plan

        planned = optimize_plan(logical, Statistics.from_engines(logical, engines))
    result = _run_local(planned, engines, dict(params or {}), max_buffered_bytes)
    result.plan = logical
    return result


def check_paths(plan: LogicalPlan, engines: Mapping[str, Any]) -> None:
    """Reject every bad scan selection and store target before anything is read or written.

    A path that leaves its engine's root (``..``, a ``file:`` URL elsewhere, a symlink pointing
    out), a URL scheme the engine does not serve, an unknown format or option: a
    :class:`~engine.errors.StorageError` naming the operator, so a plan with a bad second store
    does not write its first one.
    """
    for op in plan.query:
        engine = engines.get(getattr(op, "storage_engine", None) or "")
        if engine is None:
            continue
        try:
            if isinstance(op, Scan):
                engine.check_selection(op.selection)
                _check_listing(engine, op.selection)
            elif isinstance(op, Store):
                engine.check_target(op.target)
        except StorageError as err:
            raise StorageError(f"{op.op} {op.id}: {err.message}", hint=err.hint) from None


def _check_listing(engine: Any, selection: Any) -> None:
    """A symlink out of the root inside a selected directory: found by listing. Other listing
    problems (a path a store of this plan has yet to write) are the run's to report."""
    try:
        engine.list_files(selection)
    except RootEscapeError:
        raise
    except StorageError:
        pass


_PARAM = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(:path)?\}")


def apply_params(plan: LogicalPlan, params: Mapping[str, Any]) -> LogicalPlan:
    """The plan with ``${name}`` in scan selections and store targets replaced by ``params[name]``.

    This is how a partition key reaches a plan (``"path": "events/${day}"``). A placeholder with no
    parameter is a :class:`~engine.errors.PlanError` naming it. A value is one path component: a
    value that is empty, ``.`` or ``..``, or holds ``/`` or NUL, is a PlanError naming the
    parameter (``day=../orders`` would otherwise write over another dataset of the root). A plan
    lets a value span directories with ``${name:path}``: ``/`` may separate its components, each
    of which is checked the same way.

    >>> plan = parse_plan({"storage": {"q": {"type": "queue"}, "fs": {"type": "fs", "root": "/d"}},
    ...     "query": [{"@id": 1, "op": "scan", "storageengine": "fs", "ref": "e",
    ...                "selection": {"path": "events/${day}"}},
    ...               {"@id": 2, "op": "store", "input": 1, "storageengine": "q", "target": {}}]})
    >>> apply_params(plan, {"day": "2024-01-02"}).operator("1").selection
    {'path': 'events/2024-01-02'}
    >>> deeper = plan.with_query([plan.operator("1").model_copy(
    ...     update={"selection": {"path": "events/${day:path}"}}), plan.operator("2")])
    >>> apply_params(deeper, {"day": "2024/01/02"}).operator("1").selection
    {'path': 'events/2024/01/02'}
    """

    def substitute(value: Any, where: str) -> Any:
        if isinstance(value, str):

            def lookup(match: re.Match[str]) -> str:
                name = match.group(1)
                if name not in params:
                    known = ", ".join(sorted(params)) or "none"
                    raise PlanError(
                        f"{where} uses parameter '{name}', which was not given (given: {known})"
                    )
                if match.group(2):  # ${name:path}: components separated by "/"
                    parts = str(params[name]).split("/")
                    return "/".join(path_component(name, p, where, spans=True) for p in parts)
                return path_component(name, params[name], where)

            return _PARAM.sub(lookup, value)
        if isinstance(value, dict):
            return {k: substitute(v, where) for k, v in value.items()}
        if isinstance(value, list):
            return [substitute(v, where) for v in value]
        return value

    query = []
    for op in plan.query:
        if isinstance(op, Scan) and op.selection:
            op = op.model_copy(update={"selection": substitute(op.selection, f"scan {op.id}")})
        elif isinstance(op, Store) and op.target:
            op = op.model_copy(update={"target": substitute(op.target, f"store {op.id}")})
        query.append(op)
    return plan.with_query(query)


def path_component(name: str, value: Any, where: str, *, spans: bool = False) -> str:
    """``value`` of parameter ``name`` as text, checked to be one path component (one of the
    components of a ``${name:path}`` value, with ``spans``).

    >>> path_component("day", "2024-01-02", "store 2")
    '2024-01-02'
    >>> path_component("day", "../orders", "store 2")
    Traceback (most recent call last):
    ...
    engine.errors.PlanError: plan: store 2 uses parameter 'day' = '../orders', which is not one path component: ...
    """
    text = str(value)
    if text in ("", ".", "..") or "/" in text or "\x00" in text:
        if spans:
            raise PlanError(
                f"{where} uses parameter '{name}' as a path, and its component {text!r} is "
                "empty, '.' or '..', or holds a NUL character"
            )
        raise PlanError(
            f"{where} uses parameter '{name}' = {text!r}, which is not one path component: "
            "a parameter's value may not be empty, '.' or '..', nor hold '/' or a NUL character "
            "(a plan whose value spans directories says so: ${" + name + ":path})"
        )
    return text


def _is_file(text: str) -> bool:
    try:
        return "\n" not in text and len(text) < 4096 and os.path.isfile(text)
    except (OSError, ValueError):
        return False


def _run_local(
    plan: LogicalPlan,
    engines: dict[str, Any],
    params: dict[str, Any],
    max_buffered_bytes: int | None,
) -> RunResult:
    from engine.exec.local.executor import LocalExecutor
    from engine.exec.local.registry import ExecContext

    ctx = ExecContext(engines=engines, params=params)
    if max_buffered_bytes is not None:
        ctx.max_buffered_bytes = max_buffered_bytes
    done = LocalExecutor(plan, ctx).run()
    return collect_result(
        plan, engines, done.store_results, done.metrics, done.outputs, done.sink_records
    )
