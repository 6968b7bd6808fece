"""The transaction checkers on hand-made traces: what a ZooKeeper backend's partial answers mean to them.

A commit whose reply was lost and then found applied is answered ``TxCommitted`` without its keys;
a commit whose outcome stayed unknown is never answered; a ``Taken`` may wait in a paused client's
mailbox while its lock vanishes with the backend's session. Several backends share the queues.
"""

from __future__ import annotations

from typing import Any

from conveyor.actors.transactions import CommitTx, ItemKey, Taken, TxCommitted, TxItem, TxPut
from conveyor.runtime import Actor, ActorRef, EventKind, TraceEvent
from conveyor.simulation import Simulation
from conveyor.simulation.checkers import TxFinal, tx_atomicity, tx_history, tx_no_loss, tx_no_phantom

BACKENDS = ("/tx-0", "/tx-1")
IN_1, IN_2 = ItemKey("in", 1), ItemKey("in", 2)


class Idle(Actor):
    def receive(self, message: Any) -> None:
        pass


def refs(*names: str) -> list[ActorRef]:
    sim = Simulation(seed=0)
    return [sim.spawn(Idle, name=name) for name in names]


PRODUCER, TAKER, OTHER = refs("producer", "container-0", "container-1")


def sent(store: str, to: ActorRef, message: object, time: float = 0.0) -> list[TraceEvent]:
    """A message from a store: its send and its delivery."""
    return [TraceEvent(EventKind.SENT, time, store, to.path, message),
            TraceEvent(EventKind.DELIVERED, time, store, to.path, message)]


def asked(client: ActorRef, store: str, message: object) -> list[TraceEvent]:
    """A message to a store: its send and its delivery."""
    return [TraceEvent(EventKind.SENT, 0.0, client.path, store, message),
            TraceEvent(EventKind.DELIVERED, 0.0, client.path, store, message)]


def produced(store: str, created: tuple[ItemKey, ...]) -> list[TraceEvent]:
    """The producer commits items ``a`` and ``b`` into ``in``; the store answers with ``created``."""
    commit = CommitTx(PRODUCER, 1, (), (TxPut("in", b"a"), TxPut("in", b"b")))
    return asked(PRODUCER, store, commit) + sent(store, PRODUCER, TxCommitted(1, created))


def final(*items: tuple[ItemKey, bytes]) -> TxFinal:
    return TxFinal({"in": tuple(items)}, {"in": ()}, {"in": 0})


def test_a_commit_answered_without_its_keys_is_matched_by_body() -> None:
    trace = produced("/tx-1", ())  # the reply was lost; the marker said it was applied
    history = tx_history(trace, BACKENDS)
    both = final((IN_1, b"a"), (IN_2, b"b"))
    assert tx_no_phantom(history, both).ok
    assert tx_no_loss(history, both).ok
    one = final((IN_1, b"a"))
    loss = tx_no_loss(history, one)
    assert not loss.ok and "b'b'" in loss.violations[0] and "keys unknown" in loss.violations[0]
    assert not tx_no_phantom(history, final((IN_1, b"a"), (IN_2, b"z"))).ok, "a body no put had is a phantom"


def test_an_unanswered_commit_may_or_may_not_have_applied() -> None:
    trace = produced("/tx-0", (IN_1, IN_2))
    trace += sent("/tx-0", TAKER, Taken(1, TxItem(IN_1, b"a", 1)))
    commit = CommitTx(TAKER, 1, (IN_1,), (TxPut("out", b"done:a"),))
    trace += asked(TAKER, "/tx-0", commit)  # never answered: its session expired while it was resolved
    history = tx_history(trace, BACKENDS)
    assert history.unanswered() == [(TAKER.path, 1)]
    applied = TxFinal({"in": ((IN_2, b"b"),), "out": ((ItemKey("out", 1), b"done:a"),)}, {}, {})
    not_applied = TxFinal({"in": ((IN_1, b"a"), (IN_2, b"b")), "out": ()}, {}, {})
    for end in (applied, not_applied):
        assert tx_no_loss(history, end).ok
        assert tx_no_phantom(history, end).ok
        assert tx_atomicity(history, end).ok
    assert not tx_no_loss(history, TxFinal({"in": (), "out": ()}, {}, {})).ok, "IN_2 was never taken"


def test_a_take_is_dated_by_the_store_sending_it_not_by_its_delivery() -> None:
    trace = produced("/tx-1", (IN_1, IN_2))
    late = Taken(1, TxItem(IN_1, b"a", 1))
    trace.append(TraceEvent(EventKind.SENT, 0.3, "/tx-1", OTHER.path, late))  # then /tx-1's session expires
    trace += sent("/tx-0", TAKER, Taken(1, TxItem(IN_1, b"a", 2)), 1.0)
    trace += asked(TAKER, "/tx-0", CommitTx(TAKER, 1, (IN_1,), ()))
    trace += sent("/tx-0", TAKER, TxCommitted(1, ()), 1.1)
    trace.append(TraceEvent(EventKind.DELIVERED, 1.3, "/tx-1", OTHER.path, late))  # its client was paused
    end = final((IN_2, b"b"))
    assert tx_atomicity(tx_history(trace, BACKENDS), end).ok
    trace += sent("/tx-1", OTHER, Taken(2, TxItem(IN_1, b"a", 3)), 1.4)  # granted after the removal: wrong
    result = tx_atomicity(tx_history(trace, BACKENDS), end)
    assert not result.ok and "taken again" in result.violations[0]


def test_a_single_store_path_still_reads_only_that_store() -> None:
    trace = produced("/tx-1", (IN_1, IN_2))
    assert tx_history(trace, "/tx-0").committed == {}
    assert set(tx_history(trace, "/tx-1").created()) == {IN_1, IN_2}
