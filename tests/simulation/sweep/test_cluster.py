"""The sweep on a standalone cluster: conveyor's code reaches executors that cannot import it otherwise.

The workers' Python is a fresh virtualenv that sees the driver's third-party packages (trio, attrs,
pykka, ...) through a ``.pth`` line but not conveyor (an editable install is a ``.pth`` of its own,
which a ``.pth`` line does not follow), so ``import conveyor`` fails there, as on a worker machine
that never installed it. The slow test starts a master and two workers on loopback, from a folder
outside the repo, without ``PYTHONPATH``, runs ``conveyor sweep --master spark://...`` in a driver
process of its own, and compares its rows with the same matrix's rows on ``local[2]``.
"""

from __future__ import annotations

import importlib
import io
import operator
import os
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from rich.console import Console
from typer.testing import CliRunner

from conveyor.cli import app
from conveyor.cli._sweep import run_sweep
from conveyor.simulation.scenarios import run_scenario
from conveyor.simulation.sweep import LocalSparkCluster, code_archive, ship_code
from conveyor.simulation.sweep._session import on_loopback, session_conf
from conveyor.simulation.sweep._shipping import STALE_ARCHIVE_S

REPO = Path(__file__).resolve().parents[3]
SCENARIOS = ("leases", "crash-recovery", "fairness")
SEEDS = 2
STRATEGIES = ("random", "pct")
PLANS = ("none", "pause")
RUNS = len(SCENARIOS) * SEEDS * len(STRATEGIES) * len(PLANS)
DRIVER_TIMEOUT_S = 600


def _outside_the_repo(path: Path) -> Path:
    assert not path.resolve().is_relative_to(REPO), f"{path} is inside the repo {REPO}"
    return path


@pytest.fixture(scope="module")
def worker_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Python with conveyor's dependencies and without conveyor: what a worker machine has."""
    folder = _outside_the_repo(tmp_path_factory.mktemp("worker-env"))
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder / "venv")], check=True, timeout=120)
    python = folder / "venv" / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True, timeout=60,
    ).stdout.strip()
    (Path(site) / "driver-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    return python


def _worker_environment() -> dict[str, str]:
    """A worker's environment: no PYTHONPATH, and no PATH entry inside the repo (its .venv/bin)."""
    path = os.pathsep.join(
        entry for entry in os.environ.get("PATH", "").split(os.pathsep)
        if entry and not Path(entry).resolve().is_relative_to(REPO)
    )
    return {"PATH": path, "HOME": os.environ.get("HOME", "/tmp"), "LANG": "C.UTF-8"}


def _run_in_worker_python(python: Path, code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(python), "-c", code], cwd=cwd, env=_worker_environment(), capture_output=True,
                          text=True, timeout=120, check=False)


def test_the_worker_python_cannot_import_conveyor_without_the_archive(worker_python: Path, tmp_path: Path) -> None:
    found = _run_in_worker_python(worker_python, "import trio, attrs, pykka; import conveyor", tmp_path)
    assert found.returncode == 1
    assert "No module named 'conveyor'" in found.stderr


def test_the_archive_runs_a_cell_in_a_python_without_conveyor(worker_python: Path, tmp_path: Path) -> None:
    archive = code_archive(tmp_path)
    code = (
        f"import sys; sys.path.insert(0, {str(archive)!r})\n"
        "from conveyor.simulation.sweep import run_cells\n"
        "import conveyor.simulation.sweep._rows as rows\n"
        "print(rows.__file__)\n"
        "(row,) = run_cells([('fairness', 1, 'random', 3, 'none', 500_000)])\n"
        "print(row[-2])\n"
    )
    ran = _run_in_worker_python(worker_python, code, tmp_path)
    assert ran.returncode == 0, ran.stderr
    module_file, trace_hash = ran.stdout.split()
    assert module_file == f"{archive}/conveyor/simulation/sweep/_rows.py"
    assert trace_hash == run_scenario("fairness", 1, strategy="random").report.trace_hash


def test_the_archive_holds_the_real_files_and_is_the_same_for_the_same_code(tmp_path: Path) -> None:
    archive = code_archive(tmp_path / "a")
    assert code_archive(tmp_path / "b").name == archive.name  # the name is the content's hash
    with zipfile.ZipFile(archive) as opened:
        names = set(opened.namelist())
        assert opened.read("conveyor/simulation/sweep/_rows.py") == (REPO / "simulation/sweep/_rows.py").read_bytes()
    assert {"conveyor/", "conveyor/runtime/__init__.py", "conveyor/actors/broker/__init__.py",
            "conveyor/simulation/py.typed"} <= names
    assert not any("__pycache__" in name or name.endswith(".pyc") for name in names)


