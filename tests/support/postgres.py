"""A PostgreSQL server for tests: ``examples/postgres_server.py``, which ``make demo`` uses too
(initdb in a temporary directory, 127.0.0.1 on a free port, stops exactly what it starts)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_PATH = Path(__file__).resolve().parents[2] / "examples" / "postgres_server.py"


def _load():
    name = "drill_examples_postgres_server"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, _PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while being created
    spec.loader.exec_module(module)
    return module


_server = _load()
PostgresServer = _server.PostgresServer
binaries_missing = _server.binaries_missing
start_server = _server.start_server
USER = _server.USER
DATABASE = _server.DATABASE
