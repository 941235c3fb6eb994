"""The load benchmark: ``load_definitions`` over 1,000 generated plans of 10 operators each.

Writes ``--plans`` plans into a temporary directory (chains of ten: the first plan of a chain
scans a raw source, each next one scans the previous plan's store; every fifth plan joins two
scans), then times, in the same process and alternating, ``--repeat`` times after a warm-up:

* ``load_definitions``: read every plan file (its outline, kept by the warm-up's load: what
  every later load of a code location reads), link the lineage, build one graph-backed
  multi-asset per plan (ten nodes each, sharing one op definition per kind of operator), jobs and
  resources; then resolve the asset graph the way a code location does
  (``Definitions.get_repository_def()``).
* ``load_cold``: the same with no outline kept (a first load): parse and validate every plan, run
  the planner for its notes, derive the column lineage.
* ``hand_graphs`` (peer): the same Definitions written by hand with Dagster's API, no plan files:
  per plan, ten ``@op`` functions in a ``@graph_multi_asset`` with the same asset keys and deps,
  plus the source specs; resolved the same way.
* ``hand_assets`` (peer): one plain ``@asset`` per plan with the same keys and deps (what a user
  writing Python instead of plans would start with), resolved the same way.
* ``bare_shared`` (peer, ``--bare``): Dagster's own cost of the shape ``load_definitions``
  builds, with nothing of ours: one ``OpDefinition`` per kind of node, invoked under each plan's
  aliases, a ``GraphDefinition`` and an ``AssetsDefinition`` with bare specs (key and deps) per
  plan; no plan files, metadata, descriptions, tags, config or resources; built with the cycle
  collector paused, as ``load_definitions`` builds. What is above it is ours.
  ``bare_graphs`` and ``bare_lean`` (with ``--bare``): the same with one ``OpDefinition`` per
  node, built through Dagster's defaults (``bare_graphs``) or through the public shortcuts of a
  plain compute function with its signature given and input and output definitions built once
  (``bare_lean``): what a definition per operator costs.

Target: ``load_definitions`` (and ``DrillPlansComponent``) <= 3 s for 1,000 plans. The outlines
go to a directory of the run's own, not the user's cache. Run from the repository root::

    .venv/bin/python benchmarks/dagster_load.py                  # 1,000 plans, ~1 min
    .venv/bin/python benchmarks/dagster_load.py --profile 25     # cProfile of one load, top 25
    .venv/bin/python benchmarks/dagster_load.py --server --repeat 1   # + the code server, ~2 min
    .venv/bin/python benchmarks/dagster_load.py --component      # + DrillPlansComponent (dg)
    .venv/bin/python benchmarks/dagster_load.py --bare           # + Dagster's floor (bare_shared)

``--server`` times the rest of what ``dagster dev``'s code server does after the repository is
built, for ``load_definitions`` and ``hand_graphs``: ``load_all_definitions()`` (the gRPC server
forces every lazily built job, schedule and sensor before serving) and the repository snapshot the
webserver asks for (``RepositorySnap.from_def(..., defer_snapshots=True)``, which still builds
each job's snapshot to get its id).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import inspect
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dagster import (
    AssetKey,
    AssetOut,
    AssetsDefinition,
    AssetSpec,
    Definitions,
    DependencyDefinition,
    GraphDefinition,
    In,
    InputMapping,
    NodeInvocation,
    Nothing,
    OpDefinition,
    Out,
    OutputMapping,
    asset,
    graph_multi_asset,
    op,
)

from drill_dagster import load_definitions
from drill_dagster.outline_cache import CACHE_DIR_ENV

CHAIN = 10


def plan_document(index: int) -> dict[str, Any]:
    """Plan ``index``: ten operators; reads plan ``index - 1``'s store unless it starts a chain."""
    first = index % CHAIN == 0
    storage = {
        "raw": {"type": "fs", "root": "../data/raw"},
        "lake": {"type": "fs", "root": "../data/lake"},
    }
    scan = {
        "@id": 1,
        "op": "scan",
        "storageengine": "raw" if first else "lake",
        "ref": "t",
        "selection": {
            "path": f"source_{index // CHAIN}" if first else f"table_{index - 1}",
            "format": "parquet",
        },
    }
    query: list[dict[str, Any]] = [scan]
    if index % 5 == 4:  # a join of two scans instead of a filter
        query.append(
            {"@id": 2, "op": "scan", "storageengine": "raw", "ref": "d",
             "selection": {"path": "dimension.csv", "format": "csv"}}
        )  # fmt: skip
        query.append(
            {"@id": 3, "op": "join", "left": 1, "right": 2, "type": "left",
             "conditions": [{"relationship": "==", "left": "t.key", "right": "d.key"}]}
        )  # fmt: skip
    else:
        query.append(
            {"@id": 2, "op": "filter", "input": 1, "expr": "t.amount > 0 && t.kind != 'x'"}
        )
        query.append(
            {"@id": 3, "op": "transform", "input": 2,
             "transforms": [{"ref": "t.cents", "expr": "t.amount * 100"}]}
        )  # fmt: skip
    query += [
        {"@id": 4, "op": "project", "input": 3, "projections": [
            {"ref": "output.key", "expr": "t.key"}, {"ref": "output.amount", "expr": "t.amount"},
            {"ref": "output.kind", "expr": "upper(t.kind)"}]},
        {"@id": 5, "op": "order", "input": 4, "orderings": [{"order": "asc", "expr": "key"}]},
        {"@id": 6, "op": "segment", "input": 5, "ref": "grp", "exprs": ["key"]},
        {"@id": 7, "op": "collapsingaggregate", "input": 6, "within": "grp", "carryovers": ["key"],
         "aggregations": [{"ref": "n", "expr": "count(1)"}, {"ref": "amount", "expr": "sum(amount)"}]},
        {"@id": 8, "op": "project", "input": 7, "projections": [
            {"ref": "output.key", "expr": "key"}, {"ref": "output.n", "expr": "n"},
            {"ref": "output.amount", "expr": "round(amount, 2)"}]},
        {"@id": 9, "op": "limit", "input": 8, "first": 0, "last": 1000},
        {"@id": 10, "op": "store", "input": 9, "storageengine": "lake",
         "target": {"path": f"table_{index}", "format": "parquet"}},
    ]  # fmt: skip
    head = {
        "type": "APACHE_DRILL_LOGICAL",
        "version": 1,
        "generator": {"type": "bench", "info": "x"},
    }
    return {"head": head, "storage": storage, "query": query}