def test_archives_of_older_code_unused_for_a_day_are_removed_when_a_new_one_is_written(tmp_path: Path) -> None:
    stale, recent, other = (tmp_path / "conveyor-0000000000000001.zip", tmp_path / "conveyor-0000000000000002.zip",
                            tmp_path / "notes.zip")
    for path in (stale, recent, other):
        path.write_bytes(b"old code")
    day_and_more = time.time() - STALE_ARCHIVE_S - 60
    os.utime(stale, (day_and_more, day_and_more))
    os.utime(other, (day_and_more, day_and_more))
    archive = code_archive(tmp_path)
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted([archive.name, recent.name, other.name])
    os.utime(archive, (day_and_more, day_and_more))
    assert code_archive(tmp_path) == archive  # used again: kept, and its time refreshed
    assert time.time() - archive.stat().st_mtime < STALE_ARCHIVE_S


def test_a_users_module_reaches_the_executors(spark: SparkSession, tmp_path: Path) -> None:
    module = tmp_path / "conveyor_test_user_module_7f3a.py"
    module.write_text("SHIPPED = 'from --py-files'\n", encoding="utf-8")
    ship_code(spark, [module], conveyor=False)
    found = (spark.sparkContext.parallelize([module.stem], 1).map(importlib.import_module)
             .map(operator.attrgetter("SHIPPED")).collect())
    assert found == ["from --py-files"]


def test_a_missing_py_file_is_refused_before_spark_starts(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["sweep", "--seeds", "1", "--py-files", str(tmp_path / "nowhere.py"),
                                      "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "--py-files" in result.output and "nowhere.py is not an existing .py, .zip or .egg file" in " ".join(
        result.output.replace("│", " ").split()
    )


def test_a_master_on_loopback_binds_the_driver_to_loopback() -> None:
    assert on_loopback("spark://127.0.0.1:7077") and on_loopback("spark://localhost:7077")
    assert not on_loopback("spark://10.0.0.5:7077") and not on_loopback("local[2]") and not on_loopback(None)
    assert session_conf("spark://127.0.0.1:7077")["spark.driver.bindAddress"] == "127.0.0.1"
    assert "spark.driver.bindAddress" not in session_conf("spark://10.0.0.5:7077")
    assert "spark.python.unix.domain.socket.enabled" not in session_conf("spark://127.0.0.1:7077")


def _rows(spark: SparkSession, runs_path: Path) -> dict[tuple[str, int, str, str], dict[str, object]]:
    rows = {}
    for row in spark.read.parquet(str(runs_path)).collect():
        values = row.asDict()
        rows[(str(values["scenario"]), int(values["seed"]), str(values["strategy"]), str(values["faults"]))] = values
    return rows


@pytest.mark.slow
def test_a_sweep_on_two_workers_gives_the_local_runs_rows(
    spark: SparkSession, worker_python: Path, tmp_path: Path
) -> None:
    folder = _outside_the_repo(tmp_path)
    matrix = ["--scenarios", ",".join(SCENARIOS), "--seeds", str(SEEDS), "--strategy", ",".join(STRATEGIES),
              "--faults", ",".join(PLANS)]
    with LocalSparkCluster(workers=2, cores=1, memory="512m", folder=folder / "cluster",
                           worker_environment=_worker_environment()) as cluster:
        driver_environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"} | {
            "PYSPARK_PYTHON": str(worker_python),  # the executors' interpreter, which lacks conveyor
            "PYSPARK_SUBMIT_ARGS": "--conf spark.executor.memory=512m pyspark-shell",  # fits a 512m worker
        }
        driver = subprocess.run(
            [str(Path(sys.executable).parent / "conveyor"), "sweep", "--master", cluster.master_url, *matrix,
             "--out", str(folder / "cluster-report")],
            cwd=folder, env=driver_environment, capture_output=True, text=True, timeout=DRIVER_TIMEOUT_S,
            check=False,
        )
        logs = ", ".join(str(path) for path in cluster.logs)
        assert driver.returncode == 0, f"{driver.stdout}\n{driver.stderr[-4000:]}\ndaemon logs: {logs}"
    printed = " ".join(driver.stdout.split())
    assert f"on {cluster.master_url} (2 cores)" in printed
    assert f"conveyor sweep: {RUNS} runs, 0 with violations" in printed
    # both workers ran an executor, each fetched this code's archive and finished tasks
    archive = code_archive(folder / "archive").name
    for worker in ("worker-1", "worker-2"):
        executors = list((folder / "cluster" / worker / "work").glob("app-*/*"))
        assert len(executors) == 1, executors
        assert (executors[0] / archive).is_file()
        assert "Finished task" in (executors[0] / "stderr").read_text(encoding="utf-8", errors="replace")

    local, _ = run_sweep(
        scenarios=",".join(SCENARIOS), seeds=SEEDS, strategies=",".join(STRATEGIES), faults=",".join(PLANS),
        out=folder / "local-report", console=Console(file=io.StringIO()), spark=spark,
    )
    cluster_rows = _rows(spark, folder / "cluster-report" / "runs.parquet")
    local_rows = _rows(spark, local.runs_path)
    assert len(cluster_rows) == len(local_rows) == RUNS
    assert cluster_rows == local_rows  # every column: no wall time is in a row
