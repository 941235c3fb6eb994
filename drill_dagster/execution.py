"""Running a plan's stores for a Dagster step, and describing what they wrote.

Two ways to run, chosen by the ``drill`` resource's ``executor``:

* ``spark``: every op of the plan's graph compiles its operator to a Spark DataFrame
  (:mod:`drill_dagster.spark_ops`) and passes it in process to the ops that read it; a store op
  writes its DataFrame.
* ``local``: the ops before a store pass nothing; the store op runs its part of the plan (the
  store and every operator it reads from) with ``engine.run_plan(..., executor="local")``.

Either way a store op ends with :func:`store_output`: the ``Output`` of its asset with the
metadata of :mod:`drill_dagster.metadata`, and ``dagster/partition_row_count`` per partition.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dagster import AssetCheckResult, AssetKey, DataVersion, Output

from drill_dagster.checks import check_results, latest_written, written_rows
from drill_dagster.errors import DrillFailure
from drill_dagster.metadata import (
    SCHEMA_FINGERPRINT,
    SCHEMA_VERSION,
    WrittenStore,
    column_schema,
    lineage_metadata,
    next_schema_version,
    schema_fingerprint,
    store_metadata,
)
from drill_dagster.partitions import RunSlice, run_keys
from drill_dagster.plans import DrillPlan, DrillStore, warehouses
from drill_dagster.versions import CODE_VERSION, INPUTS_VERSION, store_code_version
from engine import run_plan
from engine.errors import DrillError
from engine.explain import explain
from engine.plan import LogicalPlan, StorageConfig


@dataclass
class StoreWrites:
    """What one store wrote over the slices of a run, and the run's operator counters."""

    store: DrillStore
    written: list[tuple[RunSlice, WrittenStore]] = field(default_factory=list)
    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)

    def add_metrics(self, metrics: Mapping[str, Mapping[str, Any]]) -> None:
        """Sum numeric counters over slices; keep the last value of the others."""
        for op_id, counters in metrics.items():
            merged = self.metrics.setdefault(op_id, {})
            for name, value in counters.items():
                if isinstance(value, int | float) and isinstance(merged.get(name), int | float):
                    merged[name] += value
                else:
                    merged[name] = value


def absolute_plan(plan: DrillPlan, keep: set[str] | None = None) -> LogicalPlan:
    """The plan with relative ``fs`` roots and ``catalog`` warehouses made absolute (they are
    relative to the plan file), and only the operators in ``keep`` (all when None)."""
    logical = plan.logical
    storage = dict(logical.storage)
    for key, directories in (("root", plan.roots), ("warehouse", warehouses(plan))):
        for name, directory in directories.items():
            storage[name] = StorageConfig.model_validate(
                {**storage[name].to_dict(), key: str(directory)}
            )
    query = [op for op in logical.query if keep is None or op.id in keep]
    return LogicalPlan(head=logical.head, storage=storage, query=query, source=logical.source)


def store_subplan(plan: DrillPlan, store_ids: Sequence[str]) -> LogicalPlan:
    """The part of the plan the given stores need: them and every operator they read from."""
    keep: set[str] = set()
    for store_id in store_ids:
        keep |= plan.ancestors(store_id)
    return absolute_plan(plan, keep)


def run_stores_whole(
    plan: DrillPlan,
    store_ids: Sequence[str],
    slices: Sequence[RunSlice],
    *,
    executor: str,
    classpath: Sequence[str] = (),
    spark: Any = None,
) -> dict[str, StoreWrites]:
    """Run the part of the planned plan the stores need once per slice with ``engine.run_plan``.

    The whole plan is planned (as the Spark ops and ``run_plan`` plan it), then cut to the
    stores' operators: the same planned operators whichever stores a run selects."""
    from engine.planner.changes import written_counts

    writes = {store_id: StoreWrites(plan.store(store_id)) for store_id in store_ids}
    for slice_ in slices:
        try:
            logical, planned = planned_plan(plan, slice_.params, classpath)
            keep: set[str] = set()
            for store_id in store_ids:
                keep |= planned.ancestors(store_id)
            result = run_plan(
                planned.with_query([op for op in planned.query if op.id in keep]),
                executor=executor,
                classpath=list(classpath),
                params=dict(slice_.params),
                spark=spark,
                optimize=False,
            )
        except DrillError as err:
            raise DrillFailure.from_error(err, where=_where(plan, slice_)) from None
        metrics = written_counts(logical, planned, result.metrics)
        for summary in result.stores:
            if summary.operator_id in writes:
                entry = writes[summary.operator_id]
                entry.written.append((slice_, WrittenStore.of(summary)))
                entry.add_metrics(metrics)
    return writes


def planned_plan(
    plan: DrillPlan, params: Mapping[str, Any], classpath: Sequence[str] = ()
) -> tuple[LogicalPlan, LogicalPlan]:
    """The plan with ``params`` substituted and relative roots made absolute, and the plan the
    planner makes of it (with the statistics of its storage engines)."""
    from engine.planner import Statistics, optimize
    from engine.run import apply_params, build_engines, check_paths

    logical = apply_params(absolute_plan(plan), params)
    engines = build_engines(logical, base_dir=None, classpath=[Path(p) for p in classpath])
    check_paths(logical, engines)  # before the statistics read a file
    return logical, optimize(logical, Statistics.from_engines(logical, engines))