def write_plans(root: Path, count: int) -> Path:
    plans = root / "plans"
    plans.mkdir(parents=True)
    for index in range(count):
        document = plan_document(index)
        (plans / f"plan_{index:04d}.json").write_text(json.dumps(document, indent=1))
    return plans


def ours(plans_dir: Path) -> Definitions:
    """``load_definitions`` and the repository, resolved as a code location does."""
    defs = load_definitions(plans_dir, executor="local")
    defs.get_repository_def()
    return defs


def ours_cold(plans_dir: Path) -> Definitions:
    """``ours`` with no plan outlines kept from an earlier load: every plan file is parsed."""
    kept = os.environ.get(CACHE_DIR_ENV)
    os.environ[CACHE_DIR_ENV] = "off"
    try:
        return ours(plans_dir)
    finally:
        if kept is None:
            del os.environ[CACHE_DIR_ENV]
        else:
            os.environ[CACHE_DIR_ENV] = kept


def component(plans_dir: Path) -> Definitions:
    """``DrillPlansComponent`` resolved from defs.yaml attributes and built as ``dg`` does (the
    component tree's Definitions), then the repository, resolved as a code location does."""
    from dagster.components import build_defs_for_component

    from drill_dagster import DrillPlansComponent

    instance = DrillPlansComponent.resolve_from_dict(
        {"plans_dir": str(plans_dir), "executor": "local"}
    )
    defs = build_defs_for_component(instance)
    defs.get_repository_def()
    return defs


def _source_specs(count: int) -> list[Any]:
    sources = sorted(
        {AssetKey(["raw", f"source_{i // CHAIN}"]) for i in range(count) if i % CHAIN == 0}
        | ({AssetKey(["raw", "dimension_csv"])} if count > 4 else set())
    )
    return [AssetSpec(key) for key in sources]


def hand_graphs(count: int) -> Definitions:
    """The same assets written with Dagster's API: ten ops per plan in a graph multi-asset."""
    assets = _source_specs(count)
    for index in range(count):
        assets.append(_hand_graph(index))
    defs = Definitions(assets=assets)
    defs.get_repository_def()
    return defs


def _upstream(index: int) -> list[AssetKey]:
    first = AssetKey(["raw", f"source_{index // CHAIN}"]) if index % CHAIN == 0 else None
    keys = [first or AssetKey(f"table_{index - 1}")]
    if index % 5 == 4:
        keys.append(AssetKey(["raw", "dimension_csv"]))
    return keys


