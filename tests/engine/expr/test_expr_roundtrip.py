"""Property tests: printing any tree and parsing it back gives the same tree; bad text only ever
raises ExpressionSyntaxError, with a position inside the text."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import ExpressionSyntaxError
from engine.expr import (
    FUNCTIONS,
    Call,
    Cast,
    Expr,
    FieldRef,
    IfElse,
    Literal,
    lookup_function,
    parse_expression,
    to_string,
)
from engine.expr.nodes import KEYWORDS, cast_type
from engine.types import TYPE_NAMES

identifiers = st.from_regex(r"[A-Za-z_$][A-Za-z0-9_$]{0,6}", fullmatch=True)
unknown_function_names = identifiers.filter(
    lambda n: (
        lookup_function(n) is None
        and n.lower() not in KEYWORDS
        and not n.lower().startswith("cast")
    )
)
function_names = st.sampled_from(sorted(FUNCTIONS)) | unknown_function_names
segment_names = identifiers | st.text(max_size=6) | st.sampled_from(sorted(KEYWORDS))

literals = st.builds(
    Literal.of,
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
)
field_refs = st.builds(
    lambda first, rest: FieldRef((first, *rest)),
    segment_names,
    st.lists(segment_names | st.integers(min_value=0, max_value=10**6), max_size=4),
)
cast_types = st.sampled_from(sorted(set(TYPE_NAMES.values()))).map(cast_type)


def compound(children: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
    calls = st.builds(
        Call,
        function_names,
        st.lists(children, max_size=3).map(tuple),
    )
    binary_operator_calls = st.builds(
        lambda name, left, right: Call(name, (left, right)),
        st.sampled_from(sorted(n for n, f in FUNCTIONS.items() if f.operator)),
        children,
        children,
    )
    unary_calls = st.builds(
        lambda name, operand: Call(name, (operand,)), st.sampled_from(["negate", "not"]), children
    )
    if_elses = st.builds(
        IfElse, st.lists(st.tuples(children, children), min_size=1, max_size=3).map(tuple), children
    )
    casts = st.builds(Cast, children, cast_types)
    return calls | binary_operator_calls | unary_calls | if_elses | casts


expressions = st.recursive(literals | field_refs, compound, max_leaves=12)


@settings(max_examples=200, deadline=None)
@given(expressions)
def test_printed_expression_parses_back_to_the_same_tree(expr: Expr) -> None:
    printed = to_string(expr)
    reparsed = parse_expression(printed)
    assert reparsed == expr, printed
    assert to_string(reparsed) == printed


@settings(max_examples=150, deadline=None)
@given(field_refs)
def test_field_ref_str_parses_back(ref: FieldRef) -> None:
    assert parse_expression(str(ref)) == ref


grammar_fragments = st.sampled_from(
    [
        "a",
        "b.c",
        "[0]",
        "1",
        "2.5",
        "'s'",
        '"',
        "`",
        "(",
        ")",
        ",",
        "+",
        "-",
        "*",
        "/",
        "^",
        "<",
        "<=",
        "==",
        "!=",
        "!",
        "&&",
        "||",
        "and",
        "if",
        "then",
        "else",
        "end",
        "case",
        "when",
        "cast",
        "as",
        "BIGINT",
        "sum(",
        "\n",
        " ",
        "\\",
        "#",
        ".",
        "e",
    ]
)


@settings(max_examples=200, deadline=None)
@given(st.lists(grammar_fragments, max_size=12).map("".join) | st.text(max_size=20))
def test_any_text_parses_or_raises_a_positioned_syntax_error(text: str) -> None:
    try:
        expr = parse_expression(text)
    except ExpressionSyntaxError as err:
        lines = text.splitlines() or [""]
        assert 1 <= err.line <= max(len(lines), 1) + 1
        line = lines[err.line - 1] if err.line <= len(lines) else ""
        assert 1 <= err.column <= len(line) + 1
        assert str(err).splitlines()[0].endswith(f"at line {err.line}, column {err.column}")
    else:
        assert parse_expression(to_string(expr)) == expr
