"""Explain a plan: the physical plan's fragments as a tree, as JSON or as Markdown; and the logical
operator DAG (:func:`explain_logical`).

:func:`explain` runs the planner (:func:`~engine.planner.optimize`, then
:func:`~engine.planner.physical.to_physical`) and shows every fragment: the operators it runs
(``pop #id``, and the logical operator each implements), what was pushed into each scan
(``columns``, ``filter``, ``limit``) and the exchange it sends its records to. Given a
SparkSession it also shows, per root, the Spark plan the operators compile to (Spark's own
``explain`` text: the ``FileScan`` line shows ``ReadSchema`` and ``PushedFilters``).

>>> from engine.plan import parse_plan
>>> plan = parse_plan({"storage": {"fs": {"type": "fs", "root": "/d"}, "q": {"type": "queue"}},
...   "query": [
...     {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "e", "selection": {"path": "e.json"}},
...     {"@id": 2, "op": "filter", "input": 1, "expr": "e.n > 1 + 1"},
...     {"@id": 3, "op": "project", "input": 2, "projections": [{"ref": "output.n", "expr": "e.n"}]},
...     {"@id": 4, "op": "store", "input": 3, "storageengine": "q", "target": {}}]})
>>> print(explain(plan))
fragment 0 (single)
store-queue #5 (store 4): storageengine=q, target={}
└─ single #4 (store 4) <- fragment 1
fragment 1 (parallel) -> single #4 in fragment 0
project #3 (project 3): exprs=[output.n = e.n]
└─ filter #2 (filter 2): expr=e.n > 2
   └─ scan-json #1 (scan 1): columns=[n], storageengine=fs, selection={"path": "e.json"}, ref=e

>>> print(explain_logical(plan))
store 4: storageengine=q, target={}
└─ project 3: projections=[output.n = e.n]
   └─ filter 2: expr=e.n > 1 + 1
      └─ scan 1: storageengine=fs, selection={"path": "e.json"}, ref=e
"""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

from engine.errors import PlanningError
from engine.plan import LogicalPlan

_HIDDEN_KEYS = {"@id", "op", "input", "left", "right", "inputs", "memo"}
_DETAIL_WIDTH = 100
FORMATS = ("text", "json", "markdown")
_PUSHED = ("columns", "filter", "limit", "statistics")  # first on a scan, never shortened


