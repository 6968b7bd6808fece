"""Durable queues: after a crash the restarted queue has exactly the state it had, on every backend.

The core property (hypothesis): any sequence of calls on an ``EntryList`` made through
``journal_calls``, with compactions anywhere, replays from the journal into the same state.
The actor tests crash a real ``QueueActor`` mid-work on trio, threads and the simulator and
check what a client sees: nothing lost, nothing redelivered, leases and acks still valid.
"""

from __future__ import annotations

import functools
import pickle
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conveyor.actors.broker import (
    COMPACT_AFTER_EVENTS,
    Ack,
    ConsumerActor,
    ConsumerSettings,
    Delivered,
    DeliveryError,
    EntryList,
    GetStats,
    MatchAll,
    Message,
    Overflow,
    Publish,
    PublishBatch,
    Pull,
    QueueActor,
    QueueConfig,
    QueueStats,
    Reconfigure,
    Rejoin,
    Rejoined,
    RetryPolicy,
    Subscribe,
    Subscribed,
)
from conveyor.actors.broker._durable import (
    COMPACT_AFTER_BYTES,
    CoreCall,
    as_core_call,
    journal_calls,
    published_bytes,
    recorded_call,
    replay_call,
)
from conveyor.actors.broker._entries import EntryListSnapshot
from conveyor.runtime import Actor, ActorRef, EventKind, Journal, ensure_immutable
from conveyor.simulation import FailWrite, InjectedFault, Simulation
from tests.actors.broker.clients import Action, Client, GetAckResults, GetSeen, Send, consume, received, seen
from tests.conftest import Harness


@attrs.frozen
class CrashNow:
    """Makes a ``CrashableQueue`` raise: its instance dies and the supervisor restarts it."""


class CrashableQueue(QueueActor):
    """A real queue that raises on ``CrashNow``, as a bug in a handler would."""

    def receive(self, message: Any) -> None:
        if type(message) is CrashNow:
            msg = "injected crash of the queue"
            raise RuntimeError(msg)
        super().receive(message)


def durable_queue(backend: Harness, durable: bool = True, **options: Any) -> Any:
    config = QueueConfig("q", durable=durable, **options)
    return backend.spawn(lambda: CrashableQueue(config), name="q")


def unpaged(stats: QueueStats) -> QueueStats:
    """The counters a restart keeps: where a paged queue's bodies are (RAM or store) may differ after it."""
    return attrs.evolve(stats, body_bytes_in_ram=None, bodies_paged=0)


async def stats_of(backend: Harness, queue: Any) -> QueueStats:
    await backend.quiet()
    result: QueueStats = await backend.ask(queue, GetStats())
    return result


# --- the actor, on every backend ---------------------------------------------------------------


async def test_a_crashed_durable_queue_keeps_its_messages_leases_and_consumers(backend: Harness) -> None:
    queue = durable_queue(backend, ack_deadline_s=60.0)
    client, _ = consume(backend, queue, Action.IGNORE, settings=ConsumerSettings(prefetch_messages=3))
    await backend.quiet()
    for n in range(1, 6):
        queue.tell(Publish(Message(f"m{n}".encode())))
    before = await stats_of(backend, queue)
    assert (before.depth, before.in_flight, before.published, before.delivered) == (2, 3, 5, 3)

    queue.tell(CrashNow())
    after = await stats_of(backend, queue)
    assert unpaged(after) == unpaged(before)  # every counter, every consumer, every entry's state

    # The leases taken before the crash are still the consumer's: its acks count, and the
    # credit they free brings the two queued messages, each delivered once in all.
    consumer_id = (await seen(backend, client))[0].delivery.consumer_id
    await backend.ask(client, Send(Ack(consumer_id, (1, 2, 3), confirm=True)))
    await backend.quiet()
    results = await backend.ask(client, GetAckResults())
    assert [r.acked for r in results] == [(1, 2, 3)]
    assert await received(backend, client) == [(f"m{n}".encode(), 1) for n in range(1, 6)]
    final = await stats_of(backend, queue)
    assert (final.depth, final.in_flight, final.acked, final.redelivered) == (0, 2, 3, 0)


