"""Versions of a store asset: its code version, its inputs' version, and ``skip_unchanged``.

* **Code version**: a hash of what determines the store's data: the operators it reads from
  (their canonical JSON: key order and formatting do not count, nor ``memo`` texts), the storage
  engines they use, the plan's fixed ``params`` and its partition settings. A changed upstream
  filter changes it; a reformatted plan file does not.
* **Data version** of a materialization: the commit version the store wrote (a new one per
  write), given to Dagster as the output's ``DataVersion``; for a ``jdbc`` table the
  transaction that swapped its rows in, for a ``catalog`` table a hash of its files.
* **Inputs' version** (only with ``skip_unchanged``): a hash of the files every scan of the store
  reads (their paths, sizes and modification times, after ``${...}`` parameters are
  substituted); another plan's store read by a scan is files too, and each of its commits
  writes new ones. A scan of anything that is not files has no such version.

``skip_unchanged: true`` (``drill_project.yaml``, per plan or in ``defaults``) skips a store whose
code version and inputs' version are those of its last materialization (of that partition): the
step logs why and writes nothing.

>>> canonical_json({"b": [1, {"y": 2, "x": 1}], "a": "t"})
'{"a":"t","b":[1,{"x":1,"y":2}]}'
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from glob import has_magic, iglob
from pathlib import Path
from typing import Any

from drill_dagster.outline import canonical_json
from drill_dagster.partitions import RunSlice
from drill_dagster.plans import DrillStore
from engine.errors import DrillError
from engine.plan import Scan

CODE_VERSION = "drill/code_version"
INPUTS_VERSION = "drill/inputs_version"


def store_code_version(store: DrillStore) -> str:
    """The code version of a store's asset (16 hex digits)."""
    plan = store.plan
    ancestors = plan.ancestors(store.id)
    operators = [op for op in plan.outline.topological_order() if op.id in ancestors]
    engines = sorted({op.engine for op in operators if op.engine is not None})
    config = plan.config
    storage = {name: plan.outline.storage[name] for name in engines if name in plan.outline.storage}
    # canonical_json of {"operators": [...], "params": ..., "partitions": ..., "storage": ...},
    # written key by key in sorted order: each operator's text is made once.
    text = (
        f'{{"operators":[{",".join(op.canonical for op in operators)}],'
        f'"params":{canonical_json(dict(sorted((config.params or {}).items())))},'
        f'"partitions":'
        f"{canonical_json(config.partitions.model_dump() if config.partitions else None)},"
        f'"storage":{canonical_json(storage)}}}'
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def inputs_version(store: DrillStore, slices: Sequence[RunSlice]) -> str | None:
    """A hash of the files the store's scans read for these slices; None when a scan reads
    something that is not files (then nothing can be skipped)."""
    from drill_dagster.execution import store_subplan
    from engine.run import apply_params

    digest = hashlib.sha256()
    for slice_ in slices:
        try:
            logical = apply_params(store_subplan(store.plan, [store.id]), slice_.params)
        except DrillError:  # the run reports it
            return None
        for op in logical.query:
            if not isinstance(op, Scan):
                continue
            root = store.plan.roots.get(op.storage_engine)
            path = (op.selection or {}).get("path")
            if root is None or not isinstance(path, str):
                return None
            digest.update(f"scan {op.id} {path}\n".encode())
            for line in _file_stats(root / path.lstrip("/")):
                digest.update(line.encode())
    return digest.hexdigest()[:16]


def _file_stats(location: Path) -> list[str]:
    """``path size mtime`` of every file at or under ``location`` (a glob allowed), sorted."""
    text = str(location)
    tops = sorted(iglob(text)) if has_magic(text) else [text]
    lines = []
    for top in tops:
        if os.path.isfile(top):
            stat = os.stat(top)
            lines.append(f"{top} {stat.st_size} {stat.st_mtime_ns}\n")
            continue
        for folder, _, names in os.walk(top):
            for name in names:
                full = os.path.join(folder, name)
                stat = os.stat(full)
                lines.append(f"{full} {stat.st_size} {stat.st_mtime_ns}\n")
    if not lines:
        lines.append(f"{text} missing\n")
    return sorted(lines)


def unchanged_since(
    context: Any,
    store: DrillStore,
    asset_key: Any,
    slices: Sequence[RunSlice],
    code_version: str,
    inputs: str | None,
) -> str | None:
    """Why the store can be skipped (its last materialization of these partitions had the same
    code and inputs' versions), or None to run it."""
    from dagster import AssetRecordsFilter

    if inputs is None or len(slices) != 1 or len(slices[0].partition_keys) > 1:
        return None
    keys = list(slices[0].partition_keys)
    records = context.instance.fetch_materializations(
        AssetRecordsFilter(asset_key=asset_key, asset_partitions=keys or None), limit=1
    ).records
    if not records:
        return None
    event = records[0].asset_materialization
    metadata = event.metadata if event is not None else {}
    last_code = getattr(metadata.get(CODE_VERSION), "value", None)
    last_inputs = getattr(metadata.get(INPUTS_VERSION), "value", None)
    if last_code != code_version or last_inputs != inputs:
        return None
    where = f" of partition {keys[0]}" if keys else ""
    return (
        f"store {store.id} of {store.plan.path.name} skipped (skip_unchanged): code version "
        f"{code_version} and inputs' version {inputs} are those of its last "
        f"materialization{where} (run {records[0].run_id}); nothing written"
    )
