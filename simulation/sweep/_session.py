"""The SparkSession every sweep and trace analysis uses: embedded ``local[*]`` by default.

One place decides the settings, so the command line, the benchmark and the tests run
Spark the same way (``../shared/PLATFORM.md`` measured them): loopback-only networking
for a local master, no UI, no console progress (the command draws its own), Python
workers over unix sockets (7-10 ms per task instead of 25), no Arrow for Python UDFs
(pyarrow is not a dependency), and log4j at ERROR. A cluster is one ``--master`` (or
``CONVEYOR_SPARK_MASTER``) away; for it only the neutral settings apply (and loopback binding
for a master on 127.0.0.1), and conveyor's code is shipped to its executors (``ship_code``).

This is driver-side set-up, not row production, but it has no clock and no lock and
every entry point needs it, hence its home beside the pipeline.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from pyspark.sql import SparkSession

from ._shipping import check_py_files, ship_code

MASTER_ENV = "CONVEYOR_SPARK_MASTER"
"""Environment variable naming the Spark master when ``--master`` is not given."""
DEFAULT_MASTER = "local[*]"

_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n
logger.spark.name = org.apache.spark
logger.spark.level = error
logger.hadoop.name = org.apache.hadoop
logger.hadoop.level = error
"""


def submitted() -> bool:
    """Whether this driver was started by ``spark-submit`` (which then owns the master setting)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def default_master() -> str | None:
    """``$CONVEYOR_SPARK_MASTER`` if set; else ``spark-submit``'s own (``None``); else ``local[*]``."""
    chosen = os.environ.get(MASTER_ENV, "").strip()
    if chosen:
        return chosen
    return None if submitted() else DEFAULT_MASTER


def is_local(master: str | None) -> bool:
    """Whether ``master`` runs Spark inside this process (``local``, ``local[N]``, ``local[*]``)."""
    return master is not None and (master == "local" or master.startswith("local["))


def on_loopback(master: str | None) -> bool:
    """Whether ``master`` is a standalone cluster on this machine's loopback (``spark://127.0.0.1:PORT``)."""
    if master is None or not master.startswith("spark://"):
        return False
    hosts = {address.rsplit(":", 1)[0] for address in master.removeprefix("spark://").split(",")}
    return hosts <= {"127.0.0.1", "localhost"}


def _quiet_conf_dir() -> str:
    """A folder holding a log4j2.properties at level error (written once, reused)."""
    folder = Path(tempfile.gettempdir()) / f"conveyor-spark-conf-{os.getuid()}"
    folder.mkdir(exist_ok=True)
    target = folder / "log4j2.properties"
    if not target.exists() or target.read_text(encoding="utf-8") != _LOG4J2:
        target.write_text(_LOG4J2, encoding="utf-8")
    return str(folder)


def session_conf(master: str | None, *, testing: bool = False) -> dict[str, str]:
    """The Spark settings for ``master``; ``testing`` adds the small fixed sizes tests want."""
    conf = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.execution.pythonUDF.arrow.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
    }
    if is_local(master) or on_loopback(master):
        conf |= {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}
    if is_local(master):
        conf |= {
            "spark.python.unix.domain.socket.enabled": "true",
            "spark.sql.shuffle.partitions": str(max(2, os.cpu_count() or 2)),
        }
    if testing:
        conf |= {
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.driver.memory": "1g",
        }
    return conf


def spark_session(
    master: str | None = None,
    *,
    app_name: str = "conveyor",
    testing: bool = False,
    conf: Mapping[str, str] | None = None,
    py_files: Sequence[Path] = (),
) -> SparkSession:
    """Start (or join) the SparkSession for ``master`` (default: ``default_master()``).

    Sets, before the JVM starts and only where not already set: ``SPARK_CONF_DIR`` (quiet
    logging) and, for a local master, ``PYSPARK_PYTHON`` (this interpreter, so workers import the
    installed conveyor) and ``SPARK_LOCAL_IP=127.0.0.1`` (also for a cluster on loopback). On a
    cluster, conveyor's own code is shipped to the executors (``ship_code``), so the workers need
    only Python and conveyor's dependencies, with ``PYSPARK_PYTHON`` naming their interpreter.

    Args:
        master: ``local[*]``, ``local[2]``, ``spark://host:7077``, ...; ``None``: ``default_master()``
            (under ``spark-submit``, the master it was given).
        app_name: shown by the cluster manager.
        testing: small fixed parallelism and driver memory for the test suite.
        conf: extra settings, applied last.
        py_files: the user's own modules (.py, .zip, .egg) the executors import, e.g. scenarios.

    Raises:
        ValueError: a ``py_files`` entry that is not an existing .py, .zip or .egg file.
    """
    check_py_files(py_files)
    chosen = master or default_master()
    os.environ.setdefault("SPARK_CONF_DIR", _quiet_conf_dir())
    if is_local(chosen) or on_loopback(chosen):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if is_local(chosen):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if chosen is not None:
        builder = builder.master(chosen)
    for key, value in (session_conf(chosen, testing=testing) | dict(conf or {})).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    ship_code(session, py_files)
    return session
