"""Run the kill -9 crash test by hand: ``python -m tests.crash --target embedded --cycles 50 --seed 3``
(``--memory-target 65536``: the queue pages).

Prints what it did and the checker's counts; exits 1 if a promise was broken (lost, unexpected, bad
duplicate, order), 2 if a client process misbehaved (a life also logged a traceback, kept with ``--workdir``
in ``life-N.stderr``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from .harness import CrashTestError, EmbeddedTarget, PubSubTarget, Target, run_crash_test


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.crash", description="The kill -9 crash test.")
    parser.add_argument("--target", choices=("embedded", "pubsub"), default="embedded")
    parser.add_argument("--cycles", type=int, default=10, help="kill cycles before the drain")
    parser.add_argument("--seed", type=int, default=1, help="seeds the kill moments and the clients")
    parser.add_argument("--max-life", type=float, default=1.0, help="longest life (s) after ready before the kill")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="keep the data directory and history here (default: a temporary directory)")
    parser.add_argument("--memory-target", type=int, default=None,
                        help="embedded: page the queue under this many bytes of messages in RAM (default: none)")
    args = parser.parse_args(argv)
    if args.memory_target is not None and args.target != "embedded":
        parser.error("--memory-target: only with --target embedded")
    with tempfile.TemporaryDirectory(prefix="conveyor-crash-") as scratch:
        workdir = args.workdir or Path(scratch)
        workdir.mkdir(parents=True, exist_ok=True)
        target: Target = (EmbeddedTarget(workdir, memory_target=args.memory_target) if args.target == "embedded"
                          else PubSubTarget(workdir))
        try:
            report = run_crash_test(target, args.cycles, args.seed, max_life_s=args.max_life)
        except CrashTestError as error:
            print(f"crash test: {error}", file=sys.stderr)
            return 2
    print(report.summary() if report.verdict.ok and not report.lives_with_tracebacks else report.details())
    return 1 if not report.verdict.ok else 2 if report.lives_with_tracebacks else 0


if __name__ == "__main__":
    sys.exit(main())
