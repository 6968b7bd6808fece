"""The server-wide memory budget (issue 15, item 3): publishes are refused before the process grows past it."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from google.api_core import exceptions
from google.cloud import pubsub_v1
from hypothesis import example, given
from hypothesis import strategies as st
from typer.testing import CliRunner

from conveyor.actors.pubsub import PubSubServer, parse_byte_size
from conveyor.actors.pubsub._memory import MemoryBudget
from conveyor.cli import app
from tests.actors.pubsub.helpers import pull_exactly, pull_nothing, subscription, topic
from tests.cli.test_serve import Served

MB = 1_000_000


@pytest.mark.parametrize(
    ("text", "size"),
    [("512MB", 512 * MB), ("2GiB", 2 * 2**30), ("1.5 GB", 1_500_000_000), ("1048576", 2**20), ("64kib", 65_536),
     ("10 B", 10), (4096, 4096)],
)
def test_sizes_are_read_with_decimal_and_binary_units(text: str | int, size: int) -> None:
    assert parse_byte_size(text) == size


@pytest.mark.parametrize("bad", ["", "12XB", "MB", "-5MB", "0", 0, -1, True, 1.5, "1e3MB", "0.1B"])
def test_a_bad_size_is_refused_naming_the_value_and_the_units(bad: object) -> None:
    with pytest.raises(ValueError, match=r"max_memory must be .*bytes.*KB, MB, GB, TB.*KiB, MiB, GiB, TiB") as refused:
        parse_byte_size(bad)  # type: ignore[arg-type]
    assert repr(bad)[:20] in str(refused.value)


def test_the_budget_refuses_what_would_pass_it_after_giving_free_memory_back() -> None:
    resident = [90 * MB]
    trims: list[int] = []

    def trim() -> None:
        trims.append(1)
        resident[0] -= 5 * MB  # the allocator had 5 MB free to give back

    budget = MemoryBudget(100 * MB, resident=lambda: resident[0], trim=trim, clock=lambda: 0.0)
    assert budget.refusal(request_bytes=1 * MB, messages=10) is None  # 90 + 3 + a little: fits
    assert trims == []
    assert budget.refusal(request_bytes=4 * MB, messages=10) is None  # 103.07 MB: fits once 5 MB went back
    assert trims == [1]
    refused = budget.refusal(request_bytes=8 * MB, messages=10)  # no second trim within a second
    assert refused is not None
    assert "max_memory = 100,000,000 bytes (100.0 MB)" in refused
    assert "85.0 MB resident" in refused
    assert trims == [1]


@given(headroom=st.integers(0, 400).map(lambda tenths: tenths * MB // 10),
       request_bytes=st.integers(1, 100).map(lambda tenths: tenths * MB // 10), messages=st.integers(1, 1000))
@example(headroom=20 * MB, request_bytes=9 * MB, messages=1)  # fits counted twice, not three times
def test_an_accepted_publish_leaves_room_for_its_copy_and_the_next_request_of_its_size(
        headroom: int, request_bytes: int, messages: int) -> None:
    """The next request is received and parsed (two copies) before its own check can refuse it: room is kept."""
    held = 100 * MB - headroom
    budget = MemoryBudget(100 * MB, resident=lambda: held, trim=None, clock=lambda: 0.0)
    if budget.refusal(request_bytes, messages) is None:
        stored, next_received = request_bytes, 2 * request_bytes
        assert held + stored + next_received + 1024 * messages <= budget.limit


def test_a_server_needs_a_sensible_budget() -> None:
    with pytest.raises(ValueError, match="max_memory must be"):
        PubSubServer(max_memory="lots")
    with pytest.raises(ValueError, match=r"max_memory .* is below what the process holds already"):
        PubSubServer(max_memory=1024)


def _resident_of(pid: int) -> int:
    """The resident size of process ``pid`` (Linux), as the server reads its own."""
    with open(f"/proc/{pid}/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.fixture
def small_budget(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Served, int]]:
    """``conveyor serve`` in a process of its own, as an emulator runs, with 64 MiB of budget above its size.

    The size a fresh server settles at is measured on one started without a budget; the budget
    leaves 64 MiB above it. A process of its own, because in the test's process the client's own
    copies of what it publishes would count against the server's budget.
    """
    probe = Served(["--host-port", "127.0.0.1:0"], background=False)
    try:
        probe.wait_for(r"on (127\.0\.0\.1:\d+);", probe.stdout)
        limit = _resident_of(probe.pid) + 64 * 2**20
    finally:
        probe.kill()
    served = Served(["--host-port", "127.0.0.1:0", "--max-memory", str(limit)], background=False)
    try:
        address = served.wait_for(r"on (127\.0\.0\.1:\d+);", served.stdout).group(1)
        monkeypatch.setenv("PUBSUB_EMULATOR_HOST", address)
        yield served, limit
    finally:
        served.kill()


def test_publishes_are_refused_before_the_process_grows_past_the_budget(small_budget: tuple[Served, int]) -> None:
    served, limit = small_budget
    publisher = pubsub_v1.PublisherClient()
    subscriber = pubsub_v1.SubscriberClient()
    try:
        publisher.create_topic(name=topic("hoard"))
        subscriber.create_subscription(name=subscription("hoard-sub"), topic=topic("hoard"))
        four = [{"data": os.urandom(MB)} for _ in range(4)]
        stored = 0
        with pytest.raises(exceptions.ResourceExhausted) as refused:
            for _ in range(40):  # 160 MB at most: far past the budget
                publisher.api.publish(topic=topic("hoard"), messages=four, retry=None)
                stored += 4
        assert _resident_of(served.pid) <= limit  # refused before the server grew past the budget
        assert f"max_memory = {limit:,} bytes" in str(refused.value.message)
        assert "Publish: the server's memory budget is spent" in str(refused.value.message)
        assert stored >= 8  # what fitted was taken

        # Everything taken is deliverable, nothing of the refused request was stored.
        taken = 0
        while taken < stored:
            received = pull_exactly(subscriber, subscription("hoard-sub"), min(3, stored - taken))
            subscriber.acknowledge(subscription=subscription("hoard-sub"), ack_ids=[m.ack_id for m in received])
            taken += len(received)
        assert pull_nothing(subscriber, subscription("hoard-sub")) == []
        # Once subscribers have caught up, the memory is back and publishes are taken again.
        publisher.api.publish(topic=topic("hoard"), messages=four, retry=None)
    finally:
        publisher.stop()
        subscriber.close()


def test_serve_refuses_a_bad_max_memory() -> None:
    result = CliRunner().invoke(app, ["serve", "--pubsub", "127.0.0.1:0", "--max-memory", "lots"])
    assert result.exit_code == 2
    assert "max_memory must be" in result.output
