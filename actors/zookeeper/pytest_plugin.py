"""pytest fixtures for tests against a real ZooKeeper: a private server on loopback, started once.

Installing conveyor registers this plugin through its ``pytest11`` entry point. ZooKeeper itself
comes from Debian's ``zookeeper`` package (``make zookeeper``; ``make test`` runs it first). A test
that asks for a server where none can start *fails* with the reason and the fix: it never skips,
so a machine without ZooKeeper cannot pass the suite by leaving these tests out.

* ``zookeeper_server``: one ``LocalZooKeeper`` for the whole session (tick 500 ms, no fsync);
  ``kill()`` / ``start()`` / ``restart()`` it for crash tests.
* ``zookeeper``: that server's ``host:port``, serving again if an earlier test left it down.
* ``zookeeper_ensemble``: a three-node ``LocalZooKeeperEnsemble`` for the session (for slow tests),
  every member running again before each test.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypeVar

import pytest

from ._local import LocalZooKeeper, LocalZooKeeperEnsemble, ZooKeeperNotInstalled

_Local = TypeVar("_Local", LocalZooKeeper, LocalZooKeeperEnsemble)


def _running(local: _Local) -> Iterator[_Local]:
    """Start ``local`` for a session fixture and close it at the end; without ZooKeeper installed the
    test fails with the fix (``make zookeeper``), it never skips."""
    try:
        local.start()
    except ZooKeeperNotInstalled as missing:
        local.close()
        pytest.fail(str(missing), pytrace=False)
    try:
        yield local
    finally:
        local.close()


@pytest.fixture(scope="session")
def zookeeper_server() -> Iterator[LocalZooKeeper]:
    """A standalone ZooKeeper on a free loopback port for the session; stopped by its pid at the end."""
    yield from _running(LocalZooKeeper(force_sync=False))


@pytest.fixture
def zookeeper(zookeeper_server: LocalZooKeeper) -> str:
    """``host:port`` of the session's ZooKeeper, started again first if a test before left it down (killed, or
    paused with SIGSTOP by a test that failed before killing it)."""
    if not zookeeper_server.serving:
        zookeeper_server.restart()
    return zookeeper_server.address


@pytest.fixture(scope="session")
def _zookeeper_session_ensemble() -> Iterator[LocalZooKeeperEnsemble]:
    """The ensemble behind ``zookeeper_ensemble``, started once (ask for that fixture, not this one)."""
    yield from _running(LocalZooKeeperEnsemble(3, force_sync=False))


@pytest.fixture
def zookeeper_ensemble(_zookeeper_session_ensemble: LocalZooKeeperEnsemble) -> LocalZooKeeperEnsemble:
    """A three-node ensemble on loopback with every member running (members killed by a test come back)."""
    ensemble = _zookeeper_session_ensemble
    for n in range(len(ensemble.ports)):
        if not ensemble.running(n):
            ensemble.start_member(n)
    return ensemble
