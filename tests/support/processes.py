"""Stopping the servers and daemons tests start in their own process group.

Dagster's processes ignore SIGINT in the background and map SIGTERM to it (see
``../shared/ENVIRONMENT.md``), so a test starts each with ``start_new_session=True`` and stops the
whole group: SIGTERM, a wait, and SIGKILL only if it does not exit.
"""

from __future__ import annotations

import os
import signal
import subprocess


def stop_process_group(process: subprocess.Popen[bytes], timeout: float = 30) -> None:
    """SIGTERM to ``process``'s group, then SIGKILL if it has not exited after ``timeout`` s."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
