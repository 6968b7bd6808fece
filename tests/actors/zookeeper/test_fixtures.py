"""The ZooKeeper fixtures: a test that needs a server fails where none can start, it never skips."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conveyor.actors.zookeeper import LocalZooKeeper, zookeeper_missing


def test_without_java_a_test_that_needs_zookeeper_errors_with_the_fix(tmp_path: Path) -> None:
    (tmp_path / "test_needs_zookeeper.py").write_text("def test_it(zookeeper):\n    assert zookeeper\n")
    env = {**os.environ, "PATH": str(tmp_path)}  # no java on it
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120, check=False)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "1 error" in run.stdout and "skipped" not in run.stdout, run.stdout
    assert "java is not on the PATH" in run.stdout and "make zookeeper" in run.stdout, run.stdout


def test_zookeeper_is_installed_here() -> None:
    assert zookeeper_missing() is None  # `make test` installs it; CI never runs the suite without it


def test_a_killed_server_comes_back_on_its_port_and_data(zookeeper_server: LocalZooKeeper) -> None:
    port, pid = zookeeper_server.port, zookeeper_server.pid
    zookeeper_server.restart()
    assert zookeeper_server.port == port and zookeeper_server.pid not in {None, pid}
    assert (zookeeper_server.directory / "data" / "version-2").is_dir()


def test_a_server_left_paused_is_serving_again_for_the_next_test(zookeeper_server: LocalZooKeeper,
                                                                 request: pytest.FixtureRequest) -> None:
    pid = zookeeper_server.pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)  # as a crash test that failed between its pause and its kill
    assert not zookeeper_server.serving
    address = request.getfixturevalue("zookeeper")
    assert address == zookeeper_server.address and zookeeper_server.serving and zookeeper_server.pid != pid
