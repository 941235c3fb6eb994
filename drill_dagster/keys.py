"""The asset key of a store, for Python assets downstream of a plan.

Like dagster-dbt's ``get_asset_key_for_model``: the key comes from the definitions (or the
component) that made the asset, so a translator's or ``translation``'s key change is followed::

    from dagster import asset
    from drill_dagster import asset_key_for_store, load_definitions

    plans = load_definitions("plans")

    @asset(deps=[asset_key_for_store(plans, "events_cleaned", "events_cleaned")])
    def report(): ...

With the component, ``DrillPlansComponent.asset_key_for_store(plan, store)`` does the same.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from dagster import AssetKey, AssetsDefinition, Definitions

from drill_dagster.plans import DrillProject, DrillStore, store_setting_names


def asset_key_for_store(
    definitions: Definitions | Iterable[Any], plan: str, store: str
) -> AssetKey:
    """The key of the asset of ``store`` (its target path or ``"@<id>"``) of plan ``plan`` (the
    plan file stem) among ``definitions`` (Definitions, or assets definitions).

    Raises :class:`KeyError` naming the plans or stores there are.
    """
    assets = definitions.assets or () if isinstance(definitions, Definitions) else definitions
    names: dict[str, list[str]] = {}
    for item in assets:
        if not isinstance(item, AssetsDefinition):
            continue
        for spec in item.specs:
            plan_name = spec.metadata.get("drill/plan_name")
            if plan_name is None:
                continue
            target = spec.metadata.get("drill/target_path")
            store_names = [f"@{spec.metadata.get('drill/store_id')}"]
            if target:
                store_names += [str(target), str(target).strip("/")]
            names.setdefault(plan_name, []).extend(store_names)
            if plan_name == plan and store in store_names:
                return spec.key
    if plan not in names:
        known = ", ".join(sorted(names)) or "none"
        raise KeyError(f"no plan {plan!r} among these definitions (plans: {known})")
    stores = ", ".join(dict.fromkeys(names[plan]))
    raise KeyError(f"plan {plan!r} has no store {store!r} (stores: {stores})")


def find_store(project: DrillProject, plan: str, store: str) -> DrillStore:
    """The store named ``store`` (target path or ``"@<id>"``) of plan ``plan`` in ``project``."""
    try:
        found = project.plan(plan)
    except KeyError:
        known = ", ".join(p.name for p in project.plans) or "none"
        raise KeyError(f"no plan {plan!r} in {project.plans_dir} (plans: {known})") from None
    for candidate in found.stores:
        if store in store_setting_names(candidate):
            return candidate
    stores = ", ".join(n for s in found.stores for n in store_setting_names(s))
    raise KeyError(f"plan {plan!r} has no store {store!r} (stores: {stores})")
