"""Many processes on one real ZooKeeper: consumers killed with SIGKILL holding locks, the server killed.

Each test starts ``zk_worker`` processes (``python -m tests.actors.transactions.zk_worker``): a
producer committing batches into ``in``, consumers each taking one item from ``in`` and putting its
body to ``out`` in one transaction, every one with its own ``KazooSession`` and ``ZkTxBackend`` and
its own history file. A *holder* takes items and sleeps holding their locks; the test kills it with
SIGKILL, reads the locks with a raw kazoo client until the server removed them (session timeout),
lets the others drain the queue, and counts the histories against the end state
(``zk_history.count``, Jepsen's total-queue count): lost 0, unexpected 0, no double commit, no
returned commit lost, redeliveries only after a take that did not commit, at most K takes under
``ConsumeTimes(K)``, and no lock left once quiet. Another pauses a holder (SIGSTOP) past its
session timeout, another kills the ZooKeeper server itself mid-run and starts it again; the slow
ones kill the leader of a three-node ensemble, and consumers at random moments again and again.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import signal
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
from kazoo.client import KazooClient

from conveyor.actors.zookeeper import LocalZooKeeper, LocalZooKeeperEnsemble
from tests.actors.transactions.zk_history import Count, Event, FinalState, count, read_history, takes_of
from tests.crash.harness import Child

SESSION_TIMEOUT_S = 3.0
"""Of every worker's session: a killed holder's locks go this long after its death (tickTime is 500 ms)."""
DEADLINE_S = 60.0
"""Longest wait for anything (a process ready, the locks gone, the queue drained): generous, not asserted."""
WORKER = [sys.executable, "-m", "tests.actors.transactions.zk_worker"]


@contextmanager
def raw_client(hosts: str) -> Iterator[KazooClient]:
    """A plain kazoo client, for reading what the workers left in ZooKeeper."""
    client = KazooClient(hosts=hosts, timeout=10.0)
    client.start(timeout=DEADLINE_S)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def wait_until(condition: Callable[[], bool], what: str, timeout: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.1)


@attrs.define
class Run:
    """The worker processes of one test on one ZooKeeper root, their histories in ``directory``."""

    hosts: str
    directory: Path
    policy: str
    root: str = attrs.field(factory=lambda: f"procs-{uuid.uuid4().hex[:12]}")
    children: dict[str, Child] = attrs.field(factory=dict)
    killed: set[str] = attrs.field(factory=set)

    @property
    def stop_file(self) -> Path:
        return self.directory / "stop"

    def start(self, name: str, role: str, *options: str) -> Child:
        """Start a worker ``name``; it is ready once it has declared its queues."""
        command = [*WORKER, role, "--hosts", self.hosts, "--root", self.root, "--policy", self.policy,
                   "--history", str(self.directory / f"{name}.jsonl"), "--stop-file", str(self.stop_file),
                   "--session-timeout", str(SESSION_TIMEOUT_S), *options]
        child = self.children[name] = Child(command)
        child.wait_for("^ready", child.stdout, DEADLINE_S)
        return child

    def kill(self, name: str) -> None:
        self.children[name].kill()
        self.killed.add(name)

    def close(self) -> None:
        """SIGKILL every worker still running (a test that failed leaves them waiting)."""
        for child in self.children.values():
            child.kill()

    def histories(self) -> dict[str, list[Event]]:
        return {name: read_history(self.directory / f"{name}.jsonl") for name in self.children}

    def path(self, *parts: str) -> str:
        return "/".join((f"/{self.root}", *parts))

    def stop_consumers(self) -> None:
        """Once the queue is drained: the consumers see the stop file on their next empty take and exit 0."""
        self.stop_file.touch()
        for name, child in self.children.items():
            if name not in self.killed:
                assert child.finish(DEADLINE_S) == 0, child.describe()
                assert not child.logged_traceback(), child.describe()

    def end_state(self, zk: KazooClient) -> FinalState:
        def bodies(folder: str) -> list[bytes]:
            return [zk.get(f"{folder}/{name}")[0] for name in zk.get_children(folder)]

        dead = [json_letter(data) for data in bodies(self.path("in", "dlq"))]
        return FinalState(out=tuple(data.decode() for data in bodies(self.path("out", "items"))),
                          remaining=tuple(data.decode() for data in bodies(self.path("in", "items"))),
                          dead=tuple(dead))

    def locks(self, zk: KazooClient, queue: str = "in") -> dict[str, int]:
        """Lock name -> the session that owns it (ephemeral owner), read now."""
        owners = {}
        for name in zk.get_children(self.path(queue, "locks")):
            stat = zk.exists(self.path(queue, "locks", name))
            if stat is not None:
                owners[name] = stat.ephemeralOwner
        return owners

    def drained(self, zk: KazooClient) -> bool:
        return not zk.get_children(self.path("in", "items")) and not zk.get_children(self.path("in", "locks"))

    def finish(self, *, k: int | None) -> tuple[Count, dict[str, list[Event]], FinalState]:
        """Wait for the producer and the drain, stop the consumers, read the end state and count."""
        assert self.children["producer"].finish(DEADLINE_S) == 0, self.children["producer"].describe()
        with raw_client(self.hosts) as zk:
            wait_until(lambda: self.drained(zk), "the consumers drained 'in'")
            self.stop_consumers()
            assert self.locks(zk, "in") == {} and self.locks(zk, "out") == {}, "no lock left once quiet"
            final = self.end_state(zk)
        histories = self.histories()
        return count(histories, final, killed=self.killed, k=k), histories, final


NewRun = Callable[[str, str], Run]
"""``new_run(hosts, policy)``: a ``Run`` in the test's directory."""


