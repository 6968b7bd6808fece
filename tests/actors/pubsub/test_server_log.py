"""What ``PubSubServer`` logs: a debug line per request, INFO lines for start, drain and stop."""

from __future__ import annotations

import logging
import re

import pytest
from google.api_core import exceptions
from google.cloud import pubsub_v1

from conveyor.actors.pubsub import PubSubServer
from tests.actors.pubsub.helpers import topic


def _lines(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "conveyor.pubsub" and r.levelno == level]


def test_each_request_is_one_debug_line_with_method_resource_outcome_and_duration(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.DEBUG, logger="conveyor.pubsub")
    with PubSubServer() as server:
        monkeypatch.setenv("PUBSUB_EMULATOR_HOST", server.address)
        publisher = pubsub_v1.PublisherClient()
        publisher.create_topic(name=topic("logged"))
        ids = [publisher.publish(topic("logged"), b"x").result(10) for _ in range(2)]
        with pytest.raises(exceptions.NotFound):
            publisher.get_topic(topic="projects/demo/topics/missing", retry=None)
        with pytest.raises(exceptions.InvalidArgument):
            publisher.get_topic(topic="projects/demo/topics/" + "x" * 300, retry=None)
        publisher.stop()
    lines = _lines(caplog, logging.DEBUG)
    number = r"\d+\.\d ms"
    assert any(re.fullmatch(rf"CreateTopic projects/demo/topics/logged OK {number}", line) for line in lines), lines
    for message_id in ids:
        assert any(re.fullmatch(rf"Publish projects/demo/topics/logged OK {number}: 1 message, "
                                rf"ids={message_id}\.\.{message_id}", line) for line in lines), lines
    assert any(re.fullmatch(rf"GetTopic projects/demo/topics/missing NOT_FOUND {number}", line) for line in lines)
    # A long resource is logged as a short prefix, with the status the call ended with.
    long_name = next(line for line in lines if line.startswith("GetTopic projects/demo/topics/xxx"))
    assert re.fullmatch(rf"GetTopic projects/demo/topics/x{{99}}\.\.\. INVALID_ARGUMENT {number}", long_name)


def test_start_drain_and_stop_are_info_lines(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="conveyor.pubsub")
    with PubSubServer() as server:
        address = server.address
    lines = _lines(caplog, logging.INFO)
    assert lines == [
        f"conveyor Pub/Sub front listening on {address}",
        "draining: 0 open streams end with UNAVAILABLE, calls in flight get 2.0 s to finish",
        f"stopped listening on {address}",
    ]
