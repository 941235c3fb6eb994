"""The function registry: every function is complete, names resolve, return types follow Drill."""

from __future__ import annotations

import pytest

from engine.expr import FUNCTIONS, FunctionKind, lookup_function
from engine.expr.functions import (
    ArgumentTypeMismatch,
    binary_operators,
    function_names,
    unary_operators,
)
from engine.types import (
    BIGINT,
    BIT,
    DATE,
    FLOAT4,
    FLOAT8,
    INT,
    NULL,
    TIMESTAMP,
    VARCHAR,
    DataMode,
    MajorType,
    MinorType,
)

REQUIRED = DataMode.REQUIRED
OPTIONAL = DataMode.OPTIONAL

REQUIRED_FUNCTIONS = {
    FunctionKind.SCALAR: [
        "add",
        "subtract",
        "multiply",
        "divide",
        "modulo",
        "power",
        "negate",
        "equal",
        "not_equal",
        "less_than",
        "less_than_or_equal",
        "greater_than",
        "greater_than_or_equal",
        "and",
        "or",
        "not",
        "isnull",
        "isnotnull",
        "coalesce",
        "greatest",
        "least",
        "abs",
        "ceil",
        "floor",
        "round",
        "sqrt",
        "pow",
        "mod",
        "lower",
        "upper",
        "length",
        "substr",
        "concat",
        "concatoperator",
        "trim",
        "like",
        "regex_like",
        "to_date",
        "to_timestamp",
        "date_trunc",
        "extract",
    ],
    FunctionKind.AGGREGATE: [
        "count",
        "sum",
        "min",
        "max",
        "avg",
        "count_distinct",
        "countDistinct",
    ],
    FunctionKind.RUNNING: ["sum", "count", "min", "max", "avg", "row_number"],
}


@pytest.mark.parametrize("kind", list(FunctionKind))
def test_required_functions_are_registered_with_their_kind(kind: FunctionKind) -> None:
    for name in REQUIRED_FUNCTIONS[kind]:
        spec = lookup_function(name)
        assert spec is not None, name
        assert kind in spec.kinds, name


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_every_function_is_complete(name: str) -> None:
    spec = FUNCTIONS[name]
    assert spec.name == name == name.lower()
    assert spec.kinds and spec.kinds <= set(FunctionKind)
    assert spec.min_args >= 0
    assert spec.max_args is None or spec.max_args >= spec.min_args
    assert spec.doc
    count = spec.min_args
    result = spec.return_type([NULL] * count)
    assert isinstance(result, MajorType)
    if spec.operator is not None:
        assert spec.operator.arity in (1, 2)
        assert spec.min_args == spec.max_args == spec.operator.arity
        assert spec.symbol == spec.operator.symbols[0]


def test_aliases_and_case_insensitive_lookup() -> None:
    assert lookup_function("countDistinct") is FUNCTIONS["count_distinct"]
    assert lookup_function("COUNTDISTINCT") is FUNCTIONS["count_distinct"]
    assert lookup_function("Pow") is FUNCTIONS["power"]
    assert lookup_function("mod") is FUNCTIONS["modulo"]
    assert lookup_function("substring") is FUNCTIONS["substr"]
    assert lookup_function("nope") is None
    assert "countdistinct" in function_names()


def test_operator_tables_come_from_the_registry() -> None:
    binary = binary_operators()
    assert {s: e.function for s, e in binary.items() if s in ("=", "==", "<>", "!=", "and")} == {
        "=": "equal",
        "==": "equal",
        "<>": "not_equal",
        "!=": "not_equal",
        "and": "and",
    }
    assert {s: e.function for s, e in unary_operators().items()} == {
        "-": "negate",
        "!": "not",
        "not": "not",
    }


def rt(name: str, *args: MajorType) -> MajorType:
    spec = lookup_function(name)
    assert spec is not None
    return spec.return_type(list(args))


def req(t: MajorType) -> MajorType:
    return t.with_mode(REQUIRED)


