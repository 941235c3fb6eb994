"""How a run's partition key (or key range) reaches a plan: as ``${name}`` parameters.

A run of a partitioned plan is cut into *slices*, each one run of the plan with its parameters:

* one partition key: one slice, ``params[<param>] = key``;
* a key range (a backfill launched as one run by ``BackfillPolicy.single_run()``), with
  ``range: keys`` (the default): one slice per key, in key order, all inside the one run, each
  writing its partition; ``dagster/partition_row_count`` is recorded per key;
* a key range with ``range: params``: one slice, with ``params[<start_param>]`` and
  ``params[<end_param>]`` the first and last key (and ``params[<param>]`` the first key), for plans
  that read a whole range at once; per-partition row counts are then not known.

The plan's fixed ``params`` from ``drill_project.yaml`` come first; the partition's win.

>>> from drill_dagster.project import PartitionsConfig
>>> config = PartitionsConfig(daily={"start": "2024-01-01"}, param="day")
>>> [s.params for s in slices_for_keys(config, ["2024-01-02", "2024-01-03"], {"env": "t"})]
[{'env': 't', 'day': '2024-01-02'}, {'env': 't', 'day': '2024-01-03'}]
>>> ranged = PartitionsConfig(daily={"start": "2024-01-01"}, range="params")
>>> slices_for_keys(ranged, ["2024-01-02", "2024-01-03"], {})[0].params
{'partition': '2024-01-02', 'partition_start': '2024-01-02', 'partition_end': '2024-01-03'}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from drill_dagster.project import PartitionsConfig


@dataclass(frozen=True)
class RunSlice:
    """One run of a plan inside a Dagster run: its parameters and the partition keys it writes."""

    params: Mapping[str, str] = field(default_factory=dict)
    partition_keys: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """How logs and errors name the slice."""
        if not self.partition_keys:
            return "the plan"
        if len(self.partition_keys) == 1:
            return f"partition {self.partition_keys[0]}"
        return f"partitions {self.partition_keys[0]}..{self.partition_keys[-1]}"


def slices_for_keys(
    config: PartitionsConfig | None,
    keys: Sequence[str] | None,
    params: Mapping[str, str] | None = None,
) -> list[RunSlice]:
    """The slices of a run over ``keys`` (None: an unpartitioned run)."""
    base = dict(params or {})
    if config is None or not keys:
        return [RunSlice(base)]
    if config.range == "params" and len(keys) > 1:
        ranged = {
            **base,
            config.param: keys[0],
            config.start_param: keys[0],
            config.end_param: keys[-1],
        }
        return [RunSlice(ranged, tuple(keys))]
    return [
        RunSlice(
            {**base, config.param: key, config.start_param: key, config.end_param: key}
            if config.range == "params"
            else {**base, config.param: key},
            (key,),
        )
        for key in keys
    ]


def run_keys(context: Any) -> list[str] | None:
    """The partition keys a Dagster step runs for (None when the run is not partitioned)."""
    op_context = getattr(context, "op_execution_context", context)
    if not op_context.has_partitions:
        return None
    if op_context.has_partition_key_range:
        return list(op_context.partition_keys)
    return [op_context.partition_key]
