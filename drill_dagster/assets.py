"""A plan becomes one graph-backed multi-asset: one op per operator, one asset per store.

Each operator is a node of the plan's graph named ``<op>_<id>`` (``scan_1``), wired as the plan's
DAG (a node's inputs are ``upstream``, or ``left`` and ``right``, or ``input_0``...); the store
nodes' outputs are the assets. A scan node also waits, through a data-less ``after`` input, for
the asset it reads, so a run that writes another plan's store reads it afterwards. Selecting some
stores runs only the nodes they need (``can_subset``). Op-to-op values are Spark DataFrames kept
in memory (``drill_mem_io_manager``); the store assets load as DataFrames through
``drill_io_manager``.

The nodes share one op definition per kind of operator (``drill_filter``; a store's also by its
checks, any op's by its pool), as ``.alias()`` shares an op in a hand-written graph: a thousand
plans make a dozen op definitions, not ten thousand, which Dagster builds and checks one by one.
The graph's config mapping gives each node its name as op config, and the graph's description
shows every operator's JSON and what the planner does to it; plans with other op tags or pools
(the translator's) share other definitions.

Operators that feed no store (their output is lost, the plan validator warns) are left out.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dagster import (
    AssetCheckResult,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    AssetsDefinition,
    AssetSpec,
    ConfigMapping,
    DagsterInvalidDefinitionError,
    DependencyDefinition,
    Field,
    GraphDefinition,
    In,
    InputMapping,
    NodeInvocation,
    Nothing,
    OpDefinition,
    Out,
    Output,
    OutputMapping,
)

from drill_dagster import versions
from drill_dagster.checks import ROW_COUNT_BOUNDS, SCHEMA_CONTRACT, store_check_specs
from drill_dagster.errors import DrillDefinitionsError, DrillFailure
from drill_dagster.execution import run_stores_whole, store_checks, store_output
from drill_dagster.outline import OperatorOutline
from drill_dagster.partitions import RunSlice, run_keys, slices_for_keys
from drill_dagster.plans import DrillPlan, DrillProject, DrillStore, safe_name
from drill_dagster.spec_metadata import definition_metadata
from drill_dagster.translator import DrillTranslator
from engine.plan import Operator

MEM_IO_MANAGER = "drill_mem_io_manager"
STORE_IO_MANAGER = "drill_io_manager"
RESOURCE = "drill"


@dataclass(frozen=True)
class AssetKeys:
    """Asset keys by store and by scan, decided once for a whole project by the translator."""

    stores: Mapping[tuple[str, str], AssetKey]
    scans: Mapping[tuple[str, str], AssetKey]
    sources: Mapping[int, AssetKey]
    # The translator's spec of each store: its key is the asset's key everywhere.
    specs: Mapping[tuple[str, str], AssetSpec]

    @staticmethod
    def of(project: DrillProject, translator: DrillTranslator) -> AssetKeys:
        stores: dict[tuple[str, str], AssetKey] = {}
        specs: dict[tuple[str, str], AssetSpec] = {}
        owners: dict[AssetKey, DrillStore] = {}
        for store in project.stores():
            try:
                spec = translator.get_asset_spec(store)
            except (ValueError, TypeError, DagsterInvalidDefinitionError) as err:
                raise DrillDefinitionsError(f"{store.plan.path}: store {store.id}: {err}") from None
            key = spec.key
            if key in owners:
                other = owners[key]
                raise DrillDefinitionsError(
                    f"{store.plan.path}: store {store.id} and store {other.id} of "
                    f"{other.plan.path} both have the asset key {key.to_user_string()}; "
                    "give one another target path, or a `key` in drill_project.yaml"
                )
            owners[key] = store
            stores[(store.plan.name, store.id)] = key
            specs[(store.plan.name, store.id)] = spec
        sources = {id(s): translator.get_source_asset_key(s) for s in project.sources}
        scans: dict[tuple[str, str], AssetKey] = {}
        for plan in project.plans:
            for scan in plan.scans:
                if scan.upstream is not None:
                    key = stores[(scan.upstream.plan.name, scan.upstream.id)]
                else:
                    key = sources[id(scan.source)]
                scans[(plan.name, scan.id)] = key
        return AssetKeys(stores, scans, sources, specs)

    def scan_keys(self, plan: DrillPlan) -> dict[str, AssetKey]:
        """Asset key read by each scan of ``plan``, by scan id."""
        return {scan.id: self.scans[(plan.name, scan.id)] for scan in plan.scans}

    def deps(self, store: DrillStore) -> list[AssetKey]:
        """The assets a store's records are read from, in plan order."""
        keys = [self.scans[(store.plan.name, scan.id)] for scan in store.upstream_scans]
        return list(dict.fromkeys(keys))


