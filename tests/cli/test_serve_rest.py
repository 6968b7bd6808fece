"""``conveyor serve --rest-port``: the REST face beside gRPC in the real process, one state behind both."""

from __future__ import annotations

import json
import re
import signal
import socket
import urllib.request

import pytest
from google.cloud import pubsub_v1
from typer.testing import CliRunner

from conveyor.cli import app
from tests.cli.test_serve import WAIT_S, Served


def test_rest_port_serves_the_same_topics_as_grpc(monkeypatch: pytest.MonkeyPatch) -> None:
    served = Served(["--host-port", "127.0.0.1:0", "--rest-port", "0"], background=False)
    try:
        address = served.wait_for(r"listening on (\S+)").group(1)
        rest = served.wait_for(r"REST on http://(\S+)/v1/", served.stdout).group(1)
        with urllib.request.urlopen(f"http://{rest}/", timeout=WAIT_S) as response:
            assert response.read() == b"Ok"
        request = urllib.request.Request(f"http://{rest}/v1/projects/p/topics/made-over-rest", method="PUT")
        with urllib.request.urlopen(request, timeout=WAIT_S) as response:
            assert json.loads(response.read()) == {"name": "projects/p/topics/made-over-rest"}
        monkeypatch.setenv("PUBSUB_EMULATOR_HOST", address)
        publisher = pubsub_v1.PublisherClient()
        assert [t.name for t in publisher.list_topics(project="projects/p")] == ["projects/p/topics/made-over-rest"]
        publisher.stop()
        served.process.send_signal(signal.SIGTERM)
        assert served.wait() == 0, served.stderr
    finally:
        served.kill()


def test_a_taken_rest_port_is_refused_naming_the_option() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(app, ["serve", "--host-port", "127.0.0.1:0", "--rest-port", str(port)])
    assert result.exit_code == 2
    flat = " ".join(re.sub(r"[│╭╮╰╯─]", " ", result.output).split())
    assert re.search(rf"--rest-port.*could not listen on 127\.0\.0\.1:{port}", flat), result.output


def test_a_rest_port_out_of_range_is_refused() -> None:
    result = CliRunner().invoke(app, ["serve", "--rest-port", "70000"])
    assert result.exit_code == 2
    assert "'--rest-port': Input should be less than or equal to 65535" in " ".join(
        re.sub(r"[│╭╮╰╯─]", " ", result.output).split()), result.output