async def test_a_crashed_queue_that_is_not_durable_starts_empty(backend: Harness) -> None:
    # The contrast that makes the durable test mean something: without the journal a restart
    # loses every message and forgets every consumer.
    queue = durable_queue(backend, durable=False, ack_deadline_s=60.0)
    consume(backend, queue, Action.IGNORE, settings=ConsumerSettings(prefetch_messages=3))
    await backend.quiet()
    for n in range(5):
        queue.tell(Publish(Message(f"m{n}".encode())))
    await backend.quiet()
    queue.tell(CrashNow())
    after = await stats_of(backend, queue)
    assert (after.depth, after.in_flight, after.published, after.consumers) == (0, 0, 0, ())
    assert "/q" not in backend.system.journals


def test_compaction_keeps_the_journal_in_proportion_and_recovery_still_exact() -> None:
    sim = Simulation(seed=7, trace=False)
    queue = sim.spawn(lambda: CrashableQueue(QueueConfig("q", durable=True)), name="q")
    client = sim.spawn(Client, name="client")  # acks every delivery
    consumer = sim.spawn(
        lambda: ConsumerActor(queue, client, ConsumerSettings(prefetch_messages=50)), name="consumer"
    )
    sim.run()
    for n in range(3_000):
        queue.tell(Publish(Message(b"x", message_id=str(n))))
        if n % 100 == 0:
            sim.run()
    sim.run()
    journal = sim.journals["/q"]
    assert journal.snapshots_saved >= 2
    assert len(journal) < COMPACT_AFTER_EVENTS + 64  # not one event per call since the start
    before = sim.ask(queue, GetStats())
    assert before.acked == 3_000
    queue.tell(CrashNow())
    sim.run()
    assert unpaged(sim.ask(queue, GetStats())) == unpaged(before)
    assert consumer.is_alive


def test_a_failed_journal_write_anywhere_loses_no_message_and_stalls_no_consumer() -> None:
    # Fail each of the first 70 writes in turn: subscribing, pulls, acks, publishes. The handler
    # (and the request it handled) dies; recovery and the Rejoin handshake must bring every
    # message to an ack all the same.
    failed_on: set[str] = set()
    for nth in range(1, 71):
        sim = Simulation(seed=nth, trace=True, faults=[FailWrite("/q", nth=nth)])
        queue = sim.spawn(lambda: QueueActor(QueueConfig("q", durable=True, ack_deadline_s=1.0)), name="q")
        client = sim.spawn(Client, name="client")
        sim.spawn(functools.partial(ConsumerActor, queue, client, ConsumerSettings(prefetch_messages=3)),
                  name="consumer")
        sim.run()  # subscribed first: its registration is write 1
        queue.tell(PublishBatch(tuple(Message(f"b{n}".encode()) for n in range(10))))
        for n in range(10):
            queue.tell(Publish(Message(f"m{n}".encode())))
        sim.run(until=60.0)
        stats = sim.ask(queue, GetStats())
        failed_on |= {type(e.message).__name__ for e in sim.trace if e.kind is EventKind.FAILED}
        lost = stats.published - stats.acked
        # A request whose write failed is handled again, exactly once: the batch is one write, so
        # it is never cut short with a part kept (which a retry would double).
        assert (stats.published, lost, stats.depth) == (20, 0, 0), (nth, stats)
    assert {"Subscribe", "Pull", "Ack", "Publish", "PublishBatch"} <= failed_on


def test_a_batch_whose_write_fails_leaves_no_part_of_itself_behind() -> None:
    # An asked batch is not retried (its asker has the error), so what a failed write left is in
    # plain view. Whichever write fails, the batch is all in the queue, confirmed, or none of it.
    batch = PublishBatch(tuple(Message(f"b{n}".encode()) for n in range(5)))
    for nth in range(2, 8):
        sim = Simulation(seed=nth, trace=True, faults=[FailWrite("/q", nth=nth)])
        queue = sim.spawn(lambda: QueueActor(QueueConfig("q", durable=True)), name="q")
        queue.tell(Publish(Message(b"first")))  # write 1
        sim.run()
        try:
            answer = sim.ask(queue, batch)
        except InjectedFault:
            answer = None
        sim.run()
        stats = sim.ask(queue, GetStats())
        enqueued = [e.message.tag for e in sim.trace if e.kind is EventKind.NOTE
                    and type(e.message).__name__ == "EntryEnqueued"]
        if answer is None:
            assert nth == 2  # the batch is one write: the second
            assert (stats.published, stats.depth, enqueued) == (1, 1, [1])  # and it noted nothing
        else:
            assert [outcome.tag for outcome in answer.outcomes] == [2, 3, 4, 5, 6]
            assert (stats.published, stats.depth, enqueued) == (6, 6, [1, 2, 3, 4, 5, 6]), nth


