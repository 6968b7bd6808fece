"""The ``zk-basics`` scenario: clients of the simulated ZooKeeper creating sequential and ephemeral nodes.

Each client owns a session actor (``SimZooKeeperEnsemble.session()``) and makes a drawn series of
requests, one at a time: ephemeral sequential nodes under ``/zk/e``, persistent sequential ones
under ``/zk/seq``, deletes of its own nodes, and reads (the children of ``/zk/e``, then each
child's node, owner included). The ensemble's network misbehaves as drawn (``ZkFaults``: slow
requests, lost connections before or after a write, sessions that expire past their timeout), and
an expirer ends sessions at drawn times. A client whose session expired opens a new one and goes
on. When the run is quiet the faults end and a final reader, on a fresh session, reads every node
under ``/zk/e``. Judged by ``ephemerals_die_with_their_session`` and
``sequential_names_never_repeat`` from the protocol messages, then the kernel's checkers.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Sequence
from typing import final

import attrs

from conveyor.runtime import Actor, ActorRef, TraceEvent
from conveyor.runtime.lowlevel import (
    ZkCall,
    ZkClose,
    ZkCreate,
    ZkDelete,
    ZkExists,
    ZkGetChildren,
    ZkOperation,
    ZkReply,
    ZkSessionEvent,
    ZkWatchSession,
)
from conveyor.simulation import (
    ExpireZkSession,
    Fault,
    RunResult,
    Simulation,
    SimZooKeeper,
    SimZooKeeperEnsemble,
    Strategy,
    ZkFaults,
    seeded_random,
)
from conveyor.simulation.checkers import (
    CheckResult,
    ephemerals_die_with_their_session,
    every_call_answered_once,
    guarded,
    sequential_names_never_repeat,
)

SERVER = "/zookeeper"
EPHEMERALS = "/zk/e"
SEQUENTIAL = "/zk/seq"
FINAL_READER = "final-reader"

ModelFactory = Callable[[], SimZooKeeper]


@final
@attrs.frozen
class ZkBasicsScenario:
    """A ``zk-basics`` workload: clients, their requests, the ensemble's faults and the hand-made expiries."""

    clients: int
    operations: int
    """Requests each client makes after its setup."""
    faults: ZkFaults
    expiries: tuple[tuple[float, int], ...] = ()
    """(virtual time, session id): the expirer ends that session then (if it is live)."""
    closes_at_end: tuple[bool, ...] = ()
    """Per client: close its session once done (its ephemeral nodes go), or leave it open."""
    draws: str = ""
    ack_deadline_s: float = 1.0
    """Unused (no queue here); the registry's liveness scale, kept for its other families."""


def random_zk_basics_scenario(seed: int) -> ZkBasicsScenario:
    """2-4 clients of 6-20 requests; faults drawn per seed (calm in a fifth of the runs); 0-3 expiries."""
    rng = seeded_random(f"scenario:zk-basics:{seed}")
    clients = rng.randint(2, 4)
    operations = rng.randint(6, 20)
    if rng.random() < 0.2:
        faults = ZkFaults()
    else:
        faults = ZkFaults(
            slow=rng.choice((0.0, 0.1, 0.3)), slow_s=rng.uniform(0.05, 1.0),
            connection_loss=rng.choice((0.0, 0.05, 0.15)), losses=rng.randint(1, 3),
            reconnect_s=rng.uniform(0.1, 2.0), expiry=rng.choice((0.0, 0.5, 1.0)),
            session_timeout_s=rng.uniform(1.0, 4.0),
        )
    expiries = tuple(sorted((round(rng.uniform(0.1, 3.0), 3), rng.randint(1, clients + 2))
                            for _ in range(rng.randint(0, 3))))
    closes = tuple(rng.random() < 0.5 for _ in range(clients))
    draws = (f"clients={clients}, operations={operations}, loss={faults.connection_loss}, expiry={faults.expiry}, "
             f"slow={faults.slow}, expiries={len(expiries)}")
    return ZkBasicsScenario(clients, operations, faults, expiries, closes, draws)


@final
@attrs.frozen
class _Next:
    """A client's timer: make its next request."""


