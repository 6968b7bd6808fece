"""The Spark sweep and trace analysis: many simulated runs, and traces larger than memory, on Spark.

``execute_sweep`` runs a matrix of scenario x seed x strategy x fault plan as Spark tasks
(each task many runs, through ``mapPartitions``), writes one ``RunReport`` row per run to
Parquet and aggregates with Spark SQL; ``write_report`` renders report.md with plots.
``analyze_traces`` checks recorded traces (JSON Lines or Parquet) for the broker's order,
accounting and fairness with Spark aggregations and window functions. On a cluster, ``ship_code``
gives the executors conveyor's own code as a zip (``LocalSparkCluster`` starts one on loopback for tests).

Everything but the matrix (``SweepCell``, ``build_matrix``, the parsers) and the in-process trace
analysis (``analyze_traces_in_process``: the same verdicts on small traces, no Spark start-up)
needs the ``spark`` extra and is imported when first used.
"""

import typing

from conveyor.runtime.extras import lazy_exports as _lazy_exports

from ._in_process import analyze_traces_in_process as analyze_traces_in_process
from ._matrix import COST_HINTS_MS as COST_HINTS_MS
from ._matrix import DEFAULT_PLAN as DEFAULT_PLAN
from ._matrix import SweepCell as SweepCell
from ._matrix import build_matrix as build_matrix
from ._matrix import parse_fault_plans as parse_fault_plans
from ._matrix import parse_scenarios as parse_scenarios
from ._matrix import parse_strategies as parse_strategies
from ._matrix import partition_count as partition_count
from ._matrix import plan_partitions as plan_partitions
from ._verdicts import QueueVerdict as QueueVerdict
from ._verdicts import TraceAnalysis as TraceAnalysis
from ._verdicts import is_parquet_trace as is_parquet_trace

if typing.TYPE_CHECKING:
    from ._cluster import LocalSparkCluster as LocalSparkCluster
    from ._pipeline import FirstFailure as FirstFailure
    from ._pipeline import GroupSummary as GroupSummary
    from ._pipeline import SweepOutcome as SweepOutcome
    from ._pipeline import SweepSpec as SweepSpec
    from ._pipeline import execute_sweep as execute_sweep
    from ._pipeline import matrix_frame as matrix_frame
    from ._pipeline import runs_frame as runs_frame
    from ._pipeline import summarize as summarize
    from ._report import SUMMARY_HEADER as SUMMARY_HEADER
    from ._report import DepthPoint as DepthPoint
    from ._report import LatencySpread as LatencySpread
    from ._report import ReportDraft as ReportDraft
    from ._report import latency_spreads as latency_spreads
    from ._report import prepare_report as prepare_report
    from ._report import queue_depth_series as queue_depth_series
    from ._report import summary_cells as summary_cells
    from ._report import write_report as write_report
    from ._rows import MATRIX_SCHEMA as MATRIX_SCHEMA
    from ._rows import ROW_SCHEMA as ROW_SCHEMA
    from ._rows import logging_off as logging_off
    from ._rows import run_cell as run_cell
    from ._rows import run_cell_tuple as run_cell_tuple
    from ._rows import run_cells as run_cells
    from ._rows import sweep_replay_command as sweep_replay_command
    from ._session import MASTER_ENV as MASTER_ENV
    from ._session import default_master as default_master
    from ._session import spark_session as spark_session
    from ._shipping import code_archive as code_archive
    from ._shipping import ship_code as ship_code
    from ._traces import analyze_traces as analyze_traces
    from ._traces import read_trace as read_trace
    from ._traces import write_trace_parquet as write_trace_parquet
else:  # pyspark comes with the ``spark`` extra: the matrix and its parsers above need none
    __getattr__ = _lazy_exports(__name__, "spark", {
        "._pipeline": (
            "FirstFailure", "GroupSummary", "SweepOutcome", "SweepSpec", "execute_sweep", "matrix_frame", "runs_frame",
            "summarize",
        ),
        "._report": (
            "SUMMARY_HEADER", "DepthPoint", "LatencySpread", "ReportDraft", "latency_spreads", "prepare_report",
            "queue_depth_series", "summary_cells", "write_report",
        ),
        "._rows": (
            "MATRIX_SCHEMA", "ROW_SCHEMA", "logging_off", "run_cell", "run_cell_tuple", "run_cells",
            "sweep_replay_command",
        ),
        "._session": ("MASTER_ENV", "default_master", "spark_session"),
        "._shipping": ("code_archive", "ship_code"),
        "._cluster": ("LocalSparkCluster",),
        "._traces": ("analyze_traces", "read_trace", "write_trace_parquet"),
    })

__all__ = [
    "COST_HINTS_MS",
    "DEFAULT_PLAN",
    "MASTER_ENV",
    "MATRIX_SCHEMA",
    "ROW_SCHEMA",
    "SUMMARY_HEADER",
    "DepthPoint",
    "FirstFailure",
    "GroupSummary",
    "LatencySpread",
    "LocalSparkCluster",
    "QueueVerdict",
    "ReportDraft",
    "SweepCell",
    "SweepOutcome",
    "SweepSpec",
    "TraceAnalysis",
    "analyze_traces",
    "analyze_traces_in_process",
    "build_matrix",
    "code_archive",
    "default_master",
    "execute_sweep",
    "is_parquet_trace",
    "latency_spreads",
    "logging_off",
    "matrix_frame",
    "parse_fault_plans",
    "parse_scenarios",
    "parse_strategies",
    "partition_count",
    "plan_partitions",
    "prepare_report",
    "queue_depth_series",
    "read_trace",
    "run_cell",
    "run_cell_tuple",
    "run_cells",
    "runs_frame",
    "ship_code",
    "spark_session",
    "summarize",
    "summary_cells",
    "sweep_replay_command",
    "write_report",
    "write_trace_parquet",
]
