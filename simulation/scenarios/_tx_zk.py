"""``tx-zk``: the transactions workload of ``tx-broker`` on ZooKeeper backends sharing one root, under ZooKeeper faults.

The same producer, listener containers, misuser and auditor as ``tx-broker``
(``_transactions.py``), but the store is 2-3 ``ZkTxBackend`` actors (processes), each on its own
session of one ``SimZooKeeperEnsemble`` and the same root: container ``i`` goes through backend
``i % backends``, so they contend for the same items through ZooKeeper. The ensemble's network
misbehaves as drawn (``ZkFaults``: slow requests, connections lost before or after a request was
applied, sessions that expire past their timeout, never backend 0's, whose first container keeps
serving); ``queue-crash`` expires the sessions of other backends by hand, each as soon as it holds a
lock past a drawn time; ``crash``, ``pause`` and
``delay`` hit containers as in ``tx-broker``. After 30 virtual seconds the faults end, the
containers are stopped, and an auditor reads the end state from ZooKeeper through a fresh backend
on a fresh session. Judged by the same six checkers, over every backend's traffic.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from typing import final

import attrs

from conveyor.actors.transactions import (
    AtLeastOnce,
    DeclareTxQueue,
    ListenerContainerActor,
    QueueItems,
    ReadItems,
    StopContainer,
    Taken,
    TxAborted,
    TxCommitted,
    TxQueueSettings,
    TxRolledBack,
    ZkTxBackend,
)
from conveyor.runtime import Actor, ActorRef, EventKind, Terminated, TraceEvent
from conveyor.runtime.lowlevel import ZkSessionEvent
from conveyor.simulation import (
    Crash,
    Fault,
    RunResult,
    Simulation,
    SimZooKeeperEnsemble,
    Strategy,
    ZkFaults,
    seeded_random,
)

from ._transactions import (
    LISTENER_S,
    SERVE_S,
    TX_QUEUES,
    Audit,
    TxAuditor,
    TxMisuser,
    TxProducer,
    TxScenario,
    ZkTxSetup,
    failing_listener,
    random_tx_scenario,
    tx_stores,
)

ZK_ROOT = "tx"
"""The root every backend of the run shares."""

SERVE_START_S = 4
"""The first virtual second at which the containers may be stopped early (see ``_serve``)."""

EXPIRY_SLICE_S = 0.02
"""While a session is to expire, the run goes in slices this long, looking for a lock its backend holds."""

EXPIRY_WAIT_S = 2.0
"""A session to expire that holds no lock for this long after its time expires all the same."""

BackendFactory = Callable[..., Actor]
"""``factory(session, root=...)``: a ``ZkTxBackend`` (or a planted bug's subclass) on that session."""


def random_tx_zk_scenario(seed: int) -> TxScenario:
    """``tx-broker``'s workload drawn for ``tx-zk``, on 2-3 backends and a drawn ensemble's network; at least one
    container more than backends (a 1-worker one added), so backend 0 serves two and each other backend one."""
    base = random_tx_scenario(seed, "tx-zk")
    rng = seeded_random(f"scenario:tx-zk:{seed}:zookeeper")
    backends = rng.choice((2, 2, 3))
    faults = ZkFaults(
        slow=rng.choice((0.0, 0.1, 0.3)), slow_s=round(rng.uniform(0.02, 0.3), 3),
        connection_loss=rng.choice((0.0, 0.03, 0.1)), losses=rng.randint(1, 3),
        reconnect_s=round(rng.uniform(0.1, 1.0), 3), expiry=rng.choice((0.0, 0.5, 1.0)),
        session_timeout_s=round(rng.uniform(1.0, 3.0), 3),
    )
    containers = base.containers + (1,) * (backends + 1 - len(base.containers))  # two on backend 0, one on each other
    return attrs.evolve(base, containers=containers, zk=ZkTxSetup(backends, faults, producer=rng.randrange(backends)))


def zk_setup_candidates(work: TxScenario) -> Iterator[TxScenario]:
    """Simpler ZooKeeper setups for the shrinker: two backends, a calmer network (the expiries are the fault plan's:
    the shrinker drops ``queue-crash`` to lose them)."""
    zk = work.zk
    if zk is None:
        return
    if zk.backends > 2:
        yield attrs.evolve(work, zk=attrs.evolve(zk, backends=2, producer=min(zk.producer, 1)))
    faults = zk.faults
    for calmer in (attrs.evolve(faults, slow=0.0), attrs.evolve(faults, connection_loss=0.0),
                   attrs.evolve(faults, expiry=0.0)):
        if calmer != faults:
            yield attrs.evolve(work, zk=attrs.evolve(zk, faults=calmer))


def run_tx_zk_simulation(
    scenario: TxScenario,
    seed: int,
    strategy: Strategy | None = None,
    *,
    faults: Sequence[Fault] = (),
    backend: BackendFactory = ZkTxBackend,
    system: Callable[..., Simulation] = Simulation,
    max_steps: int = 500_000,
) -> tuple[Simulation, RunResult]:
    """Run the workload on ZooKeeper backends, stop the containers, have a fresh backend note the end state.

    ``backend`` builds each backend (a planted bug's subclass); ``system`` builds the Simulation.
    """
    zk = scenario.zk
    if zk is None:
        msg = "run_tx_zk_simulation needs a workload with zk set (random_tx_zk_scenario)"
        raise ValueError(msg)
    plan: list[Fault] = [Crash(f"/container-{index}", step, restart=False)
                         for index, step in scenario.container_crashes]
    sim = system(seed=seed, strategy=strategy, faults=(*faults, *plan), job_duration=LISTENER_S)
    ensemble = SimZooKeeperEnsemble(sim, zk.faults)
    steady = attrs.evolve(zk.faults, expiry=0.0)  # backend 0's session: lost connections come back
    sessions = [sim.spawn(ensemble.session(steady if index == 0 else None), name=f"zk-session-{index}")
                for index in range(zk.backends)]
    names = [path.lstrip("/") for path in tx_stores(scenario)]
    stores = [sim.spawn(functools.partial(backend, session, root=ZK_ROOT), name=name)
              for session, name in zip(sessions, names, strict=True)]
    for store in stores:
        _declare(sim, store, scenario)
    listener = failing_listener(scenario.fail_percent)

    def container_of(index: int, workers: int) -> Callable[[], ListenerContainerActor]:
        return lambda: ListenerContainerActor(stores[zk.home(index)], "in", listener, workers=workers, poll_s=0.5)

    containers = [sim.spawn(container_of(index, workers), name=f"container-{index}")
                  for index, workers in enumerate(scenario.containers)]
    sim.spawn(lambda: TxProducer(stores[zk.producer], scenario.batches, scenario.batch_size), name="producer")
    if scenario.misuse:
        sim.spawn(lambda: TxMisuser(stores[-1]), name="misuser")
    steps = _serve(sim, ensemble, scenario, max_steps)
    sim.end_faults()
    ensemble.end_faults()
    serving = any(container.is_alive for container in containers)
    left: QueueItems = sim.ask(stores[0], ReadItems("in"), timeout=30.0)
    for container in containers:
        if container.is_alive:
            container.tell(StopContainer())
    more = sim.run(max_steps=max_steps - steps)
    steps += more.steps
    audit_session = sim.spawn(ensemble.session(), name="zk-session-audit")
    audit_store = sim.spawn(functools.partial(backend, audit_session, root=ZK_ROOT), name=f"{names[0]}-audit")
    _declare(sim, audit_store, scenario)
    auditor = sim.spawn(lambda: TxAuditor(audit_store), name="auditor")
    auditor.tell(Audit(tuple(key for key, _ in left.items) if serving else None))
    more = sim.run(max_steps=max(0, max_steps - sim.steps))
    result = RunResult(steps=sim.steps, time=more.time, quiet=more.quiet)
    sim.shutdown()
    return sim, result


def _serve(sim: Simulation, ensemble: SimZooKeeperEnsemble, scenario: TxScenario, max_steps: int) -> int:
    """Run until ``SERVE_S``, or sooner once every batch of the producer was answered and ``in`` is empty; at each
    of ``ZkTxSetup.expiries``, expire the session of the first backend (not backend 0) found holding an item, or
    the one named if none does within ``EXPIRY_WAIT_S`` (a harness's hand: a partition at the moment it hurts).

    A waiting take lists its queue every 50 ms, so 30 idle seconds would cost thousands of steps. Between
    slices of the run the trace and the ensemble's model are read (no request: the schedule is untouched).
    """
    zk = scenario.zk
    assert zk is not None
    items = f"/{ZK_ROOT}/in/items"
    pending = sorted(zk.expiries)
    seen = _Seen(tx_stores(scenario))
    steps = 0
    now = 0.0
    while now < SERVE_S and steps < max_steps:
        now = min(SERVE_S, now + (EXPIRY_SLICE_S if pending else 1.0))
        steps += sim.run(until=now, max_steps=max_steps - steps).steps
        seen.read(sim.trace)
        for at, backend in list(pending):
            holding = [index for index in range(1, zk.backends) if seen.held[index]]
            if now >= at and (holding or now >= at + EXPIRY_WAIT_S):
                pending.remove((at, backend))
                expired = holding[0] if holding else backend
                seen.held[expired].clear()
                if expired in seen.sessions:
                    ensemble.expire(seen.sessions[expired])
        if not pending and now >= SERVE_START_S and seen.answered == scenario.batches and not \
                ensemble.model.child_count(items):
            break
    return steps


@final
class _Seen:
    """What the run's trace showed so far: each backend's current session id, the (session, tx) it has given an item
    and not yet answered or released, and how many of the producer's commits were answered."""

    def __init__(self, stores: Sequence[str]) -> None:
        self.backends = {path: index for index, path in enumerate(stores)}
        self.sessions: dict[int, int] = {}
        self.held: list[set[tuple[str, int]]] = [set() for _ in stores]
        self.answered = 0
        self.events = 0

    def read(self, trace: Sequence[TraceEvent]) -> None:
        """Take in the events since the last read."""
        for event in trace[self.events:]:
            message = event.message
            kind = type(message)
            if event.kind is EventKind.SENT and event.sender in self.backends:
                held = self.held[self.backends[event.sender]]
                if kind is Taken:
                    held.add((event.receiver or "", message.tx))
                elif kind in (TxCommitted, TxAborted, TxRolledBack):
                    held.discard((event.receiver or "", message.tx))
            elif event.kind is EventKind.DELIVERED and event.receiver in self.backends:
                index = self.backends[event.receiver]
                if kind is ZkSessionEvent and message.state == "connected":
                    self.sessions[index] = message.session_id  # its current one: a new one after an expiry
                elif kind is Terminated:
                    self.held[index] = {owner for owner in self.held[index] if owner[0] != message.ref.path}
            elif event.kind is EventKind.DELIVERED and event.receiver == "/producer":
                self.answered += kind in (TxCommitted, TxAborted)
        self.events = len(trace)


def _declare(sim: Simulation, store: ActorRef, scenario: TxScenario) -> None:
    """Declare the three queues on one backend (a session that expires meanwhile refuses: its takes say so)."""
    for name in TX_QUEUES:
        policy = scenario.policy if name == "in" else AtLeastOnce()
        sim.ask(store, DeclareTxQueue(TxQueueSettings(name, policy, scenario.backoff if name == "in" else None)),
                timeout=30.0)