def test_a_drop_head_publish_whose_write_fails_is_retried_whole() -> None:
    # At max_length with drop-head, a publish enqueues and evicts the least significant entry (here the
    # head): one write. Had they been two, failing the second would leave the queue past its length.
    # Paged (``--force-paging``), a head whose body is paged out is owed its dead letter: the send is a write too.
    writes = 0
    for nth in range(6):
        sim = Simulation(seed=nth, trace=True, faults=[FailWrite("/q", nth=nth)] if nth else [])
        dlq = sim.spawn(lambda: QueueActor(QueueConfig("dlq")), name="dlq")
        config = QueueConfig("q", durable=True, max_length=2, overflow=Overflow.DROP_HEAD, dead_letter=dlq)
        queue = sim.spawn(lambda: QueueActor(config), name="q")  # noqa: B023 - spawned at once
        for n in range(3):
            queue.tell(Publish(Message(f"m{n}".encode())))
        sim.run()
        if not nth:
            writes = sim.journals["/q"].writes
            assert writes == 3 + any(type(e).__name__ == "DeadLetterSent" for e in sim.journals["/q"])
        assert bool(sim.faults_applied) == (0 < nth <= writes), nth  # m0, m1, then drop + m2 as one (, the send)
        stats, dead = sim.ask(queue, GetStats()), sim.ask(dlq, GetStats())
        assert (stats.published, stats.depth, stats.dead_lettered, dead.published) == (3, 2, 1, 1), (nth, stats)


@attrs.frozen
class Tell:
    """Makes a ``ScriptedConsumer`` send ``message`` to the queue (a consumer's part, played by hand)."""

    message: Any


class ScriptedConsumer(Actor):
    """Subscribes, then sends the queue only what the test tells it; keeps what the queue sends."""

    def __init__(self, queue: ActorRef) -> None:
        self.queue = queue
        self.heard: list[Any] = []

    def on_start(self) -> None:
        self.ctx.send(self.queue, Subscribe(self.ctx.self_ref))

    def receive(self, message: Any) -> None:
        if type(message) is Tell:
            self.ctx.send(self.queue, message.message)
        elif message == "heard":
            self.ctx.reply(tuple(self.heard))
        else:
            self.heard.append(message)


def test_a_rejoined_answering_an_earlier_incarnation_voids_no_pull() -> None:
    """Two restarts before the consumer answers: its answer to the first ``Rejoin`` reaches the
    third instance, and the ``Pull`` after it asked the second for one message. Only the pull
    that follows the answer to the newest ``Rejoin`` is served: one message, as its credit said
    (found by the durable soak: a subscriber got 4 messages for a credit of 3)."""
    sim = Simulation(seed=3, trace=False)
    queue = sim.spawn(lambda: CrashableQueue(QueueConfig("q", durable=True, ack_deadline_s=60.0)), name="q")
    consumer = sim.spawn(lambda: ScriptedConsumer(queue), name="consumer")
    sim.run()
    for n in range(4):
        queue.tell(Publish(Message(f"m{n}".encode())))
    queue.tell(CrashNow())
    sim.run()
    queue.tell(CrashNow())
    sim.run()
    heard = sim.ask(consumer, "heard")
    (subscribed,) = [m for m in heard if type(m) is Subscribed]
    first, second = [m for m in heard if type(m) is Rejoin]
    assert first.incarnation != second.incarnation
    cid = subscribed.consumer_id
    for message in (Rejoined(cid, first.incarnation), Pull(cid, 1, 1 << 20),
                    Rejoined(cid, second.incarnation), Pull(cid, 1, 1 << 20)):
        consumer.tell(Tell(message))
    sim.run()
    delivered = [d for m in sim.ask(consumer, "heard") if type(m) is Delivered for d in m.deliveries]
    assert [d.message.body for d in delivered] == [b"m0"]
    assert sim.ask(queue, GetStats()).delivered == 1  # (the lease has lapsed since: the run went on to quiet)


