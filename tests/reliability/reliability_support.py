"""Helpers of the reliability tests: a wall-clock bound that turns a hang into a failure."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class Hang(Exception):
    """Raised in the main thread when a bounded call runs past its time."""


@contextmanager
def time_bound(seconds: float, what: str) -> Iterator[None]:
    """Fail with :class:`Hang` if the block runs longer than ``seconds`` (SIGALRM, main thread)."""

    def expire(signum: int, frame: object) -> None:
        raise Hang(f"{what} took more than {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def peak_rss_growth(setup: str, body: str, *, cwd: str, timeout: float = 120) -> int:
    """Bytes the peak RSS of a fresh Python process grew by while running ``body`` after
    ``setup`` (imports and inputs, not counted). A subprocess, so other tests' memory is not in
    the figure; the peak is the kernel's (``ru_maxrss``), so no sampling can miss it."""
    import json
    import os
    import subprocess
    import sys
    import textwrap

    script = "\n".join(
        [
            "import json, resource",
            textwrap.dedent(setup),
            "base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss",
            textwrap.dedent(body),
            "peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss",
            "print(json.dumps({'growth': (peak - base) * 1024}))",
        ]
    )
    env = {**os.environ, "PYTHONPATH": cwd}
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return int(json.loads(done.stdout.strip().splitlines()[-1])["growth"])


def scan(op_id: int, path: str) -> dict[str, Any]:
    """A JSON scan of ``path`` under the plan's ``fs`` engine, its records as ``r``."""
    return {
        "@id": op_id,
        "op": "scan",
        "storageengine": "fs",
        "ref": "r",
        "selection": {"path": path, "format": "json"},
    }


def to_queue(op_id: int, input_id: int) -> dict[str, Any]:
    """A store of ``input_id``'s records into the plan's queue engine ``q``."""
    return {"@id": op_id, "op": "store", "input": input_id, "storageengine": "q", "target": {}}
