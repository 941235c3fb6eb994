"""Every logical operator and every aggregate or running function has a Spark translation (or an
explicit, explained entry in UNSUPPORTED), and the compiler stays native: no Python UDFs, no Arrow
hops, no SQL text."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

from engine.exec.spark import compiler
from engine.exec.spark.compiler_aggregate import AGGREGATE_FORMS, RUNNING_FORMS
from engine.expr.functions import FUNCTIONS, FunctionKind
from engine.plan.operators import OPERATORS

SPARK_DIR = Path(compiler.__file__).parent
COMPILER_MODULES = sorted(SPARK_DIR.glob("compiler*.py"))


@pytest.mark.parametrize("op", sorted(OPERATORS))
def test_every_logical_operator_has_a_visitor(op: str) -> None:
    has_visitor = callable(getattr(compiler.SparkCompiler, f"visit_{op}", None))
    assert has_visitor or op in compiler.UNSUPPORTED, (
        f"logical operator '{op}' has no SparkCompiler.visit_{op} and no UNSUPPORTED entry"
    )


def test_unsupported_entries_name_real_operators_with_a_reason() -> None:
    for op, reason in compiler.UNSUPPORTED.items():
        assert op in OPERATORS and reason.strip()


@pytest.mark.parametrize(
    ("kind", "forms"),
    [(FunctionKind.AGGREGATE, AGGREGATE_FORMS), (FunctionKind.RUNNING, RUNNING_FORMS)],
    ids=["aggregate", "running"],
)
def test_every_aggregate_and_running_function_has_a_spark_form(kind, forms) -> None:
    registered = {name for name, spec in FUNCTIONS.items() if kind in spec.kinds}
    assert registered - set(forms) == set(), f"{kind} functions without a Spark form"
    assert set(forms) - registered == set(), "Spark forms of functions the registry does not have"


_NOT_NATIVE = re.compile(
    r"\budf\b|pandas_udf|mapInArrow|applyInArrow|mapInPandas|\.rdd\b|spark\.sql ?\(|F\.expr ?\(|selectExpr"
)


def _code_only(source: str) -> str:
    """``source`` without its strings and comments (docstrings may name what the code avoids)."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    skipped = (tokenize.STRING, tokenize.COMMENT)
    return " ".join(t.string for t in tokens if t.type not in skipped).replace(" . ", ".")


@pytest.mark.parametrize("module", COMPILER_MODULES, ids=lambda p: p.name)
def test_compiler_modules_stay_native(module: Path) -> None:
    code = _code_only(module.read_text())
    assert not _NOT_NATIVE.findall(code), f"{module.name} leaves native Spark operations"


def _self_writes(source: str) -> list[str]:
    """The assignments in ``source`` to an attribute of ``self`` or to an item of one
    (``self.x = ...``, ``self._x[k] = ...``), and the calls changing one in place."""
    changing = {"add", "discard", "pop", "update", "clear", "setdefault", "append", "remove"}
    found = []

    def own(node: ast.AST) -> bool:  # self.<name>, or self.<name>[...]
        if isinstance(node, ast.Subscript):
            node = node.value
        return (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        )

    for node in ast.walk(ast.parse(source)):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        found += [ast.unparse(t) for t in targets if own(t)]
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in changing
            and own(node.func.value)
        ):
            found.append(ast.unparse(node.func))
    return found


@pytest.mark.parametrize(
    "module", sorted(SPARK_DIR.glob("compiler_visit_*.py")), ids=lambda p: p.name
)
def test_visitors_keep_no_state_of_their_own(module: Path) -> None:
    """A visitor passes what its readers need in what it returns (``compiled.Compiled``), never
    in the compiler's attributes."""
    assert _self_writes(module.read_text()) == []