def test_a_small_compaction_threshold_compacts_early_and_recovers_exactly() -> None:
    sim = Simulation(seed=3, trace=False)
    queue = sim.spawn(lambda: CrashableQueue(QueueConfig("q", durable=True, compact_after_events=8)), name="q")
    for n in range(40):
        queue.tell(Publish(Message(b"x", message_id=str(n))))
    client = sim.spawn(Client, name="client")  # acks every delivery
    sim.spawn(lambda: ConsumerActor(queue, client, ConsumerSettings(prefetch_messages=3)), name="consumer")
    for _ in range(3):  # the restart budget: three in a minute
        sim.run(max_steps=40)
        queue.tell(CrashNow())
    sim.run()
    assert sim.journals["/q"].snapshots_saved >= 1
    assert sim.ask(queue, GetStats()).acked == 40


def test_compact_after_events_must_be_a_positive_int() -> None:
    with pytest.raises(ValueError, match=r"compact_after_events"):
        QueueConfig("q", compact_after_events=0)


def test_durable_must_be_a_bool() -> None:
    with pytest.raises(ValueError, match=r"QueueConfig\.durable must be True or False, got 'yes'"):
        QueueConfig("q", durable="yes")  # type: ignore[arg-type]


# --- the core: replaying the journal rebuilds the same EntryList -------------------------------


def core_state(core: EntryList) -> tuple[Any, ...]:
    """Everything observable about an ``EntryList``, as a comparable value."""
    entries = []
    for tag in core.live_tags():
        e = core.get(tag)
        assert e is not None
        entries.append((
            e.seq, e.position, e.state.value, e.consumer, e.deadline, e.delivery_count,
            e.available_at, e.expires_at, e.last_consumer, e.message, e.last_error,
        ))
    cursors = {
        cid: (c.pointer, c.interested, tuple(sorted(c.held)), c.priority, c.acquiring)
        for cid, c in core._cursors.items()
    }
    counters = (core.available, core.acquired, core.published, core.delivered, core.redelivered,
                core.acked, core.dead_lettered, core.expired)
    groups = {group: tuple(owner) for group, owner in core._groups.items()}
    return tuple(entries), cursors, counters, groups, core.next_wakeup()


_PUBLISH = st.tuples(
    st.just("publish"), st.integers(0, 9), st.sampled_from([None, "g1", "g2"]), st.sampled_from([None, 0.7])
)
_TAKE = st.tuples(st.just("take"), st.integers(0, 3), st.integers(1, 4))
OPERATION = st.one_of(
    _PUBLISH,
    _TAKE,
    st.tuples(st.just("ack"), st.integers(0, 3), st.integers(1, 3)),
    _PUBLISH,
    _TAKE,
    st.tuples(st.just("subscribe"), st.integers(0, 2), st.booleans()),
    st.tuples(st.just("give_back"), st.integers(0, 3), st.integers(1, 3), st.sampled_from([0.0, 0.3])),
    st.tuples(st.just("nack"), st.integers(0, 3), st.integers(1, 3), st.booleans(), st.integers(0, 1)),
    st.tuples(st.just("fail"), st.integers(0, 3), st.integers(1, 3), st.booleans()),
    st.tuples(st.just("extend"), st.integers(0, 3), st.floats(0.1, 3.0)),
    st.tuples(st.just("interest"), st.integers(0, 3), st.booleans()),
    st.tuples(st.just("unsubscribe"), st.integers(0, 3)),
    st.tuples(st.just("tick"), st.floats(0.0, 1.5)),
    st.tuples(st.just("compact")),
)


PREFIX: list[tuple[Any, ...]] = [("subscribe", 0, True), ("subscribe", 1, True)] + [("publish", 4, None, None)] * 4
"""Every example starts from two consumers and four messages, so its calls have something to act on."""


