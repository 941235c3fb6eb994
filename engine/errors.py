"""One error hierarchy for everything a user can get wrong, and for what the engine gets wrong.

Every error says *where* (plan file, JSON path, operator id, expression line and column, data file and
line) and, where it can, *what to do*. The CLI and the Dagster layer print ``str(error)`` and never a
traceback for a :class:`DrillError`.

>>> err = PlanError([PlanIssue("unknown op 'scna'", path="$.query[0].op", op_id="1")], source="p.json")
>>> print(err)
p.json: 1 problem
  $.query[0].op (operator 1): unknown op 'scna'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class DrillError(Exception):
    """Base of every error the engine raises on purpose. ``hint`` says what to do about it."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(self._render())

    def _render(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"

    def __str__(self) -> str:
        return self._render()


_ESCAPED_LINE_BREAKS = {ord(c): repr(c)[1:-1] for c in "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"}


class ExpressionSyntaxError(DrillError):
    """An expression that does not parse; ``line`` and ``column`` are 1-based.

    ``str()`` shows the expression with a caret under the fault::

        expected an operand at line 1, column 7
          a.b >
                ^
    """

    def __init__(self, message: str, *, expression: str, line: int, column: int) -> None:
        self.expression = expression
        self.line = line
        self.column = column
        # The reason may quote a token holding a line break; keep the message's first line whole.
        self.reason = message.translate(_ESCAPED_LINE_BREAKS)
        super().__init__(self.reason)

    def _render(self) -> str:
        lines = self.expression.splitlines() or [""]
        text = lines[self.line - 1] if 0 < self.line <= len(lines) else ""
        offset = self.column - 1
        if len(text) > _EXCERPT:  # a long line: the part around the fault, marked as cut
            start = max(0, min(offset - _EXCERPT // 2, len(text) - _EXCERPT))
            cut = text[start : start + _EXCERPT]
            text = ("..." if start else "") + cut + ("..." if start + _EXCERPT < len(text) else "")
            offset = offset - start + (3 if start else 0)
        caret = " " * offset + "^"
        return f"{self.reason} at line {self.line}, column {self.column}\n  {text}\n  {caret}"


_EXCERPT = 100
"""The characters of a long expression line shown around a fault."""


@dataclass(frozen=True)
class PlanIssue:
    """One problem in a plan: what, at which JSON path, in which operator."""

    message: str
    path: str = "$"
    op_id: str | None = None

    def __str__(self) -> str:
        where = self.path + (f" (operator {self.op_id})" if self.op_id is not None else "")
        return f"{where}: {self.message}"


class PlanError(DrillError):
    """A plan that cannot be accepted. Carries *all* the problems found, not only the first."""

    def __init__(
        self, issues: list[PlanIssue] | PlanIssue | str, *, source: str | None = None
    ) -> None:
        if isinstance(issues, str):
            issues = [PlanIssue(issues)]
        elif isinstance(issues, PlanIssue):
            issues = [issues]
        self.issues = list(issues)
        self.source = source
        super().__init__(self._render())

    def _render(self) -> str:
        head = self.source or "plan"
        if len(self.issues) == 1 and self.issues[0].path == "$" and self.issues[0].op_id is None:
            return f"{head}: {self.issues[0].message}"
        count = f"{len(self.issues)} problem" + ("s" if len(self.issues) != 1 else "")
        body = "\n".join("  " + str(issue).replace("\n", "\n    ") for issue in self.issues)
        return f"{head}: {count}\n{body}"

    def with_source(self, source: str) -> PlanError:
        """The same error, naming the plan file it came from."""
        return PlanError(self.issues, source=source)


class PlanningError(DrillError):
    """The planner could not turn a valid logical plan into a physical one."""


class ExecutionError(DrillError):
    """A failure while running a fragment, naming the fragment and the operator."""

    def __init__(
        self,
        message: str,
        *,
        operator_id: str | None = None,
        operator_kind: str | None = None,
        fragment: int | None = None,
        hint: str | None = None,
    ) -> None:
        self.reason = message
        self.operator_id = operator_id
        self.operator_kind = operator_kind
        self.fragment = fragment
        where = []
        if fragment is not None:
            where.append(f"fragment {fragment}")
        if operator_id is not None:
            where.append(
                f"operator {operator_id}" + (f" ({operator_kind})" if operator_kind else "")
            )
        prefix = ", ".join(where)
        super().__init__(f"{prefix}: {message}" if prefix else message, hint=hint)


class SchemaConflictError(DrillError):
    """A column whose type changed between batches or files in strict schema mode."""

    def __init__(
        self,
        *,
        column: str,
        old_type: str,
        new_type: str,
        file: str | None = None,
        hint: str
        | None = "give the column a type in the selection's `schema`, or use schemaMode: change",
    ) -> None:
        self.column = column
        self.old_type = old_type
        self.new_type = new_type
        self.file = file
        where = f"{file}: " if file else ""
        super().__init__(
            f"{where}column '{column}' changed type from {old_type} to {new_type}", hint=hint
        )


class StorageError(DrillError):
    """Bad data or a storage problem, naming the file and, where known, line and column."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        column: int | None = None,
        hint: str | None = None,
    ) -> None:
        self.file = file
        self.line = line
        self.column = column
        where = file or ""
        if line is not None:
            where += f":{line}" + (f":{column}" if column is not None else "")
        super().__init__(f"{where}: {message}" if where else message, hint=hint)


class SqlError(DrillError):
    """A SQL statement that does not parse or names something unknown; ``line`` and ``column`` are
    1-based and point into ``sql`` (None when the fault has no position).

    >>> print(SqlError("unknown table 'emps'", sql="select *\\nfrom emps", line=2, column=6))
    unknown table 'emps' at line 2, column 6
      from emps
           ^
    """

    def __init__(
        self,
        message: str,
        *,
        sql: str,
        line: int | None = None,
        column: int | None = None,
        source: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.reason = message
        self.sql = sql
        self.line = line
        self.column = column
        self.source = source
        super().__init__(message, hint=hint)

    def _render(self) -> str:
        head = f"{self.source}: " if self.source else ""
        if self.line is None or self.column is None:
            text = f"{head}{self.reason}"
        else:
            lines = self.sql.splitlines() or [""]
            row = lines[self.line - 1] if 0 < self.line <= len(lines) else ""
            caret = " " * (self.column - 1) + "^"
            text = (
                f"{head}{self.reason} at line {self.line}, column {self.column}\n  {row}\n  {caret}"
            )
        return text if not self.hint else f"{text}\n  hint: {self.hint}"

    def with_source(self, source: str, *, line_offset: int = 0) -> SqlError:
        """The same error, naming the file the SQL came from (lines shifted by ``line_offset``)."""
        return SqlError(
            self.reason,
            sql="\n" * line_offset + self.sql,
            line=None if self.line is None else self.line + line_offset,
            column=self.column,
            source=source,
            hint=self.hint,
        )


class RootEscapeError(StorageError):
    """A path that would leave its storage engine's root (found while listing: a symlink out)."""


class PlanSyntaxError(PlanError):
    """The plan document is not JSON, not even relaxed JSON. ``kind`` is ``"parse"``."""

    kind = "parse"

    def with_source(self, source: str) -> PlanSyntaxError:
        return PlanSyntaxError(self.issues, source=source)


class ExpressionTypeError(DrillError):
    """An expression whose types can never work, e.g. ``'a' + 1``; names the function and types."""

    def __init__(self, message: str, *, position: Any = None, hint: str | None = None) -> None:
        self.position = position  # an engine.expr Position: line and column in the expression
        self.reason = message
        super().__init__(message + (f" at {position}" if position else ""), hint=hint)


class EvaluationError(DrillError):
    """An expression that cannot be evaluated on the data it meets (``'a' + 1`` at run time).

    ``expression`` is the text of the (sub)expression that failed.
    """

    def __init__(self, message: str, *, expression: str | None = None, hint: str | None = None):
        self.expression = expression
        super().__init__(message, hint=hint)


class TreePathError(DrillError):
    """A write to a path that cannot be written (a list index, an empty path)."""


class LoaderStateError(DrillError):
    """The result set loader was used out of its lifecycle (a write outside a row, ...)."""


class BufferLimitError(DrillError):
    """A blocking operator would buffer more than ``max_buffered_bytes`` of input."""


class AggregationError(DrillError):
    """An aggregation that names a field path the operator cannot write."""


class AggregateError(DrillError):
    """An aggregate that cannot be computed over the values it meets (``sum`` of strings), on
    either executor."""


class JoinError(DrillError):
    """Records that cannot be merged (the same field holds different kinds of value on each
    side), on either executor."""


class ExpressionCompileError(DrillError):
    """An expression that cannot become a Column: an unknown function, a wrong number of
    arguments, or an aggregate function outside an aggregate operator."""


class NestedFilterError(DrillError):
    """A nested filter with no single array path to prune (references through unrelated arrays)."""


class UnsupportedOnSpark(DrillError):
    """A function or argument form the Spark executor has no native translation for."""


INVALID_INPUT = "CAST_INVALID_INPUT"
CAST_OVERFLOW = "CAST_OVERFLOW"
ARITHMETIC_OVERFLOW = "ARITHMETIC_OVERFLOW"
RAISED = "USER_RAISED_EXCEPTION"  # a failure the compiled expression raises in our own words


class DataError(DrillError):
    """A value an expression could not take, met by Spark as a job ran
    (:mod:`engine.exec.spark.data_errors`): ``kind`` is Spark's error class (one of the four
    above); ``expression`` is the one that raised it, once located."""

    def __init__(
        self,
        kind: str,
        *,
        value: str | None = None,
        target: str | None = None,
        called: str | None = None,
        expression: str | None = None,
        node: Any = None,
        file: str | None = None,
    ) -> None:
        self.kind = kind
        self.value = value
        self.target = target
        self.called = called
        self.expression = expression
        self.node = node  # the expression that raised it, once located
        self.file = file  # the file of the record holding the value, where found
        super().__init__(self._text())

    def _text(self) -> str:
        where = f" in `{self.expression}`" if self.expression else ""
        if self.file:
            where += f", read from {self.file}"
        if self.kind == INVALID_INPUT:
            return f"cannot read '{self.value}' as {self.target}{where}"
        if self.kind == CAST_OVERFLOW:
            return f"cannot cast {self.value} to {self.target}: out of its range{where}"
        if self.kind == RAISED:
            return f"{self.value}{where}"
        if self.expression:
            return f"cannot evaluate `{self.expression}`: overflow"
        return "an arithmetic overflow"

    def at(self, expr: Any, target: str | None = None) -> DataError:
        """This error raised by the expression ``expr`` (``target``: the type a cast names, as
        the plan does)."""
        target = target or self.target
        return DataError(
            self.kind,
            value=self.value,
            target=target,
            called=self.called,
            expression=str(expr),
            node=expr,
        )

    def read_from(self, file: str) -> DataError:
        """This error naming ``file``, which holds the record of the value."""
        return DataError(
            self.kind,
            value=self.value,
            target=self.target,
            called=self.called,
            expression=self.expression,
            node=self.node,
            file=file,
        )
