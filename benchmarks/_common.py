"""Helpers shared by the benchmarks."""

from __future__ import annotations

import os


def check_equal(name: str, what: str, expected: int, got: object) -> None:
    """Refuse a run whose counts are wrong: a fast wrong answer is no figure."""
    if got != expected:
        msg = f"{name}: expected {what} == {expected}, got {got!r}"
        raise RuntimeError(msg)


def pinned_cpu() -> int | None:
    """The CPU a benchmark keeps actors on (``ThreadSystem(cpu=...)``): the lowest this process may use, or None
    where the platform cannot pin threads."""
    if not hasattr(os, "sched_getaffinity") or not hasattr(os, "sched_setaffinity"):
        return None
    return min(os.sched_getaffinity(os.getpid()))
