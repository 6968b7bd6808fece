"""``kazoo_client``'s one-call ``select``: kazoo's answers, and kazoo's selector past select's limit."""

from __future__ import annotations

import os
import resource
import socket
from collections.abc import Iterator

import pytest

from conveyor.actors.zookeeper import kazoo_client

pytest.importorskip("kazoo")


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    left, right = socket.socketpair()
    yield left, right
    left.close()
    right.close()


def _select(*args: object) -> tuple[list[object], list[object], list[object]]:
    client = kazoo_client(hosts="127.0.0.1:1")  # never started: only its handler is used
    return client.handler.select(*args)  # type: ignore[no-any-return]


def test_a_socket_with_data_is_readable_and_one_without_is_not(pair: tuple[socket.socket, socket.socket]) -> None:
    left, right = pair
    assert _select([left, right], [], [], 0) == ([], [], [])
    right.send(b"x")
    assert _select([left, right], [], [], 0.5)[0] == [left]
    assert _select([], [left], [], 0.5)[1] == [left]


def test_a_descriptor_past_select_limit_falls_back_to_kazoo_selector(pair: tuple[socket.socket, socket.socket]) -> None:
    left, right = pair
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft <= 1100:
        pytest.skip(f"open-file limit {soft} too low for a descriptor past FD_SETSIZE")
    high = os.dup2(left.fileno(), 1100)
    far = socket.socket(fileno=high)
    try:
        right.send(b"x")
        assert _select([far], [], [], 0.5)[0] == [far]
    finally:
        far.close()


def test_a_closed_socket_is_refused_as_kazoo_refuses_it(pair: tuple[socket.socket, socket.socket]) -> None:
    left, _ = pair
    closed = socket.socket()
    closed.close()
    with pytest.raises(TypeError, match="Invalid file descriptor"):  # kazoo's own refusal
        _select([left, closed], [], [], 0)