def explain(
    plan: LogicalPlan,
    *,
    fmt: str = "text",
    spark: Any = None,
    stats: Any = None,
    classpath: Any = (),
    base_dir: Path | None = None,
    options: Any = None,
) -> str:
    """The plan as the planner runs it: fragments, pushed projections and filters, exchanges.

    ``fmt`` is ``text`` (a tree per fragment), ``json`` (``{"source", "fragments", "physical",
    "optimized"}``, plus ``"spark"``) or ``markdown``. ``stats`` are the scans' statistics; when
    None they are asked of the plan's storage engines (``classpath`` and ``base_dir`` as for
    :func:`engine.run.run_plan`). ``options`` are the physical planner's thresholds
    (:class:`~engine.planner.physical.PlannerOptions`). With ``spark``, the Spark plans are added.
    """
    from engine.planner import Statistics, optimize
    from engine.planner.physical import to_physical

    if fmt not in FORMATS:
        raise PlanningError(f"unknown explain format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if stats is None:
        stats = Statistics.collect(plan, base_dir=base_dir, classpath=classpath)
    optimized = optimize(plan, stats)
    physical = to_physical(optimized, stats, options)
    spark_plans = (
        spark_explain(plan, spark, classpath=classpath, base_dir=base_dir)
        if spark is not None
        else None
    )
    if fmt == "json":
        body: dict[str, Any] = {
            "source": plan.source,
            "fragments": [
                {
                    "id": f.id,
                    "parallel": f.parallel,
                    "root": f.root,
                    "operators": list(f.operators),
                    "sends_to": None
                    if f.sends_to is None
                    else {"exchange": f.sends_to, "fragment": f.receiver_fragment},
                }
                for f in physical.fragments()
            ],
            "physical": physical.to_dict(),
            "optimized": optimized.to_dict(),
        }
        if spark_plans is not None:
            body["spark"] = spark_plans
        return json.dumps(body, indent=2, ensure_ascii=False)
    text = render_fragments(physical, optimized)
    if fmt == "markdown":
        parts = [f"**Physical plan** ({len(physical.fragments())} fragments)", "```", text, "```"]
        for root, spark_text in (spark_plans or {}).items():
            parts += [f"**Spark plan** of {root}", "```", spark_text.rstrip(), "```"]
        return "\n".join(parts)
    for root, spark_text in (spark_plans or {}).items():
        text += f"\n\nspark plan of {root}:\n{spark_text.rstrip()}"
    return text


def render_fragments(physical: Any, plan: LogicalPlan) -> str:
    """The fragments of a physical plan as text trees (exchanges name the fragment they read)."""
    lines: list[str] = [f"# {plan.source}"] if plan.source else []
    fragments = physical.fragments()
    starts = {f.root: f.id for f in fragments}
    for fragment in fragments:
        mode = "parallel" if fragment.parallel else "single"
        header = f"fragment {fragment.id} ({mode})"
        if fragment.sends_to is not None:
            exchange = physical.operator(fragment.sends_to)
            header += f" -> {exchange.pop} #{exchange.id} in fragment {fragment.receiver_fragment}"
        lines.append(header)
        _render_physical(physical, plan, fragment.root, "", "", starts, set(), lines, top=True)
    return "\n".join(lines)


def _render_physical(
    physical: Any,
    plan: LogicalPlan,
    op_id: int,
    first: str,
    rest: str,
    starts: dict[int, int],
    shown: set[int],
    lines: list[str],
    *,
    top: bool = False,
) -> None:
    op = physical.operator(op_id)
    label = f"{op.pop} #{op.id}"
    if op.logical_id is not None:
        logical = plan.operator(op.logical_id)
        label += f" ({logical.op}" + ("" if logical.has_generated_id else f" {logical.id}") + ")"
    if op_id in shown:
        lines.append(f"{first}{label} (see above)")
        return
    shown.add(op_id)
    detail = _physical_detail(op.props)
    if op.is_exchange:
        (child,) = op.inputs
        lines.append(f"{first}{label}" + (f": {detail}" if detail else "") + _from(starts, child))
        return
    lines.append(f"{first}{label}" + (f": {detail}" if detail else ""))
    for i, child in enumerate(op.inputs):
        last = i == len(op.inputs) - 1
        _render_physical(
            physical,
            plan,
            child,
            rest + ("└─ " if last else "├─ "),
            rest + ("   " if last else "│  "),
            starts,
            shown,
            lines,
        )


def _from(starts: dict[int, int], child: int) -> str:
    return f" <- fragment {starts[child]}" if child in starts else ""


def _physical_detail(props: dict[str, Any]) -> str:
    pushed = [f"{k}={_value(props[k])}" for k in _PUSHED if k in props]
    others = {k: v for k, v in props.items() if k not in _PUSHED}
    detail = _detail(others)
    return ", ".join([*pushed, detail] if detail else pushed)


def _value(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)


def spark_explain(
    plan: LogicalPlan, spark: Any, *, classpath: Any = (), base_dir: Path | None = None
) -> dict[str, str]:
    """Per root operator (``store 5``), the Spark plan it compiles to; nothing is run or written.
    The records are shown as stores write them: without the compiler's unread member
    (:mod:`~engine.exec.spark.unread_member`)."""
    from engine.exec.spark.executor import SparkPlanRun
    from engine.exec.spark.unread_member import without_unread
    from engine.run import build_engines

    engines = build_engines(plan, base_dir=base_dir, classpath=list(classpath))
    frames = SparkPlanRun(plan, spark, engines=engines, params={}).compile_frames()
    texts = {}
    for label, frame in frames.items():
        buffer = io.StringIO()
        with redirect_stdout(buffer):
            without_unread(frame).explain()
        texts[label] = buffer.getvalue()
    return texts


def explain_logical(plan: LogicalPlan, *, fmt: str = "text") -> str:
    """The plan's DAG as text (a tree per root) or as JSON (``{"source", "roots", "operators"}``)."""
    roots = _roots(plan)
    if fmt == "json":
        return json.dumps(
            {
                "source": plan.source,
                "roots": [op.id for op in roots],
                "operators": [op.to_dict() for op in plan.topological_order()],
            },
            indent=2,
        )
    lines: list[str] = [f"# {plan.source}"] if plan.source else []
    shown: set[str] = set()
    for root in roots:
        _render(plan, root.id, "", "", shown, lines)
    return "\n".join(lines)


def _roots(plan: LogicalPlan) -> list[Any]:
    read = {ref for op in plan.query for ref in op.input_ids()}
    return [op for op in plan.query if op.id not in read]


def _render(
    plan: LogicalPlan, op_id: str, first: str, rest: str, shown: set[str], lines: list[str]
) -> None:
    # An explicit stack, not recursion: a chain of thousands of operators is a valid plan.
    stack = [(op_id, first, rest)]
    while stack:
        op_id, first, rest = stack.pop()
        op = plan.operator(op_id)
        label = op.op if op.has_generated_id else f"{op.op} {op.id}"
        if op_id in shown:
            lines.append(f"{first}{label} (see above)")
            continue
        shown.add(op_id)
        detail = _detail(op.to_dict())
        lines.append(f"{first}{label}" + (f": {detail}" if detail else ""))
        inputs = op.input_ids()
        children = []
        for i, child in enumerate(inputs):
            last = i == len(inputs) - 1
            children.append(
                (child, rest + ("└─ " if last else "├─ "), rest + ("   " if last else "│  "))
            )
        stack.extend(reversed(children))


def _detail(body: dict[str, Any]) -> str:
    parts = []
    for key, value in body.items():
        if key in _HIDDEN_KEYS:
            continue
        text = value if isinstance(value, str) else _summarise(value)
        parts.append(f"{key}={text}")
    detail = ", ".join(parts)
    return detail if len(detail) <= _DETAIL_WIDTH else detail[: _DETAIL_WIDTH - 1] + "…"


def _summarise(value: Any) -> str:
    if isinstance(value, list) and value and all(isinstance(v, dict) and "ref" in v for v in value):
        return (
            "[" + ", ".join(f"{v['ref']} = {v.get('expr', '')}".rstrip(" =") for v in value) + "]"
        )
    return json.dumps(value, separators=(", ", ": "))