def _where(plan: DrillPlan, slice_: RunSlice) -> str:
    where = str(plan.path)
    return where if not slice_.partition_keys else f"{where} ({slice_.label})"


def explain_store(plan: DrillPlan, store: DrillStore) -> str:
    """The plan as the store runs it, as text (the physical plan once the planner exists)."""
    return explain(store_subplan(plan, [store.id]), base_dir=plan.path.parent)


def store_output(
    context: Any,
    store: DrillStore,
    asset_key: AssetKey,
    writes: StoreWrites,
    scan_keys: Mapping[str, AssetKey],
    inputs_version: str | None = None,
) -> Output[Any]:
    """The asset output of a store, its metadata, its data version (the commit version written)
    and per-partition row counts."""
    metadata = materialization_metadata(
        store, writes, scan_keys, previous_schema(context, asset_key), inputs_version
    )
    _partition_counts(context, asset_key, writes)
    last = writes.written[-1][1]
    return Output(
        StoredDataset(Path(last.location), last.format, tuple(str(f) for f in last.files)),
        metadata=metadata,
        data_version=data_version([w for _, w in writes.written]),
    )


def materialization_metadata(
    store: DrillStore,
    writes: StoreWrites,
    scan_keys: Mapping[str, AssetKey],
    previous: Mapping[str, Any] | None,
    inputs_version: str | None = None,
) -> dict[str, Any]:
    """The metadata of a store's materialization (:func:`store_metadata`, the code version);
    ``previous``: the schema version and fingerprint of the last one, if any."""
    if not writes.written:
        raise DrillFailure(description=f"store {store.id} of {store.plan.path} wrote nothing")
    written = [w for _, w in writes.written]
    last = written[-1]
    fingerprint = schema_fingerprint(last.schema)
    ancestors = store.plan.ancestors(store.id)
    names = {
        op.id: (op.op if op.has_generated_id else f"{op.op} {op.id}")
        for op in store.plan.logical.topological_order()
        if op.id in ancestors
    }
    metadata = store_metadata(
        written=written,
        lineage=lineage_metadata(store.lineage, last.schema, scan_keys.get),
        explain=explain_store(store.plan, store),
        metrics=writes.metrics,
        operator_names=names,
        plan_file=store.plan.path,
        schema_version=next_schema_version(previous, fingerprint),
    )
    metadata[CODE_VERSION] = store_code_version(store)
    if inputs_version is not None:
        metadata[INPUTS_VERSION] = inputs_version
    return metadata


def store_checks(
    context: Any, store: DrillStore, asset_key: AssetKey, writes: StoreWrites | None
) -> list[AssetCheckResult]:
    """The results of the store's selected checks, judged from what it wrote in this step; with
    ``writes`` None (the step only checks: the asset is not selected), from its latest
    materialization of the run's partitions."""
    config = store.config.checks
    selected = {k.name for k in context.selected_asset_check_keys if k.asset_key == asset_key}
    if config is None or not selected:
        return []
    if writes is None:
        keys = list(run_keys(context) or ())
        schema, rows = latest_written(context.instance, asset_key, keys)
    else:
        schema = column_schema(writes.written[-1][1].schema)
        rows = written_rows(writes.written)
    return check_results(asset_key, config, selected, schema, rows)


def data_version(written: Sequence[WrittenStore]) -> DataVersion | None:
    """The commit version(s) the store wrote (of files, or of a table: see
    :class:`~engine.storage.store.StoreResult`); else a hash of the files it wrote (each commit
    names its files anew); None when it wrote neither (a queue, a console)."""
    versions = [w.version for w in written if w.version]
    if versions:
        return DataVersion("-".join(versions))
    files = sorted(f for w in written for f in w.files)
    if files:
        return DataVersion(hashlib.sha256("\n".join(files).encode()).hexdigest()[:16])
    return None


def _partition_counts(context: Any, asset_key: AssetKey, writes: StoreWrites) -> None:
    """Each partition's own rows on its materialization (``dagster/row_count`` and
    ``dagster/partition_row_count``), when the run wrote its partitions one by one."""
    step = getattr(context, "op_execution_context", context)
    if not getattr(step, "has_partitions", False):
        return
    for slice_, written in writes.written:
        if len(slice_.partition_keys) == 1:
            key = slice_.partition_keys[0]
            own: dict[str, Any] = {
                "dagster/row_count": written.row_count,
                "dagster/partition_row_count": written.row_count,
            }
            if written.version:
                own["drill/commit_version"] = written.version
            context.add_asset_metadata(own, asset_key=asset_key, partition_key=key)


def previous_schema(context: Any, asset_key: AssetKey) -> dict[str, Any] | None:
    """The schema version and fingerprint of the asset's latest materialization (None: none)."""
    try:
        event = context.instance.get_latest_materialization_event(asset_key)
    except Exception:  # an instance that cannot answer only loses the version history
        return None
    materialization = event.asset_materialization if event is not None else None
    if materialization is None:
        return None
    metadata = materialization.metadata
    return {
        k: getattr(metadata[k], "value", metadata[k])
        for k in (SCHEMA_VERSION, SCHEMA_FINGERPRINT)
        if k in metadata
    }


@dataclass(frozen=True)
class StoredDataset:
    """The value of a store asset's output: where the data is (the store wrote it already)."""

    location: Path
    format: str
    files: tuple[str, ...] = ()