def store_specs(plan: DrillPlan, translator: DrillTranslator, keys: AssetKeys) -> list[AssetSpec]:
    """The asset spec of every store of ``plan``, with its deps from the lineage."""
    specs = []
    key_of_scan = keys.scan_keys(plan).get
    for store in plan.stores:
        spec = keys.specs[(plan.name, store.id)]
        # One more spec, not two: each AssetSpec is validated again when built.
        specs.append(
            spec.replace_attributes(
                key=keys.stores[(plan.name, store.id)],
                deps=[*spec.deps, *keys.deps(store)],
                metadata={
                    **definition_metadata(store, key_of_scan),
                    **spec.metadata,
                    "drill/store_id": store.id,
                    "drill/plan_name": plan.name,
                },
            )
        )
    return specs


def build_plan_assets(
    plan: DrillPlan,
    translator: DrillTranslator,
    keys: AssetKeys,
) -> AssetsDefinition:
    """The graph-backed multi-asset of ``plan``."""
    specs = store_specs(plan, translator, keys)
    needed: set[str] = set()
    for store in plan.stores:
        needed |= plan.ancestors(store.id)
    operators = [o for o in plan.outline.topological_order() if o.id in needed]
    if not plan.stores:
        raise DrillDefinitionsError(
            f"{plan.path}: the plan has no store, so it makes no asset; add a store operator"
        )
    scan_keys = keys.scan_keys(plan)
    # Each store's checks are outputs of its op (graph outputs <store output>__<check>).
    checks_by_store = {store.id: _check_specs(store, keys) for store in plan.stores}
    op_tags = translator.get_op_tags(plan)
    pool = translator.get_pool(plan)
    node_defs: dict[str, OpDefinition] = {}
    dependencies: dict[NodeInvocation, dict[str, DependencyDefinition]] = {}
    # Each scan waits for the asset it reads (a Nothing input, no data): within one run, another
    # plan's store is written before this plan's scan of it runs.
    upstream_inputs = {
        key: f"after_{'__'.join(key.path)}"
        for key in dict.fromkeys(scan_keys[o.id] for o in operators if o.op == "scan")
    }
    input_mappings = [
        InputMapping(
            graph_input_name=safe_name(upstream_inputs[scan_keys[o.id]]),
            mapped_node_name=plan.node_name(o),
            mapped_node_input_name=AFTER,
        )
        for o in operators
        if o.op == "scan"
    ]
    steps: dict[str, _OpStep] = {}
    for operator in operators:
        store = plan.store(operator.id) if operator.op == "store" else None
        asset_key = keys.stores[(plan.name, operator.id)] if store is not None else None
        checks = tuple(spec.name for spec in checks_by_store.get(operator.id, ()))
        op_def = shared_op(operator, store is not None, checks, pool, op_tags)
        node_defs[op_def.name] = op_def
        node = plan.node_name(operator)
        steps[node] = _OpStep(plan, operator.id, store, asset_key, scan_keys)
        wiring = {
            name: DependencyDefinition(plan.node_name(ref), "result")
            for name, ref in zip(operator.input_names, operator.inputs)
        }
        dependencies[NodeInvocation(op_def.name, alias=node)] = wiring
    graph = GraphDefinition(
        name=plan.name,
        description=_graph_description(plan, operators),
        node_defs=list(node_defs.values()),
        dependencies=dependencies,
        input_mappings=input_mappings,
        output_mappings=[
            OutputMapping(
                graph_output_name=store.output_name,
                mapped_node_name=store.node_name,
                mapped_node_output_name="result",
            )
            for store in plan.stores
        ]
        + [
            OutputMapping(
                graph_output_name=f"{store.output_name}__{spec.name}",
                mapped_node_name=store.node_name,
                mapped_node_output_name=spec.name,
            )
            for store in plan.stores
            for spec in checks_by_store[store.id]
        ],
        config=ConfigMapping(config_fn=_PlanNodes(steps), config_schema=_NO_GRAPH_CONFIG),
    )
    try:
        return AssetsDefinition(
            node_def=graph,
            keys_by_input_name={name: key for key, name in upstream_inputs.items()},
            keys_by_output_name={
                store.output_name: keys.stores[(plan.name, store.id)] for store in plan.stores
            },
            specs=specs,
            check_specs_by_output_name={
                f"{store.output_name}__{spec.name}": spec
                for store in plan.stores
                for spec in checks_by_store[store.id]
            },
            can_subset=True,
            backfill_policy=translator.get_backfill_policy(plan),
        )
    except DagsterInvalidDefinitionError as err:
        raise DrillDefinitionsError(f"{plan.path}: {err}") from None


