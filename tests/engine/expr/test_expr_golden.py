"""Golden files for the parser, the printer and syntax errors, and the conformance corpus's expressions.

Each golden file holds cases: a line ``> input`` (or ``>json "input"`` for text with line breaks),
then the expected output. Regenerate after an intended change with
``UPDATE_GOLDEN=1 .venv/bin/pytest tests/engine/expr`` and review the diff.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from golden_files import assert_golden

from engine.errors import ExpressionSyntaxError
from engine.expr import Call, Cast, Expr, FieldRef, IfElse, Literal, parse_expression, to_string

GOLDEN = Path(__file__).parent / "golden"
REPO = Path(__file__).resolve().parents[3]
CONFORMANCE = Path(os.environ.get("DRILL_CONFORMANCE_DIR", REPO.parent / "shared" / "conformance"))


def dump(expr: Expr) -> str:
    """``(add (ref 'a' 0) 1:BIGINT)``: every node and literal type spelled out."""
    if isinstance(expr, Literal):
        value = "null" if expr.value is None else repr(expr.value)
        return f"{value}:{expr.type.minor.value}"
    if isinstance(expr, FieldRef):
        return "(ref " + " ".join(repr(s) for s in expr.path) + ")"
    if isinstance(expr, Call):
        return "(" + " ".join([expr.name, *(dump(a) for a in expr.args)]) + ")"
    if isinstance(expr, Cast):
        return f"(cast {dump(expr.expr)} {expr.type.minor.value})"
    if isinstance(expr, IfElse):
        parts = [f"{dump(c)} {dump(v)}" for c, v in expr.branches]
        return "(if " + " ".join(parts) + f" else {dump(expr.otherwise)})"
    raise TypeError(expr)


def read_inputs(path: Path) -> tuple[list[str], list[str]]:
    """The header comment lines and the inputs of a golden file."""
    header, inputs = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith(">json "):
            inputs.append(json.loads(line[len(">json ") :]))
        elif line.startswith("> "):
            inputs.append(line[2:])
        elif line.startswith("#") and not inputs:
            header.append(line)
    return header, inputs


def input_line(text: str) -> str:
    plain = "\n" not in text and "\r" not in text and text == text.strip() and text
    return f"> {text}" if plain else f">json {json.dumps(text)}"


def check_golden(path: Path, render) -> None:
    header, inputs = read_inputs(path)
    blocks = ["\n".join(header)] + [f"{input_line(text)}\n{render(text)}" for text in inputs]
    expected = "\n\n".join(blocks) + "\n"
    assert_golden(path, expected)


def render_parse(text: str) -> str:
    tree = parse_expression(text)
    printed = to_string(tree)
    assert parse_expression(printed) == tree, f"printed form {printed!r} does not parse back"
    return f"{dump(tree)}\n= {printed}"


def render_error(text: str) -> str:
    with pytest.raises(ExpressionSyntaxError) as caught:
        parse_expression(text)
    return str(caught.value)


def test_parser_and_printer_golden() -> None:
    check_golden(GOLDEN / "parse.golden", render_parse)


def test_syntax_errors_golden() -> None:
    check_golden(GOLDEN / "errors.golden", render_error)


_STRING = r'"((?:[^"\\]|\\.)*)"'
_SCALAR_KEYS = re.compile(r'"?\b(expr|left|right|within|target)"?\s*:\s*' + _STRING)
_LIST_KEYS = re.compile(r'"?\b(exprs|carryovers)"?\s*:\s*\[([^\]]*)\]')


def corpus_expressions() -> set[str]:
    """Every expression string in the conformance plans (read as text: some plans are malformed)."""
    found: set[str] = set()
    files = [*CONFORMANCE.glob("plans/**/*.json"), *CONFORMANCE.glob("plans/**/*.plan")]
    files += CONFORMANCE.glob("cases/*/plan.json")
    for path in files:
        text = path.read_text(encoding="utf-8")
        for match in _SCALAR_KEYS.finditer(text):
            found.add(json.loads(f'"{match[2]}"'))
        for match in _LIST_KEYS.finditer(text):
            found.update(json.loads(f'"{s}"') for s in re.findall(_STRING, match[2]))
    return found


def test_corpus_expressions_parse_and_are_in_the_golden_file() -> None:
    expressions = corpus_expressions()
    assert len(expressions) > 40, f"conformance corpus not found under {CONFORMANCE}"
    _, golden_inputs = read_inputs(GOLDEN / "parse.golden")
    missing = sorted(expressions - set(golden_inputs))
    assert not missing, f"add these corpus expressions to parse.golden: {missing}"
    for text in expressions:
        parse_expression(text)
