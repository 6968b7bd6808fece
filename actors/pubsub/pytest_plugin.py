"""pytest fixtures for tests that use conveyor as their Pub/Sub emulator.

Enable them with ``pytest_plugins = ["conveyor.actors.pubsub.pytest_plugin"]`` in a top-level
``conftest.py``. ``pubsub_emulator`` starts a ``PubSubServer`` on a free loopback port and points
the official client at it (``PUBSUB_EMULATOR_HOST``) for the duration of one test.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ._server import PubSubServer


@pytest.fixture
def pubsub_server() -> Iterator[PubSubServer]:
    """A running ``PubSubServer`` on a free loopback port, closed after the test."""
    with PubSubServer() as server:
        yield server


@pytest.fixture
def pubsub_emulator(pubsub_server: PubSubServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """``host:port`` of a fresh server, with ``PUBSUB_EMULATOR_HOST`` set to it for this test."""
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", pubsub_server.address)
    yield pubsub_server.address
