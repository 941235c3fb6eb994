"""infer_type: Drill types with modes through fields, maps, lists, calls, conditionals and casts."""

from __future__ import annotations

import pytest

from engine.errors import DrillError
from engine.expr import ExpressionTypeError, infer_type, parse_expression
from engine.types import (
    BIGINT,
    BIT,
    FLOAT8,
    NULL,
    VARCHAR,
    DataMode,
    MajorType,
    MinorType,
)

REQUIRED, OPTIONAL, REPEATED = DataMode.REQUIRED, DataMode.OPTIONAL, DataMode.REPEATED


def req(t: MajorType) -> MajorType:
    return t.with_mode(REQUIRED)


MEMBER = MajorType.map({"x": req(BIGINT), "name": VARCHAR})
SCHEMA: dict[tuple[str | int, ...], MajorType] = {
    ("a",): req(BIGINT),
    ("f",): FLOAT8,
    ("s",): req(VARCHAR),
    ("ok",): req(BIT),
    ("m",): MajorType.map({"x": req(BIGINT), "tags": VARCHAR.with_mode(REPEATED)}),
    ("r",): MEMBER.with_mode(REPEATED),
    ("l",): MajorType.list_of(MajorType.list_of(BIGINT)),
    ("direct", "path"): req(FLOAT8),
}


def infer(text: str) -> MajorType:
    return infer_type(parse_expression(text), SCHEMA.get)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a", req(BIGINT)),
        ("a * 2", req(BIGINT)),
        ("a + 1.5", req(FLOAT8)),
        ("a + f", FLOAT8),
        ("a / 2", req(FLOAT8)),
        ("a ^ 2", req(FLOAT8)),
        ("-a", req(BIGINT)),
        ("a > 1 && ok", req(BIT)),
        ("a == f", BIT),
        ("!ok", req(BIT)),
        ("isnull(f)", req(BIT)),
        ("coalesce(f, 0)", req(FLOAT8)),
        ("nothere", NULL),
        ("nothere.deep[3]", NULL),
        ("nothere + 1", NULL),
        ("nothere > 1", BIT),
        ("m.x", BIGINT),
        ("m.tags", VARCHAR.with_mode(REPEATED)),
        ("m.tags[0]", VARCHAR),
        ("m.missing", NULL),
        ("r[0]", MEMBER),
        ("r[0].x", BIGINT),
        ("r.x", BIGINT.with_mode(REPEATED)),
        ("l[0]", MajorType.list_of(BIGINT)),
        ("l[0][1]", BIGINT),
        ("direct.path", req(FLOAT8)),
        ("'x'", req(VARCHAR)),
        ("null", NULL),
        ("if a > 1 then 1 else 2.5 end", req(FLOAT8)),
        ("if a > 1 then 1 end", BIGINT),
        ("case when ok then s else 'none' end", req(VARCHAR)),
        ("cast(a as VARCHAR)", req(VARCHAR)),
        ("castFLOAT8(f)", FLOAT8),
        ("cast(nothere as BIGINT)", BIGINT),
        ("sum(a)", req(BIGINT)),
        ("sum(f)", FLOAT8),
        ("avg(a)", req(FLOAT8)),
        ("count(f)", req(BIGINT)),
        ("max(s)", req(VARCHAR)),
        ("sum(a) / count(a)", req(FLOAT8)),
        ("length(upper(s))", req(BIGINT)),
        ("no_such_function(a)", NULL),
        ("substr(s)", NULL),
    ],
)
def test_inferred_types(text: str, expected: MajorType) -> None:
    assert infer(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "'a' + 1",
            "cannot apply '+' (add) to (VARCHAR, BIGINT): expected a number, got VARCHAR "
            "at column 5",
        ),
        ("not 5", "cannot apply '!' (not) to (BIGINT): expected a boolean (BIT), got BIGINT"),
        ("s < a", "cannot apply '<' (less_than) to (VARCHAR, BIGINT): cannot compare"),
        ("lower(a)", "cannot apply 'lower' to (BIGINT): expected a string, got BIGINT"),
        ("m.tags + 1", "expected a number, got REPEATED VARCHAR"),
        ("a.b", "'a' is BIGINT, not a map, so it has no member 'b'"),
        ("a[0]", "'a' is BIGINT, not a list, so 'a[0]' cannot be read"),
        ("l.x", "hint: index it first: l[0].x"),
        (
            "if a then 1 else 2 end",
            "the condition of an if/case must be a boolean (BIT), got BIGINT",
        ),
        ("if ok then 1 else 'x' end", "the branches of an if/case have incompatible types"),
        ("cast(m as BIGINT)", "cannot cast MAP<x: BIGINT, tags: REPEATED VARCHAR> to BIGINT"),
    ],
)
def test_definite_mismatches_raise(text: str, message: str) -> None:
    with pytest.raises(ExpressionTypeError) as caught:
        infer(text)
    assert message in str(caught.value)
    assert isinstance(caught.value, DrillError)


def test_lookup_is_asked_for_the_full_path_before_its_prefixes() -> None:
    asked: list[tuple[str | int, ...]] = []

    def lookup(path: tuple[str | int, ...]) -> MajorType | None:
        asked.append(path)
        return SCHEMA.get(path)

    assert infer_type(parse_expression("m.tags[2]"), lookup) == VARCHAR
    assert asked == [("m", "tags", 2), ("m", "tags"), ("m",)]


def test_late_minor_is_null_optional() -> None:
    late = infer("nothere")
    assert (late.minor, late.mode) == (MinorType.NULL, DataMode.OPTIONAL)
