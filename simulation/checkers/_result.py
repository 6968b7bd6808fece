"""CheckResult: what every checker returns."""

from __future__ import annotations

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