@settings(max_examples=150, deadline=None)
@given(st.lists(OPERATION, min_size=10, max_size=80), st.booleans())
def test_replaying_the_journal_rebuilds_exactly_the_same_entry_list(
    operations: list[tuple[Any, ...]], as_core_calls: bool
) -> None:
    # ``as_core_calls``: the same journal as an older version wrote it, a CoreCall per call.
    journal = Journal("/q")
    core = EntryList(priorities=3, max_deliveries=3)

    def compact() -> None:
        journal.save_snapshot(core.snapshot())

    journal_calls(core, journal, lambda _held: None)

    def registry_call(method: str, *args: Any) -> None:
        # The queue journals a registry change as one event whose replay makes these calls.
        getattr(core, method)(*args)
        journal.append(recorded_call(method, args))

    now = 0.0
    consumers: list[int] = []
    next_id = 1
    for operation in PREFIX + operations:
        kind = operation[0]
        cid = consumers[operation[1] % len(consumers)] if consumers and kind not in ("publish", "tick",
                                                                                    "compact", "subscribe") else None
        held = tuple(sorted(core._cursors[cid].held)) if cid is not None else ()
        match operation:
            case ("publish", priority, group, ttl):
                core.publish(Message(b"m", priority=priority, group=group, ttl_s=ttl), now)
            case ("subscribe", priority, acquiring):
                registry_call("add_consumer", next_id, MatchAll(), priority, acquiring)
                consumers.append(next_id)
                next_id += 1
            case ("take", _, most) if cid is not None:
                if core._cursors[cid].acquiring:
                    core.take(cid, now, most, 1 << 20, now + 1.0)
                else:
                    core.browse(cid, most, 1 << 20)
            case ("ack", _, count) if cid is not None:
                core.ack(cid, held[:count])
            case ("give_back", _, count, delay) if cid is not None:
                core.give_back(cid, held[:count], now, delay)  # as a journal from before Nack.attempts has it
            case ("nack", _, count, with_delays, stale) if cid is not None:
                # A nack naming its deliveries: each tag's current one, or (stale) the one before it.
                attempts = tuple(max(1, core._cursors[cid].held[tag].delivery_count - stale) for tag in held[:count])
                if with_delays:
                    core.give_back_with(cid, held[:count], now, dict.fromkeys(held[:count], 0.2), attempts)
                else:
                    core.give_back(cid, held[:count], now, 0.0, attempts)
            case ("fail", _, count, with_delays) if cid is not None:
                # A nack saying why (a callback's error), as the consumer of a raising callback sends.
                errors = tuple(DeliveryError("ValueError", f"tag {tag}") if tag % 2 else None for tag in held[:count])
                attempts = tuple(core._cursors[cid].held[tag].delivery_count for tag in held[:count])
                if with_delays:
                    core.give_back_with(cid, held[:count], now, dict.fromkeys(held[:count], 0.2), attempts, errors)
                else:
                    core.give_back(cid, held[:count], now, 0.0, attempts, errors)
            case ("extend", _, seconds) if cid is not None:
                core.extend(cid, held, now + seconds)
            case ("interest", _, wanted) if cid is not None:
                registry_call("set_interest", cid, wanted)
            case ("unsubscribe", _) if cid is not None:
                registry_call("remove_consumer", cid, now)
                consumers.remove(cid)
            case ("tick", seconds):
                now += seconds
                core.expire_leases(now)
                core.expire_ttls(now)
                core.release_delays(now)
            case ("compact",):
                compact()
            case _:
                pass
    assert all(type(event) is tuple for event in journal)
    base = journal.snapshot
    rebuilt = EntryList(priorities=3, max_deliveries=3)
    if isinstance(base, EntryListSnapshot):
        ensure_immutable(base)  # a snapshot is a value: nothing the core does later can change it
        rebuilt.restore(base)
    for event in journal:
        replay_call(rebuilt, as_core_call(event) if as_core_calls else event)
    assert core_state(rebuilt) == core_state(core)