def _hand_graph(index: int) -> Any:
    name = f"plan_{index:04d}"

    def make(label: str, inputs: int) -> Any:
        ins = {f"in_{n}": In() for n in range(inputs)}
        if inputs == 0:
            ins["after"] = In(Nothing)

        @op(name=f"{name}__{label}", ins=ins, out=Out())
        def step(**kwargs: Any) -> Any:
            return next(iter(kwargs.values()), None)

        return step

    joins = index % 5 == 4
    middle = ["scan_2", "join_3"] if joins else ["filter_2", "transform_3"]
    tail = ["project_4", "order_5", "segment_6", "aggregate_7", "project_8", "limit_9"]
    ops = {label: make(label, 0 if label.startswith("scan") else 1) for label in tail}
    ops["scan_1"] = make("scan_1", 0)
    ops.update(
        {
            middle[0]: make(middle[0], 0 if joins else 1),
            middle[1]: make(middle[1], 2 if joins else 1),
        }
    )
    store = make("store_10", 1)
    upstream = _upstream(index)

    @graph_multi_asset(
        name=name,
        outs={"store_10": AssetOut(key=AssetKey(f"table_{index}"))},
        ins={f"after_{n}": _asset_in(key) for n, key in enumerate(upstream)},
        can_subset=True,
    )
    def plan_graph(**after: Any) -> Any:
        value = ops["scan_1"](after=after["after_0"])
        if joins:
            value = ops[middle[1]](in_0=value, in_1=ops[middle[0]](after=after["after_1"]))
        else:
            value = ops[middle[1]](in_0=ops[middle[0]](in_0=value))
        for label in tail:
            value = ops[label](in_0=value)
        return {"store_10": store(in_0=value)}

    return plan_graph


def _labels(index: int) -> list[str]:
    """The node names of plan ``index``'s ten operators, in plan order."""
    middle = ["scan_2", "join_3"] if index % 5 == 4 else ["filter_2", "transform_3"]
    tail = ["project_4", "order_5", "segment_6", "aggregate_7", "project_8", "limit_9"]
    return ["scan_1", *middle, *tail, "store_10"]


