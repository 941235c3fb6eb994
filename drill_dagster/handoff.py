"""How a plan's ops pass their DataFrames on: in memory when they can, rebuilt from the plan when not.

An op of a plan's graph outputs lazy DataFrames (nothing has run on Spark yet), which cannot be
pickled. Within one process the IO manager keeps them in memory; an input whose value is not
there comes back as :class:`NotInMemory`. Either way the op compiles its operator from the
run's planned plan (:mod:`drill_dagster.spark_ops`), which compiles the upstream operators
once per run and process (milliseconds, nothing is read until the store writes): the inputs
order the steps. An input is not in memory when

* a run re-executes from failure or only some steps (the earlier steps' values were in the
  memory of the run that failed), or
* each step runs in its own process (Dagster's multiprocess executor).

So the data a store writes is the same whichever way its inputs reached it: the plan is the
persisted artifact, and Dagster allows re-execution with this IO manager (it is not its
``mem_io_manager``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dagster import InitResourceContext, InputContext, IOManager, OutputContext, io_manager


@dataclass(frozen=True)
class NotInMemory:
    """An input whose value is not in this process: the reading op rebuilds it from the plan."""

    step_key: str


class DrillOpIOManager(IOManager):
    """Keeps op outputs in this process's memory; hands out :class:`NotInMemory` otherwise."""

    def __init__(self) -> None:
        self._values: dict[tuple[str, str], Any] = {}  # one manager per run: no run id needed

    def handle_output(self, context: OutputContext, obj: Any) -> None:
        self._values[(context.step_key, context.name)] = obj

    def load_input(self, context: InputContext) -> Any:
        upstream = context.upstream_output
        if upstream is None:
            return NotInMemory("")
        key = (upstream.step_key, upstream.name)
        if key in self._values:
            return self._values[key]
        return NotInMemory(upstream.step_key)


@io_manager(description="op-to-op DataFrames of Drill plans: in memory, else rebuilt from the plan")
def drill_op_io_manager(_: InitResourceContext) -> DrillOpIOManager:
    """One :class:`DrillOpIOManager` per run (per step process under a multiprocess executor)."""
    return DrillOpIOManager()
