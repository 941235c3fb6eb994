"""Errors of the Dagster layer: the engine's messages, as Dagster errors.

A mistake found while loading definitions (a bad plan, a bad ``drill_project.yaml``) is a
:class:`DrillDefinitionsError`; a mistake found while running (bad data, a failed store) is a
:class:`DrillFailure`, which Dagster shows as a failed step with the message and no traceback of
ours. Both carry the engine's message unchanged: plan file, JSON path, operator id.

>>> from engine.errors import PlanError, PlanIssue
>>> err = DrillDefinitionsError.from_error(PlanError([PlanIssue("bad", "$.query[0]", "1")], source="p.json"))
>>> print(err)
p.json: 1 problem
  $.query[0] (operator 1): bad
"""

from __future__ import annotations

from dagster import DagsterInvalidDefinitionError, Failure

from engine.errors import DrillError, ExpressionSyntaxError, PlanError, PlanningError


class DrillDefinitionsError(DagsterInvalidDefinitionError):
    """Definitions cannot be built from a plans directory; the message says where and why."""

    @staticmethod
    def from_error(error: DrillError | Exception) -> DrillDefinitionsError:
        """The same message as ``error`` (an engine error names the file and JSON path)."""
        return DrillDefinitionsError(str(error))


class DrillFailure(Failure):
    """A step of a plan failed; ``description`` is the engine's message.

    Subclassing :class:`dagster.Failure` makes Dagster report the message as the step's failure
    instead of a Python traceback (dagster-dbt does the same).
    """

    @staticmethod
    def from_error(error: DrillError | Exception, *, where: str | None = None) -> DrillFailure:
        message = str(error)
        if where:
            message = f"{where}: {message}"
        # A plan mistake fails the same way every time; a failure while running (a file that
        # vanished, a lost executor) may not, so a RetryPolicy the user set may rerun the step.
        fixed = isinstance(error, PlanError | PlanningError | ExpressionSyntaxError)
        return DrillFailure(description=message, allow_retries=not fixed)