def test_a_recorded_publish_holds_only_plain_values_and_gives_back_an_equal_message() -> None:
    # The journal pickles each event on the publish path: a tuple of bytes, str, numbers and None
    # pickles without a class lookup; replay builds an equal Message from it.
    message = Message(b"body", headers=(("k", "v"), ("n", 3)), priority=7, ttl_s=2.5, delay_s=0.5, group="g",
                      message_id="id-1")
    event = recorded_call("publish", (message, 4.0))

    def plain(value: object) -> bool:
        return type(value) in (bytes, str, int, float, type(None)) or (
            type(value) is tuple and all(plain(item) for item in value))

    assert plain(event)
    call = as_core_call(event)
    assert call == CoreCall("publish", (message, 4.0))
    assert call.args[0].size == message.size
    assert as_core_call(recorded_call("ack", (3, (1, 2)))) == CoreCall("ack", (3, (1, 2)))
    with pytest.raises(ValueError, match=r"a recorded call is a tuple \(method, \*args\), got \(\)"):
        as_core_call(())


# A Message pickled before it had ``__reduce__``: attrs' slots state, as journals on disk may hold it.
_ATTRS_STATE_PICKLE = (
    b"\x80\x05\x95\xa4\x00\x00\x00\x00\x00\x00\x00\x8c\x1dconveyor.actors.broker._model\x94\x8c\x07Message"
    b"\x94\x93\x94)\x81\x94}\x94(\x8c\x04body\x94C\x01x\x94\x8c\x07headers\x94\x8c\x01a\x94K\x01\x86\x94"
    b"\x85\x94\x8c\x08priority\x94K\x07\x8c\x05ttl_s\x94G@\x08\x00\x00\x00\x00\x00\x00\x8c\x07delay_s\x94N"
    b"\x8c\x05group\x94\x8c\x01g\x94\x8c\nmessage_id\x94\x8c\x02id\x94\x8c\x04size\x94K\x03ub."
)


def test_a_message_pickles_as_its_fields_and_one_pickled_as_attrs_state_still_loads() -> None:
    # A snapshot pickles every queued message: as (Message, fields) it needs no state dict per message.
    message = Message(b"x", headers={"a": 1}, priority=7, ttl_s=3.0, group="g", message_id="id")
    for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
        data = pickle.dumps(message, protocol)
        assert b"size" not in data, "rebuilt by Message(*fields), which computes size"
        again = pickle.loads(data)
        assert (again, again.size) == (message, message.size)
    old = pickle.loads(_ATTRS_STATE_PICKLE)
    assert (old, old.size) == (message, message.size)


def test_a_call_that_raises_is_not_recorded() -> None:
    journal = Journal("/q")
    core = EntryList()
    journal_calls(core, journal, lambda _held: None)
    with pytest.raises(KeyError):
        core.take(99, 0.0, 1, 1 << 20, 1.0)  # no such consumer
    assert len(journal) == 0
    core.publish(Message(b"m"), 0.0)
    assert [event[0] for event in journal if type(event) is tuple] == ["publish"]


def test_a_snapshot_loads_only_into_a_new_list_of_the_same_shape() -> None:
    core = EntryList(priorities=3)
    core.publish(Message(b"m"), 0.0)
    snapshot = core.snapshot()
    with pytest.raises(ValueError, match=r"restore\(\) needs a new EntryList"):
        core.restore(snapshot)
    with pytest.raises(ValueError, match=r"priorities=3, max_deliveries=None cannot load into one with priorities=10"):
        EntryList().restore(snapshot)
    fresh = EntryList(priorities=3)
    fresh.restore(snapshot)
    assert core_state(fresh) == core_state(core)


def test_an_unknown_call_in_a_journal_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"journal holds a call to EntryList\.clear, which is not one of"):
        replay_call(EntryList(), CoreCall("clear", ()))


# --- Reconfigure: new settings in place, kept across a crash -----------------------------------


