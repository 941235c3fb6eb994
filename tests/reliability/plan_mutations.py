"""Hypothesis strategies that mutate real plans: the corpus and the examples, broken on purpose.

Every base plan is a plan document that validates (the conformance corpus and ``examples/plans``);
a mutant is that document with one to three mutations applied at places hypothesis picks:

* structural: delete a key, retype a value (any JSON), swap two operators' ids, point an input at
  itself or at a later operator (a cycle), drop an operator, duplicate one;
* expressions: truncate, splice garbage, call an unknown function, hostile names
  (``__import__('os')``, ``eval(...)``, SQL and shell fragments, quotes, NUL, unicode);
* names: unknown ops, unknown storage engines, engines of unknown types or bad settings, paths
  that escape the root;
* size: thousands of chained operators, very long expressions, deeply nested JSON and
  expressions.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from engine.errors import PlanError
from engine.plan import parse_plan
from engine.plan.source import load_document

REPO = Path(__file__).resolve().parents[2]
CONFORMANCE_PLANS = (REPO / ".." / "shared" / "conformance" / "plans").resolve()
EXAMPLE_PLANS = REPO / "examples" / "plans"

JsonPath = tuple[str | int, ...]


def base_plan_files() -> list[Path]:
    """Every plan file of the conformance corpus and of the examples, sorted."""
    corpus = sorted(
        p for p in CONFORMANCE_PLANS.rglob("*") if p.suffix in (".json", ".plan") and p.is_file()
    )
    return corpus + sorted(EXAMPLE_PLANS.glob("*.json"))


def base_documents() -> list[tuple[str, Any]]:
    """``(name, document)`` for each base plan that validates (relaxed JSON read once).

    The corpus holds three plans that are invalid on purpose (``dsort-logical.json``,
    ``common/simple_plan.json``, ``DistinctTest.plan``: see CASES.md); they are left out.
    """
    documents = []
    for path in base_plan_files():
        try:
            parse_plan(path)
        except PlanError:
            continue
        documents.append((str(path), load_document(path)[0]))
    return documents


def walk(value: Any, path: JsonPath = ()) -> Iterator[tuple[JsonPath, Any]]:
    """Every ``(path, value)`` in a JSON document, parents before children (no recursion: the
    mutants nest deeper than Python's stack)."""
    stack: list[tuple[JsonPath, Any]] = [(path, value)]
    while stack:
        path, value = stack.pop()
        yield path, value
        if isinstance(value, dict):
            stack.extend(((*path, k), v) for k, v in reversed(list(value.items())))
        elif isinstance(value, list):
            stack.extend(((*path, i), v) for i, v in reversed(list(enumerate(value))))


def get(document: Any, path: JsonPath) -> Any:
    for part in path:
        document = document[part]
    return document


def operators(document: Any) -> list[dict[str, Any]]:
    """The operator objects of a document (top-level query and sequence bodies)."""
    return [v for _, v in walk(document) if isinstance(v, dict) and isinstance(v.get("op"), str)]


# ------------------------------------------------------------------ values

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)

HOSTILE_TEXT = [
    "__import__('os').system('touch /tmp/pwned')",
    "eval('1+1')",
    "exec('import os')",
    "os.system('id')",
    "'; DROP TABLE users; --",
    '"; DROP TABLE users; --',
    "1); SELECT * FROM secrets; --(",
    "`rm -rf /`",
    "$(id)",
    "${HOME}",
    "${env:PATH}",
    "e.`a``b`",
    "e.`__class__`.`__mro__`",
    "getenv('HOME')",
    "read_file('/etc/passwd')",
    "lambda: 0",
    "\x00",
    "e.a\x00",
    "é.ü + \U0001d518",
    "'unterminated",
    "e.a[",
    "e.a[-1]",
    "e.a[99999999999999999999999]",
    "((((",
    "))))",
    "cast(e.a as NOSUCHTYPE)",
    "cast(e.a as ",
    "if e.a then 1",
    "case when end",
    "1e999999",
    "9" * 400,
    "0x" + "f" * 40,
    "a.b.c.d.e.f.g.h.i.j.k",
    "!",
    "&&",
    "e.a == ",
    "sum(sum(sum(e.a)))",
    "count()",
    "count(e.a, e.b, e.c, e.d)",
    "nosuchfunction(e.a)",
    "NoSuchFunction()",
    "__builtins__",
]

