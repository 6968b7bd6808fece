"""What a Spark task runs: a partition of matrix cells in, one ``RunReport`` row per run out.

This module is imported by Spark's Python workers, so it lives in the installed package
(functions defined in a test file or a ``__main__`` script cannot be unpickled there).
The schemas are explicit, so Spark never infers a type from a sample of rows.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from conveyor.simulation.scenarios import RunReport, replay_command, run_scenario

from ._matrix import DEFAULT_MAX_STEPS

MATRIX_SCHEMA = StructType(
    [
        StructField("scenario", StringType(), nullable=False),
        StructField("seed", LongType(), nullable=False),
        StructField("strategy", StringType(), nullable=False),
        StructField("depth", IntegerType(), nullable=False),
        StructField("faults", StringType(), nullable=False),
        StructField("max_steps", LongType(), nullable=False),
    ]
)
"""One row per run of the matrix."""

_ROW_TYPES: dict[str, tuple[DataType, bool]] = {
    "scenario": (StringType(), False),
    "seed": (LongType(), False),
    "strategy": (StringType(), False),
    "depth": (IntegerType(), False),
    "faults": (StringType(), False),
    "steps": (LongType(), False),
    "virtual_time": (DoubleType(), False),
    "published": (LongType(), False),
    "delivered": (LongType(), False),
    "acked": (LongType(), False),
    "redelivered": (LongType(), False),
    "dead_lettered": (LongType(), False),
    "max_outstanding": (LongType(), False),
    "consumers": (IntegerType(), False),
    "fairness": (DoubleType(), True),
    "latency_p50_ms": (DoubleType(), True),
    "latency_p99_ms": (DoubleType(), True),
    "violations": (ArrayType(StringType(), containsNull=False), False),
    "trace_hash": (StringType(), False),
    "replay_command": (StringType(), False),
}

ROW_SCHEMA = StructType([StructField(name, kind, nullable) for name, (kind, nullable) in _ROW_TYPES.items()])
"""One row per run: the fields of ``RunReport``, in its order."""

ROW_COLUMNS: tuple[str, ...] = tuple(_ROW_TYPES)
"""The row's columns; a test checks they are ``RunReport``'s fields, in order."""


def sweep_replay_command(
    scenario: str, seed: int, strategy: str, depth: int, faults: str, max_steps: int = DEFAULT_MAX_STEPS
) -> str:
    """The command that reproduces a run: the registry's, plus a step budget other than the default."""
    command = replay_command(scenario, seed, strategy, depth, faults)
    if max_steps != DEFAULT_MAX_STEPS:
        command += f" --max-steps {max_steps}"
    return command


def report_row(report: RunReport, max_steps: int = DEFAULT_MAX_STEPS) -> tuple[Any, ...]:
    """A report as a tuple in ``ROW_COLUMNS`` order (violations as a list, the full replay command)."""
    row = report.as_row()
    row["replay_command"] = sweep_replay_command(
        report.scenario, report.seed, report.strategy, report.depth, report.faults, max_steps
    )
    return tuple(row[name] for name in ROW_COLUMNS)


def error_row(
    scenario: str, seed: int, strategy: str, depth: int, faults: str, max_steps: int, error: BaseException
) -> tuple[Any, ...]:
    """The row of a run that raised: zero counts and the error as its one violation.

    A sweep of thousands of runs should not lose the others to one crashing seed, and the
    row still carries the command that reproduces the crash.
    """
    report = RunReport(
        scenario=scenario, seed=seed, strategy=strategy, depth=depth, faults=faults, steps=0, virtual_time=0.0,
        published=0, delivered=0, acked=0, redelivered=0, dead_lettered=0, max_outstanding=0, consumers=0,
        fairness=None, latency_p50_ms=None, latency_p99_ms=None,
        violations=(f"error: {type(error).__name__}: {error}",), trace_hash="", replay_command="",
    )
    return report_row(report, max_steps)


def run_cell(
    scenario: str, seed: int, strategy: str, depth: int, faults: str, max_steps: int = DEFAULT_MAX_STEPS
) -> tuple[Any, ...]:
    """Run one cell with ``run_scenario`` and return its row (an error row if it raised)."""
    try:
        run = run_scenario(scenario, seed, strategy=strategy, depth=depth, faults=faults, max_steps=max_steps)
    except Exception as error:  # noqa: BLE001 - any failure of one run becomes that run's row
        return error_row(scenario, seed, strategy, depth, faults, max_steps, error)
    return report_row(run.report, max_steps)


def _cell_args(cell: Sequence[Any]) -> tuple[str, int, str, int, str, int]:
    scenario, seed, strategy, depth, faults, max_steps = cell
    return str(scenario), int(seed), str(strategy), int(depth), str(faults), int(max_steps)


def run_cell_tuple(cell: Sequence[Any]) -> tuple[Any, ...]:
    """``run_cell`` of one matrix tuple (``MATRIX_COLUMNS`` order), logging off: for process pools."""
    with logging_off():
        return run_cell(*_cell_args(cell))


@contextmanager
def logging_off() -> Iterator[None]:
    """Logging disabled for the block, then as it was: a caller in the driver's process (a test, a pool of
    one) gets its logs back."""
    previous = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        yield
    finally:
        logging.disable(previous)


def run_cells(cells: Iterable[Sequence[Any]], search_path: Sequence[str] = ()) -> Iterator[tuple[Any, ...]]:
    """The ``mapPartitions`` function: each matrix row (``MATRIX_COLUMNS`` order) -> its run's row.

    Logging is disabled first: actors log errors with tracebacks on purpose (a callback
    that raises is part of some scenarios), which would bury Spark's own output. The folders of
    ``search_path`` (``scenario_search_path``: where the driver found users' ``module:NAME``
    scenarios) go on the worker's ``sys.path`` first, so it imports the same modules.
    """
    sys.path.extend(folder for folder in search_path if folder not in sys.path)
    with logging_off():
        for cell in cells:
            yield run_cell(*_cell_args(cell))


def flatten(group: Sequence[Any]) -> Sequence[Any]:
    """``flatMap`` helper: a planned partition (a list of cells) -> its cells."""
    return group
