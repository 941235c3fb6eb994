"""The local join operator: inner, left and outer (full) joins of two record streams.

A pair of records joins when *every* condition holds (R-JOIN-AND): ``condition.left`` is evaluated on
the left record, ``condition.right`` on the right one, and null or incomparable operands never match.
No conditions is a cartesian join. The output record is the deep merge of the two records: maps of
the same name merge member by member, and for any other field of the same name the right record's
value wins unless it is null.

Order (R-JOIN-ORDER): left-major, each left record followed by its matches in right order; ``left``
and ``outer`` keep an unmatched left record alone in its place; ``outer`` appends the unmatched right
records at the end.

The right input is buffered (bounded by ``ctx.max_buffered_bytes``); the left input streams. Equality
conditions probe an index of the right keys built once per join (:class:`KeyIndex`: the keys'
distinct values sorted, the rows grouped by key; probing is a vectorised binary search); the other
conditions filter its candidate pairs. A join with no usable equality is a nested loop over blocks
of pairs, vectorised.

>>> import pyarrow as pa
>>> from engine.exec.protocol import BatchSource, FragmentExecutor
>>> from engine.plan.operators import Join
>>> op = Join.model_validate({"@id": 3, "op": "join", "left": 1, "right": 2, "type": "left",
...     "conditions": [{"relationship": "==", "left": "l.k", "right": "r.k"}]})
>>> left = BatchSource("1", [pa.record_batch({"l": [{"k": 1}, {"k": 2}]})])
>>> right = BatchSource("2", [pa.record_batch({"r": [{"k": 1, "v": "x"}]})])
>>> FragmentExecutor(create_join(op, [left, right], ExecContext())).run().to_pylist()
[{'l': {'k': 1}, 'r': {'k': 1, 'v': 'x'}}, {'l': {'k': 2}, 'r': None}]
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import JoinError
from engine.exec.local.aggregate_functions import same_pairs
from engine.exec.local.buffering import BatchBuffer
from engine.exec.local.registry import ExecContext, creator
from engine.exec.protocol import BatchOperator, GeneratorOperator
from engine.expr import Expr, parse_expression
from engine.expr.arrow.evaluate import evaluate
from engine.plan.operators import Join
from engine.planner.properties.semi_joins import SemiJoin

PAIR_BLOCK = 1 << 20
"""Candidate pairs a nested-loop join evaluates at once."""

_COMPARE: dict[str, Callable[[pa.Array, pa.Array], pa.Array]] = {
    "==": pc.equal,
    "!=": pc.not_equal,
    "<": pc.less,
    "<=": pc.less_equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
}
_ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError)


@dataclass(frozen=True)
class _Condition:
    relationship: str
    left: Expr
    right: Expr


class JoinOperator(GeneratorOperator):
    """Joins input 0 (left, streamed) with input 1 (right, buffered)."""

    kind = "join"

    def __init__(
        self, op: Join, left: BatchOperator, right: BatchOperator, ctx: ExecContext
    ) -> None:
        super().__init__(op.id, [left, right])
        self.ctx = ctx
        self.type = op.type
        self.conditions = [
            _Condition(c.relationship, parse_expression(c.left), parse_expression(c.right))
            for c in op.conditions
        ]
        self.index_builds = 0  # how many key indexes of the right side were built (one per join)
        self._indexes: dict[tuple[object, ...], KeyIndex] = {}

    def generate(self) -> Iterator[pa.RecordBatch]:
        buffer = BatchBuffer(self.operator_id, self.kind, max_bytes=self.ctx.max_buffered_bytes)
        right = buffer.extend(self.drain(1)).batch()
        buffer.clear()
        self._indexes.clear()
        right_values = [evaluate(c.right, right) for c in self.conditions]
        matched_right = np.zeros(right.num_rows, dtype=bool)
        left_schema: pa.Schema | None = None
        emitted = False
        for left in self.drain(0):
            left_schema = left.schema
            for li, ri in self._pairs(left, right, right_values):
                matched_right[ri[ri >= 0]] = True
                for out in self._merged(left, li, right, ri):
                    emitted = True
                    yield out
        if self.type == "outer" and not matched_right.all():
            unmatched = np.flatnonzero(~matched_right)
            left = _nulls(left_schema, 0)
            none = np.full(len(unmatched), -1, dtype=np.int64)
            for out in self._merged(left, none, right, unmatched):
                emitted = True
                yield out
        if not emitted:
            yield merge_records(_nulls(left_schema, 0), right.slice(0, 0))

    # -- pairs -----------------------------------------------------------------------------

    def _pairs(
        self, left: pa.RecordBatch, right: pa.RecordBatch, right_values: list[pa.Array]
    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Pairs (left index, right index or -1 for an unmatched left record) in output order."""
        left_values = [evaluate(c.left, left) for c in self.conditions]
        hashed = [
            i
            for i, c in enumerate(self.conditions)
            if c.relationship == "==" and _hashable(left_values[i].type, right_values[i].type)
        ]
        if hashed:
            li, ri = self._hash_pairs(left_values, right_values, hashed, left.num_rows)
            rest = [i for i in range(len(self.conditions)) if i not in hashed]
            if rest:
                keep = self._hold(left_values, right_values, rest, li, ri)
                li, ri = li[keep], ri[keep]
            # probe gives the pairs left-major, right in order: no sort needed
            yield self._with_unmatched(li, ri, 0, left.num_rows)
            return
        per_left = max(1, PAIR_BLOCK // max(right.num_rows, 1))
        all_conditions = list(range(len(self.conditions)))
        for low in range(0, left.num_rows, per_left):
            high = min(left.num_rows, low + per_left)
            li = np.repeat(np.arange(low, high, dtype=np.int64), right.num_rows)
            ri = np.tile(np.arange(right.num_rows, dtype=np.int64), high - low)
            keep = self._hold(left_values, right_values, all_conditions, li, ri)
            yield self._with_unmatched(li[keep], ri[keep], low, high)

    def _hash_pairs(
        self,
        left_values: list[pa.Array],
        right_values: list[pa.Array],
        hashed: list[int],
        left_rows: int,
    ) -> tuple[np.ndarray, np.ndarray]:
        left_keys: list[pa.Array] = []
        right_keys: list[pa.Array] = []
        for i in hashed:
            keys = _comparable_keys(left_values[i], right_values[i])
            if keys is None:  # e.g. text against numbers: the condition never holds
                return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
            left_keys.append(keys[0])
            right_keys.append(keys[1])
        # The index depends on the key types only: one build per join (per left key types, which
        # change only with a schema change of the left input).
        signature = (*hashed, *(k.type for k in right_keys))
        if signature not in self._indexes:
            self.index_builds += 1
            self._indexes[signature] = KeyIndex(right_keys)
        return self._indexes[signature].probe(left_keys, left_rows)

    def _hold(
        self,
        left_values: list[pa.Array],
        right_values: list[pa.Array],
        conditions: list[int],
        li: np.ndarray,
        ri: np.ndarray,
    ) -> np.ndarray:
        """Which candidate pairs satisfy every condition in ``conditions``."""
        keep = np.ones(len(li), dtype=bool)
        for i in conditions:
            if not keep.any():
                break
            at = np.flatnonzero(keep)
            a = left_values[i].take(pa.array(li[at]))
            b = right_values[i].take(pa.array(ri[at]))
            keep[at] = holds(self.conditions[i].relationship, a, b)
        return keep

    def _with_unmatched(
        self, li: np.ndarray, ri: np.ndarray, low: int, high: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """For left and outer joins, left records of ``[low, high)`` without a match, in place."""
        if self.type == "inner":
            return li, ri
        matched = np.zeros(high - low, dtype=bool)
        matched[li - low] = True
        alone = np.flatnonzero(~matched) + low
        if not len(alone):
            return li, ri
        li = np.concatenate([li, alone])
        ri = np.concatenate([ri, np.full(len(alone), -1, dtype=np.int64)])
        order = np.argsort(li, kind="stable")  # pairs are sorted; a lone record has no pairs
        return li[order], ri[order]

    # -- output ----------------------------------------------------------------------------

    def _merged(
        self, left: pa.RecordBatch, li: np.ndarray, right: pa.RecordBatch, ri: np.ndarray
    ) -> Iterator[pa.RecordBatch]:
        step = max(1, self.ctx.batch_rows)
        for first in range(0, len(li), step):
            lpart, rpart = li[first : first + step], ri[first : first + step]
            yield merge_records(_take(left, lpart), _take(right, rpart))


class SemiJoinOperator(JoinOperator):
    """A semi (anti) join the planner decided (:mod:`~engine.planner.properties.semi_joins`):
    the left records (streamed, in order, each once) that some record of input 1 matches (that
    none does), where input 1 holds the records whose ``keys`` the join's conditions compare. Of
    those only the distinct keys are kept, not the records."""

    def __init__(
        self,
        op: Join,
        semi: SemiJoin,
        left: BatchOperator,
        rows: BatchOperator,
        ctx: ExecContext,
    ) -> None:
        super().__init__(op, left, rows, ctx)
        self.type = "inner"  # the pairs found: matches only
        self.anti = semi.kind == "anti"
        self.conditions = [
            _Condition("==", parse_expression(c.left), parse_expression(key))
            for c, key in zip(op.conditions, semi.keys, strict=True)
        ]

    def generate(self) -> Iterator[pa.RecordBatch]:
        keys = self._distinct_keys()
        emitted, left_schema = False, None
        for left in self.drain(0):
            left_schema = left.schema
            matched = np.zeros(left.num_rows, dtype=bool)
            for li, _ in self._pairs(left, keys, keys.columns):
                matched[li] = True
            kept = left.filter(pa.array(~matched if self.anti else matched))
            if kept.num_rows:
                emitted = True
                yield kept
        if not emitted:
            yield _nulls(left_schema, 0)

    def _distinct_keys(self) -> pa.RecordBatch:
        """The distinct key values of the right records (column ``k<i>``: condition ``i``'s)."""
        parts: list[list[pa.Array]] = [[] for _ in self.conditions]
        for batch in self.drain(1):
            for part, condition in zip(parts, self.conditions, strict=True):
                value = evaluate(condition.right, batch)
                if pa.types.is_dictionary(value.type):
                    value = value.dictionary_decode()
                if len(self.conditions) == 1 and not pa.types.is_integer(value.type):
                    value = pc.unique(value) if _hashable(value.type, value.type) else value
                part.append(value)
        columns = [_concatenated(part) for part in parts]
        names = [f"k{i}" for i in range(len(columns))]
        hashable = all(_hashable(c.type, c.type) and not pa.types.is_null(c.type) for c in columns)
        if hashable and len(columns) == 1:
            columns = [_distinct(columns[0])]
        table = pa.Table.from_arrays(columns, names=names)
        if hashable and len(columns) > 1:
            table = table.group_by(names, use_threads=False).aggregate([])
        return table.combine_chunks().to_batches()[0] if table.num_rows else _empty(table.schema)


def _distinct(values: pa.Array) -> pa.Array:
    """The distinct values of ``values``; integers spanning few values by a table of those
    present (no hash table, no sort: a semi join's keys are often a dense range)."""
    if pa.types.is_integer(values.type) and len(values):
        present = _numpy(pc.drop_null(values))
        if len(present):
            low, high = int(present.min()), int(present.max())
            if high - low < 4 * len(present) + _DENSE:
                table = np.zeros(high - low + 1, dtype=bool)
                table[present - low] = True
                return pa.array(np.flatnonzero(table) + low).cast(values.type)
    return pc.unique(values)


def _concatenated(arrays: list[pa.Array]) -> pa.Array:
    """One array of ``arrays``' values (of one type where their types differ)."""
    if not arrays:
        return pa.nulls(0)
    try:
        return pa.concat_arrays(arrays)
    except _ARROW_ERRORS:
        return pa.array([v for a in arrays for v in a.to_pylist()])


def _empty(schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array([], f.type) for f in schema], schema=schema)


class KeyIndex:
    """The right side's equality keys, indexed once: per key column its distinct values sorted,
    and the rows ordered by their combined key code (a row with a null key is left out: nulls
    never match). :meth:`probe` finds the matching right rows of left keys by binary search.

    >>> index = KeyIndex([pa.array([2, 1, 2, None])])
    >>> [a.tolist() for a in index.probe([pa.array([2, 3, 1])], 3)]
    [[0, 0, 2], [0, 2, 1]]
    """

    def __init__(self, keys: list[pa.Array]) -> None:
        rows = len(keys[0]) if keys else 0
        valid = np.ones(rows, dtype=bool)
        for key in keys:
            valid &= ~key.is_null().to_numpy(zero_copy_only=False)
        self.uniques: list[np.ndarray] = []
        code = np.zeros(int(valid.sum()), dtype=np.int64)
        self.lookups: list[_Lookup | None] = []
        for key in keys:
            values = _numpy(key.filter(pa.array(valid)) if len(code) < rows else key)
            lookup = _Lookup.dense(values)
            uniques = sorted_distinct(values) if lookup is None else lookup.uniques(values.dtype)
            self.lookups.append(lookup or _Lookup.of(uniques))
            self.uniques.append(uniques)
            positions = np.searchsorted(uniques, values) if lookup is None else lookup.codes(values)
            code = code * max(len(uniques), 1) + positions
        # Where the codes are few (always with one key), the first row of each code is looked up
        # instead of searched for, and so is each integer key's position among its values.
        space = int(np.prod([max(len(u), 1) for u in self.uniques], dtype=object))
        self.starts: np.ndarray | None = None
        self.unique = False  # no two rows of one key
        order = None
        if space <= 4 * len(code) + _DENSE:
            counts = np.bincount(code, minlength=space)
            self.unique = not len(counts) or int(counts.max()) <= 1
            # one more code, of no rows: a key the right side does not hold
            self.starts = np.concatenate([[0], np.cumsum(counts), [len(code)]])
            if self.unique:  # each row's place is its key's: no sort
                order = np.empty(len(code), dtype=np.int64)
                order[self.starts[code]] = np.arange(len(code), dtype=np.int64)
        if order is None:
            order = np.argsort(code, kind="stable")
        self.codes = code[order]
        self.rows = np.flatnonzero(valid)[order]

    def probe(self, keys: list[pa.Array], left_rows: int) -> tuple[np.ndarray, np.ndarray]:
        """``(left index, right index)`` of every matching pair, left-major, right in order."""
        if (found := self._probe_one_integer(keys)) is not None:
            return found
        found = np.ones(left_rows, dtype=bool)
        for key in keys:
            found &= ~key.is_null().to_numpy(zero_copy_only=False)
        code = np.zeros(left_rows, dtype=np.int64)
        for key, uniques, lookup in zip(keys, self.uniques, self.lookups, strict=True):
            at = np.flatnonzero(found)
            values = _numpy(key.take(pa.array(at)) if len(at) < left_rows else key)
            if lookup is not None and values.dtype == uniques.dtype:
                position, hit = lookup.find(values)
            else:
                position = np.searchsorted(uniques, values)
                inside = position < len(uniques)
                hit = np.zeros(len(at), dtype=bool)
                hit[inside] = uniques[position[inside]] == values[inside]
            found[at[~hit]] = False
            code[at] = code[at] * max(len(uniques), 1) + np.where(hit, position, 0)
        left = np.flatnonzero(found)
        if self.starts is not None:
            low, high = self.starts[code[left]], self.starts[code[left] + 1]
        else:
            low = np.searchsorted(self.codes, code[left], side="left")
            high = np.searchsorted(self.codes, code[left], side="right")
        return self._pairs_of(left, low, high)

    def _probe_one_integer(self, keys: list[pa.Array]) -> tuple[np.ndarray, np.ndarray] | None:
        """:meth:`probe` of one integer (or DECIMAL) key with a lookup table, in a few passes
        over the left keys (the common equi-join: most of a join's time is its probes); None
        for other keys."""
        if len(keys) != 1 or self.starts is None or self.lookups[0] is None:
            return None
        key = keys[0]
        if not (pa.types.is_integer(key.type) or pa.types.is_decimal(key.type)):
            return None
        nulls = key.null_count
        values = _numpy(key.fill_null(0) if nulls and pa.types.is_integer(key.type) else key)
        if values.dtype != self.uniques[0].dtype:
            return None
        code = self.lookups[0].codes(values)
        if nulls:
            code[key.is_null().to_numpy(zero_copy_only=False)] = len(self.uniques[0])
        low = self.starts[code]
        if self.unique:
            left = np.flatnonzero(self.starts[code + 1] - low)
            return left, self.rows[low[left]].astype(np.int64)
        high = self.starts[code + 1]
        left = np.flatnonzero(high - low)
        return self._pairs_of(left, low[left], high[left])

    def _pairs_of(
        self, left: np.ndarray, low: np.ndarray, high: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Each left row ``left[i]`` paired with the right rows ``rows[low[i]:high[i]]``."""
        counts = high - low
        li = np.repeat(left, counts)
        firsts = np.repeat(low - (np.cumsum(counts) - counts), counts)
        ri = self.rows[firsts + np.arange(len(li), dtype=np.int64)]
        return li.astype(np.int64), ri.astype(np.int64)


_DENSE = 1 << 16
"""Lookup tables hold up to twelve entries per key value plus this many."""
_TABLE_SPAN = 1 << 21
"""Or up to this many (8 MiB), however few the key values: a table lookup per probed key
instead of a binary search (a few thousand part keys spanning 200,000 values, probed by
every lineitem record)."""


def _spans_few(low: int, high: int, count: int) -> bool:
    """Whether a lookup table of ``count`` integers from ``low`` to ``high`` is small enough."""
    span = max(12 * count + _DENSE, _TABLE_SPAN)
    return high - low < span and -(2**62) < low <= high < 2**62


@dataclass(frozen=True)
class _Lookup:
    """The position of each integer among sorted distinct integers, by table lookup."""

    low: int  # the value of table entry 1
    table: np.ndarray  # position of value low + i - 1, or len(uniques) (also at both ends)

    @staticmethod
    def of(uniques: np.ndarray) -> _Lookup | None:
        """A lookup for ``uniques`` when they are integers spanning few values, else None."""
        if uniques.dtype.kind not in "iu" or not len(uniques):
            return None
        low, high = int(uniques[0]), int(uniques[-1])
        if not _spans_few(low, high, len(uniques)):
            return None
        dtype = np.int32 if len(uniques) < 2**31 - 1 else np.int64
        table = np.full(high - low + 3, len(uniques), dtype=dtype)
        table[uniques.astype(np.int64) - low + 1] = np.arange(len(uniques), dtype=dtype)
        return _Lookup(low, table)

    @staticmethod
    def dense(values: np.ndarray) -> _Lookup | None:
        """The lookup of the distinct ``values`` when they are integers spanning few values,
        found without sorting them; else None."""
        if values.dtype.kind not in "iu" or not len(values):
            return None
        low, high = int(values.min()), int(values.max())
        if not _spans_few(low, high, len(values)):
            return None  # the distinct values may be fewer: of() decides on those
        present = np.zeros(high - low + 3, dtype=bool)
        present[values.astype(np.int64) - (low - 1)] = True
        count = int(np.count_nonzero(present))
        dtype = np.int32 if count < 2**31 - 1 else np.int64
        table = np.cumsum(present, dtype=dtype) - 1
        table[~present] = count
        return _Lookup(low, table)

    def uniques(self, dtype: np.dtype) -> np.ndarray:
        """The values this lookup finds, sorted."""
        return (np.flatnonzero(self.table < self.table[0]) + (self.low - 1)).astype(dtype)

    def codes(self, values: np.ndarray) -> np.ndarray:
        """The position of each value, ``len(uniques)`` where it is not one of them."""
        # Out of range lands on an end (a 64-bit wrap-around too: the range is far from it).
        at = values.astype(np.int64, copy=False) - (self.low - 1)
        return np.take(self.table, at, mode="clip")

    def find(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(position, found)`` of each value (position 0 where not found)."""
        position = self.codes(values)
        hit = position < self.table[0]
        return np.where(hit, position, 0), hit


def sorted_distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values of ``values``, sorted. A sort is several times faster than
    ``np.unique``'s hash table on the key columns joins see (NumPy 2.3+ hashes by default).

    >>> sorted_distinct(np.array([3, 1, 3, 2])).tolist()
    [1, 2, 3]
    """
    ordered = np.sort(values)
    if len(ordered) < 2:
        return ordered
    keep = np.empty(len(ordered), dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def _numpy(array: pa.Array) -> np.ndarray:
    """Key values (no nulls) as a NumPy array that sorts and compares as the values do."""
    if pa.types.is_boolean(array.type):
        return array.cast(pa.int8()).to_numpy(zero_copy_only=False)
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    if pa.types.is_decimal(array.type):
        return decimal_units(array)
    return array.to_numpy(zero_copy_only=False)


def decimal_units(array: pa.Array) -> np.ndarray:
    """A DECIMAL array's values in units of its last digit (``1.25`` of ``DECIMAL(15, 2)`` is
    ``125``): integers that sort and compare as the values do within one type, read from the
    array's buffer. NumPy would otherwise hold each value as a Python ``Decimal`` (a binary search
    over 800,000 of them takes a second). Null slots hold unspecified numbers; a precision above
    18 digits does not fit 64 bits and gives the ``Decimal`` objects.

    >>> from decimal import Decimal
    >>> values = pa.array([Decimal("1"), Decimal("-2.5"), Decimal("0.01")], pa.decimal128(15, 2))
    >>> decimal_units(values.slice(1)).tolist()
    [-250, 1]
    """
    dtype = array.type
    if dtype.precision > 18:
        return array.to_numpy(zero_copy_only=False)
    # little-endian words: the lowest holds the value (18 digits fit 64 bits), the rest its sign
    word = np.int32 if dtype.bit_width == 32 else np.int64
    words = max(1, dtype.bit_width // 64)
    data = array.buffers()[1]
    if data is None:
        return np.zeros(len(array), dtype=word)
    units = np.frombuffer(data, dtype=word, count=words * (array.offset + len(array)))
    return units[words * array.offset :: words].copy()


def holds(relationship: str, a: pa.Array, b: pa.Array) -> np.ndarray:
    """``a[i] <relationship> b[i]`` for every i; null or incomparable operands never hold.

    >>> holds("<", pa.array([1, 5, None]), pa.array([3.0, 3.0, 3.0])).tolist()
    [True, False, False]
    >>> holds("==", pa.array(["1"]), pa.array([1])).tolist()
    [False]
    """
    if relationship in ("==", "!=") and (_nested(a.type) or _nested(b.type)):
        valid = ~a.is_null().to_numpy(zero_copy_only=False) & ~b.is_null().to_numpy(
            zero_copy_only=False
        )
        equal = same_pairs(a, b) if a.type.equals(b.type) else np.zeros(len(a), dtype=bool)
        return valid & (equal if relationship == "==" else ~equal)
    try:
        result = _COMPARE[relationship](a, b)
    except _ARROW_ERRORS:
        return np.zeros(len(a), dtype=bool)
    return pc.fill_null(result, False).to_numpy(zero_copy_only=False)


def merge_records(left: pa.RecordBatch, right: pa.RecordBatch) -> pa.RecordBatch:
    """The deep merge of ``left[i]`` and ``right[i]`` for every i.

    >>> l = pa.record_batch({"a": [{"x": 1}], "k": [1]})
    >>> r = pa.record_batch({"a": [{"y": 2}], "k": [None]})
    >>> merge_records(l, r).to_pylist()
    [{'a': {'x': 1, 'y': 2}, 'k': 1}]
    """
    names = list(left.schema.names)
    names += [name for name in right.schema.names if name not in names]
    columns = [_merge(_column(left, name), _column(right, name), name) for name in names]
    if not columns:
        return pa.RecordBatch.from_pylist([{}] * left.num_rows)
    return pa.RecordBatch.from_arrays(columns, names=names)


def _column(batch: pa.RecordBatch, name: str) -> pa.Array | None:
    index = batch.schema.get_field_index(name)
    return batch.column(index) if index >= 0 else None


def _merge(a: pa.Array | None, b: pa.Array | None, name: str) -> pa.Array:
    if a is None or b is None:
        merged = a if b is None else b
        assert merged is not None
        return merged
    if b.null_count == len(b):
        return a
    if a.null_count == len(a):
        return b
    if pa.types.is_struct(a.type) and pa.types.is_struct(b.type):
        a_children = dict(zip([f.name for f in a.type], a.flatten()))
        b_children = dict(zip([f.name for f in b.type], b.flatten()))
        names = list(a_children) + [n for n in b_children if n not in a_children]
        children = [_merge(a_children.get(n), b_children.get(n), f"{name}.{n}") for n in names]
        fields = [pa.field(n, child.type) for n, child in zip(names, children)]
        mask = pc.and_(a.is_null(), b.is_null())
        return pa.StructArray.from_arrays(children, fields=fields, mask=mask)
    if not a.type.equals(b.type):
        try:
            common = (
                pa.unify_schemas(
                    [pa.schema([("v", a.type)]), pa.schema([("v", b.type)])],
                    promote_options="permissive",
                )
                .field("v")
                .type
            )
            a, b = a.cast(common), b.cast(common)
        except _ARROW_ERRORS as err:
            raise JoinError(
                f"field '{name}' is {a.type} on the left and {b.type} on the right; "
                "the joined record cannot hold both",
                hint="rename the field on one side (project) before the join",
            ) from err
    return pc.coalesce(b, a)


def _take(batch: pa.RecordBatch, indices: np.ndarray) -> pa.RecordBatch:
    """Rows ``indices`` of ``batch``; -1 gives a record of nulls."""
    if _is_run(indices):
        return batch.slice(int(indices[0]), len(indices))  # no copy
    missing = indices < 0
    if not missing.any():
        return batch.take(pa.array(indices))
    if batch.num_rows == 0:
        return _nulls(batch.schema, len(indices))
    return batch.take(pa.array(indices, mask=missing))


def _is_run(indices: np.ndarray) -> bool:
    """Whether ``indices`` are consecutive rows (``i, i + 1, ...``)."""
    if not len(indices) or indices[0] < 0 or indices[-1] - indices[0] != len(indices) - 1:
        return False
    return len(indices) == 1 or bool((np.diff(indices) == 1).all())


def _nulls(schema: pa.Schema | None, rows: int) -> pa.RecordBatch:
    schema = schema or pa.schema([])
    if not len(schema):
        return pa.RecordBatch.from_pylist([{}] * rows)
    return pa.RecordBatch.from_arrays([pa.nulls(rows, f.type) for f in schema], schema=schema)


def _nested(dtype: pa.DataType) -> bool:
    return pa.types.is_nested(dtype)


def _hashable(a: pa.DataType, b: pa.DataType) -> bool:
    return not (_nested(a) or _nested(b))


def _comparable_keys(a: pa.Array, b: pa.Array) -> tuple[pa.Array, pa.Array] | None:
    """``a`` and ``b`` cast to one type an Arrow hash join accepts, or None if they never compare."""
    if pa.types.is_dictionary(a.type):
        a = a.dictionary_decode()
    if pa.types.is_dictionary(b.type):
        b = b.dictionary_decode()
    if pa.types.is_null(a.type) or pa.types.is_null(b.type):
        return None
    if a.type.equals(b.type):
        return a, b
    numeric = (pa.types.is_integer, pa.types.is_floating, pa.types.is_decimal)
    if any(f(a.type) for f in numeric) and any(f(b.type) for f in numeric):
        both_integers = pa.types.is_integer(a.type) and pa.types.is_integer(b.type)
        common = pa.int64() if both_integers else pa.float64()
        return a.cast(common), b.cast(common)
    try:
        common = (
            pa.unify_schemas(
                [pa.schema([("v", a.type)]), pa.schema([("v", b.type)])],
                promote_options="permissive",
            )
            .field("v")
            .type
        )
        return a.cast(common), b.cast(common)
    except _ARROW_ERRORS:
        return None


@creator("join")
def create_join(op: Join, inputs: list[BatchOperator], ctx: ExecContext) -> BatchOperator:
    return JoinOperator(op, inputs[0], inputs[1], ctx)