def bare_graphs(count: int, shared: bool = False, lean: bool = False) -> Definitions:
    """The shape ``load_definitions`` builds, with Dagster's classes and nothing else;
    ``shared``: one op definition per kind of node; ``lean``: each op from input and output
    definitions built once and shared, and a compute function whose signature is given rather
    than inferred (the public shortcuts ``load_definitions`` takes). Built with the cycle collector paused, as
    ``load_definitions`` builds its definitions (the floor is Dagster's work, not the
    collector's)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        assets = _source_specs(count)
        op_defs: dict[str, OpDefinition] = {}
        for index in range(count):
            assets.append(_bare_graph(index, op_defs if shared else None, lean))
        defs = Definitions(assets=assets)
        defs.get_repository_def()
    finally:
        gc.freeze()  # as load_definitions: the objects go straight to the oldest generation
        gc.unfreeze()
        if enabled:
            gc.enable()
    return defs


def _bare_step(context, inputs):  # type: ignore[no-untyped-def]  # Dagster checks the annotation
    return None


_BARE_INPUTS = {
    "after": {"after": In(Nothing)},
    "upstream": {"upstream": In()},
    "join": {"left": In(), "right": In()},
}


class _LeanStep:
    """A compute function with its signature given: Dagster reads it instead of inferring it."""

    __signature__ = inspect.Signature(
        [
            inspect.Parameter("context", inspect.Parameter.POSITIONAL_OR_KEYWORD),
            inspect.Parameter("inputs", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        ]
    )

    def __call__(self, context: Any, inputs: Any) -> None:
        return None


_LEAN_STEP = _LeanStep()
# Input and output definitions built once (``In.to_definition``/``Out.to_definition``), as
# load_definitions shares them: building them per op is a good part of an op's cost.
_LEAN_INPUTS = {
    kind: {name: value.to_definition(name) for name, value in ins.items()}
    for kind, ins in _BARE_INPUTS.items()
}


class _LeanOut(Out):
    """An ``Out`` whose definition is built once."""

    built: Any = None

    def to_definition(self, *args: Any, **kwargs: Any) -> Any:
        if _LeanOut.built is None:
            _LeanOut.built = super().to_definition(*args, **kwargs)
        return _LeanOut.built


_LEAN_OUTS = {"result": _LeanOut()}


def _bare_graph(
    index: int, shared: dict[str, OpDefinition] | None, lean: bool = False
) -> AssetsDefinition:
    name = f"plan_{index:04d}"
    node_defs: list[OpDefinition] = []
    dependencies: dict[NodeInvocation, dict[str, DependencyDefinition]] = {}
    previous = ""
    for label in _labels(index):
        kind = "after" if label.startswith("scan") else "join" if label == "join_3" else "upstream"
        op_name = f"{name}__{label}" if shared is None else f"bare_{label.split('_')[0]}"
        op_def = None if shared is None else shared.get(op_name)
        if op_def is None:
            if lean:
                op_def = OpDefinition(
                    compute_fn=_LEAN_STEP, name=op_name, ins=_LEAN_INPUTS[kind], outs=_LEAN_OUTS
                )
            else:
                op_def = OpDefinition(
                    compute_fn=_bare_step,
                    name=op_name,
                    ins=_BARE_INPUTS[kind],
                    outs={"result": Out()},
                )
            if shared is not None:
                shared[op_name] = op_def
        if op_def not in node_defs:
            node_defs.append(op_def)
        wiring: dict[str, DependencyDefinition] = {}
        if kind == "upstream":
            wiring["upstream"] = DependencyDefinition(previous, "result")
        elif kind == "join":
            wiring["left"] = DependencyDefinition("scan_1", "result")
            wiring["right"] = DependencyDefinition("scan_2", "result")
        dependencies[NodeInvocation(op_name, alias=label)] = wiring
        if label != "scan_2":  # the join reads it; the chain goes on from scan_1
            previous = label
    upstream = _upstream(index)
    scans = ["scan_1", "scan_2"][: len(upstream)]
    graph = GraphDefinition(
        name=name,
        node_defs=node_defs,
        dependencies=dependencies,
        input_mappings=[
            InputMapping(
                graph_input_name=f"after_{n}", mapped_node_name=scan, mapped_node_input_name="after"
            )
            for n, scan in enumerate(scans)
        ],
        output_mappings=[
            OutputMapping(
                graph_output_name="store_10",
                mapped_node_name="store_10",
                mapped_node_output_name="result",
            )
        ],
    )
    key = AssetKey(f"table_{index}")
    return AssetsDefinition(
        node_def=graph,
        keys_by_input_name={f"after_{n}": up for n, up in enumerate(upstream)},
        keys_by_output_name={"store_10": key},
        specs=[AssetSpec(key, deps=upstream)],
        can_subset=True,
    )


def _asset_in(key: AssetKey) -> Any:
    from dagster import AssetIn

    return AssetIn(key=key, dagster_type=Nothing)


def hand_assets(count: int) -> Definitions:
    """One plain ``@asset`` per plan, same keys and deps."""
    assets: list[Any] = []
    seen: set[AssetKey] = set()
    for index in range(count):
        upstream = _upstream(index)
        for key in upstream:
            if key.path[0] == "raw" and key not in seen:
                seen.add(key)
                assets.append(AssetSpec(key))

        @asset(name=f"table_{index}", deps=upstream)
        def table() -> None:
            return None

        assets.append(table)
    defs = Definitions(assets=assets)
    defs.get_repository_def()
    return defs


def server_stages(defs: Definitions) -> dict[str, float]:
    """CPU seconds of what a code server does after ``get_repository_def()``."""
    from dagster._core.remote_representation.external_data import RepositorySnap

    repo = defs.get_repository_def()
    cpu = time.process_time()
    repo.load_all_definitions()
    loaded = time.process_time()
    RepositorySnap.from_def(repo, defer_snapshots=True)
    return {"load_all_definitions": loaded - cpu, "snapshot": time.process_time() - loaded}


def server(plans_dir: Path, count: int, repeat: int) -> int:
    """``--server``: definitions, then the code server's stages, alternating contenders."""
    contenders: dict[str, Callable[[], Definitions]] = {
        "load_definitions": lambda: ours(plans_dir),
        "hand_graphs": lambda: hand_graphs(count),
    }
    rows: dict[str, list[dict[str, float]]] = {name: [] for name in contenders}
    for _ in range(repeat):
        for name, build in contenders.items():
            gc.collect()
            cpu = time.process_time()
            defs = build()
            row = {"definitions": time.process_time() - cpu, **server_stages(defs)}
            row["total"] = sum(row.values())
            row["jobs"] = len(defs.get_repository_def().get_all_jobs())
            rows[name].append(row)
            del defs
    print(f"{count} plans, code server stages, CPU s, median of {repeat}")
    columns = ["definitions", "load_all_definitions", "snapshot", "total", "jobs"]
    print(f"  {'':<17}" + "".join(f" {c:>21}" for c in columns))
    for name, values in rows.items():
        medians = [statistics.median(v[c] for v in values) for c in columns]
        cells = [f"{m:.2f}" if c != "jobs" else f"{m:.0f}" for c, m in zip(columns, medians)]
        print(f"  {name:<17}" + "".join(f" {cell:>21}" for cell in cells))
    return 0


