"""``DrillPlansComponent``: a plans directory as a Dagster component (``dg``, ``defs.yaml``).

``dg scaffold defs drill_dagster.DrillPlansComponent my_plans`` writes ``defs/my_plans/defs.yaml``
and an example plan beside it; ``dg check defs`` and ``dg list defs`` then show its assets::

    type: drill_dagster.DrillPlansComponent
    attributes:
      plans_dir: plans                  # relative to this file
      project_file: plans/drill_project.yaml   # default: drill_project.yaml in plans_dir
      executor: spark                   # or local; default: the project file's, else spark
      spark_config: {spark.master: "local[2]"}
      classpath: [jars/udfs.jar]
      select: [events_cleaned, ingest]  # plan stems, groups or store keys (default: all)
      exclude: [scratch]
      op: {tags: {team: data}, pool: spark, backfill_policy: {type: single_run}}
      freshness: {fail_window: 24h}     # every store, unless drill_project.yaml says otherwise
      translation:                      # Dagster's asset attributes, templated per store
        key: "lake/{{ spec.key.to_user_string() }}"
        group_name: "{{ plan.name }}"
        tags: {format: "{{ store.format }}"}

In ``translation`` the template variables are ``spec`` (the translator's spec), ``store``
(:class:`~drill_dagster.plans.DrillStore`: ``id``, ``target_path``, ``format``...) and ``plan``
(:class:`~drill_dagster.plans.DrillPlan`: ``name``, ``path``...). A key changed there is the
asset's key everywhere: the plans that read the store depend on the new key. In Python, subclass
the component and override :meth:`DrillPlansComponent.get_asset_spec`.
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal

from dagster import AssetKey, AssetSpec, Definitions
from dagster.components import (
    Component,
    ComponentLoadContext,
    ResolutionContext,
    Resolvable,
    Resolver,
    Scaffolder,
    ScaffoldRequest,
    scaffold_component,
    scaffold_with,
)
from dagster.components.resolved.core_models import OpSpec
from dagster.components.utils.translation import TranslationFn, TranslationFnResolver
from pydantic import ValidationError

from drill_dagster.definitions import _collector_paused, definitions_for_project
from drill_dagster.errors import DrillDefinitionsError
from drill_dagster.freshness import FreshnessConfig
from drill_dagster.plans import DrillPlan, DrillProject, DrillSource, DrillStore, load_project
from drill_dagster.project import PROJECT_FILE, load_project_config
from drill_dagster.resource import default_resources
from drill_dagster.translator import DrillTranslator


def _relative_path(context: ResolutionContext, value: str) -> Path:
    return context.resolve_source_relative_path(value)


def _relative_paths(context: ResolutionContext, value: Sequence[str]) -> list[Path]:
    return [context.resolve_source_relative_path(v) for v in value]


def _translation_scope(store: DrillStore) -> dict[str, Any]:
    return {"store": store, "plan": store.plan}


RelativePath = Annotated[Path, Resolver(_relative_path, model_field_type=str)]


class DrillPlansScaffolder(Scaffolder):
    """Writes ``defs.yaml`` and an example plan (with a little data) beside it."""

    def scaffold(self, request: ScaffoldRequest) -> None:
        from drill_dagster.cli_scaffold import write_example_plans

        scaffold_component(request, {"plans_dir": "plans"})
        write_example_plans(request.target_path)


@scaffold_with(DrillPlansScaffolder)
@dataclass
class DrillPlansComponent(Component, Resolvable):
    """Every Drill plan of a directory as Dagster assets: one graph-backed multi-asset per plan,
    one asset per store, with the checks, schedules and resources of ``drill_project.yaml``.

    Attributes:
        plans_dir: the plans directory, relative to ``defs.yaml``.
        project_file: ``drill_project.yaml`` to use (default: the one in ``plans_dir``).
        executor: ``spark`` or ``local`` (default: the project file's, else ``spark``).
        spark_config: plain Spark settings (default: the project file's).
        classpath: jars of Java UDFs, relative to ``defs.yaml``.
        select: plan stems, groups or store keys to include (default: every plan).
        exclude: plan stems, groups or store keys to leave out.
        op: tags, pool and backfill policy of every plan's ops.
        freshness: the freshness of every store unless ``drill_project.yaml`` sets one.
        translation: Dagster asset attributes per store (template variables ``store``,
            ``plan`` and ``spec``).
    """

    plans_dir: RelativePath = Path("plans")
    project_file: RelativePath | None = None
    executor: Literal["spark", "local"] | None = None
    spark_config: dict[str, Any] | None = None
    classpath: Annotated[list[Path], Resolver(_relative_paths, model_field_type=list[str])] = field(
        default_factory=list
    )
    select: list[str] | None = None
    exclude: list[str] | None = None
    op: OpSpec | None = None
    freshness: dict[str, Any] | None = None
    translation: (
        Annotated[TranslationFn[DrillStore], TranslationFnResolver(_translation_scope)] | None
    ) = None

    # ------------------------------------------------------------------ customization

    def get_asset_spec(self, store: DrillStore) -> AssetSpec:
        """The asset spec of ``store``: :class:`DrillTranslator`'s, then ``translation``.

        Override it in a subclass to change any attribute; the key returned is the asset's key
        everywhere (the plans reading the store depend on it).
        """
        spec = self._translator.base_spec(store)
        return self.translation(spec, store) if self.translation is not None else spec

    def asset_key_for_store(self, plan: str, store: str) -> AssetKey:
        """The asset key of a store, for Python assets downstream of it: ``plan`` is the plan
        file stem, ``store`` its target path or ``"@<id>"`` (as in ``drill_project.yaml``)."""
        from drill_dagster.keys import find_store

        return self.get_asset_spec(find_store(self.project, plan, store)).key

    # ------------------------------------------------------------------ loading

    @cached_property
    def project(self) -> DrillProject:
        """The plans directory, parsed and linked (once per component)."""
        config_path = self.project_file or self.plans_dir / PROJECT_FILE
        config = load_project_config(config_path)
        return load_project(self.plans_dir, config=config, config_path=config_path)

    @cached_property
    def _translator(self) -> "_ComponentTranslator":
        try:
            freshness = FreshnessConfig.model_validate(self.freshness) if self.freshness else None
        except ValidationError as err:
            problems = "; ".join(e["msg"].removeprefix("Value error, ") for e in err.errors())
            raise DrillDefinitionsError(f"attributes.freshness: {problems}") from None
        return _ComponentTranslator(self, freshness)

    def build_defs(self, context: ComponentLoadContext) -> Definitions:
        """The Definitions of the selected plans (see :func:`~drill_dagster.load_definitions`)."""
        base = context.path
        # Paths given in Python (not defs.yaml) are relative to the component's folder too.
        if not self.plans_dir.is_absolute():
            self.plans_dir = base / self.plans_dir
            self.__dict__.pop("project", None)
        if self.project_file is not None and not self.project_file.is_absolute():
            self.project_file = base / self.project_file
            self.__dict__.pop("project", None)
        with _collector_paused():
            try:
                project = self.project
                translator = self._translator
                spark_config = (
                    self.spark_config
                    if self.spark_config is not None
                    else project.config.spark_config
                )
                executor = self.executor or project.config.executor
                classpath = [str(p if p.is_absolute() else base / p) for p in self.classpath]
                return definitions_for_project(
                    project,
                    translator=translator,
                    spark_config=spark_config,
                    classpath=classpath,
                    executor=executor,
                    plans=self._selected_plans(project, translator),
                    resources=shared_resources(executor, spark_config, classpath),
                )
            except DrillDefinitionsError as err:
                # The message names the file and key; our frames would only hide it.
                if str(err).startswith("attributes."):
                    raise DrillDefinitionsError(f"{base / 'defs.yaml'}: {err}") from None
                raise err.with_traceback(None) from None

    def _selected_plans(self, project: DrillProject, translator: DrillTranslator) -> set[str]:
        """The names of the plans ``select`` and ``exclude`` leave (every plan by default)."""
        if self.select is None and not self.exclude:
            return {plan.name for plan in project.plans}  # no spec needed to match nothing
        names = {plan.name: _plan_names(plan, translator) for plan in project.plans}
        known = set().union(*names.values()) if names else set()
        for setting, tokens in (("select", self.select), ("exclude", self.exclude)):
            unknown = [t for t in tokens or () if t not in known]
            if unknown:
                raise DrillDefinitionsError(
                    f"attributes.{setting}: {', '.join(map(repr, unknown))} names no plan, "
                    f"group or store key of {self.plans_dir} "
                    f"(plans: {', '.join(sorted(names)) or 'none'})"
                )
        chosen = {
            plan
            for plan, plan_names in names.items()
            if self.select is None or plan_names & set(self.select)
        }
        return {plan for plan in chosen if not names[plan] & set(self.exclude or ())}


_RESOURCES: dict[str, dict[str, Any]] = {}


def shared_resources(
    executor: str | None, spark_config: dict[str, Any] | None, classpath: list[str]
) -> dict[str, Any]:
    """The ``drill`` resource and IO managers of these settings, the same objects for every
    component that has them: Dagster merges the components of a code location only when their
    resources of one key are one object. (Components with other settings cannot share one code
    location: the ops of every plan use the one ``drill`` resource.)"""
    settings = json.dumps([executor, spark_config, classpath], sort_keys=True, default=str)
    if settings not in _RESOURCES:
        _RESOURCES[settings] = default_resources(
            executor=executor, spark_config=spark_config, classpath=classpath
        )
    return _RESOURCES[settings]


def _plan_names(plan: DrillPlan, translator: DrillTranslator) -> set[str]:
    """What ``select`` and ``exclude`` match a plan by: its name, its stores' groups and keys."""
    found = {plan.name}
    for store in plan.stores:
        spec = translator.get_asset_spec(store)
        found.add(spec.key.to_user_string())
        if spec.group_name:
            found.add(spec.group_name)
    return found


class _ComponentTranslator(DrillTranslator):
    """The component's settings over :class:`DrillTranslator`'s defaults: specs come from the
    component's ``get_asset_spec`` (``translation``), ops get its ``op`` settings."""

    def __init__(self, component: "DrillPlansComponent", freshness: FreshnessConfig | None) -> None:
        self.component = component
        self.freshness = freshness
        self._specs: dict[tuple[str, str], AssetSpec] = {}

    def base_spec(self, store: DrillStore) -> AssetSpec:
        return DrillTranslator.get_asset_spec(self, store)

    def get_asset_spec(self, store: DrillStore) -> AssetSpec:
        # Asked once for the keys and once for select/exclude: translated once.
        name = (store.plan.name, store.id)
        if name not in self._specs:
            self._specs[name] = self.component.get_asset_spec(store)
        return self._specs[name]

    def get_source_spec(self, source: DrillSource) -> AssetSpec:
        # Without the plans that read it (the lineage graph shows them): two components reading
        # one source then define the same spec, which Dagster merges.
        spec = super().get_source_spec(source)
        where = str(source.location) if source.location is not None else source.path
        return spec.replace_attributes(description=f"Read from `{where}` by Drill plans.")

    def get_freshness_policy(self, store: DrillStore) -> Any:
        policy = super().get_freshness_policy(store)
        if policy is None and self.freshness is not None:
            return self.freshness.policy()
        return policy

    def get_op_tags(self, plan: DrillPlan) -> dict[str, str]:
        op = self.component.op
        return {**super().get_op_tags(plan), **((op.tags or {}) if op else {})}

    def get_pool(self, plan: DrillPlan) -> str | None:
        op = self.component.op
        return op.pool if op and op.pool else super().get_pool(plan)

    def get_backfill_policy(self, plan: DrillPlan) -> Any:
        op = self.component.op
        if op and op.backfill_policy is not None:
            return op.backfill_policy
        return super().get_backfill_policy(plan)
