"""Helpers shared by the benchmarks."""

from __future__ import annotations


def check_equal(name: str, what: str, expected: int, got: object) -> None:
    """Refuse a run whose counts are wrong: a fast wrong answer is no figure."""
    if got != expected:
        msg = f"{name}: expected {what} == {expected}, got {got!r}"
        raise RuntimeError(msg)
