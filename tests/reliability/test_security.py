"""Security: paths stay under their engine's root, expressions never reach eval, SQL or a shell,
a plan cannot read the environment, and the web UI the project starts listens on 127.0.0.1."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest
from reliability_support import scan, to_queue

from engine import run_plan
from engine.errors import DrillError, ExpressionSyntaxError, PlanError, StorageError
from engine.expr.nodes import quote_name

REPO = Path(__file__).resolve().parents[2]
SOURCES = sorted((REPO / "engine").rglob("*.py")) + sorted((REPO / "drill_dagster").rglob("*.py"))


def plan_of(root: Path, *ops: dict[str, Any]) -> dict[str, Any]:
    return {
        "storage": {"fs": {"type": "fs", "root": str(root)}, "q": {"type": "queue"}},
        "query": list(ops),
    }


def constant(op_id: int = 1) -> dict[str, Any]:
    return {"@id": op_id, "op": "constant", "content": [{"a": 1}, {"a": 2}]}


def store(op_id: int, input_id: int, path: str) -> dict[str, Any]:
    return {
        "@id": op_id,
        "op": "store",
        "input": input_id,
        "storageengine": "fs",
        "target": {"path": path, "format": "json"},
    }


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    """A root with a file inside, a secret outside, and symlinks leading out."""
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "in.json").write_text('{"a": 1}\n')
    (outside / "secret.json").write_text('{"password": "hunter2"}\n')
    (root / "out_link").symlink_to(outside, target_is_directory=True)
    (root / "file_link.json").symlink_to(outside / "secret.json")
    (root / "mixed").mkdir()
    (root / "mixed" / "ok.json").write_text('{"a": 2}\n')
    (root / "mixed" / "leak.json").symlink_to(outside / "secret.json")
    return root


ESCAPING_TARGETS = [
    "../outside/x",
    "a/../../outside/x",
    "file:///etc/drill_dagster_test",
    "s3://bucket/x",
    "http://example.com/x",
    "hdfs:///x",
    "out_link/x",
    "out_link",
]


@pytest.mark.parametrize("executor", ["local", pytest.param("spark", marks=pytest.mark.spark)])
@pytest.mark.parametrize("target", ESCAPING_TARGETS)
def test_a_store_target_cannot_leave_the_root_and_nothing_runs(
    lake: Path, request: pytest.FixtureRequest, executor: str, target: str
) -> None:
    """The bad target is the plan's second store: the first one must not have written either."""
    spark = request.getfixturevalue("spark") if executor == "spark" else None
    plan = plan_of(lake, constant(), store(2, 1, "first"), store(3, 1, target))
    before = sorted(p.name for p in (lake.parent / "outside").iterdir())
    with pytest.raises(StorageError) as caught:
        run_plan(plan, executor=executor, spark=spark)
    assert "store 3" in str(caught.value), str(caught.value)
    assert not (lake / "first").exists()
    assert sorted(p.name for p in (lake.parent / "outside").iterdir()) == before


def test_an_absolute_target_path_means_under_the_root(lake: Path) -> None:
    run_plan(plan_of(lake, constant(), store(2, 1, "/abs/x")), executor="local")
    assert (lake / "abs" / "x").is_dir()


ESCAPING_SELECTIONS = [
    "../outside/secret.json",
    "/../outside/secret.json",
    "file:///etc/passwd",
    "s3://bucket/secret.json",
    "out_link/secret.json",
    "out_link",
    "file_link.json",
    "mixed",
    "mixed/*.json",
    "**/*.json",
]


@pytest.mark.parametrize("executor", ["local", pytest.param("spark", marks=pytest.mark.spark)])
@pytest.mark.parametrize("selection", ESCAPING_SELECTIONS)
def test_a_scan_cannot_read_outside_the_root(
    lake: Path, request: pytest.FixtureRequest, executor: str, selection: str
) -> None:
    spark = request.getfixturevalue("spark") if executor == "spark" else None
    plan = plan_of(lake, constant(), store(2, 1, "first"), scan(3, selection), to_queue(4, 3))
    with pytest.raises(StorageError) as caught:
        run_plan(plan, executor=executor, spark=spark)
    assert "hunter2" not in str(caught.value)
    assert "scan 3" in str(caught.value), str(caught.value)
    assert any(w in str(caught.value) for w in ("escapes the root", "symbolic link", "not serve"))
    assert not (lake / "first").exists()  # rejected before anything ran


