"""Materializing a Definitions' assets and checks in a test, failing with the steps' errors."""

from __future__ import annotations

from typing import Any

from dagster import (
    AssetSelection,
    DagsterInstance,
    Definitions,
    ExecuteInProcessResult,
    materialize,
)


def materialize_ok(
    defs: Definitions, instance: DagsterInstance, *keys: str, **kwargs: Any
) -> ExecuteInProcessResult:
    """Materialize ``defs``' assets and checks on ``instance`` (only the assets ``keys`` when
    given; ``kwargs`` as :func:`dagster.materialize`'s: ``selection``, ``partition_key``,
    ``tags``) and assert that the run succeeded, showing each failed step's error if not."""
    if keys:
        kwargs["selection"] = AssetSelection.assets(*keys)
    result = materialize(
        [*defs.assets, *(defs.asset_checks or ())],  # type: ignore[list-item]
        resources=defs.resources,
        instance=instance,
        raise_on_error=False,
        **kwargs,
    )
    failures = [
        e.event_specific_data.user_failure_data or e.event_specific_data.error
        for e in result.get_step_failure_events()
    ]
    assert result.success, failures
    return result
