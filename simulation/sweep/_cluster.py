"""A standalone Spark cluster on loopback for tests: one master and N small workers, stopped at the end.

Each daemon is a JVM started with the ``spark-class`` launcher the pyspark package ships (no
Spark distribution needed), on free 127.0.0.1 ports, in its own process group, with its output
in a log file of the cluster's folder. Workers offer one core and a little memory each and run
from their own folder with ``PYTHONPATH`` removed from their environment, as a worker on another
machine would: they see no conveyor source tree. Every wait is bounded; past it the error quotes
the daemon's log.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Self

import pyspark

SPARK_HOME = Path(pyspark.__file__).resolve().parent
"""The pip package is a Spark home: ``bin/spark-class`` and ``jars/``."""
SPARK_CLASS = SPARK_HOME / "bin" / "spark-class"
POLL_S = 0.2
"""How often a starting cluster is asked whether it is up."""
STOP_WAIT_S = 15.0
"""How long a daemon has to exit on SIGTERM before it gets SIGKILL."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class _Daemon:
    """One Spark daemon JVM: its command, folder, log file and process."""

    def __init__(self, name: str, folder: Path, command: list[str], environment: Mapping[str, str]) -> None:
        self.name = name
        self.folder = folder
        self.log_path = folder / f"{name}.log"
        self.command = command
        self.environment = dict(environment)
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=self.folder,
                env=self.environment, start_new_session=True,
            )

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        """SIGTERM to the daemon's process group (its executors and Python workers too), SIGKILL past the wait."""
        process = self.process
        if process is None:
            return
        for signum, wait in ((signal.SIGTERM, STOP_WAIT_S), (signal.SIGKILL, STOP_WAIT_S)):
            try:
                os.killpg(process.pid, signum)
            except ProcessLookupError:
                break
            try:
                process.wait(wait)
            except subprocess.TimeoutExpired:
                continue
            with contextlib.suppress(ProcessLookupError):  # the JVM is gone; its children may not be
                os.killpg(process.pid, signal.SIGKILL)
            break

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


class LocalSparkCluster:
    """A Spark standalone master and ``workers`` workers on 127.0.0.1, for tests and trying the cluster path.

    ``with LocalSparkCluster(workers=2) as cluster: ... cluster.master_url ...``; the folder (logs,
    work directories) is a new temporary one unless given, and removed at the end when it was.

    Args:
        workers: how many workers.
        cores: cores each worker offers.
        memory: memory each worker offers its executors (``512m``, ``1g``); an application's
            ``spark.executor.memory`` (1g by default) must fit in it.
        daemon_memory: the heap of the master and worker JVMs themselves.
        folder: where the logs and work directories go.
        worker_environment: replaces the workers' environment (``PATH`` and ``JAVA_HOME`` are kept).
    """

    def __init__(
        self,
        *,
        workers: int = 2,
        cores: int = 1,
        memory: str = "1g",
        daemon_memory: str = "256m",
        folder: Path | None = None,
        worker_environment: Mapping[str, str] | None = None,
    ) -> None:
        if workers < 1:
            msg = f"workers must be 1 or more, not {workers}"
            raise ValueError(msg)
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.daemon_memory = daemon_memory
        self._given_folder = folder
        self.folder = folder or Path(tempfile.mkdtemp(prefix="conveyor-spark-cluster-"))
        self.worker_environment = worker_environment
        self.port = free_port()
        self.ui_port = free_port()
        self._daemons: list[_Daemon] = []

    @property
    def master_url(self) -> str:
        """What ``--master`` takes: ``spark://127.0.0.1:PORT``."""
        return f"spark://127.0.0.1:{self.port}"

    @property
    def logs(self) -> list[Path]:
        """Each daemon's log file (master first)."""
        return [daemon.log_path for daemon in self._daemons]

    def _environment(self, base: Mapping[str, str]) -> dict[str, str]:
        kept = {key: os.environ[key] for key in ("PATH", "JAVA_HOME", "HOME") if key in os.environ}
        conf_dir = self.folder / "conf"
        conf_dir.mkdir(parents=True, exist_ok=True)
        environment = {**kept, **base}
        environment.pop("PYTHONPATH", None)
        return environment | {
            "SPARK_HOME": str(SPARK_HOME),
            "SPARK_CONF_DIR": str(conf_dir),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_DAEMON_MEMORY": self.daemon_memory,
            "SPARK_LOG_DIR": str(self.folder),
        }

    def alive_workers(self) -> int:
        """How many workers the master counts as alive (0 while its web UI does not answer)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as answer:
                state = json.loads(answer.read())
        except (OSError, urllib.error.URLError, ValueError):
            return 0
        return int(state.get("aliveworkers", 0))

    def start(self, timeout: float = 90.0) -> Self:
        """Start the master, then the workers, and wait until all workers are registered.

        Raises:
            RuntimeError: ``spark-class`` or ``java`` is missing, or a daemon exited (its log quoted).
            TimeoutError: not every worker registered within ``timeout`` seconds (the cluster is stopped).
        """
        if shutil.which("java") is None:
            msg = "java is not on the PATH, so Spark cannot run: run `make java`"
            raise RuntimeError(msg)
        if not SPARK_CLASS.is_file():
            msg = f"{SPARK_CLASS} is missing: is pyspark installed?"
            raise RuntimeError(msg)
        master = _Daemon(
            "master", self.folder / "master",
            [str(SPARK_CLASS), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", str(self.port), "--webui-port", str(self.ui_port)],
            self._environment(os.environ),
        )
        self._daemons.append(master)
        master.start()
        worker_base = os.environ if self.worker_environment is None else self.worker_environment
        for index in range(self.workers):
            worker = _Daemon(
                f"worker-{index + 1}", self.folder / f"worker-{index + 1}",
                [str(SPARK_CLASS), "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                 "--webui-port", str(free_port()), "--cores", str(self.cores), "--memory", self.memory,
                 "--work-dir", str(self.folder / f"worker-{index + 1}" / "work"), self.master_url],
                self._environment(worker_base),
            )
            self._daemons.append(worker)
            worker.start()
        try:
            self._wait_registered(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_registered(self, timeout: float) -> None:
        polls_left = int(timeout / POLL_S)
        while self.alive_workers() < self.workers:
            for daemon in self._daemons:
                if not daemon.running:
                    msg = f"Spark {daemon.name} exited at start; its log ({daemon.log_path}):\n{daemon.log_tail()}"
                    raise RuntimeError(msg)
            if polls_left <= 0:
                tails = "\n".join(f"--- {d.name} ({d.log_path}):\n{d.log_tail(10)}" for d in self._daemons)
                msg = f"{self.workers} Spark workers did not register within {timeout} s:\n{tails}"
                raise TimeoutError(msg)
            polls_left -= 1
            time.sleep(POLL_S)

    def stop(self) -> None:
        """Stop the workers, then the master; remove the folder when this cluster made it."""
        for daemon in reversed(self._daemons):
            daemon.stop()
        self._daemons.clear()
        if self._given_folder is None:
            shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()
