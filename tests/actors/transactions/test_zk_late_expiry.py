"""A ``ZkTxBackend`` that has not yet heard its ZooKeeper session expired, on a real server.

kazoo opens a new session by itself after an expiry. Between that moment and the backend's handling
of the ``expired`` event, a call the backend sends runs on the *new* session. A commit's multi sent
then must not remove an item whose lock went with the old session and which another client has
locked since. ``LateExpiry`` holds the event back, so the window is as wide as the test needs.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest

from conveyor.actors.transactions import AtLeastOnce, ReadItems, TransactionError, ZkTxBackend
from conveyor.actors.zookeeper import KazooSession
from conveyor.runtime import Actor, ActorRef
from conveyor.runtime.lowlevel import ZkSessionEvent, ZkWatchSession
from tests.actors.transactions.helpers import declared, produce
from tests.actors.zookeeper.proxy import PartitionProxy
from tests.conftest import Harness, make_harness

_roots = itertools.count()


class LateExpiry(Actor):
    """Between a backend and its session: forwards everything, but keeps the session's events from
    ``expired`` on (the backend has not handled them yet); ``seen`` gets every event."""

    def __init__(self, session: ActorRef, seen: list[ZkSessionEvent]) -> None:
        self.session = session
        self.seen = seen
        self.subscriber: ActorRef | None = None

    def receive(self, message: Any) -> None:
        match message:
            case ZkWatchSession(ref=ref):
                self.subscriber = ref
                self.ctx.send(self.session, ZkWatchSession(self.ctx.self_ref))
            case ZkSessionEvent():
                self.seen.append(message)
                if self.subscriber is not None and not any(event.state == "expired" for event in self.seen):
                    self.ctx.send(self.subscriber, message)
            case _:
                self.ctx.send(self.session, message)


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    async for made in make_harness("trio"):
        yield made


@pytest.mark.parametrize("ending", ["commit", "rollback"])
async def test_a_transaction_ended_on_a_new_session_leaves_alone_an_item_another_client_locked(
    zookeeper: str, harness: Harness, ending: str,
) -> None:
    """A's lock went with its expired session and B locked the item; A, not knowing yet, commits (must
    fail) or rolls back (must not delete B's lock): B's commit then goes through, and only B's put exists."""
    with PartitionProxy(zookeeper) as proxy:
        root = f"late-expiry-{next(_roots)}"
        seen: list[ZkSessionEvent] = []
        session_a = harness.spawn(lambda: KazooSession(proxy.address, timeout=2.0))
        late = harness.spawn(lambda: LateExpiry(session_a, seen))
        backend_a = harness.spawn(lambda: ZkTxBackend(late, root=root))
        session_b = harness.spawn(lambda: KazooSession(zookeeper))
        backend_b = harness.spawn(lambda: ZkTxBackend(session_b, root=root))
        a = await declared(harness, backend_a, ("in", AtLeastOnce()), ("out", AtLeastOnce()))
        b = await declared(harness, backend_b, ("in", AtLeastOnce()), ("out", AtLeastOnce()))
        await produce(b, "in", b"1")
        tx = a.new_transaction()
        assert await tx.try_take("in") is not None
        proxy.cut()  # the server expires A's session after 2 s: A's lock goes
        rival = b.new_transaction()
        taken = await rival.take("in", 20.0)
        assert taken is not None and taken.body == b"1", "B locked the item once A's lock was gone"
        proxy.heal()
        await harness.wait_until(lambda: [event.state for event in seen][-2:] == ["expired", "connected"], 20.0)
        if ending == "commit":
            tx.put("out", b"from A")
            with pytest.raises(TransactionError):
                await tx.commit()  # A's lock is gone: its commit must not remove the item B holds
        else:
            await tx.rollback()  # answered at once; its release must fail, not delete B's lock
        await harness.quiet()
        rival.put("out", b"from B")
        await rival.commit()
        assert (await harness.ask(backend_b, ReadItems("out"))).items[0][1] == b"from B"
        assert len((await harness.ask(backend_b, ReadItems("out"))).items) == 1
