"""The scan schema tracker of seed 003: from a projection list, hints and readers to one output schema.

A scan's output schema comes from several sources. The *projection* says which columns the plan needs
(wildcard, explicit or empty, see :mod:`engine.scan.projection`); a *provided schema* gives types for
some columns (hints: the reader's values are converted to them); a *defined schema* is the output
schema outright. Whatever is still unknown, the readers decide: each reader batch's *reader output
schema* resolves dynamic columns, expands the wildcard and, in schema-change mode, widens the schema.

Lifecycle, per reader batch::

    changed = tracker.apply_reader_schema(batch.schema, file=path)   # may raise SchemaConflictError
    out = tracker.project_batch(batch, file=path, implicit_values=implicit.for_file(root, path))
    # changed (or the first batch) -> the operator returns OK_NEW_SCHEMA, else OK

Choices where seed 003 leaves room, so readers and the operator can rely on them:

* **Missing columns** (projected, not produced) are filled with typed nulls. The type is the provided
  or defined schema's if it names the column, the already resolved type if an earlier reader produced
  it, else seed 003's "classic nullable INT" (``null_column_type``, configurable like Drill's
  ``nullType``). A reader column of Arrow type ``null`` (all values null) counts as missing for typing.
* **Strict mode** (default): the first reader batch is the schema commit point (for a wildcard,
  the first with any column: an empty file commits nothing). Later new columns and map members are
  dropped with a warning in :attr:`ScanSchemaTracker.warnings`; a later type that differs is a
  :class:`SchemaConflictError` naming file, column and both types, except a narrower number (INT
  into BIGINT) or an all-null column, which convert into the committed type. A column guessed as
  INT that later turns out VARCHAR is such a conflict, as seed 003 warns.
* **Change mode**: new columns and members widen the schema, numbers widen (INT -> BIGINT -> FLOAT8)
  and a guessed column takes its real type; each change increments :attr:`schema_version`.
  Incompatible types (BIGINT then VARCHAR) are a conflict here too.
* **Nullability**: reader columns become nullable in the output (another file may lack them) and
  REPEATED X becomes LIST<X>; provided and defined types keep their modes.
* **Order**: explicit projection order; a wildcard expands in place to the provided schema's columns,
  then the reader columns in the order first seen, then the partition columns ``dir0..dirN``.
* **Implicit columns win**: a reader column named like an implicit column in the output is dropped.
* **Versions**: 0 while unresolved, 1 once resolved (at construction if the hints settle every
  column), then +1 per change.

>>> import pyarrow as pa
>>> tracker = ScanSchemaTracker(["a", "b", "filename"], provided_schema=[{"name": "b", "type": "DOUBLE"}])
>>> tracker.apply_reader_schema(pa.schema([("a", pa.int64()), ("b", pa.int64())]), file="x.json")
True
>>> tracker.output_schema().types
[DataType(int64), DataType(double), DataType(string)]
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from engine.errors import ExecutionError, PlanError, StorageError
from engine.scan.implicit import IMPLICIT_TYPE, ImplicitColumns
from engine.scan.projection import (
    ProjectedColumn,
    ProjectionKind,
    ProjectionSpec,
    ScanProjection,
    name_key,
    parse_path,
)
from engine.scan.tracker_align import align_array, constant, typed_nulls
from engine.scan.tracker_hints import SchemaSpec, parse_schema
from engine.scan.tracker_merge import MergeContext, inner_map, member, resolve
from engine.types import INT, MajorType, from_arrow, to_arrow_field

log = logging.getLogger(__name__)


class SchemaMode(enum.StrEnum):
    """``strict``: the first batch commits the schema. ``change``: readers may widen it."""

    STRICT = "strict"
    CHANGE = "change"


class ColumnKind(enum.StrEnum):
    TABLE = "table"  # produced by the reader
    PARTITION = "partition"  # dir0, dir1, ...
    FILE = "file"  # fqn, filepath, filename, suffix


@dataclass
class _Column:
    name: str
    kind: ColumnKind
    projection: ProjectedColumn | None  # None: the whole column
    hint: MajorType | None  # from the provided or defined schema
    type: MajorType | None  # None: not resolved yet (Drill's LATE)


@dataclass(frozen=True)
class ReaderInputSchema:
    """What a reader should produce: the projected table columns, typed where the scan knows.

    ``type`` None means the reader chooses (Drill's LATE type). With ``is_wildcard`` the reader
    also produces every other column it finds; without it, other columns are not projected.
    """

    columns: tuple[tuple[str, MajorType | None], ...]
    is_wildcard: bool

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.columns)

    def type_of(self, name: str) -> MajorType | None:
        key = name_key(name)
        return next((t for n, t in self.columns if name_key(n) == key), None)


class ScanSchemaTracker:
    """Computes a scan's output schema from its projection, hints and reader schemas.

    ``projection``: a :class:`ScanProjection` or what :meth:`ScanProjection.parse` takes.
    ``provided_schema`` / ``defined_schema``: see :func:`engine.scan.tracker_hints.parse_schema`.
    ``partition_depth``: how many ``dirN`` columns the wildcard holds (the deepest file's, see
    :meth:`ImplicitColumns.partition_depth`); ``partition_keys``: the Hive-style directory keys
    (``day`` of ``day=2024-01-02``), partition columns of the wildcard after the ``dirN`` ones,
    VARCHAR unless the provided schema types them.

    >>> t = ScanSchemaTracker(None, mode="change", partition_depth=1)
    >>> t.apply_reader_schema(pa.schema([("a", pa.int64())]), file="r/2024/f.json")
    True
    >>> t.apply_reader_schema(pa.schema([("b", pa.string())]), file="r/2025/g.json")
    True
    >>> t.output_schema().names, t.schema_version
    (['a', 'b', 'dir0'], 2)
    """

    def __init__(
        self,
        projection: ScanProjection | ProjectionSpec = None,
        *,
        provided_schema: SchemaSpec = None,
        defined_schema: SchemaSpec = None,
        mode: SchemaMode | str = SchemaMode.STRICT,
        implicit_columns: ImplicitColumns | None = None,
        partition_depth: int = 0,
        null_column_type: MajorType = INT,
        union: bool = False,
        partition_keys: Sequence[str] = (),
    ) -> None:
        if not isinstance(projection, ScanProjection):
            projection = ScanProjection.parse(projection)
        try:
            self.mode = SchemaMode(mode)
        except ValueError:
            raise PlanError(f"unknown schema mode {mode!r} (use strict or change)") from None
        self.projection = projection
        self.implicit_columns = implicit_columns or ImplicitColumns()
        self.partition_depth = partition_depth
        self.partition_keys = tuple(partition_keys)
        self._key_names = {name_key(k) for k in self.partition_keys}
        self.null_column_type = null_column_type
        self.union = union
        self.provided_schema = parse_schema(provided_schema, where="provided schema")
        self.defined_schema = (
            None if defined_schema is None else parse_schema(defined_schema, where="defined schema")
        )
        self.warnings: list[str] = []
        self._columns: list[_Column] = []
        self._guessed: set[tuple[str, ...]] = set()
        self._insert_at = 0  # where the wildcard puts newly found reader columns
        self._wildcard_open = False  # may readers still add columns?
        self._committed = False
        self._last_applied: tuple[pa.Schema, str | None] | None = None
        self._schema_cache: tuple[int, pa.Schema] | None = None
        if self.defined_schema is not None:
            self._build_defined(self.defined_schema)
        else:
            self._build_from_projection()
        self._resolved = not self._wildcard_open and all(c.type is not None for c in self._columns)
        self._version = 1 if self._resolved else 0

    # ------------------------------------------------------------------ construction

    def _kind(self, name: str) -> ColumnKind:
        if self.implicit_columns.is_file_column(name):
            return ColumnKind.FILE
        if self.implicit_columns.partition_index(name) is not None:
            return ColumnKind.PARTITION
        if name_key(name) in self._key_names:
            return ColumnKind.PARTITION  # a Hive-style directory key (k=v)
        return ColumnKind.TABLE

    def _find(self, name: str) -> _Column | None:
        key = name_key(name)
        return next((c for c in self._columns if name_key(c.name) == key), None)

    def _hint(self, name: str) -> MajorType | None:
        found = member(MajorType.map(self.provided_schema), name)
        return found[1] if found else None

    def _add(self, projected: ProjectedColumn, hint: MajorType | None) -> None:
        if self._find(projected.name) is not None:
            return  # the first reference wins
        kind = self._kind(projected.name)
        if kind != ColumnKind.TABLE:
            if not projected.is_whole:
                raise PlanError(f"implicit column {projected.name!r} has no members to project")
            column = _Column(projected.name, kind, None, hint, hint or IMPLICIT_TYPE)
        else:
            ctx = MergeContext(file=None, frozen=False, null_type=self.null_column_type)
            partial = None if projected.is_whole else projected
            typ = resolve((projected.name,), partial, hint, None, None, ctx, settle_missing=False)
            column = _Column(projected.name, kind, partial, hint, typ)
        self._columns.append(column)

    def _build_from_projection(self) -> None:
        projection = self.projection
        if not projection.is_wildcard:
            for projected in projection.columns:
                self._add(projected, self._hint(projected.name))
            return
        split = projection.wildcard_index or 0
        for projected in projection.columns[:split]:
            self._add(projected, self._hint(projected.name))
        for name, hint in self.provided_schema.items():
            if self._kind(name) == ColumnKind.TABLE:
                self._add(ProjectedColumn(name), hint)
        self._insert_at = len(self._columns)
        for name in self.implicit_columns.partition_names(self.partition_depth):
            self._add(ProjectedColumn(name), self._hint(name))
        for name in self.partition_keys:
            self._add(ProjectedColumn(name), self._hint(name))
        for projected in projection.columns[split:]:
            self._add(projected, self._hint(projected.name))
        self._wildcard_open = True

    def _build_defined(self, defined: dict[str, MajorType]) -> None:
        if not self.projection.is_wildcard:
            wanted = [name_key(n) for n in self.projection.names]
            if wanted != [name_key(n) for n in defined]:
                raise PlanError(
                    f"the defined schema's columns {list(defined)} must be the projected columns "
                    f"{list(self.projection.names)}, in the same order"
                )
        for name, typ in defined.items():
            self._add(ProjectedColumn(name), typ)

    # ------------------------------------------------------------------ state

    @property
    def projection_type(self) -> ProjectionKind:
        """Seed 003's ``projectionType()``: EMPTY when no *table* column is projected."""
        if self.projection.is_wildcard and self.defined_schema is None:
            return ProjectionKind.WILDCARD
        if any(c.kind == ColumnKind.TABLE for c in self._columns):
            return ProjectionKind.EXPLICIT
        return ProjectionKind.EMPTY

    @property
    def is_resolved(self) -> bool:
        """True once every output column has a type (and the wildcard is expanded)."""
        return self._resolved

    @property
    def schema_version(self) -> int:
        """0 while unresolved; 1 when first resolved; +1 on every later change."""
        return self._version

    @property
    def is_committed(self) -> bool:
        """True once a reader batch has been applied (the strict mode's commit point).

        A reader schema without columns (an empty file) does not commit a wildcard scan.
        """
        return self._committed

    def _table_columns(self) -> list[_Column]:
        return [c for c in self._columns if c.kind == ColumnKind.TABLE]

    def _snapshot(self) -> tuple[bool, tuple[tuple[str, MajorType | None], ...]]:
        return self._resolved, tuple((c.name, c.type) for c in self._columns)

    def _warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)
            log.warning("%s", message)

    # ------------------------------------------------------------------ reader side

    def reader_input_schema(self) -> ReaderInputSchema:
        """The table columns a reader should produce (implicit columns excluded), typed if known.

        >>> ScanSchemaTracker(["a", "dir0"], provided_schema={"a": "INT"}).reader_input_schema()
        ReaderInputSchema(columns=(('a', MajorType(minor=<MinorType.INT: 'INT'>, \
mode=<DataMode.OPTIONAL: 'OPTIONAL'>, fields=(), element=None)),), is_wildcard=False)
        """
        columns = tuple((c.name, c.type) for c in self._table_columns())
        return ReaderInputSchema(columns, self._wildcard_open)

    def is_projected(self, path: str | Sequence[str]) -> bool:
        """Whether a reader should write the column or member at ``path`` (seed 003's filter).

        After the strict commit only committed columns and members are projected.
        """
        parts = parse_path(path) if isinstance(path, str) else tuple(path)
        column = self._find(parts[0])
        if column is None:
            return self._wildcard_open
        if column.kind != ColumnKind.TABLE:
            return False
        if self._wildcard_open:
            return True
        if column.projection is not None:
            return ScanProjection(ProjectionKind.EXPLICIT, (column.projection,)).is_projected(parts)
        typ = column.type
        for name in parts[1:]:
            inner = inner_map(typ)
            if inner is None:
                return True  # a member of a non-map: nothing to filter below this column
            found = member(inner, name)
            if found is None:
                return False
            typ = found[1]
        return True

    def _reader_types(
        self, schema: pa.Schema, file: str | None
    ) -> dict[str, tuple[str, MajorType]]:
        types: dict[str, tuple[str, MajorType]] = {}
        for f in schema:
            dtype = f.type.value_type if pa.types.is_dictionary(f.type) else f.type
            try:
                typ = from_arrow(dtype, nullable=f.nullable)
            except TypeError as exc:
                raise StorageError(f"column '{f.name}': {exc}", file=file) from None
            if name_key(f.name) in types:
                self._warn(
                    f"{file or 'reader'}: duplicate column '{f.name}'; the first one is used"
                )
                continue
            types[name_key(f.name)] = (f.name, typ)
        return types

    def apply_reader_schema(
        self, reader_output_schema: pa.Schema, *, file: str | None = None
    ) -> bool:
        """Merge what a reader produced into the scan schema; True if the output schema changed.

        Raises :class:`SchemaConflictError` (file, column, both types) on a type conflict; the
        tracker is then unchanged.
        """
        if self._last_applied == (reader_output_schema, file):
            return False
        before = self._snapshot()
        frozen = self.mode == SchemaMode.STRICT and self._committed
        where = file or "reader"
        ctx = MergeContext(
            file=file,
            frozen=frozen,
            null_type=self.null_column_type,
            guessed=set(self._guessed),
            warn=lambda message: self._warn(f"{where}: {message} (strict schema mode)"),
            unions=self.union,
        )
        found = self._reader_types(reader_output_schema, file)
        resolved = {}
        for column in self._table_columns():
            incoming = found.pop(name_key(column.name), None)
            resolved[id(column)] = resolve(
                (column.name,),
                column.projection,
                column.hint,
                column.type,
                incoming[1] if incoming else None,
                ctx,
            )
        added: list[_Column] = []
        for name, typ in found.values():
            if self._find(name) is not None:
                self._warn(
                    f"{where}: column '{name}' is hidden by the implicit column of that name"
                )
            elif self._wildcard_open:
                settled = resolve((name,), None, None, None, typ, ctx)
                added.append(_Column(name, ColumnKind.TABLE, None, None, settled))
            elif frozen and self.projection.is_wildcard and self.defined_schema is None:
                ctx.warn(f"column '{name}' is not in the committed schema; ignored")
        for column in self._table_columns():
            column.type = resolved[id(column)]
        for column in added:
            self._columns.insert(self._insert_at, column)
            self._insert_at += 1
        self._guessed = ctx.guessed
        self._resolved = True
        # A reader with no columns at all (an empty file) tells a wildcard nothing: no commit yet.
        if not (self._wildcard_open and len(reader_output_schema) == 0):
            self._committed = True
            if self.mode == SchemaMode.STRICT:
                self._wildcard_open = False
        self._last_applied = (reader_output_schema, file)
        changed = self._snapshot() != before
        if changed:
            self._version += 1
        return changed

    def apply_early_reader_schema(
        self, reader_schema: pa.Schema, *, file: str | None = None
    ) -> bool:
        """A schema a reader knows before reading data (a Parquet footer); same rules as a batch."""
        return self.apply_reader_schema(reader_schema, file=file)

    def missing_columns(self, reader_output_schema: pa.Schema) -> list[tuple[str, MajorType]]:
        """The projected table columns a reader did not produce, with the type their nulls take.

        Members missing inside a map are filled by :meth:`project_batch`; they are not listed.

        >>> ScanSchemaTracker(["a", "b"]).missing_columns(pa.schema([("a", pa.int8())]))
        [('b', MajorType(minor=<MinorType.INT: 'INT'>, mode=<DataMode.OPTIONAL: 'OPTIONAL'>, \
fields=(), element=None))]
        """
        present = {name_key(f.name) for f in reader_output_schema}
        ctx = MergeContext(file=None, frozen=False, null_type=self.null_column_type)
        missing = []
        for column in self._table_columns():
            if name_key(column.name) in present:
                continue
            typ = column.type or resolve(
                (column.name,), column.projection, column.hint, None, None, ctx
            )
            assert typ is not None
            missing.append((column.name, typ))
        return missing

    # ------------------------------------------------------------------ output side

    def _require_resolved(self) -> None:
        if not self._resolved:
            raise ExecutionError(
                "the scan's output schema is not known before the first reader batch",
                hint="apply a reader schema first, or give the scan a provided or defined schema",
            )

    def output_types(self) -> dict[str, MajorType]:
        """The output columns with their Drill types, in output order."""
        self._require_resolved()
        return {c.name: c.type for c in self._columns if c.type is not None}

    def output_schema(self) -> pa.Schema:
        """The schema of every batch :meth:`project_batch` returns (at the current version)."""
        if self._schema_cache is None or self._schema_cache[0] != self._version:
            fields = [to_arrow_field(name, t) for name, t in self.output_types().items()]
            self._schema_cache = (self._version, pa.schema(fields))
        return self._schema_cache[1]

    def implicit_schema(self) -> pa.Schema:
        """The implicit (file and partition) columns of the output, in output order."""
        return pa.schema(
            [to_arrow_field(c.name, c.type) for c in self._columns if c.kind != ColumnKind.TABLE]
        )

    def project_batch(
        self,
        batch: pa.RecordBatch,
        *,
        file: str | None = None,
        implicit_values: Mapping[str, object] | None = None,
    ) -> pa.RecordBatch:
        """One reader batch as a batch of :meth:`output_schema`.

        Applies the batch's schema first (a no-op if :meth:`apply_reader_schema` already did);
        reorders, converts and drops columns, fills missing columns and map members with typed
        nulls and adds the implicit columns from ``implicit_values`` (see
        :meth:`ImplicitColumns.for_file`; absent values are null).
        """
        self.apply_reader_schema(batch.schema, file=file)
        values = {name_key(k): v for k, v in (implicit_values or {}).items()}
        positions: dict[str, int] = {}
        for i, name in enumerate(batch.schema.names):
            positions.setdefault(name_key(name), i)
        rows = batch.num_rows
        arrays = []
        for column in self._columns:
            assert column.type is not None
            key = name_key(column.name)
            if column.kind != ColumnKind.TABLE:
                arrays.append(constant(values.get(key), column.type, rows, column=column.name))
            elif key in positions:
                array = batch.column(positions[key])
                arrays.append(align_array(array, column.type, column=column.name, file=file))
            else:
                arrays.append(typed_nulls(column.type, rows))
        if not arrays:
            return batch.select([])  # keeps the row count: an empty projection still counts rows
        return pa.RecordBatch.from_arrays(arrays, schema=self.output_schema())