@final
class ZkBasicsClient(Actor):
    """Makes its drawn requests one at a time on its own session; opens a new session when one expires."""

    def __init__(
        self, session: Callable[[], Actor], index: int, operations: int, close_at_end: bool, *, reader: bool = False,
    ) -> None:
        self._factory = session
        self._reader = reader
        self._index = index
        self._left = operations
        self._close_at_end = close_at_end
        self._sessions = 0
        self._request = 0
        self._waiting: int | None = None  # the request in flight
        self._mine: list[str] = []  # nodes this client created (and may delete)
        self._queue: list[ZkOperation] = [ZkGetChildren(EPHEMERALS)] if reader else [
            ZkCreate(EPHEMERALS, make_parents=True), ZkCreate(SEQUENTIAL, make_parents=True)]
        self.session: ActorRef | None = None

    def on_start(self) -> None:
        self._open()
        self.ctx.send(self.ctx.self_ref, _Next())

    def _open(self) -> None:
        self.session = self.ctx.spawn(self._factory, name=f"session-{self._sessions}")
        self._sessions += 1
        self.ctx.send(self.session, ZkWatchSession(self.ctx.self_ref))

    def receive(self, message: object) -> None:
        if isinstance(message, ZkReply):
            if message.request_id != self._waiting:
                return  # the answer of an earlier session's request
            self._waiting = None
            if message.error is None and isinstance(message.value, str) and message.value.startswith(EPHEMERALS + "/"):
                self._mine.append(message.value)
            elif message.error is None and isinstance(message.value, tuple):  # children: read each
                names = message.value if self._reader else message.value[:4]
                self._queue.extend(ZkExists(f"{EPHEMERALS}/{name}") for name in names)
            self.ctx.schedule(self.ctx.random.uniform(0.0, 0.2), _Next())
        elif isinstance(message, _Next):
            self._next()
        elif isinstance(message, ZkSessionEvent) and message.state == "expired" and self.ctx.sender == self.session:
            self._mine.clear()
            self._open()

    def _next(self) -> None:
        if self.session is None or self._waiting is not None:
            return
        if self._queue:
            operation = self._queue.pop(0)
        elif self._left > 0:
            self._left -= 1
            operation = self._draw(self.ctx.random)
        else:
            if self._close_at_end:
                self.ctx.send(self.session, ZkClose())
            return
        self._waiting = self._request
        self.ctx.send(self.session, ZkCall(self._request, self.ctx.self_ref, operation))
        self._request += 1

    def _draw(self, rng: random.Random) -> ZkOperation:
        pick = rng.random()
        if pick < 0.35:
            return ZkCreate(f"{EPHEMERALS}/c{self._index}-", b"lock", ephemeral=True, sequential=True)
        if pick < 0.55:
            return ZkCreate(f"{SEQUENTIAL}/item-", b"item", sequential=True)
        if pick < 0.7 and self._mine:
            return ZkDelete(self._mine.pop(rng.randrange(len(self._mine))))
        return ZkGetChildren(EPHEMERALS, watch=rng.random() < 0.5)


@final
class ZkExpirer(Actor):
    """Expires sessions at drawn virtual times (a partition longer than their timeout)."""

    def __init__(self, server: ActorRef, expiries: Sequence[tuple[float, int]]) -> None:
        self._server = server
        self._expiries = tuple(expiries)

    def on_start(self) -> None:
        for at, session_id in self._expiries:
            self.ctx.schedule(at, ExpireZkSession(session_id))

    def receive(self, message: object) -> None:
        if isinstance(message, ExpireZkSession):
            self.ctx.send(self._server, message)


def run_zk_basics_simulation(
    scenario: ZkBasicsScenario, seed: int, strategy: Strategy | None = None, max_steps: int = 500_000,
    faults: Sequence[Fault] = (), system: Callable[..., Simulation] = Simulation, model: ModelFactory | None = None,
) -> tuple[Simulation, RunResult]:
    """Run the clients to quiet, end the faults, read ``/zk/e`` on a fresh session, shut down."""
    sim = system(seed=seed, strategy=strategy, faults=faults)
    zk = SimZooKeeperEnsemble(sim, scenario.faults, name=SERVER.strip("/"),
                              model=model() if model is not None else None)
    for index in range(scenario.clients):
        factory = zk.session(reopen=False)  # the client opens a new session actor itself after an expiry
        close = scenario.closes_at_end[index] if index < len(scenario.closes_at_end) else False
        sim.spawn(functools.partial(ZkBasicsClient, factory, index, scenario.operations, close),
                  name=f"zk-client-{index}")
    if scenario.expiries:
        sim.spawn(lambda: ZkExpirer(zk.server, scenario.expiries), name="zk-expirer")
    result = sim.run(max_steps=max_steps)
    if result.quiet:
        zk.end_faults()
        sim.end_faults()
        factory = zk.session(reopen=False)
        sim.spawn(lambda: ZkBasicsClient(factory, scenario.clients, 0, False, reader=True), name=FINAL_READER)
        more = sim.run(max_steps=max_steps)
        result = RunResult(result.steps + more.steps, more.time, more.quiet)
    sim.shutdown()
    return sim, result


def check_zk_basics_run(trace: list[TraceEvent], scenario: ZkBasicsScenario) -> list[CheckResult]:
    """No ephemeral node outlives its session; sequential names never repeat; every call answered once."""
    del scenario
    return [
        *guarded("ephemerals_die_with_their_session", ephemerals_die_with_their_session, trace),
        *guarded("sequential_names_never_repeat", sequential_names_never_repeat, trace),
        *guarded("every_call_answered_once", every_call_answered_once, trace),
    ]
