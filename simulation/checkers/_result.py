"""CheckResult: what every checker returns."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from pathlib import Path
from typing import final

import attrs

MAX_REPORTED = 20


@final
@attrs.frozen
class CheckResult:
    """A checker's verdict: ``ok``, the first violations (readable lines) and its measurements."""

    checker: str
    ok: bool
    violations: tuple[str, ...] = ()
    metrics: tuple[tuple[str, float], ...] = ()

    @classmethod
    def of(cls, checker: str, violations: list[str], **metrics: float) -> CheckResult:
        """Build a result; ``ok`` when there is no violation. Keeps the first few violations."""
        shown = tuple(violations[:MAX_REPORTED])
        if len(violations) > MAX_REPORTED:
            shown += (f"... and {len(violations) - MAX_REPORTED} more",)
        return cls(checker, not violations, shown, tuple(sorted(metrics.items())))

    def metric(self, name: str) -> float:
        """One measurement by name."""
        return dict(self.metrics)[name]

    def __str__(self) -> str:
        head = f"{self.checker}: {'ok' if self.ok else 'VIOLATED'}"
        if self.metrics:
            head += " (" + ", ".join(f"{k}={v:g}" for k, v in self.metrics) + ")"
        return "\n  ".join([head, *self.violations])


def _where(error: BaseException) -> str:
    """Where ``error`` was raised: the innermost frame's file, line and function."""
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return "?"
    frame = frames[-1]
    return f"{Path(frame.filename).name}:{frame.lineno} in {frame.name}"


def raised(checker: str, error: Exception) -> CheckResult:
    """The verdict on a run whose checker raised: a violation naming the checker, the exception and where.

    A checker that cannot read a trace has found something (a trace it was not written for, or a
    bug of its own) and must say so in the run's report, with its seed and replay command, rather
    than stop the sweep the run is part of and hide every other finding.
    """
    return CheckResult.of(checker, [f"the checker raised {type(error).__name__}: {error} ({_where(error)})"], raised=1)


def guarded(
    checker: str, check: Callable[..., CheckResult | list[CheckResult]], *args: object
) -> list[CheckResult]:
    """``check(*args)``'s results (one or a list), or, if it raised, one failing result for ``checker`` saying what."""
    try:
        found = check(*args)
    except Exception as error:  # noqa: BLE001 - any failure of a checker is that checker's finding
        return [raised(checker, error)]
    return [found] if isinstance(found, CheckResult) else list(found)