@pytest.fixture
def new_run(tmp_path: Path) -> Iterator[NewRun]:
    """Makes a ``Run`` (hosts, policy) in the test's directory; its workers are killed when the test ends."""
    made: list[Run] = []

    def make(hosts: str, policy: str) -> Run:
        made.append(Run(hosts, tmp_path, policy))
        return made[-1]

    yield make
    for run in made:
        run.close()


def json_letter(data: bytes) -> tuple[str, int]:
    """A dead letter's body and takes."""
    letter: dict[str, Any] = json.loads(data)
    return letter["body"], letter["takes"]


# --- the count itself, on histories written by hand --------------------------------------------------


def put(*bodies: str) -> list[Event]:
    return [{"op": "put", "bodies": list(bodies)}, {"op": "put_ok", "bodies": list(bodies)}]


def taken(body: str, takes: int, end: str | None = "commit_ok") -> list[Event]:
    return [{"op": "taken", "body": body, "takes": takes}] + ([{"op": end, "body": body}] if end else [])


def test_the_count_passes_a_clean_history_and_allows_a_redelivery_after_a_kill() -> None:
    histories = {"producer": put("p-0", "p-1"), "dead": taken("p-0", 1, None), "c": taken("p-0", 2) + taken("p-1", 1)}
    final = FinalState(out=("p-0", "p-1"), remaining=(), dead=())
    counted = count(histories, final, killed={"dead"}, k=2)
    assert counted.ok and (counted.consumed, counted.redelivered) == (2, 1), counted