def test_a_plan_cannot_read_the_environment(lake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``${NAME}`` is a run parameter, never an environment variable; ``$NAME`` is literal."""
    monkeypatch.setenv("DRILL_SECRET", "in.json")
    with pytest.raises(PlanError, match="parameter 'DRILL_SECRET', which was not given"):
        run_plan(plan_of(lake, scan(1, "${DRILL_SECRET}"), to_queue(2, 1)), executor="local")
    with pytest.raises(DrillError, match=r"'\$DRILL_SECRET' does not exist"):
        run_plan(plan_of(lake, scan(1, "$DRILL_SECRET"), to_queue(2, 1)), executor="local")
    with pytest.raises(PlanError, match="getenv"):
        run_plan(
            plan_of(
                lake,
                constant(),
                {
                    "@id": 2,
                    "op": "project",
                    "input": 1,
                    "projections": [{"ref": "output.x", "expr": "getenv('DRILL_SECRET')"}],
                },
                to_queue(3, 2),
            ),
            executor="local",
        )


HOSTILE_EXPRESSIONS = [
    "__import__('os').system('touch PWNED')",
    "eval('1')",
    "exec('x')",
    "os.system('touch PWNED')",
    "system('touch PWNED')",
    "sql('select 1')",
    "a; DROP TABLE t",
    "a') OR ('1'='1",
    "`a`; select 1",
    "$(touch PWNED)",
]


@pytest.mark.parametrize("expression", HOSTILE_EXPRESSIONS)
def test_hostile_expressions_are_rejected_by_the_parser_or_the_registry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, expression: str
) -> None:
    monkeypatch.chdir(tmp_path)
    plan = plan_of(
        tmp_path,
        constant(),
        {"@id": 2, "op": "filter", "input": 1, "expr": expression},
        to_queue(3, 2),
    )
    with pytest.raises((PlanError, ExpressionSyntaxError)):
        run_plan(plan, executor="local")
    assert not (tmp_path / "PWNED").exists()


HOSTILE_NAMES = ["'; DROP TABLE t; --", "a`b", "$(id)", "__class__", "a.b", "x) OR (1=1", "é €"]


@pytest.mark.parametrize("executor", ["local", pytest.param("spark", marks=pytest.mark.spark)])
def test_hostile_field_names_are_plain_data(
    tmp_path: Path, request: pytest.FixtureRequest, executor: str
) -> None:
    """Field names from data and from the plan are column names, quoted, never code."""
    spark = request.getfixturevalue("spark") if executor == "spark" else None
    record = {name: index for index, name in enumerate(HOSTILE_NAMES)}
    projections = [
        {"ref": f"output.c{index}", "expr": quote_name(name)}
        for index, name in enumerate(HOSTILE_NAMES)
    ]
    plan = plan_of(
        tmp_path,
        {"@id": 1, "op": "constant", "content": [record]},
        {"@id": 2, "op": "project", "input": 1, "projections": projections},
        to_queue(3, 2),
    )
    records = run_plan(plan, executor=executor, spark=spark).records()
    assert records == [{f"c{index}": index for index in range(len(HOSTILE_NAMES))}]


# ------------------------------------------------------------------ the code itself

DANGEROUS_CALLS = {"eval", "exec", "compile", "__import__", "execfile"}
DANGEROUS_ATTRIBUTES = {
    ("os", "system"),
    ("os", "popen"),
    ("os", "execv"),
    ("os", "execvp"),
    ("os", "spawnl"),
    ("pickle", "loads"),
    ("yaml", "load"),
}
SQL_CALLS = {"sql", "selectExpr", "expr"}  # Spark entry points that parse SQL text


def _calls(tree: ast.AST) -> list[ast.Call]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)]


def _is_string_built(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.JoinedStr)
        or (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mod))
        or (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "format")
    )


SQL_TEXT_FUNCTIONS = {("engine/exec/spark/catalog_tables.py", "_ddl")}
"""The one function that hands SQL text to Spark: catalog statements PySpark's Catalog API cannot
make, every name in them validated and quoted (see its docstring)."""


def _allowed_sql_calls(tree: ast.AST, path: Path) -> list[ast.Call]:
    where = str(path.relative_to(REPO))
    return [
        call
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and (where, node.name) in SQL_TEXT_FUNCTIONS
        for call in _calls(node)
    ]


def _imports_spark(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
            if any(n.split(".")[0] in ("pyspark", "py4j") for n in names):
                return True
    return False


def test_the_engine_never_calls_eval_a_shell_or_string_built_sql() -> None:
    """No eval/exec, no shell, no subprocess, no SQL text handed to Spark: expressions are
    compiled to Column objects through the function registry. The SQL front end (engine/sql)
    renders a user's SQL back only for messages (sqlglot's ``.sql()``); it never touches Spark."""
    problems = []
    for path in SOURCES:
        tree = ast.parse(path.read_text(), filename=str(path))
        allowed = _allowed_sql_calls(tree, path)
        sql_front_end = path.relative_to(REPO).parts[:2] == ("engine", "sql")
        if sql_front_end and _imports_spark(tree):
            problems.append(f"{path.relative_to(REPO)}: the SQL front end imports Spark")
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                if any(n.split(".")[0] in ("subprocess", "pickle", "marshal") for n in names):
                    problems.append(f"{path}:{node.lineno}: imports {names}")
        for call in _calls(tree):
            func = call.func
            where = f"{path.relative_to(REPO)}:{call.lineno}"
            if isinstance(func, ast.Name) and func.id in DANGEROUS_CALLS:
                problems.append(f"{where}: calls {func.id}()")
            if isinstance(func, ast.Attribute):
                owner = func.value.id if isinstance(func.value, ast.Name) else None
                if (owner, func.attr) in DANGEROUS_ATTRIBUTES:
                    problems.append(f"{where}: calls {owner}.{func.attr}()")
                if (
                    func.attr in SQL_CALLS
                    and owner not in ("re", "self")
                    and not sql_front_end
                    and call not in allowed
                ):
                    problems.append(f"{where}: hands SQL text to Spark ({func.attr})")
                if (
                    func.attr in ("filter", "where")
                    and owner not in ("np", "pc")
                    and any(map(_is_string_built, call.args))
                ):
                    problems.append(f"{where}: a string-built condition")
            if any(k.arg == "shell" for k in call.keywords):
                problems.append(f"{where}: shell=...")
    assert problems == []


def test_the_scanner_finds_what_it_looks_for(tmp_path: Path) -> None:
    """The check above is not vacuous: it sees each pattern in a planted file."""
    planted = "import subprocess\neval('1')\nos.system('x')\nspark.sql(f'select {x}')\ndf.filter(f'a = {b}')\n"
    tree = ast.parse(planted)
    calls = _calls(tree)
    assert {getattr(c.func, "id", getattr(c.func, "attr", None)) for c in calls} >= {
        "eval",
        "system",
        "sql",
        "filter",
    }
    assert any(_is_string_built(a) for c in calls for a in c.args)


def test_function_names_resolve_only_through_the_registry() -> None:
    from engine.expr.functions import lookup_function

    for name in ("eval", "exec", "__import__", "system", "getenv", "open", "__class__", "sql"):
        assert lookup_function(name) is None, name


# ------------------------------------------------------------------ the web UI

_DAGSTER_START = re.compile(r"\bdagster(?:-webserver)?\s+dev\b|\bdagster-webserver\b")
_HOST = re.compile(r"(?:-h|--host)[ =](\S+)")


def _dagster_commands() -> list[tuple[str, str]]:
    """Every line of the Makefile and scripts that starts the Dagster web UI."""
    files = [REPO / "Makefile", *sorted((REPO / ".ci").glob("*")), *sorted(REPO.glob("scripts/*"))]
    found = []
    for path in files:
        if not path.is_file():
            continue
        for line in path.read_text().splitlines():
            if _DAGSTER_START.search(line) and not line.lstrip().startswith("#"):
                found.append((str(path.relative_to(REPO)), line))
    return found


def test_the_web_ui_started_by_the_project_binds_to_localhost() -> None:
    for where, line in _dagster_commands():
        hosts = _HOST.findall(line)
        # No host given: dagster's default is 127.0.0.1 (checked below).
        assert all(
            h.strip("'\"") in ("127.0.0.1", "localhost", "$(HOST)", "${HOST}") for h in hosts
        ), (
            where,
            line,
        )
    makefile = (REPO / "Makefile").read_text()
    if re.search(r"^HOST\s*\??=", makefile, re.M):
        assert re.search(r"^HOST\s*\??=\s*127\.0\.0\.1\s*$", makefile, re.M), (
            "HOST must default to 127.0.0.1"
        )


def test_dagster_dev_defaults_to_localhost() -> None:
    """`dagster dev` without -h passes no host to the webserver, whose default is 127.0.0.1."""
    from dagster._cli.dev import dev_command
    from dagster_webserver.cli import DEFAULT_WEBSERVER_HOST, dagster_webserver

    assert DEFAULT_WEBSERVER_HOST == "127.0.0.1"
    (host,) = [p for p in dagster_webserver.params if p.name == "host"]
    assert host.default == "127.0.0.1"
    (dev_host,) = [p for p in dev_command.params if p.name == "host"]
    assert not isinstance(dev_host.default, str)  # unset: the webserver's default applies