def _check_specs(store: DrillStore, keys: AssetKeys) -> list[AssetCheckSpec]:
    if store.config.checks is None:
        return []
    key = keys.stores[(store.plan.name, store.id)]
    return store_check_specs(store, key, store.config.checks)


AFTER = "after"
# A check's output carries no value (Nothing: no IO manager); not required, since a run may
# select the asset without its checks.
_CHECK_OUTS = {
    name: Out(Nothing, is_required=False) for name in (SCHEMA_CONTRACT, ROW_COUNT_BOUNDS)
}


def shared_op(
    operator: OperatorOutline,
    store: bool,
    checks: Sequence[str] = (),
    pool: str | None = None,
    tags: Mapping[str, str] | None = None,
) -> OpDefinition:
    """The op definition every node of ``operator``'s kind shares (with the same inputs, checks,
    pool and tags), across every plan of the process: Dagster requires one definition per name
    in a code location, and several components may share one.

    >>> from engine.plan import parse_plan
    >>> from drill_dagster.outline import PlanOutline
    >>> outline = PlanOutline.of(parse_plan({"storage": {}, "query": [
    ...     {"@id": 1, "op": "constant", "content": [{"a": 1}]},
    ...     {"@id": 2, "op": "filter", "input": 1, "expr": "a > 0"}]}))
    >>> shared_op(outline.operator("2"), store=False).name
    'drill_filter'
    >>> shared_op(outline.operator("2"), store=False, pool="spark").name
    'drill_filter__pool_spark'
    """
    names = operator.input_names
    tag_items = tuple(sorted((tags or {}).items()))
    key = (operator.op, names, store, tuple(checks), pool, tag_items)
    with _SHARED_LOCK:
        op_def = _SHARED_OPS.get(key)
        if op_def is None:
            op_def = _new_shared_op(operator.op, names, store, checks, pool, dict(tag_items))
            _SHARED_OPS[key] = op_def
    return op_def


_SHARED_OPS: dict[tuple[Any, ...], OpDefinition] = {}
_SHARED_NAMES: set[str] = set()
_SHARED_LOCK = threading.Lock()


def _new_shared_op(
    kind: str,
    names: tuple[str, ...],
    store: bool,
    checks: Sequence[str],
    pool: str | None,
    tags: Mapping[str, str],
) -> OpDefinition:
    name = f"drill_{kind}"
    if kind == "union":
        name += f"_of_{len(names)}"
    name += "".join(f"__{check}" for check in checks)
    if pool is not None:
        name += f"__pool_{safe_name(pool)}"
    if tags:
        digest = hashlib.sha256(json.dumps(sorted(tags.items())).encode()).hexdigest()
        name += f"__tags_{digest[:8]}"
    unique, n = name, 1
    while unique in _SHARED_NAMES:  # two pools with one safe name
        n += 1
        unique = f"{name}_{n}"
    _SHARED_NAMES.add(unique)
    ins = {name: In() for name in names}
    if kind == "scan":
        ins[AFTER] = In(Nothing)
    result = (
        # Not required: a store skipped by skip_unchanged yields nothing.
        Out(io_manager_key=STORE_IO_MANAGER, is_required=False)
        if store
        else Out(io_manager_key=MEM_IO_MANAGER)
    )
    return OpDefinition(
        compute_fn=_NODE_STEP,
        name=unique,
        description=(
            f"A Drill `{kind}` operator. Which one each node runs (its operator's JSON, and what "
            "the planner does to it) is in its plan's graph description."
        ),
        ins=ins,
        outs={"result": result, **{name: _CHECK_OUTS[name] for name in checks}},
        config_schema=Field(Any, is_required=False),  # the node's name, from the config mapping
        required_resource_keys={RESOURCE},
        tags={**tags, "drill/op": kind},
        pool=pool,
    )


def _graph_description(plan: DrillPlan, operators: Sequence[OperatorOutline]) -> str:
    """A plan graph's description: the plan's memo, then each node's operator as written, after
    what the planner does to it (if anything), under the node's name."""
    parts = [plan.memo] if plan.memo else []
    for operator in operators:
        note = operator.note
        said = "" if note is None else f"{note[0].upper()}{note[1:]}.\n\n"
        # pydantic's own JSON: a seventh of the cost of to_dict() and json.dumps per operator.
        parts.append(f"#### {plan.node_name(operator.id)}\n\n{said}```json\n{operator.text}\n```")
    return "\n\n".join(parts)


# A plan graph takes no config of its own. Dagster converts the schema {} anew for every
# ConfigMapping (a tenth of a second for a thousand plans); its converted form is taken as is.
_NO_GRAPH_CONFIG = ConfigMapping(config_fn=dict, config_schema={}).config_schema


