"""A producer or consumer process on a real ZooKeeper, for ``test_zk_processes.py`` (``python -m`` this module).

Each process owns its ``KazooSession`` and ``ZkTxBackend`` on a ``ThreadSystem`` and drives them
through the blocking ``TxQueue`` (or a ``QueueListenerContainer``). It appends what it does and sees
to its own history file, one JSON line per event, fsync'd before the next step, so a SIGKILL leaves
an exact prefix: a ``taken`` line is written once the item is in user code's hands, a ``commit_ok``
once ``commit()`` returned. ``zk_history.py`` reads the files back and counts.

A *holder* takes ``--hold`` items (after ``--hold-after`` ordinary transactions), writes ``holding``
with their numbers, prints ``holding`` and sleeps: the test kills it with SIGKILL while it holds
their locks. Consumers exit when the ``--stop-file`` exists and their last take found nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import sys
import threading
import time
from pathlib import Path
from typing import Any

from conveyor.actors.transactions import (
    AtLeastOnce,
    ConsumePolicy,
    ConsumeTimes,
    ListenerConsumer,
    QueueListenerContainer,
    Transaction,
    TransactionError,
    TxItem,
    TxQueue,
    ZkTxBackend,
)
from conveyor.actors.zookeeper import KazooSession
from conveyor.runtime import Actor, ActorRef, AskTimeout, ThreadSystem
from conveyor.runtime.lowlevel import ZkSessionEvent, ZkWatchSession

TAKE_WAIT_S = 0.5
"""How long a consumer's take waits for an item."""


class History:
    """One process's history: JSON lines, each written with one ``os.write`` and fsync'd at once."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def record(self, op: str, **fields: Any) -> None:
        """Append the event ``op`` and make it durable before the caller goes on."""
        line = (json.dumps({"op": op, "at": time.time(), **fields}, separators=(",", ":")) + "\n").encode()
        os.write(self.fd, line)
        os.fsync(self.fd)


def policy_of(text: str) -> ConsumePolicy:
    """``at-least-once`` or ``times:K``."""
    if text == "at-least-once":
        return AtLeastOnce()
    if text.startswith("times:"):
        return ConsumeTimes(int(text.removeprefix("times:")))
    msg = f"--policy must be 'at-least-once' or 'times:K', got {text!r}"
    raise ValueError(msg)


def is_poison(body: str, every: int) -> bool:
    """Items the consumers roll back on purpose: every ``every``-th by the number in the body."""
    return every > 0 and int(body.rsplit("-", 1)[1]) % every == 0


class SessionEvents(Actor):
    """Hands the ZooKeeper session's events to a thread that records them (no file is written in a handler)."""

    def __init__(self, seen: queue.SimpleQueue[ZkSessionEvent]) -> None:
        self.seen = seen

    def receive(self, message: Any) -> None:
        if isinstance(message, ZkSessionEvent):
            self.seen.put(message)


def record_session_events(history: History, seen: queue.SimpleQueue[ZkSessionEvent]) -> None:
    while True:
        event = seen.get()
        history.record("session", state=event.state, session=event.session_id)


class Client:
    """A ZooKeeper session and a backend on it, with a queue handle; renewed after the session expired."""

    def __init__(self, system: ThreadSystem, args: argparse.Namespace, history: History) -> None:
        self.system = system
        self.args = args
        self.history = history
        self.refs: list[ActorRef] = []
        self.stale = ""
        self.seen: queue.SimpleQueue[ZkSessionEvent] = queue.SimpleQueue()
        threading.Thread(target=record_session_events, args=(history, self.seen), daemon=True).start()
        self.queue = self._open()

    def _open(self) -> TxQueue:
        args = self.args
        session = self.system.spawn(lambda: KazooSession(args.hosts, timeout=args.session_timeout))
        backend = self.system.spawn(lambda: ZkTxBackend(session, root=args.root))
        events = self.system.spawn(lambda: SessionEvents(self.seen))
        session.tell(ZkWatchSession(events))
        self.refs = [backend, events, session]
        handle = TxQueue(self.system, backend)
        handle.declare(args.queue, policy_of(args.policy))
        handle.declare(args.out, AtLeastOnce())
        return handle

    def renew(self, why: str) -> None:
        """The session expired: a backend refuses everything after that, so start a new one on a new session
        before the next transaction (the one that found out is rolled back on the old backend first)."""
        self.stale = why

    def fresh(self) -> TxQueue:
        """The queue handle, renewed first if its session expired."""
        if self.stale:
            self.history.record("renewed", reason=self.stale)
            self.stale = ""
            self.queue.close()
            for ref in self.refs:
                self.system.stop(ref)
            self.queue = self._open()
        return self.queue


def expired(error: Exception) -> bool:
    return "session expired" in str(error)


def produce(system: ThreadSystem, args: argparse.Namespace, history: History) -> None:
    """Commit ``--items`` bodies ``<prefix>-<n>`` into the queue in batches; a failed batch is not retried."""
    client = Client(system, args, history)
    print("ready", flush=True)
    number = 0
    committed = 0
    while committed < args.items:
        bodies = [f"{args.prefix}-{number + n}" for n in range(args.batch)]
        number += args.batch
        history.record("put", bodies=bodies)
        with client.fresh().new_transaction() as tx:
            for body in bodies:
                tx.put(args.queue, body.encode())
            try:
                tx.commit()
            except TransactionError as error:
                history.record("put_aborted", bodies=bodies, reason=str(error))
                if expired(error):
                    client.renew(str(error))
                continue
            except AskTimeout as error:
                history.record("put_unknown", bodies=bodies, reason=str(error))
                continue
        history.record("put_ok", bodies=bodies)
        committed += len(bodies)
        time.sleep(args.pause)
    print("produced", flush=True)


