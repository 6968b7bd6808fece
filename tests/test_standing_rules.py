"""The design's standing rules, checked on the source: no locks, clocks or global random in actors."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCKS = re.compile(r"(threading|trio|asyncio|multiprocessing)\.(R?Lock|Semaphore|Condition)\(|\bR?Lock\(\)")
# The module-level random functions, not ``ctx.random.uniform(...)`` (the context's seeded generator).
CLOCKS_AND_RANDOM = re.compile(
    r"time\.(time|monotonic|perf_counter)\(|(?<![\w.])random\.(random|randint|choice|shuffle|uniform)\("
    r"|datetime\.now\("
)


def _hits(pattern: re.Pattern[str], *folders: str) -> list[str]:
    found = []
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                if pattern.search(line) and not line.lstrip().startswith("#"):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    return found


def test_no_locks_in_actors_or_simulation() -> None:
    assert _hits(LOCKS, "actors", "simulation") == []


def test_actors_and_simulation_never_read_the_clock_or_global_random() -> None:
    assert _hits(CLOCKS_AND_RANDOM, "actors", "simulation") == []


def test_the_checks_can_fail(tmp_path: Path) -> None:
    assert LOCKS.search("guard = threading.Lock()")
    assert CLOCKS_AND_RANDOM.search("deadline = time.monotonic() + 5")
    assert CLOCKS_AND_RANDOM.search("pick = random.choice(peers)")
    assert not CLOCKS_AND_RANDOM.search("pick = self.ctx.random.choice(peers)")