@pytest.mark.parametrize(("histories", "final", "broken"), [
    ({"producer": put("p-0", "p-1")}, FinalState(("p-0",), (), ()), "lost"),
    ({"producer": put("p-0")}, FinalState(("p-0", "x-9"), (), ()), "unexpected"),
    ({"producer": [{"op": "put", "bodies": ["p-0"]}, {"op": "put_aborted", "bodies": ["p-0"]}]},
     FinalState(("p-0",), (), ()), "unexpected"),
    ({"producer": put("p-0")}, FinalState(("p-0", "p-0"), (), ()), "double_commits"),
    ({"producer": put("p-0"), "c": taken("p-0", 1)}, FinalState((), (), (("p-0", 1),)), "lost_commits"),
    ({"producer": put("p-0"), "c": taken("p-0", 1) + taken("p-0", 2, "rolled_back")},
     FinalState(("p-0",), (), ()), "bad_redeliveries"),
    ({"producer": put("p-0"), "alive": taken("p-0", 1, None), "c": taken("p-0", 2)},
     FinalState(("p-0",), (), ()), "bad_redeliveries"),
    ({"producer": put("p-0"), "c": taken("p-0", 1, "rolled_back") + taken("p-0", 2, "rolled_back")
      + taken("p-0", 3, "rolled_back")}, FinalState((), (), (("p-0", 3),)), "over_k"),
])
def test_the_count_finds_each_broken_promise(histories: dict[str, list[Event]], final: FinalState,
                                             broken: str) -> None:
    counted = count(histories, final, killed=(), k=2)
    assert not counted.ok
    assert [name for name in ("lost", "unexpected", "double_commits", "lost_commits", "bad_redeliveries", "over_k")
            if getattr(counted, name)] == [broken], counted


# --- real processes ----------------------------------------------------------------------------------


def held_numbers(child: Child) -> list[int]:
    """The item numbers a holder printed it holds (one ``holding`` line per listener in a container)."""
    return [int(number) for line in child.stdout if line.startswith("holding ") for number in line.split()[1:]]


def kill_a_holder_and_count(run: Run, holder_role: str, holder_options: list[str], *, k: int | None,
                            items: int) -> Count:
    run.start("c1", "consumer", "--poison-every", "7")
    run.start("c2", "consumer", "--poison-every", "7")
    holder = run.start("holder", holder_role, *holder_options)
    run.start("producer", "producer", "--items", str(items), "--batch", "5", "--pause", "0.02")
    holder.wait_for(r"^holding", holder.stdout, DEADLINE_S)
    wait_until(lambda: len(held_numbers(holder)) >= 2, "the holder holds two items")
    numbers = held_numbers(holder)
    with raw_client(run.hosts) as zk:
        owners = run.locks(zk)
        held_by = {owners.get(f"lock-{number}") for number in numbers}
        assert len(held_by) == 1 and None not in held_by, f"the holder's locks {numbers} among {owners}"
        session = held_by.pop()
        run.kill("holder")
        wait_until(lambda: session not in run.locks(zk).values(), "the killed holder's locks vanished")
        print(f"the holder's session {session:#x} held {numbers}; its locks vanished after its session timeout")
    counted, histories, final = run.finish(k=k)
    print(counted.summary())
    held_bodies = {take.body for take in takes_of(histories) if take.process == "holder" and take.outcome == "open"}
    assert len(held_bodies) == len(numbers)
    again = {take.body for take in takes_of(histories) if take.process != "holder"}
    dead = {body for body, _ in final.dead} if k is not None else set()  # at-least-once dead-letters nothing
    assert held_bodies <= again | dead, "every item the holder held was taken again by another (or dead-lettered)"
    if k is None:
        assert final.dead == (), "at-least-once (without max_rollbacks) dead-letters nothing"
    return counted


def test_a_consumer_killed_holding_locks_under_at_least_once(zookeeper: str, new_run: NewRun) -> None:
    """A listener container holding two items is SIGKILLed; at-least-once: its items come back, nothing lost."""
    run = new_run(zookeeper, "at-least-once")
    counted = kill_a_holder_and_count(run, "holding-container", ["--hold", "2"], k=None, items=100)
    assert counted.ok, counted
    assert counted.redelivered >= 2, "the holder's two items and the poison ones were handed over again"


def test_a_consumer_killed_holding_locks_under_consume_times(zookeeper: str, new_run: NewRun) -> None:
    """A consumer holding two items in one transaction is SIGKILLed; ConsumeTimes(3) holds over all histories."""
    run = new_run(zookeeper, "times:3")
    counted = kill_a_holder_and_count(run, "consumer", ["--hold", "2", "--hold-after", "3"], k=3, items=100)
    assert counted.ok, counted
    assert counted.dead > 0, "the poison items were dead-lettered after their third take"