def say_holding(history: History, numbers: list[int]) -> None:
    """Say which items this holds (one write: two listeners may say it at once)."""
    history.record("holding", numbers=numbers)
    os.write(sys.stdout.fileno(), ("holding " + " ".join(map(str, numbers)) + "\n").encode())


def hold_forever(history: History, numbers: list[int]) -> None:
    """Say which items this holds, then sleep holding them until killed."""
    say_holding(history, numbers)
    while True:
        time.sleep(60)


def commit(client: Client, tx: Transaction, bodies: list[str]) -> bool:
    """Commit ``tx`` and record its outcome for each body it took; True if it returned."""
    history = client.history
    try:
        tx.commit()
    except TransactionError as error:
        for body in bodies:
            history.record("commit_aborted", body=body, reason=str(error))
        if expired(error):
            client.renew(str(error))
        return False
    except AskTimeout as error:
        for body in bodies:
            history.record("commit_unknown", body=body, reason=str(error))
        return False
    for body in bodies:
        history.record("commit_ok", body=body)
    return True


def take_more(client: Client, tx: Transaction, held: list[TxItem], count: int) -> None:
    """Take into ``tx`` until it holds ``count`` items."""
    while len(held) < count:
        more = tx.take(client.args.queue, TAKE_WAIT_S)
        if more is not None:
            client.history.record("taken", body=more.body.decode(), number=more.key.number, takes=more.takes)
            held.append(more)


def consume(system: ThreadSystem, args: argparse.Namespace, history: History) -> None:
    """Transactions one after the other: take one item, put its body to ``--out``, commit (or roll back poison).

    With ``--hold``, after ``--hold-after`` commits one transaction takes ``--hold`` items and holds them:
    for ever, or with ``--go-file`` until that file exists, then commits them (once; then it goes on).
    """
    client = Client(system, args, history)
    print("ready", flush=True)
    done = 0
    to_hold = args.hold
    while True:
        with client.fresh().new_transaction() as tx:
            try:
                item = tx.take(args.queue, TAKE_WAIT_S)
            except TransactionError as error:
                history.record("take_failed", reason=str(error))
                if expired(error):
                    client.renew(str(error))
                continue
            except AskTimeout as error:
                history.record("take_failed", reason=str(error))
                continue
            if item is None:
                if Path(args.stop_file).exists():
                    return
                continue
            body = item.body.decode()
            history.record("taken", body=body, number=item.key.number, takes=item.takes)
            if to_hold and done >= args.hold_after:
                held = [item]
                take_more(client, tx, held, to_hold)
                numbers = [taken.key.number for taken in held]
                if not args.go_file:
                    hold_forever(history, numbers)
                say_holding(history, numbers)
                while not Path(args.go_file).exists():
                    time.sleep(0.05)
                to_hold = 0
                for taken in held:
                    tx.put(args.out, taken.body)
                commit(client, tx, [taken.body.decode() for taken in held])
                continue
            if is_poison(body, args.poison_every) and (item.takes == 1 or args.policy != "at-least-once"):
                tx.rollback()
                history.record("rolled_back", body=body)
                continue
            time.sleep(args.work_s)  # user code at work, holding the lock
            tx.put(args.out, item.body)
            if commit(client, tx, [body]):
                done += 1


def hold_in_container(system: ThreadSystem, args: argparse.Namespace, history: History) -> None:
    """A listener container of ``--hold`` workers whose listener holds every item it is given, for ever."""
    client = Client(system, args, history)

    def listener(consumer: ListenerConsumer, item: TxItem) -> None:
        history.record("taken", body=item.body.decode(), number=item.key.number, takes=item.takes)
        hold_forever(history, [item.key.number])

    container = QueueListenerContainer(system, client.queue.store, args.queue, listener, workers=args.hold)
    container.start()
    print("ready", flush=True)
    while True:
        time.sleep(60)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("role", choices=["producer", "consumer", "holding-container"])
    parser.add_argument("--hosts", required=True)
    parser.add_argument("--root", required=True)
    parser.add_argument("--queue", default="in")
    parser.add_argument("--out", default="out")
    parser.add_argument("--policy", default="at-least-once")
    parser.add_argument("--history", required=True)
    parser.add_argument("--session-timeout", type=float, default=3.0)
    parser.add_argument("--items", type=int, default=100)
    parser.add_argument("--batch", type=int, default=5)
    parser.add_argument("--pause", type=float, default=0.0)
    parser.add_argument("--prefix", default="p")
    parser.add_argument("--stop-file", default="")
    parser.add_argument("--hold", type=int, default=0)
    parser.add_argument("--hold-after", type=int, default=0)
    parser.add_argument("--poison-every", type=int, default=0)
    parser.add_argument("--go-file", default="")
    parser.add_argument("--work-s", type=float, default=0.0)
    args = parser.parse_args(argv)
    history = History(args.history)
    history.record("start", pid=os.getpid(), role=args.role)
    with ThreadSystem() as system:
        if args.role == "producer":
            produce(system, args, history)
        elif args.role == "consumer":
            consume(system, args, history)
        else:
            hold_in_container(system, args, history)
    history.record("exit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
