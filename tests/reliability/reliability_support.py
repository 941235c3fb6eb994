"""Helpers of the reliability tests: a wall-clock bound that turns a hang into a failure."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager


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