@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [
        ("add", (req(INT), req(BIGINT)), req(BIGINT)),
        ("multiply", (req(BIGINT), req(FLOAT4)), req(FLOAT8)),
        ("subtract", (BIGINT, req(BIGINT)), BIGINT),
        ("divide", (req(BIGINT), req(BIGINT)), req(FLOAT8)),
        ("modulo", (req(BIGINT), req(BIGINT)), req(BIGINT)),
        ("power", (req(BIGINT), req(BIGINT)), req(FLOAT8)),
        ("negate", (req(INT),), req(INT)),
        ("equal", (req(BIGINT), req(FLOAT8)), req(BIT)),
        ("less_than", (VARCHAR, req(DATE)), BIT),
        ("and", (req(BIT), BIT), BIT),
        ("isnull", (BIGINT,), req(BIT)),
        ("coalesce", (BIGINT, req(FLOAT8)), req(FLOAT8)),
        ("coalesce", (VARCHAR, VARCHAR), VARCHAR),
        ("sqrt", (req(BIGINT),), req(FLOAT8)),
        ("round", (FLOAT8, req(BIGINT)), FLOAT8),
        ("length", (req(VARCHAR),), req(BIGINT)),
        ("substr", (VARCHAR, req(BIGINT)), VARCHAR),
        ("concat", (VARCHAR, BIGINT), req(VARCHAR)),
        ("concatoperator", (VARCHAR, BIGINT), VARCHAR),
        ("concatoperator", (req(VARCHAR), req(BIGINT)), req(VARCHAR)),
        ("regex_like", (req(VARCHAR), req(VARCHAR)), req(BIT)),
        ("to_date", (req(VARCHAR),), req(DATE)),
        ("to_timestamp", (VARCHAR,), TIMESTAMP),
        ("date_trunc", (req(VARCHAR), req(DATE)), req(DATE)),
        ("extract", (req(VARCHAR), TIMESTAMP), BIGINT),
        ("count", (VARCHAR,), req(BIGINT)),
        ("count_distinct", (VARCHAR,), req(BIGINT)),
        ("sum", (req(INT),), req(BIGINT)),
        ("sum", (FLOAT4,), FLOAT8),
        ("avg", (req(BIGINT),), req(FLOAT8)),
        ("min", (VARCHAR,), VARCHAR),
        ("max", (req(DATE),), req(DATE)),
        ("row_number", (), req(BIGINT)),
        ("add", (NULL, req(BIGINT)), NULL),
    ],
)
def test_return_types_follow_drill(name: str, args: tuple[MajorType, ...], expected: MajorType):
    assert rt(name, *args) == expected


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("add", (VARCHAR, BIGINT)),
        ("not", (BIGINT,)),
        ("less_than", (BIT, BIGINT)),
        ("equal", (VARCHAR, BIGINT)),
        ("lower", (BIGINT,)),
        ("sum", (VARCHAR,)),
        ("add", (MajorType(MinorType.BIGINT, DataMode.REPEATED), BIGINT)),
        ("coalesce", (BIGINT, VARCHAR)),
        ("date_trunc", (VARCHAR, BIGINT)),
    ],
)
def test_definite_mismatches_are_rejected(name: str, args: tuple[MajorType, ...]) -> None:
    with pytest.raises(ArgumentTypeMismatch):
        rt(name, *args)


def test_arity_text() -> None:
    assert FUNCTIONS["substr"].arity_text() == "2 to 3 arguments"
    assert FUNCTIONS["coalesce"].arity_text() == "at least 1 argument"
    assert FUNCTIONS["row_number"].arity_text() == "0 arguments"
    assert FUNCTIONS["abs"].arity_text() == "1 argument"


def test_every_name_and_alias_parses_to_a_call_of_the_canonical_function() -> None:
    from engine.expr import Call, parse_expression

    for spec in FUNCTIONS.values():
        for name in (spec.name, *spec.aliases):
            args = ", ".join(["x"] * spec.min_args)
            tree = parse_expression(f"{name}({args})")
            assert isinstance(tree, Call) and tree.name == spec.name, name
