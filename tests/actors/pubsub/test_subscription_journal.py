"""A subscription's own journal on a disk store: what its answers wait for, and a Seek a crash cut short.

The kill -9 tests with Google's client are in tests/cli/test_serve_data_dir.py; these drive the
actors directly, on the simulator's disk (virtual time, every message in the trace) and on a real
data directory, to reach the cases a client cannot time: the order of a sync and an answer, and a
process that died between a Seek's generation and its new queue's first sync.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conveyor.actors.pubsub import (
    Batch,
    CreateSubscription,
    CreateTopic,
    Publish,
    PublishedIds,
    PubMessage,
    PubSubRegistry,
    PubSubServer,
    PullMessages,
    Settle,
    SettleKind,
    SettleOutcome,
    SubscriptionConfig,
    TopicConfig,
)
from conveyor.actors.pubsub._seek_log import GENERATION
from conveyor.actors.storage import DiskJournalStore
from conveyor.runtime import EventKind, JournalSynced
from conveyor.simulation import Simulation
from conveyor.simulation.scenarios import open_disk_store

TOPIC, SUBSCRIPTION = "projects/p/topics/t", "projects/p/subscriptions/s"
SUBSCRIPTION_PATH = "/pubsub/subscription-2"  # the topic is the registry's first child, the subscription its second


def _setup(ask: Any, exactly_once: bool) -> tuple[str, ...]:
    """A topic, a subscription and three published messages: their ids."""
    ask(CreateTopic(TopicConfig(TOPIC)))
    ask(CreateSubscription(SubscriptionConfig(SUBSCRIPTION, TOPIC, exactly_once=exactly_once)))
    published = ask(Publish(TOPIC, tuple(PubMessage(f"m{n}".encode()) for n in range(3))))
    assert type(published) is PublishedIds
    return published.message_ids


def test_an_exactly_once_ack_is_answered_only_after_its_confirmation_is_synced() -> None:
    sim = Simulation(1, journal_store=open_disk_store, disk_latency=(0.5, 0.5))
    registry = sim.spawn(lambda: PubSubRegistry(b"k" * 32), name="pubsub")
    _setup(lambda request: sim.ask(registry, request, timeout=60.0), exactly_once=True)
    batch = sim.ask(registry, PullMessages(SUBSCRIPTION, 3, 1.0), timeout=60.0)
    assert type(batch) is Batch and len(batch.received) == 3
    start = len(sim.trace)
    outcome = sim.ask(registry, Settle(SUBSCRIPTION, SettleKind.ACK, tuple(r[0] for r in batch.received)),
                      timeout=60.0)
    assert outcome == SettleOutcome(())
    events = sim.trace[start:]
    confirmed = next(i for i, e in enumerate(events) if e.kind is EventKind.DELIVERED
                     and e.receiver == SUBSCRIPTION_PATH and type(e.message).__name__ == "Confirmed")
    answered = next(i for i, e in enumerate(events) if e.kind is EventKind.SENT
                    and e.sender == SUBSCRIPTION_PATH and type(e.message) is SettleOutcome)
    # The queue confirmed the acks (synced); the subscription then journaled the confirmed ids, and
    # answers only once a sync covering that write reached it.
    assert any(e.kind is EventKind.DELIVERED and e.receiver == SUBSCRIPTION_PATH and type(e.message) is JournalSynced
               for e in events[confirmed:answered])
    # The same ids acked again are confirmed again (the memory the journal keeps).
    again = sim.ask(registry, Settle(SUBSCRIPTION, SettleKind.ACK, tuple(r[0] for r in batch.received)),
                    timeout=60.0)
    assert again == SettleOutcome(())
    sim.shutdown()


def test_a_seek_cut_short_by_a_crash_is_done_again_at_the_next_start(tmp_path: Path) -> None:
    server = PubSubServer(data_dir=tmp_path)
    ids = _setup(lambda request: server.system.ask(server.registry, request, timeout=30.0), exactly_once=False)
    server.close()  # a clean stop keeps every journal
    # The process that died had journaled a Seek's new generation, and nothing of its new queue.
    store = DiskJournalStore(tmp_path, threaded=False)
    store.write(SUBSCRIPTION_PATH, "events", ((GENERATION, 1),))
    store.write_queued()
    store.close()
    server = PubSubServer(data_dir=tmp_path)
    try:
        batch = server.system.ask(server.registry, PullMessages(SUBSCRIPTION, 10, 2.0), timeout=30.0)
        assert type(batch) is Batch
        # queue-1 never received the log's messages: the start rebuilt them into a new generation.
        assert sorted(message.message_id for _, message, _ in batch.received) == sorted(ids)
    finally:
        server.close()


def test_an_event_the_journal_cannot_replay_is_skipped_not_fatal(tmp_path: Path) -> None:
    server = PubSubServer(data_dir=tmp_path)
    ids = _setup(lambda request: server.system.ask(server.registry, request, timeout=30.0), exactly_once=False)
    server.close()
    store = DiskJournalStore(tmp_path, threaded=False)
    store.write(SUBSCRIPTION_PATH, "events", (("no such event", 1),))
    store.write_queued()
    store.close()
    server = PubSubServer(data_dir=tmp_path)
    try:  # a start that raised would be restarted into the same raise, and its journal lost at the end
        batch = server.system.ask(server.registry, PullMessages(SUBSCRIPTION, 10, 2.0), timeout=30.0)
        assert sorted(message.message_id for _, message, _ in batch.received) == sorted(ids)
    finally:
        server.close()


def _first_delivery(start: int) -> tuple[Simulation, Any, str, str]:
    """A fresh process (start ``start``, the same key): topic, exactly-once subscription, 3 messages, 1 pulled."""
    sim = Simulation(7)
    registry = sim.spawn(lambda: PubSubRegistry(b"k" * 32, start=start), name="pubsub")
    _setup(lambda request: sim.ask(registry, request), exactly_once=True)
    batch = sim.ask(registry, PullMessages(SUBSCRIPTION, 1, 1.0))
    ((ack_id, message, _),) = batch.received
    return sim, registry, ack_id, message.message_id


def test_an_ack_id_of_an_earlier_start_never_settles_a_delivery_of_this_one() -> None:
    # Two starts that did the same things: the same subscription, binding, tag, attempt and message.
    _, _, earlier, message_id = _first_delivery(start=1)
    sim, registry, current, again = _first_delivery(start=2)
    assert again == message_id and current != earlier  # only the start tells them apart
    answer = sim.ask(registry, Settle(SUBSCRIPTION, SettleKind.ACK, (earlier,)))
    assert answer == SettleOutcome((earlier,))  # refused: its lease ended with its process
    assert sim.ask(registry, Settle(SUBSCRIPTION, SettleKind.ACK, (current,))) == SettleOutcome(())  # still held
    sim.shutdown()
