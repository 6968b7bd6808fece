"""pytest fixtures for tests that use conveyor as their Pub/Sub emulator.

Installing conveyor registers this plugin through its ``pytest11`` entry point: no conftest line
is needed. Every fixture that gives a test a server points ``PUBSUB_EMULATOR_HOST`` at it for that
test and restores the variable afterwards, so Google's client never goes to the real service.

* ``pubsub_server``: a fresh ``PubSubServer`` on a free loopback port for one test;
* ``pubsub_emulator``: the same, as its ``host:port``;
* ``pubsub_shared_server``: one server for the whole session, emptied of every topic and
  subscription before each test (cheaper than a server per test; streams a test left open end).

The server is imported when a fixture first starts one: without the ``pubsub`` extra, loading the
plugin costs nothing and only a test that asks for a server fails, saying which extra to install.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ._server import PubSubServer

EMULATOR_HOST = "PUBSUB_EMULATOR_HOST"


def _new_server() -> PubSubServer:
    """A ``PubSubServer``, imported now (``MissingExtra`` naming ``pubsub`` when grpc is not installed)."""
    from . import PubSubServer

    return PubSubServer()


def _pointed_at(server: PubSubServer) -> Iterator[PubSubServer]:
    """Yield ``server`` with ``PUBSUB_EMULATOR_HOST`` set to it; the variable is restored (or unset) after."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(EMULATOR_HOST, server.address)
        yield server


@pytest.fixture
def pubsub_server() -> Iterator[PubSubServer]:
    """A running ``PubSubServer`` on a free loopback port for this test, ``PUBSUB_EMULATOR_HOST`` set to it."""
    with _new_server() as server:
        yield from _pointed_at(server)


@pytest.fixture
def pubsub_emulator(pubsub_server: PubSubServer) -> str:
    """``host:port`` of a fresh server, with ``PUBSUB_EMULATOR_HOST`` set to it for this test."""
    return pubsub_server.address


@pytest.fixture(scope="session")
def _pubsub_session_server() -> Iterator[PubSubServer]:
    """The server behind ``pubsub_shared_server``, started once (ask for that fixture, not this one)."""
    with _new_server() as server:
        yield server


@pytest.fixture
def pubsub_shared_server(_pubsub_session_server: PubSubServer) -> Iterator[PubSubServer]:
    """The session's one server, with no topic or subscription left by an earlier test; env var set."""
    _pubsub_session_server.reset()
    yield from _pointed_at(_pubsub_session_server)