def test_a_consumer_paused_past_its_session_timeout_cannot_commit_what_it_held(zookeeper: str,
                                                                                new_run: NewRun) -> None:
    """SIGSTOP a consumer holding an item (a long GC pause) until the server expired its session and another
    consumer took the item; SIGCONT: its commit must not return, the item is committed once, and the
    consumer goes on with a new session (its backend's, or one the worker starts)."""
    run = new_run(zookeeper, "at-least-once")
    go = run.directory / "go"
    run.start("c1", "consumer")
    run.start("c2", "consumer")
    holder = run.start("holder", "consumer", "--hold", "1", "--hold-after", "2", "--go-file", str(go))
    run.start("producer", "producer", "--items", "100", "--batch", "5", "--pause", "0.02")
    holder.wait_for(r"^holding", holder.stdout, DEADLINE_S)
    [number] = held_numbers(holder)
    [body] = [take.body for take in takes_of(run.histories()) if take.process == "holder" and take.outcome == "open"]
    with raw_client(run.hosts) as zk:
        session = run.locks(zk).get(f"lock-{number}")
        assert session is not None, "the holder holds the lock"
        os.kill(holder.process.pid, signal.SIGSTOP)
        go.touch()  # it commits the moment it runs again
        wait_until(lambda: session not in run.locks(zk).values(), "the paused holder's session expired")
    wait_until(lambda: any(take.body == body and take.process != "holder" for take in takes_of(run.histories())),
               "another consumer took the held item")
    os.kill(holder.process.pid, signal.SIGCONT)
    counted, histories, _ = run.finish(k=None)
    print(counted.summary())
    outcome = [take.outcome for take in takes_of(histories) if take.process == "holder" and take.body == body]
    print(f"the paused holder's commit of {body}: {outcome}; "
          f"{[event['reason'] for event in histories['holder'] if event['op'] == 'renewed']}")
    assert counted.ok, counted
    assert outcome in (["aborted"], ["unknown"]), "a commit whose locks went with the session does not return"
    # It goes on: its backend serves new transactions on the session kazoo opened (or the worker renews it).
    sessions = {event["session"] for event in histories["holder"]
                if event["op"] == "session" and event["state"] == "connected"}
    assert len(sessions) >= 2 or any(event["op"] == "renewed" for event in histories["holder"]), (
        "the holder went on on a new session")


def freeze(pid: int | None) -> None:
    """SIGSTOP a server for a moment before its SIGKILL: every client then has a call sent and unanswered (the
    producer's is the multi of its commit), so the kill cuts requests in flight, not idle connections."""
    assert pid is not None, "the server runs"
    os.kill(pid, signal.SIGSTOP)
    time.sleep(0.5)