class _PlanNodes:
    """A plan graph's config mapping (``config_fn``): it gives each node its own name as op
    config, and holds what each node runs, for the op definition the nodes share."""

    __slots__ = ("config", "steps")

    def __init__(self, steps: Mapping[str, _OpStep]) -> None:
        self.steps = steps
        self.config = {node: {"config": node} for node in steps}

    def __call__(self, _graph_config: Any) -> Mapping[str, Any]:
        return self.config


class _NodeStep:
    """The compute function of every shared op: it runs the step of the node Dagster runs,
    named by the node's op config, of the plan whose graph is the running asset's."""

    # Dagster reads the signature (and compares the context annotation object itself).
    __signature__ = inspect.Signature(
        [
            inspect.Parameter(
                "context",
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                annotation=AssetExecutionContext,
            ),
            inspect.Parameter("inputs", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        ]
    )

    def __call__(
        self, context: AssetExecutionContext, inputs: Mapping[str, Any]
    ) -> Iterator[Output[Any] | AssetCheckResult]:
        nodes = context.assets_def.node_def.config_mapping.config_fn  # type: ignore[union-attr]
        return nodes.steps[context.op_config](context, inputs)


_NODE_STEP = _NodeStep()


class _OpStep:
    """What one node runs: one small object per node instead of a closure (a function, its
    cells and two dicts each), which a thousand plans' ten thousand nodes make worth it."""

    __slots__ = ("asset_key", "operator_id", "plan", "scan_keys", "store")

    def __init__(
        self,
        plan: DrillPlan,
        operator_id: str,
        store: DrillStore | None,
        asset_key: AssetKey | None,
        scan_keys: Mapping[str, AssetKey],
    ) -> None:
        self.plan = plan
        self.operator_id = operator_id
        self.store = store
        self.asset_key = asset_key
        self.scan_keys = scan_keys

    @property
    def operator(self) -> Operator:
        """The node's operator, of the parsed plan (parsed by the first step that needs it)."""
        return self.plan.logical.operator(self.operator_id)

    def __call__(
        self, context: AssetExecutionContext, inputs: Mapping[str, Any]
    ) -> Iterator[Output[Any] | AssetCheckResult]:
        plan, store = self.plan, self.store
        if store is not None and self.asset_key not in context.selected_asset_keys:
            # Only the store's checks are selected: judge its latest materialization.
            yield from store_checks(context, store, self.asset_key, None)
            return
        if not context.selected_asset_keys:  # a run of checks alone: nothing to compile
            yield Output(None)
            return
        drill = context.resources.drill
        slices = plan_slices(plan, context)
        inputs_version = None
        if store is not None and plan.config.skip_unchanged:
            inputs_version = versions.inputs_version(store, slices)
            reason = versions.unchanged_since(
                context,
                store,
                self.asset_key,
                slices,
                versions.store_code_version(store),
                inputs_version,
            )
            if reason is not None:
                context.log.info(reason)
                return  # no output: no materialization, no files
        if drill.executor == "local":
            if store is None:
                yield Output(SliceValues(tuple(slices), (None,) * len(slices)))
                return
            writes = run_stores_whole(
                plan, [store.id], slices, executor="local", classpath=drill.classpath
            )[store.id]
        else:
            result = self._spark_step(plan, store, slices, drill)
            if store is None:
                from drill_dagster.spark_ops import step_metadata

                # this operator's DataFrames, for the next step
                yield Output(result, metadata=step_metadata(plan, self.operator, slices, drill))
                return
            writes = result
        yield store_output(
            context,
            store,
            self.asset_key,  # type: ignore[arg-type]
            writes,
            self.scan_keys,
            inputs_version,
        )
        yield from store_checks(context, store, self.asset_key, writes)

    def _spark_step(self, plan, store, slices, drill):
        """The step on Spark: this operator's DataFrames, or, for a store, what it wrote. The
        DataFrames come from the run's planned plan, not from the inputs: an input orders the
        steps (and may be :class:`~drill_dagster.handoff.NotInMemory`)."""
        from drill_dagster import spark_ops  # the Spark compiler, loaded by the first step

        if store is None:
            return spark_ops.compile_step(plan, self.operator, slices, drill)
        return spark_ops.store_step(plan, store, slices, drill)


@dataclass(frozen=True)
class SliceValues:
    """What an op passes on: one value (a DataFrame) per slice of the run."""

    slices: tuple[RunSlice, ...]
    values: tuple[Any, ...]


def plan_slices(plan: DrillPlan, context: Any) -> list[RunSlice]:
    """The slices this step runs (one per partition key, unless the plan takes a range)."""
    try:
        keys = run_keys(context)
    except Exception as err:  # a partition key Dagster cannot resolve
        raise DrillFailure.from_error(err, where=str(plan.path)) from None
    return slices_for_keys(plan.config.partitions, keys, plan.config.params)
