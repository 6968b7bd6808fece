"""Clients of the official library pointed at a fresh server per test.

The shipped fixtures (``pubsub_emulator``, ``pubsub_server``, ``pubsub_shared_server``) come from
conveyor's pytest plugin, registered by its ``pytest11`` entry point: no import is needed here.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from google.cloud import pubsub_v1


@pytest.fixture
def publisher(pubsub_emulator: str) -> Iterator[pubsub_v1.PublisherClient]:
    """An official publisher client on the test's server (batches flush within 10 ms)."""
    client = pubsub_v1.PublisherClient(
        batch_settings=pubsub_v1.types.BatchSettings(max_latency=0.01),
        publisher_options=pubsub_v1.types.PublisherOptions(enable_message_ordering=True),
    )
    yield client
    client.stop()


@pytest.fixture
def subscriber(pubsub_emulator: str) -> Iterator[pubsub_v1.SubscriberClient]:
    """An official subscriber client on the test's server."""
    client = pubsub_v1.SubscriberClient()
    yield client
    client.close()