def timed(fn: Callable[[], Any]) -> tuple[float, float]:
    """Wall-clock and CPU seconds of ``fn()`` (CPU time is steadier on a shared machine)."""
    gc.collect()
    start, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - start, time.process_time() - cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plans", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--profile", type=int, metavar="N", help="print the top N of one load")
    parser.add_argument("--server", action="store_true", help="time the code server's stages too")
    parser.add_argument(
        "--component", action="store_true", help="time DrillPlansComponent's build too"
    )
    parser.add_argument(
        "--bare",
        action="store_true",
        help="time bare_shared, bare_lean and bare_graphs too (Dagster's floor of the shape)",
    )
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="drill-load-") as tmp:
        plans_dir = write_plans(Path(tmp), args.plans)
        os.environ[CACHE_DIR_ENV] = str(Path(tmp) / "cache")  # not the user's cache
        if args.profile:
            ours(plans_dir)  # warm imports
            profiler = cProfile.Profile()
            profiler.runcall(ours, plans_dir)
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(args.profile)
            return 0
        if args.server:
            return server(plans_dir, args.plans, args.repeat)
        contenders: dict[str, Callable[[], Any]] = {
            "load_definitions": lambda: ours(plans_dir),
            "load_cold": lambda: ours_cold(plans_dir),
            "hand_graphs": lambda: hand_graphs(args.plans),
            "hand_assets": lambda: hand_assets(args.plans),
        }
        if args.component:
            contenders["component"] = lambda: component(plans_dir)
        if args.bare:
            contenders["bare_graphs"] = lambda: bare_graphs(args.plans)
            contenders["bare_lean"] = lambda: bare_graphs(args.plans, lean=True)
            contenders["bare_shared"] = lambda: bare_graphs(args.plans, shared=True)
        defs = ours(plans_dir)
        keys = defs.resolve_asset_graph().get_all_asset_keys()
        expected = hand_graphs(args.plans).resolve_asset_graph().get_all_asset_keys()
        assert keys == expected, sorted(keys ^ expected)[:5]
        if args.bare:
            for lean in (False, True):
                bare = bare_graphs(args.plans, lean=lean).resolve_asset_graph().get_all_asset_keys()
                assert bare == expected, sorted(bare ^ expected)[:5]
        del defs  # a live Definitions of 1,000 plans slows every later run's garbage collection
        for fn in contenders.values():  # warm-up
            fn()
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in contenders}
        for _ in range(args.repeat):
            for name, fn in contenders.items():
                times[name].append(timed(fn))
    wall = {name: statistics.median(w for w, _ in values) for name, values in times.items()}
    cpu = {name: statistics.median(c for _, c in values) for name, values in times.items()}
    print(f"{args.plans} plans x 10 operators, median of {args.repeat} (after a warm-up)")
    print(f"  {'':<17} {'wall':>7} {'cpu':>7}")
    for name in contenders:
        print(f"  {name:<17} {wall[name]:6.2f}s {cpu[name]:6.2f}s")
    for peer in ("hand_graphs", "hand_assets", "bare_graphs", "bare_lean", "bare_shared"):
        if peer not in cpu:
            continue
        print(
            f"  load_definitions / {peer}: {wall['load_definitions'] / wall[peer]:.2f} (wall), "
            f"{cpu['load_definitions'] / cpu[peer]:.2f} (cpu)"
        )
    for name in ("load_definitions", "component", "load_cold"):
        if name in wall:
            ours_s = wall[name]
            verdict = "met" if ours_s <= 3.0 else "NOT met"
            print(f"  {name} target <= 3 s: {verdict} ({ours_s:.2f} s wall)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