HOSTILE_PATHS = [
    "../outside",
    "../../etc/passwd",
    "a/../../..",
    "/../../etc",
    "file:///etc/passwd",
    "file://otherhost/x",
    "s3://bucket/key",
    "http://example.com/x.json",
    "hdfs:///x",
    "~/x",
    "$HOME/x",
    "${HOME}",
    "",
    "/",
    ".",
    "\x00",
    "a\x00b",
    "*",
    "**/*",
    "[",
    "a" * 5000,
    "/" * 300,
]


def expression_variant(original: str) -> st.SearchStrategy[str]:
    """A broken or hostile version of an expression."""
    return st.one_of(
        st.sampled_from(HOSTILE_TEXT),
        st.integers(min_value=0, max_value=max(len(original), 1)).map(lambda n: original[:n]),
        st.tuples(
            st.integers(min_value=0, max_value=len(original)),
            st.text(alphabet="()[]{}.,'`\"!&|=<>+-*/%^ \n\tabc019_$#@\\", max_size=6),
        ).map(lambda t: original[: t[0]] + t[1] + original[t[0] :]),
        st.from_regex(r"[a-z_][a-z0-9_]{0,12}", fullmatch=True).map(lambda f: f"{f}({original})"),
        st.integers(min_value=50, max_value=3000).map(lambda n: "(" * n + original + ")" * n),
        st.integers(min_value=50, max_value=3000).map(lambda n: "-" * n + "1"),
        st.integers(min_value=50, max_value=3000).map(lambda n: "!" * n + "true"),
        st.integers(min_value=50, max_value=500).map(lambda n: " + ".join([original] * n)),
        st.integers(min_value=50, max_value=2000).map(lambda n: "f(" * n + "1" + ")" * n),
        st.integers(min_value=50, max_value=2000).map(
            lambda n: "if true then " * n + "1" + " else 0 end" * n
        ),
        st.text(max_size=40),
    )


# ------------------------------------------------------------------ mutations

Mutation = Callable[[Any, Any], Any]


class _Drawer:
    """``draw`` of a composite strategy, shaped like ``st.data()`` for the mutations."""

    def __init__(self, draw: st.DrawFn) -> None:
        self.draw = draw


def _pick_path(data: Any, document: Any, want: Callable[[JsonPath, Any], bool]):
    paths = [p for p, v in walk(document) if want(p, v)]
    if not paths:
        return None
    return data.draw(st.sampled_from(paths))


def delete_key(data: Any, document: Any) -> Any:
    path = _pick_path(data, document, lambda p, v: bool(p))
    if path is None:
        return document
    parent = get(document, path[:-1])
    del parent[path[-1]]
    return document


def retype_value(data: Any, document: Any) -> Any:
    path = _pick_path(data, document, lambda p, v: True)
    value = data.draw(json_values)
    if not path:
        return value
    get(document, path[:-1])[path[-1]] = value
    return document


def swap_ids(data: Any, document: Any) -> Any:
    ops = [op for op in operators(document) if "@id" in op]
    if len(ops) < 2:
        return document
    i, j = data.draw(st.permutations(range(len(ops))))[:2]
    ops[i]["@id"], ops[j]["@id"] = ops[j]["@id"], ops[i]["@id"]
    return document


def add_cycle(data: Any, document: Any) -> Any:
    ops = [op for op in operators(document) if "@id" in op]
    with_input = [op for op in ops if "input" in op]
    if not with_input:
        return document
    target = data.draw(st.sampled_from(with_input))
    target["input"] = data.draw(st.sampled_from([op["@id"] for op in ops]))
    return document


def drop_or_duplicate_operator(data: Any, document: Any) -> Any:
    query = document.get("query") if isinstance(document, dict) else None
    if not isinstance(query, list) or not query:
        return document
    index = data.draw(st.integers(min_value=0, max_value=len(query) - 1))
    if data.draw(st.booleans()):
        del query[index]
    else:
        query.insert(index, copy.deepcopy(query[index]))
    return document


def break_expression(data: Any, document: Any) -> Any:
    path = _pick_path(
        data,
        document,
        lambda p, v: isinstance(v, str) and bool(p) and p[-1] in ("expr", "ref", "condition"),
    )
    if path is None:
        path = _pick_path(data, document, lambda p, v: isinstance(v, str) and bool(p))
    if path is None:
        return document
    original = get(document, path)
    get(document, path[:-1])[path[-1]] = data.draw(expression_variant(original))
    return document


