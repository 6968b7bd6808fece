"""A sweep of a scenario from the user's own module: Spark's workers import it from where the driver found it."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from rich.console import Console

from conveyor.cli._sweep import run_sweep
from conveyor.simulation.scenarios import run_scenario, scenario_search_path
from conveyor.simulation.sweep import SweepSpec, execute_sweep

USER_BANK = Path(__file__).resolve().parents[1] / "user_bank.py"


def test_the_workers_import_a_users_module_found_outside_their_path(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A folder only this (driver) process has on its sys.path: the workers start with their own.
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "swept_bank.py").write_text(USER_BANK.read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.syspath_prepend(str(folder))
    name = "swept_bank:bank"
    assert scenario_search_path([name, "fairness"]) == (str(folder.resolve()),)
    spec = SweepSpec(scenarios=(name,), seeds=4, strategies=("random",), partitions_per_core=1)
    outcome = execute_sweep(spark, spec, tmp_path / "out")
    rows = {row["seed"]: row for row in spark.read.parquet(str(outcome.runs_path)).collect()}
    for seed in range(4):
        expected = run_scenario(name, seed).report
        assert list(rows[seed]["violations"]) == list(expected.violations), rows[seed]["violations"]
        assert rows[seed]["trace_hash"] == expected.trace_hash
    assert outcome.failed == sum(1 for seed in range(4) if not run_scenario(name, seed).report.ok) > 0
    assert outcome.failures[0].replay_command.startswith("conveyor replay swept_bank:bank --seed ")
    sys.modules.pop("swept_bank", None)


def test_a_given_session_ships_the_users_py_files_to_its_workers(spark: SparkSession, tmp_path: Path) -> None:
    # run_sweep(spark=...) once ignored py_files: the workers could not import what the user named
    module = tmp_path / "shipped_helper_7f3a.py"
    module.write_text("ANSWER = 42\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"--py-files: .*missing\.py is not an existing"):
        run_sweep(scenarios="fairness", seeds=1, spark=spark, py_files=[tmp_path / "missing.py"],
                  out=tmp_path / "refused", console=Console(file=io.StringIO()))
    assert not (tmp_path / "refused").exists()  # refused before anything ran
    run_sweep(scenarios="fairness", seeds=1, strategies="random", spark=spark, py_files=[module],
              out=tmp_path / "out", console=Console(file=io.StringIO()))
    imported = spark.sparkContext.parallelize([0], 1).map(
        lambda _: __import__("shipped_helper_7f3a").ANSWER).collect()
    assert imported == [42]
    sys.modules.pop("shipped_helper_7f3a", None)