@pytest.mark.parametrize("compacted", [False, True], ids=["events", "snapshot"])
def test_a_durable_queue_keeps_new_settings_across_a_crash(compacted: bool) -> None:
    # The delivery limit a Reconfigure set must survive the restart, whether the journal still
    # holds the change as an event or a compaction folded it into a snapshot: a queue rebuilt with
    # its original settings would redeliver the nacked message for ever.
    sim = Simulation(seed=5, trace=False)
    dlq = sim.spawn(lambda: QueueActor(QueueConfig("dlq")), name="dlq")
    config = QueueConfig("q", durable=True, retry=RetryPolicy(0.01, 0.01), dead_letter=dlq)
    queue = sim.spawn(lambda: CrashableQueue(config), name="q")
    client = sim.spawn(lambda: Client(Action.NACK), name="client")
    sim.spawn(lambda: ConsumerActor(queue, client, ConsumerSettings(prefetch_messages=1)), name="consumer")
    limit = 400 if compacted else 5
    queue.tell(Reconfigure(attrs.evolve(config, max_deliveries=limit, name="ignored", durable=False)))
    queue.tell(Publish(Message(b"nacked")))
    sim.run(until=limit * 0.01 / 2)  # about half way to the limit
    journal = sim.journals["/q"]
    assert (journal.snapshots_saved > 0) is compacted
    queue.tell(CrashNow())
    sim.run(until=limit * 0.01 * 3)
    stats = sim.ask(queue, GetStats())
    assert (stats.queue, stats.dead_lettered, stats.depth, stats.in_flight) == ("q", 1, 0, 0)
    deliveries = [s.count for s in sim.ask(client, GetSeen())]
    assert deliveries == list(range(1, limit + 1))


LARGE_BODY = bytes(1024 * 1024)


def acking_queue(seed: int) -> tuple[Simulation, ActorRef]:
    """A durable queue (crashable) on the simulator whose one consumer acks every delivery."""
    sim = Simulation(seed=seed, trace=False)
    queue = sim.spawn(lambda: CrashableQueue(QueueConfig("q", durable=True)), name="q")
    client = sim.spawn(Client, name="client")
    sim.spawn(lambda: ConsumerActor(queue, client, ConsumerSettings(prefetch_messages=2)), name="consumer")
    return sim, queue


def publish_large(sim: Simulation, queue: ActorRef, numbers: range) -> None:
    """Publish a 1 MiB message per number, each handled (and acked) before the next."""
    for n in numbers:
        queue.tell(Publish(Message(LARGE_BODY, message_id=str(n))))
        sim.run()


def test_a_journal_lets_go_of_acked_bodies_once_they_outweigh_what_is_live() -> None:
    # Events keep the messages they published: a few large messages, all acked, must not stay in
    # memory until a thousand events have passed (a Pub/Sub server's memory budget saw them stay).
    sim, queue = acking_queue(seed=3)
    publish_large(sim, queue, range(12))
    journal = sim.journals["/q"]
    stats = sim.ask(queue, GetStats())
    assert stats.acked == 12
    if stats.body_bytes_in_ram is not None:  # paged (--force-paging): the events never held a body
        assert published_bytes(journal) == 0
        assert all(not getattr(arg, "body", b"") for event in journal for arg in getattr(event, "args", ()))
        return
    assert len(journal) < COMPACT_AFTER_EVENTS  # the event count alone would not have compacted it
    assert journal.snapshots_saved >= 1
    assert published_bytes(journal) < COMPACT_AFTER_BYTES


def test_the_bytes_a_journals_events_publish_are_counted_again_by_a_restarts_replay() -> None:
    # The count that compacts a journal of large acked messages is rebuilt by the replay, not kept
    # by the dead instance: restarted after three 1 MiB publishes, the queue still compacts at the
    # fourth (as one that never restarted), not four publishes after the restart.
    sim, queue = acking_queue(seed=3)
    publish_large(sim, queue, range(3))
    journal = sim.journals["/q"]
    if sim.ask(queue, GetStats()).body_bytes_in_ram is not None:
        pytest.skip("paged (--force-paging): the events hold no body to count")
    assert (journal.snapshots_saved, published_bytes(journal)) == (0, 3 * len(LARGE_BODY))
    queue.tell(CrashNow())
    sim.run()
    publish_large(sim, queue, range(3, 4))
    assert journal.snapshots_saved == 1
    assert sim.ask(queue, GetStats()).acked == 4
