"""The ZooKeeper session protocol answered by the simulator's session actors, with and without faults.

The tests that take ``zk`` speak only the protocol through a harness (``zk_harness.py``), so they
run on any backend whose harness joins ``harnesses()``; the ones below them drive the simulator's
faults.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from conveyor.runtime import Actor
from conveyor.runtime.lowlevel import (
    ZkCall,
    ZkCheck,
    ZkClose,
    ZkCreate,
    ZkDelete,
    ZkExists,
    ZkGetChildren,
    ZkGetData,
    ZkMulti,
    ZkMultiFailed,
    ZkNode,
    ZkReply,
    ZkSessionEvent,
    ZkSetData,
    ZkWatchFired,
)
from conveyor.simulation import ChoiceStream, Crash, ZkFaults, choice_stream

from .zk_harness import Client, SimZkHarness, ZkClientActor, ZkHarness, harnesses, reply_to, session_id


@pytest.fixture(params=sorted(harnesses()))
def zk(request: pytest.FixtureRequest) -> ZkHarness:
    factory: Callable[[], Any] = harnesses()[request.param]
    return factory()  # type: ignore[no-any-return]


def _states(client: Client) -> list[str]:
    return [event.state for event in client.log if isinstance(event, ZkSessionEvent)]


def _watch_events(client: Client) -> list[ZkWatchFired]:
    return [event for event in client.log if isinstance(event, ZkWatchFired)]


# -- the protocol, backend-agnostic --------------------------------------------------------------------


def test_a_session_connects_and_sequential_names_count_up(zk: ZkHarness) -> None:
    client = zk.client("c")
    assert _states(client) == ["connected"]
    assert zk.call(client, ZkCreate("/q/items", make_parents=True)) == ZkReply(0, "/q/items")
    names = [zk.call(client, ZkCreate("/q/items/item-", b"x", sequential=True)).value for _ in range(3)]
    assert names == [f"/q/items/item-000000000{n}" for n in range(3)]
    children = zk.call(client, ZkGetChildren("/q/items")).value
    assert sorted(children) == ["item-0000000000", "item-0000000001", "item-0000000002"]  # type: ignore[call-overload]


def test_expiry_takes_the_sessions_ephemerals_and_a_new_session_opens(zk: ZkHarness) -> None:
    owner, other = zk.client("owner"), zk.client("other")
    zk.call(owner, ZkCreate("/locks", make_parents=False))
    zk.call(owner, ZkCreate("/locks/lock-1", ephemeral=True))
    zk.call(owner, ZkCreate("/locks/lock-", ephemeral=True, sequential=True))
    node = zk.call(other, ZkGetData("/locks/lock-1")).value
    assert isinstance(node, ZkNode) and node.ephemeral_owner == session_id(owner)
    zk.call(other, ZkGetChildren("/locks", watch=True))
    zk.expire(owner)
    assert zk.call(other, ZkGetChildren("/locks")).value == ()
    assert _watch_events(other) == [ZkWatchFired("/locks", "child")]  # both went in one step: one event
    assert _states(owner) == ["connected", "expired", "connected"]  # as kazoo: a new session follows
    ids = [event.session_id for event in owner.log if isinstance(event, ZkSessionEvent)]
    assert ids[0] == ids[1] != ids[2]
    assert zk.call(owner, ZkCreate("/locks/lock-1", ephemeral=True)).error is None
    node = zk.call(other, ZkGetData("/locks/lock-1")).value
    assert isinstance(node, ZkNode) and node.ephemeral_owner == ids[2]


def test_close_takes_the_ephemerals_and_later_calls_are_closed(zk: ZkHarness) -> None:
    client, other = zk.client("c"), zk.client("o")
    zk.call(client, ZkCreate("/e", ephemeral=True))
    zk.close(client)
    assert zk.call(other, ZkExists("/e")) == ZkReply(0, None)
    assert zk.call(client, ZkExists("/e")).error == "closed"
    assert _states(client)[-1] == "closed"


def test_a_watch_fires_once_to_the_reader(zk: ZkHarness) -> None:
    reader, writer = zk.client("r"), zk.client("w")
    zk.call(writer, ZkCreate("/n", b"0"))
    zk.call(reader, ZkGetData("/n", watch=True))
    zk.call(writer, ZkSetData("/n", b"1"))
    zk.call(writer, ZkSetData("/n", b"2"))
    zk.settle()
    assert _watch_events(reader) == [ZkWatchFired("/n", "changed")]
    assert _watch_events(writer) == []


def test_a_multi_is_atomic_and_names_its_failing_operation(zk: ZkHarness) -> None:
    client = zk.client("c")
    zk.call(client, ZkCreate("/q/items/item-0", b"x", make_parents=True))
    zk.call(client, ZkCreate("/q/locks/lock-0", ephemeral=True, make_parents=True))
    failed = zk.call(client, ZkMulti((ZkDelete("/q/items/item-0"), ZkDelete("/q/locks/lock-0"),
                                      ZkCheck("/q/items", 5))))
    assert (failed.value, failed.error) == (ZkMultiFailed(2, "bad_version"), "bad_version")
    assert zk.call(client, ZkExists("/q/items/item-0")).value is not None
    assert zk.call(client, ZkExists("/q/locks/lock-0")).value is not None
    done = zk.call(client, ZkMulti((ZkDelete("/q/items/item-0"), ZkDelete("/q/locks/lock-0"),
                                    ZkCreate("/q/items/item-", b"y", sequential=True))))
    assert done.error is None
    assert zk.call(client, ZkGetChildren("/q/items")).value == ("item-0000000002",)


# -- the simulator: determinism and faults ----------------------------------------------------------------

LOSSY = ZkFaults(connection_loss=1.0, losses=1, reconnect_s=0.5)


def _create_once(seed: int, faults: ZkFaults) -> tuple[SimZkHarness, Client, ZkReply]:
    harness = SimZkHarness(seed, faults)
    client = harness.client("c")
    reply = harness.call(client, ZkCreate("/lock-1_uuid", ephemeral=True))
    return harness, client, reply


def test_a_connection_loss_may_come_after_the_write_was_applied() -> None:
    """The client hears connection_loss either way; for some seeds the node exists (the seed's lock-N_uuid case)."""
    applied: list[int] = []
    not_applied: list[int] = []
    for seed in range(12):
        harness, client, reply = _create_once(seed, LOSSY)
        assert reply.error == "connection_loss"
        assert _states(client) == ["connected", "suspended", "reconnected"]
        exists = harness.zk.model.node("/lock-1_uuid") is not None
        (applied if exists else not_applied).append(seed)
        # after the reconnect the session is the same: a retry finds its own node, or creates it
        again = harness.call(client, ZkCreate("/lock-1_uuid", ephemeral=True))
        assert again.error == ("node_exists" if exists else None)
    assert applied and not_applied, (applied, not_applied)


def test_calls_made_while_suspended_wait_for_the_reconnect() -> None:
    harness = SimZkHarness(3, LOSSY)
    client = harness.client("c")
    lost = harness.send(client, ZkCreate("/a"))
    waiting = harness.send(client, ZkCreate("/b"))
    harness.settle()
    assert reply_to(client, lost) is not None and reply_to(client, lost).error == "connection_loss"  # type: ignore[union-attr]
    assert reply_to(client, waiting) == ZkReply(waiting, "/b")  # sent after the reconnect, lost no more
    assert harness.sim.now() > 0


def test_a_lost_connection_that_outlasts_the_session_timeout_expires_the_session() -> None:
    faults = ZkFaults(connection_loss=1.0, losses=1, expiry=1.0, session_timeout_s=4.0)
    for seed in range(6):
        harness = SimZkHarness(seed, faults)
        other = harness.client("other")  # its first request loses its connection too: keep it out of the way
        owner = harness.client("owner")
        reply = harness.call(owner, ZkCreate("/e", ephemeral=True))
        assert reply.error == "connection_loss"
        assert _states(owner) == ["connected", "suspended", "expired", "connected"]
        assert harness.sim.now() >= 4.0
        assert harness.zk.model.ephemerals(session_id(owner)) == []
        assert harness.zk.model.node("/e") is None
        assert harness.call(owner, ZkExists("/e")).value is None  # answered on the new session
        del other


def test_a_slow_server_delays_replies_in_virtual_time_and_keeps_a_sessions_order() -> None:
    harness = SimZkHarness(1, ZkFaults(slow=1.0, slow_s=2.0))
    client = harness.client("c")
    ids = [harness.send(client, ZkCreate("/s-", sequential=True)) for _ in range(5)]
    harness.settle()
    replies = [event for event in client.log if isinstance(event, ZkReply)]
    assert [reply.request_id for reply in replies] == ids
    assert [reply.value for reply in replies] == [f"/s-000000000{n}" for n in range(5)]
    assert harness.sim.now() > 0


def test_end_faults_calms_the_sessions() -> None:
    harness = SimZkHarness(0, ZkFaults(connection_loss=1.0, losses=5))
    client = harness.client("c")
    harness.zk.end_faults()
    harness.settle()
    assert harness.call(client, ZkCreate("/a")).error is None
    assert _states(client) == ["connected"]


def test_children_come_in_a_drawn_order_unless_calm() -> None:
    orders = set()
    for seed in range(6):
        harness = SimZkHarness(seed, ZkFaults())
        client = harness.client("c")
        for name in "abcde":
            harness.call(client, ZkCreate(f"/{name}"))
        orders.add(harness.call(client, ZkGetChildren("/")).value)
    assert len(orders) > 1
    calm = SimZkHarness(0)
    client = calm.client("c")
    for name in "cab":
        calm.call(client, ZkCreate(f"/{name}"))
    assert calm.call(client, ZkGetChildren("/")).value == ("a", "b", "c")


def _faulty_run(seed: int) -> tuple[str, list[object]]:
    harness = SimZkHarness(seed, ZkFaults(slow=0.5, connection_loss=0.3, losses=3, expiry=0.3))
    clients = [harness.client(f"c{n}") for n in range(3)]
    for round_ in range(4):
        for client in clients:
            harness.send(client, ZkCreate(f"/{client.ref.name}-{round_}-", ephemeral=True, sequential=True))
    harness.settle()
    return harness.sim.trace_hash(), [event for client in clients for event in client.log]


def test_the_same_seed_gives_the_same_run_and_a_recorded_stream_replays_it() -> None:
    first, again = _faulty_run(5), _faulty_run(5)
    assert first == again
    assert _faulty_run(6)[0] != first[0]
    stream = ChoiceStream()
    with choice_stream(stream):
        recorded = _faulty_run(5)
    assert recorded == first
    with choice_stream(ChoiceStream(stream.drawn)):
        assert _faulty_run(5) == first
    with choice_stream(ChoiceStream([])):  # the simplest run: no fault happens
        _, events = _faulty_run(5)
    assert not any(isinstance(e, ZkReply) and e.error is not None for e in events)


def test_a_restarted_server_keeps_its_data_and_its_sessions() -> None:
    harness = SimZkHarness(2, kernel_faults=(Crash("/zookeeper", at_step=30),))
    client, other = harness.client("c"), harness.client("o")
    names = [harness.call(client, ZkCreate("/s-", ephemeral=True, sequential=True)).value for _ in range(8)]
    assert [fault.outcome for fault in harness.sim.faults_applied] == ["restarted"]
    assert names == [f"/s-000000000{n}" for n in range(8)]
    harness.expire(client)
    assert harness.call(other, ZkGetChildren("/")).value == ()


def test_zk_faults_refuse_bad_values_naming_the_field() -> None:
    with pytest.raises(ValueError, match="connection_loss"):
        ZkFaults(connection_loss=1.5)
    with pytest.raises(ValueError, match="session_timeout_s"):
        ZkFaults(session_timeout_s=0)


def test_a_close_goes_behind_the_requests_on_their_way() -> None:
    harness = SimZkHarness(1, ZkFaults(slow=1.0, slow_s=2.0))
    client = harness.client("c")
    ids = [harness.send(client, ZkCreate(f"/n{n}", ephemeral=True)) for n in range(3)]
    client.ref.tell(ZkClose())
    late = harness.send(client, ZkCreate("/late"))
    harness.settle()
    assert [reply_to(client, i) for i in ids] == [ZkReply(i, f"/n{n}") for n, i in enumerate(ids)]
    assert reply_to(client, late) == ZkReply(late, error="closed")
    assert _states(client) == ["connected", "closed"]
    assert list(harness.zk.model.paths()) == ["/"]  # its ephemerals went with the close


def test_a_session_made_not_to_reopen_stays_expired() -> None:
    harness = SimZkHarness(0)
    log: list[object] = []
    factory = harness.zk.session(reopen=False)
    owner = Client(harness.sim.spawn(lambda: ZkClientActor(factory, log), name="owner"), log)
    harness.sim.run()
    harness.expire(owner)
    assert _states(owner) == ["connected", "expired"]
    assert harness.call(owner, ZkExists("/")).error == "session_expired"


class Pipeliner(Actor):
    """Keeps two sequential creates of ``/log/r-`` in flight on its session, the next sent as soon as one is answered
    (as a client chaining continuations does); each create's data is its number in sending order."""

    def __init__(self, session: Callable[[], Actor], total: int) -> None:
        self.factory = session
        self.total = total
        self.sent = 0

    def on_start(self) -> None:
        self.session = self.ctx.spawn(self.factory, name="session")
        self.ctx.send(self.session, ZkCall(-1, self.ctx.self_ref, ZkCreate("/log", make_parents=True)))

    def receive(self, message: object) -> None:
        if isinstance(message, ZkReply):
            for _ in range(2 if message.request_id < 0 else 1):
                if self.sent < self.total:
                    create = ZkCreate("/log/r-", str(self.sent).encode(), sequential=True)
                    self.ctx.send(self.session, ZkCall(self.sent, self.ctx.self_ref, create))
                    self.sent += 1


@pytest.mark.parametrize("seed", range(8))
def test_a_request_sent_when_a_slow_one_comes_due_waits_behind_the_others_held(seed: int) -> None:
    """A session's requests reach the server in the order sent, also a request sent at the very instant the
    requests held behind a slow one come due (``tx-zk`` seed 525: a lock create overtook the multi that deleted
    the lock, and an item dead-lettered once was taken again)."""
    harness = SimZkHarness(seed, ZkFaults(slow=0.5, slow_s=0.2))
    harness.sim.spawn(lambda: Pipeliner(harness.zk.session(), 60), name="pipeliner")
    harness.settle()
    model = harness.zk.model
    applied = [int(node.data) for name in sorted(path for path in model.paths() if path.startswith("/log/r-"))
               if (node := model.node(name)) is not None]
    assert applied == list(range(60))