def unknown_op(data: Any, document: Any) -> Any:
    ops = operators(document)
    if not ops:
        return document
    op = data.draw(st.sampled_from(ops))
    op["op"] = data.draw(
        st.one_of(st.sampled_from(["scna", "SCAN", "", "eval", "__class__", "sql"]), st.text())
    )
    return document


def wrong_storage_engine(data: Any, document: Any) -> Any:
    choice = data.draw(st.integers(min_value=0, max_value=3))
    ops = [op for op in operators(document) if "storageengine" in op]
    storage = document.get("storage") if isinstance(document, dict) else None
    if choice == 0 and ops:
        data.draw(st.sampled_from(ops))["storageengine"] = data.draw(
            st.one_of(st.text(max_size=10), st.sampled_from(["nosuch", "", "__proto__"]))
        )
    elif choice == 1 and isinstance(storage, dict) and storage:
        name = data.draw(st.sampled_from(sorted(storage)))
        storage[name] = data.draw(
            st.one_of(
                st.fixed_dictionaries({"type": st.sampled_from(["mock", "jdbc", "s3", "", "FS"])}),
                st.fixed_dictionaries(
                    {"type": st.just("fs"), "root": st.sampled_from(HOSTILE_PATHS)}
                ),
                st.fixed_dictionaries({"type": st.just("fs"), "secret": json_values}),
                json_values,
            )
        )
    elif choice == 2 and ops:
        op = data.draw(st.sampled_from(ops))
        key = "selection" if "selection" in op else "target"
        op[key] = data.draw(
            st.one_of(
                st.fixed_dictionaries({"path": st.sampled_from(HOSTILE_PATHS)}),
                st.fixed_dictionaries(
                    {"path": st.text(max_size=20), "format": st.text(max_size=8)}
                ),
                json_values,
            )
        )
    elif isinstance(document, dict):
        document["engines" if data.draw(st.booleans()) else "storage"] = data.draw(json_values)
    return document


def huge_input(data: Any, document: Any) -> Any:
    """Thousands of chained operators, or a long sequence."""
    ops = [op for op in operators(document) if "@id" in op]
    query = document.get("query") if isinstance(document, dict) else None
    if not ops or not isinstance(query, list):
        return document
    count = data.draw(st.integers(min_value=300, max_value=1500))
    start = ops[0]["@id"]
    chain = []
    previous = start
    for n in range(count):
        new_id = f"x{n}"
        chain.append({"@id": new_id, "op": "filter", "input": previous, "expr": "true"})
        previous = new_id
    query.extend(chain)
    return document


def deeply_nested(data: Any, document: Any) -> Any:
    """A value nested thousands of levels deep somewhere in the document."""
    depth = data.draw(st.integers(min_value=100, max_value=1500))
    nested: Any = 1
    as_list = data.draw(st.booleans())
    for _ in range(depth):
        nested = [nested] if as_list else {"a": nested}
    path = _pick_path(data, document, lambda p, v: bool(p))
    if path is None:
        return nested
    get(document, path[:-1])[path[-1]] = nested
    return document


MUTATIONS: list[Mutation] = [
    delete_key,
    retype_value,
    swap_ids,
    add_cycle,
    drop_or_duplicate_operator,
    break_expression,
    break_expression,
    unknown_op,
    wrong_storage_engine,
    huge_input,
    deeply_nested,
]


class Mutant:
    """A mutated document, shown by its base and mutations (the document can be megabytes, or
    nested deeper than ``repr`` can go)."""

    def __init__(self, base: str, document: Any, mutations: list[str]) -> None:
        self.base = base
        self.document = document
        self.mutations = mutations

    def __repr__(self) -> str:
        return f"Mutant({Path(self.base).name}: {', '.join(self.mutations)})"


@st.composite
def mutated_plans(draw: st.DrawFn, bases: list[tuple[str, Any]]) -> Mutant:
    """A mutant of one of ``bases``; the size mutations go last (they make documents too deep to
    walk cheaply). Hypothesis prints each draw of a failing example, so the cause is readable."""
    name, document = bases[draw(st.integers(min_value=0, max_value=len(bases) - 1))]
    document = copy.deepcopy(document)
    data = _Drawer(draw)
    applied = []
    chosen = draw(st.lists(st.sampled_from(MUTATIONS), min_size=1, max_size=3))
    for mutation in sorted(chosen, key=lambda m: m in (huge_input, deeply_nested)):
        document = mutation(data, document)
        applied.append(mutation.__name__)
    return Mutant(name, document, applied)