def kill_the_servers_mid_run(run: Run, kill: Callable[[], None], bring_back: Callable[[], object], *, items: int,
                             pause_s: float) -> Count:
    """Producer and three consumers; once a third is consumed, ``kill`` a server, wait longer than a session
    timeout, ``bring_back`` the server; every process must commit again after the kill, the producer after
    the return too, and the count must hold."""
    for name in ("c1", "c2", "c3"):
        run.start(name, "consumer")
    run.start("producer", "producer", "--items", str(items), "--batch", "5", "--pause", str(pause_s))
    wait_until(lambda: sum(1 for events in run.histories().values() for event in events
                           if event["op"] == "commit_ok") >= items // 3, "a third of the items consumed")
    kill()
    killed_at = time.time()
    time.sleep(SESSION_TIMEOUT_S + 1.0)  # longer than a session timeout
    bring_back()
    back_at = time.time()
    counted, histories, _ = run.finish(k=None)
    print(counted.summary())
    last_put = max(event["at"] for event in histories["producer"] if event["op"] == "put_ok")
    for name, events in histories.items():
        back = [event["at"] for event in events if event["op"] == "session" and event["at"] > killed_at
                and event["state"] in ("connected", "reconnected")]
        if back and back[0] > last_put:  # kazoo's reconnection came after the last put: nothing was left for it
            continue
        after = [event["op"] for event in events if event["at"] > killed_at]
        assert "commit_ok" in after or "put_ok" in after, f"{name} committed after the kill: {after[:5]}"
    assert any(event["op"] == "put_ok" and event["at"] > back_at for event in histories["producer"]), \
        "the run went on after the server came back"
    commits = sorted(event["at"] for events in histories.values() for event in events if event["op"] == "commit_ok")
    sessions = [event["state"] for events in histories.values() for event in events if event["op"] == "session"]
    failed = [event["op"] for events in histories.values() for event in events
              if event["op"] in ("take_failed", "commit_aborted", "commit_unknown", "put_aborted", "put_unknown")]
    print(f"server back after {back_at - killed_at:.1f} s; longest pause between two returned commits "
          f"{max(b - a for a, b in itertools.pairwise(commits)):.1f} s; sessions: "
          f"{sessions.count('reconnected')} reconnected, {sessions.count('expired')} expired; "
          f"{len(failed)} transactions failed or unanswered {sorted(failed)}")
    return counted


def test_the_zookeeper_server_killed_and_restarted_mid_run(zookeeper: str, zookeeper_server: LocalZooKeeper,
                                                           new_run: NewRun) -> None:
    """SIGKILL the server, start it again on its data directory: no returned commit lost, no lock left."""
    run = new_run(zookeeper, "at-least-once")

    def kill() -> None:
        freeze(zookeeper_server.pid)
        zookeeper_server.kill()

    counted = kill_the_servers_mid_run(run, kill, zookeeper_server.start, items=150, pause_s=0.02)
    assert counted.ok, counted


@pytest.mark.slow
def test_the_ensemble_leader_killed_and_brought_back_mid_run(zookeeper_ensemble: LocalZooKeeperEnsemble,
                                                             new_run: NewRun) -> None:
    """Three nodes; the leader SIGKILLed mid-run and started again: the count as on one server."""
    run = new_run(zookeeper_ensemble.address, "at-least-once")
    leader = zookeeper_ensemble.leader()
    assert leader is not None

    def kill() -> None:
        freeze(zookeeper_ensemble.pid(leader))
        zookeeper_ensemble.kill(leader)

    counted = kill_the_servers_mid_run(run, kill, lambda: zookeeper_ensemble.start_member(leader), items=300,
                                       pause_s=0.2)  # the producer runs on past the leader's return
    assert counted.ok, counted


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["at-least-once", "times:3"])
def test_consumers_killed_at_random_moments_again_and_again(zookeeper: str, new_run: NewRun, policy: str) -> None:
    """Three consumers, each 50 ms in user code per item; every 0.5-1.5 s (seeded) one of them is SIGKILLed
    wherever it is and a fresh one started, eight times over: the count over every life's history holds."""
    run = new_run(zookeeper, policy)
    chance = random.Random(19)
    alive = []
    for n in range(3):
        run.start(f"c{n}", "consumer", "--poison-every", "11", "--work-s", "0.05")
        alive.append(f"c{n}")
    run.start("producer", "producer", "--items", "400", "--batch", "10", "--pause", "0.01")
    for life in range(3, 11):
        time.sleep(chance.uniform(0.5, 1.5))
        victim = alive.pop(chance.randrange(len(alive)))
        run.kill(victim)
        run.start(f"c{life}", "consumer", "--poison-every", "11", "--work-s", "0.05")
        alive.append(f"c{life}")
    with raw_client(run.hosts) as zk:
        wait_until(lambda: not set(run.locks(zk).values()) & dead_sessions(run), "the killed consumers' locks went")
    counted, histories, _ = run.finish(k=3 if policy == "times:3" else None)
    open_at_death = [take for take in takes_of(histories) if take.outcome == "open"]
    print(f"{len(run.killed)} consumers killed, {len(open_at_death)} of them holding an item; {counted.summary()}")
    assert counted.ok, counted


def dead_sessions(run: Run) -> set[int]:
    """The session ids the killed processes had (from their histories' session events)."""
    return {event["session"] for name in run.killed
            for event in read_history(run.directory / f"{name}.jsonl") if event["op"] == "session"}
