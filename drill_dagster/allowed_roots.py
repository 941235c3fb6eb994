"""Which directories a code location's plans may use as ``fs`` storage roots (and as the
``warehouse`` of a ``catalog`` engine, checked the same way).

A plan file is untrusted input: without a limit, its ``root`` could name any directory the Dagster
process can write (``/etc``), and a materialization would replace what is there. Every ``fs``
root of every plan must lie at or under one allowed directory, else loading the code location
fails naming the plan file and the JSON path of the root (``$.storage.lake.root``).

The allowed directories are, first found:

* the ``allowed_roots`` argument of :func:`~drill_dagster.definitions.load_definitions`;
* ``allowed_roots`` in ``drill_project.yaml`` (relative entries: relative to the plans directory);
* by default, the *project directory* (the one holding the plans directory, as
  ``drill-dagster init`` lays it out: ``plans/`` beside ``data/``) and the classpath data
  directories given to ``load_definitions``.

Paths are compared with symbolic links resolved, so a link inside an allowed directory that
leads out of it does not widen the list.

>>> from pathlib import Path
>>> allowed = allowed_root_dirs(Path("/srv/project/plans"), None, ())
>>> [str(p) for p in allowed]
['/srv/project']
>>> is_allowed(Path("/srv/project/data/lake"), allowed), is_allowed(Path("/etc"), allowed)
(True, False)
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path


def allowed_root_dirs(
    plans_dir: Path,
    configured: Sequence[str | Path] | None,
    data_dirs: Iterable[str | Path],
) -> tuple[Path, ...]:
    """The directories roots may lie under: ``configured`` (relative to ``plans_dir``) when
    given, else the project directory and ``data_dirs``; all with links resolved."""
    plans_dir = Path(os.path.abspath(plans_dir))
    if configured is not None:
        chosen = [plans_dir / Path(entry) for entry in configured]
    else:
        chosen = [plans_dir.parent, *(Path(d) for d in data_dirs)]
    return tuple(dict.fromkeys(Path(os.path.realpath(p)) for p in chosen))


def is_allowed(root: Path, allowed: Iterable[Path]) -> bool:
    """Whether ``root`` (links resolved) is one of ``allowed`` or lies below one."""
    real = Path(os.path.realpath(root))
    return any(real == a or a in real.parents for a in allowed)


def describe(allowed: Sequence[Path]) -> str:
    """The allowed directories, for messages."""
    return ", ".join(str(p) for p in allowed) or "none"
