"""A backend-agnostic way for tests to talk to a ZooKeeper session actor through the kernel's protocol.

``ZkClientActor`` spawns a session actor from a factory (the simulated one here; the kazoo-backed
one of ``actors/zookeeper`` takes the same place), subscribes to its session events and sends it
``ZkCall``s on request, writing down everything it is told. A harness (``SimZkHarness`` for the
``Simulation``) runs the system until the answer is in. Protocol tests written against the
harness's few methods run unchanged on another backend's harness.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, final

import attrs

from conveyor.runtime import Actor, ActorRef
from conveyor.runtime.lowlevel import ZkCall, ZkClose, ZkOperation, ZkReply, ZkSessionEvent, ZkWatchSession
from conveyor.simulation import Fault, Simulation, SimZooKeeperEnsemble, ZkFaults


@final
@attrs.frozen
class Do:
    """Tell the client actor to send ``operation`` as request ``request_id``."""

    request_id: int
    operation: ZkOperation


@final
class ZkClientActor(Actor):
    """Owns one session actor; forwards ``Do`` as ``ZkCall`` and logs replies, watch and session events."""

    def __init__(self, session: Callable[[], Actor], log: list[object]) -> None:
        self._factory = session
        self._log = log

    def on_start(self) -> None:
        self.session = self.ctx.spawn(self._factory, name="session")
        self.ctx.send(self.session, ZkWatchSession(self.ctx.self_ref))

    def receive(self, message: object) -> None:
        if isinstance(message, Do):
            self.ctx.send(self.session, ZkCall(message.request_id, self.ctx.self_ref, message.operation))
        elif isinstance(message, ZkClose):
            self.ctx.send(self.session, message)
        else:
            self._log.append(message)


@final
@attrs.define
class Client:
    """A client of the harness: its actor and what it was told, in order."""

    ref: ActorRef
    log: list[object]
    next_id: int = 0


class ZkHarness(Protocol):
    """What a protocol test needs of a backend."""

    def client(self, name: str) -> Client:
        """A new client with its own session, connected."""

    def call(self, client: Client, operation: ZkOperation) -> ZkReply:
        """Send ``operation`` on the client's session and wait for its reply."""

    def settle(self) -> None:
        """Let everything in flight arrive."""

    def expire(self, client: Client) -> None:
        """Make the client's session expire (as a partition longer than its timeout would)."""

    def close(self, client: Client) -> None:
        """Close the client's session cleanly."""


def session_id(client: Client) -> int:
    """The id the client's session reported first."""
    return next(event.session_id for event in client.log if isinstance(event, ZkSessionEvent))


def reply_to(client: Client, request_id: int) -> ZkReply | None:
    """The reply the client got for ``request_id``, if any yet."""
    return next((r for r in client.log if isinstance(r, ZkReply) and r.request_id == request_id), None)


@final
class SimZkHarness:
    """The harness on the ``Simulation``: one ensemble, its clients top-level actors."""

    def __init__(
        self, seed: int = 0, faults: ZkFaults | None = None, trace: bool = True, kernel_faults: Sequence[Fault] = (),
    ) -> None:
        self.sim = Simulation(seed, trace=trace, faults=kernel_faults)
        self.zk = SimZooKeeperEnsemble(self.sim, faults)

    def client(self, name: str) -> Client:
        log: list[object] = []
        factory = self.zk.session()
        ref = self.sim.spawn(lambda: ZkClientActor(factory, log), name=name)
        self.sim.run()
        return Client(ref, log)

    def send(self, client: Client, operation: ZkOperation) -> int:
        """Send without waiting; the request's id."""
        request_id = client.next_id
        client.next_id += 1
        client.ref.tell(Do(request_id, operation))
        return request_id

    def call(self, client: Client, operation: ZkOperation) -> ZkReply:
        request_id = self.send(client, operation)
        self.sim.run()
        reply = reply_to(client, request_id)
        assert reply is not None, f"no reply to {operation}"
        return reply

    def settle(self) -> None:
        self.sim.run()

    def expire(self, client: Client) -> None:
        self.zk.expire(session_id(client))
        self.sim.run()

    def close(self, client: Client) -> None:
        client.ref.tell(ZkClose())
        self.sim.run()


def harnesses() -> dict[str, Callable[[], Any]]:
    """The backends protocol tests run on, by name (the kazoo-backed one joins here)."""
    return {"simulation": SimZkHarness}
