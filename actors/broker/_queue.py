"""QueueActor: a strictly ordered queue (seeds 000 and 001) as a thin shell around ``EntryList``.

It turns messages into calls on the core and the core's results into messages:
confirms to publishers, deliveries to consumers, notices to its consumer manager,
dead letters to its dead-letter queue, and notes in the trace. One handler runs at
a time, so the "immediate" race of seed 001 (a check and a dequeue interleaved with
a concurrent delivery) cannot happen: the check and the enqueue are one step.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, final

import attrs

from conveyor.runtime import Actor, ActorRef, JobDone, JobFailed, Journal, JournalSynced, Terminated, TimerHandle

from ._body_store import BodyStore, MemoryBodyStore, PageDone, run_page_batch
from ._client_protocol import (
    Ack,
    AckResult,
    BatchPublished,
    ConsumerStats,
    Delivered,
    GetStats,
    ModifyAckDeadline,
    Nack,
    Publish,
    PublishBatch,
    Published,
    PublishRejected,
    Pull,
    QueueStats,
    Rejoin,
    Rejoined,
    Release,
    SetInterest,
    Subscribe,
    Subscribed,
    Unsubscribe,
)
from ._consumer_lists import ConsumerListStats
from ._dead_letters import DeadLetterOwed, DeadLetterSent
from ._disk_body_store import DiskBodyStore
from ._durable import (
    ConsumerRegistered,
    ConsumerUnregistered,
    CoreCall,
    InterestRecorded,
    PublishRefused,
    QueueReconfigured,
    QueueSnapshot,
    RegisteredConsumer,
    as_core_call,
    delta_pushed,
    journal_calls,
    needs_compaction,
    replay_call,
)
from ._entries import Entry, EntryList, Returned
from ._manager import ConsumerManagerActor
from ._manager_protocol import AddConsumer, ConsumerExhausted, InterestChanged, RemoveConsumer, WorkAvailable
from ._notes import (
    BodiesInRam,
    EntryEnqueued,
    EntryReturned,
    EntrySettled,
    QueueClosed,
    QueueRecovered,
    StaleNackIgnored,
)
from ._paging import BodyPager
from ._store_turn import StoreFree, StoreTurn, run_in_turn, turn_of
from ._values import (
    DEAD_LETTER_QUEUE,
    DEAD_LETTER_REASON,
    DELIVERY_COUNT,
    LAST_ERROR,
    LAST_ERROR_TYPE,
    DeliveryError,
    Message,
    Overflow,
    QueueConfig,
    Reconfigure,
    delivery_unchecked,
)

_WORK = WorkAvailable()


DELTA_CHUNK_ENTRIES = 256
"""A paged queue moves the entries of its deep tail out of RAM this many at a time."""

ENTRY_RAM_BYTES = 512
"""What a message held in RAM costs beside its body, counted against ``memory_target_bytes``: its
``Message`` object and its entry's (the entry, its place in the list and the live table, the pager's heap
items; 540 bytes measured with tracemalloc, docs/storage.md). Without it a target of 64 MiB of 1 KiB
bodies held 65,536 entries and about 100 MiB."""


class PagingFailed(RuntimeError):
    """A paged queue's body store failed a job: the bodies it holds cannot be trusted any more."""


@final
class _Held:
    """A dead letter whose body is paged out: it waits until the body is read, and for every earlier one."""

    __slots__ = ("build", "lost", "messages", "missing", "owed", "target")

    def __init__(
        self, target: ActorRef, missing: set[int], messages: dict[int, Message],
        build: Callable[[dict[int, Message]], object],
    ) -> None:
        self.target = target
        self.missing = missing  # seqs whose bodies are still being read
        self.messages = messages  # seq -> message as taken (without its body while missing)
        self.build = build  # the message to send, from the complete messages
        self.lost = False  # a durable store lost a body it needs (a publish never confirmed): not sent
        self.owed = 0  # a durable queue's owed dead letter (its seq): journaled as sent just before the send


@final
@attrs.frozen
class _Wake:
    """The queue's own timer: leases, TTLs or delays are due."""


@final
class _Consumer:
    """A registered consumer as the queue counts it."""

    __slots__ = (
        "acked", "acquiring", "delivered", "exhausted_notices", "interest_notices", "interested", "lease_s", "nothing",
        "path", "priority", "pulling", "ref", "request",
    )

    def __init__(self, request: Subscribe, interested: bool) -> None:
        self.request = request
        ref = request.consumer
        priority, acquiring = request.priority, request.acquiring
        self.ref = ref
        self.path = ref.path
        self.priority = priority
        self.acquiring = acquiring
        # None: the queue's ack deadline. A journal written before consumers could ask holds a Subscribe without it.
        self.lease_s: float | None = getattr(request, "lease_s", None)
        self.interested = interested
        self.pulling = False  # between a Pull and the answer that says exhausted
        self.delivered = 0
        self.acked = 0
        # The manager notices about this consumer, indexed by the flag (False, True): immutable
        # values, built on first use and reused, as one is sent per pull or credit change.
        self.exhausted_notices: tuple[ConsumerExhausted, ConsumerExhausted] | None = None
        self.interest_notices: tuple[InterestChanged, InterestChanged] | None = None
        self.nothing: Delivered | None = None  # the empty, exhausted answer to a pull, likewise reused


class QueueActor(Actor):
    """One queue: publish -> notify -> pull -> deliver -> ack, with leases, TTL, groups, limits."""

    def __init__(self, config: QueueConfig) -> None:
        if not isinstance(config, QueueConfig):
            msg = f"QueueActor needs a QueueConfig, got {type(config).__qualname__}"
            raise TypeError(msg)
        self.config = config
        self.name = config.name
        self.entries = self.make_entries(config)
        self.consumers: dict[int, _Consumer] = {}
        self.by_ref: dict[ActorRef, int] = {}
        self.next_consumer_id = 1
        self.rejected = 0
        self.manager: ActorRef | None = None
        self.work_signals = 0  # WorkAvailable sent since the last other message to the manager
        self.wake_limit: int | None = None  # cached _notifiable(), reset with work_signals
        self.wake_at: float | None = None
        self.wake_handle: TimerHandle | None = None
        self.rejoining: set[int] = set()  # consumers told to Rejoin after a restart, not yet Rejoined
        self.incarnation = 0  # this instance's id in its Rejoin handshakes (drawn at recovery)
        self.journal: Journal | None = None  # a durable queue's, once recovered
        self.writes_before = 0  # the journal's writes when the message being handled arrived
        self.compaction_asked: int | None = None  # held bytes of a compaction asked for during this handler
        # Inside ``_one_write``: what the writes announce (trace notes, dead letters), held until
        # the group is written; None outside.
        self.after_write: list[Callable[[], None]] | None = None
        # A durable queue on a disk store: publish answers waiting for their write to be synced,
        # as (the journal's write number, the latest body it needs synced (paged), who asked, the
        # answer), oldest first.
        self.unconfirmed: deque[tuple[int, int, ActorRef, object]] = deque()
        self.last_body = 0  # a durable paged queue's latest published seq: its body must be synced to confirm
        self.sync_asked = 0  # the latest write number a JournalSynced was asked for
        self.synced_through = 0  # the latest write number the store said is synced
        self.on_disk = False  # durable on a disk store: confirms wait for JournalSynced
        # Paging (``memory_target_bytes``): the pager core, its store, the job running its batch,
        # and the sends waiting for bodies being read (in the order they were made), by seq too.
        target = config.memory_target_bytes
        self.pager = None if target is None else self.make_pager(target)
        # A durable queue's store lives beside its journal: found or made when it recovers (``_recover``).
        self.body_store: BodyStore | None = None if target is None or config.durable else self.make_body_store()
        self.bodies_now = False  # durable with its journal in memory: bodies go to the store in the handler
        self.noted_held = 0  # what the last BodiesInRam note said the target counts (bodies and their entries)
        self.page_job: int | None = None
        # A durable queue's store is shared with its other instances: one job at a time (``_store_turn``).
        self.turn: StoreTurn | None = None
        self.store_free = True  # False while a dead instance's job still holds the store
        self.awaited: tuple[int, int | None] = (0, None)  # that job's token, and its id if it is this cell's
        self.outbox: deque[_Held] = deque()
        self.waiting: dict[int, list[_Held]] = {}
        self.held_pulls: list[tuple[int, int, int, ActorRef | None]] = []  # waiting for a body, in arrival order
        # A durable paged queue's dead letters settled and not yet sent, by seq, in order (``_dead_letters``).
        self.owed: dict[int, DeadLetterOwed] = {}

    def make_entries(self, config: QueueConfig) -> EntryList:
        """The sans-IO core; a subclass may supply a variant (the simulation's planted bugs do)."""
        return EntryList(config.priorities, config.max_deliveries)

    def make_pager(self, target_bytes: int) -> BodyPager:
        """The paging core of a queue with ``memory_target_bytes``; a subclass may tune it.

        Each body held counts ``ENTRY_RAM_BYTES`` more against the target (its message and entry).
        Entries move out of RAM (delta) in chunks of one per KiB of the target, 2 to
        ``DELTA_CHUNK_ENTRIES``, keeping twice that many available in RAM (a small target keeps few
        entries too), unless the queue has a length limit (the ring's victim may be in the delta).
        A durable queue's chunks go to its synced store, and its journal records their pushes and loads
        (docs/storage.md, "A durable queue that pages").
        """
        chunk = min(DELTA_CHUNK_ENTRIES, max(2, target_bytes // 1024))
        config = self.config
        return BodyPager(self.entries, target_bytes, None if config.max_length is not None else chunk, 2 * chunk,
                         durable=config.durable, entry_bytes=ENTRY_RAM_BYTES)

    def make_body_store(self) -> BodyStore:
        """Where a paged queue keeps bodies out of RAM: a segment log in a temporary directory.

        A subclass may supply another (a simulated disk, or ``MemoryBodyStore``); it is only ever
        called from the queue's jobs.
        """
        return DiskBodyStore()

    def make_durable_body_store(self, journal: Journal) -> BodyStore:
        """A durable paged queue's body store, kept beside its journal so later instances reuse it.

        On a disk journal store: a synced ``DiskBodyStore`` in the store's ``bodies/`` directory, on
        its file operations (the simulator's disk); with the journal in memory: a ``MemoryBodyStore``.
        """
        kept = journal.attached.get("bodies")
        if kept is not None:
            return kept  # type: ignore[return-value]  # only this queue's instances put it there
        locate = getattr(journal.store, "body_location", None)
        if locate is None:
            store: BodyStore = MemoryBodyStore(durable=True)
        else:
            directory, fs = locate(journal.path)
            store = DiskBodyStore(directory, fs=fs, durable=True)
        journal.attached["bodies"] = store
        return store

    def make_manager(self) -> ConsumerManagerActor:
        """The consumer manager child; a subclass may supply a variant."""
        return ConsumerManagerActor(self.ctx.self_ref, self.config.hand_over_timeout_s)

    def on_start(self) -> None:
        """Spawn the consumer manager as a child; a durable queue first rebuilds itself from its journal."""
        recovered = self._recover() if self.config.durable else False
        self.manager = self.ctx.spawn(self.make_manager, name="consumers")
        if recovered:
            self._resume()
        if self.owed and self.pager is not None:
            self._page()  # read the bodies of the dead letters a dead instance owed, and send them

    def on_stop(self) -> None:
        """Record what is still in the queue, so a trace accounts for every message."""
        if self.ctx.tracing:
            self.ctx.note(QueueClosed(self.name, self.entries.live_tags()))

    def receive(self, message: Any) -> None:
        """Dispatch one request; a paged queue then balances its bodies against its memory target.

        A compaction the handler's journal calls asked for comes after the whole handler: a snapshot
        taken between two of its writes would keep half its work if the second write failed, and
        the restarted queue would neither have the rest nor be handed the request again.
        """
        self._handle(message)
        if self.compaction_asked is not None:
            held_bytes, self.compaction_asked = self.compaction_asked, None
            self._compact_now(held_bytes)
        if self.pager is not None:
            self._page()

    def _handle(self, message: Any) -> None:
        if self.journal is not None:
            self.writes_before = self.journal.writes  # see retry_failed
        cls = type(message)
        if cls is Publish:  # the hot path: one per message
            payload = message.message
            outcome = self._enqueue(payload, message.immediate)
            if self.ctx.sender is not None:  # confirm to whoever can hear it
                if self.on_disk:
                    self._confirm(self._outcome(outcome, payload))
                else:
                    self.ctx.reply(self._outcome(outcome, payload))
            self._signal_work()
            if payload.ttl_s is not None or payload.delay_s:
                self._arm_wake()  # only a TTL or a delay adds a deadline at publish
            return
        if cls is Pull:
            if self.rejoining and message.consumer_id in self.rejoining:
                return  # sent before the consumer heard of our restart: it has forgotten it (Rejoin)
            self._pull(message.consumer_id, message.max_messages, message.max_bytes)
            return
        if cls is Ack:
            self._ack(message.consumer_id, message.tags, message.confirm, message.attempts)
            return
        if cls is SetInterest:  # one or two per message: ahead of the match's class patterns
            self._set_interest(message.consumer_id, message.interested)
            return
        match message:
            case PublishBatch(messages=payloads):
                with self._one_write():  # a disk error keeps none of the batch, and the retry all of it
                    outcomes = tuple(self._publish(payload, False) for payload in payloads)
                if self.ctx.sender is not None:
                    self._confirm(BatchPublished(outcomes))
                self._work_and_wake()
            case Nack(consumer_id=consumer_id, tags=tags, delay_s=delay_s, attempts=attempts, errors=errors):
                self._nack(consumer_id, tags, delay_s, attempts, errors)
            case Release(consumer_id=consumer_id, tags=tags):
                self._returned(self.entries.give_back(consumer_id, tags, self.ctx.now(), 0.0), consumer_id, "release")
            case ModifyAckDeadline(consumer_id=consumer_id, tags=tags, seconds=seconds):
                if seconds == 0:
                    self._nack(consumer_id, tags, None)
                else:
                    self.entries.extend(consumer_id, tags, self.ctx.now() + seconds)
                    self._arm_wake()  # a shortened lease must lapse before the timer already armed
            case Reconfigure(config=config):
                self._reconfigure(config)
            case Rejoined(consumer_id=consumer_id, incarnation=incarnation) if incarnation == self.incarnation:
                self.rejoining.discard(consumer_id)  # an answer to an earlier incarnation's Rejoin is stale
            case Subscribe():
                self._subscribe(message)
            case Unsubscribe(consumer_id=consumer_id):
                self._unsubscribe(consumer_id, "unsubscribed")
            case Terminated(ref=ref):
                gone = self.by_ref.get(ref)
                if gone is not None:
                    self._unsubscribe(gone, "consumer stopped")
            case _Wake():
                self._wake()
            case JournalSynced(through=through):
                self._synced(through)
            case JobDone(job_id=job_id, result=result) if job_id == self.page_job:
                self.page_job = None
                self._loaded(result)
            case JobFailed(job_id=job_id, error=error) if job_id == self.page_job:
                self._drop_store()
                msg = f"queue {self.name!r}: its body store failed ({error!r})"
                raise PagingFailed(msg) from error
            case StoreFree(token=token) if not self.store_free and token == self.awaited[0]:
                self._store_released(False)  # the dead instance's job that held the store ended
            case JobDone(job_id=job_id) | JobFailed(job_id=job_id) if (
                not self.store_free and job_id == self.awaited[1]
            ):
                self._store_released(type(message) is JobFailed)  # likewise (a fault may fail it unrun)
            case StoreFree():
                pass  # for an earlier instance, or the store was free already when this one recovered
            case GetStats():
                self.ctx.reply(self.stats())
            case Published() | PublishRejected() | ConsumerListStats():
                pass  # answers from our dead-letter queue or manager; nothing to do

    # --- publishing -----------------------------------------------------------------------

    def _confirm(self, answer: object) -> None:
        """Answer a publisher (or a confirmed ack): at once, or, on a disk store, once what it wrote is synced.

        A confirm promises the message (or its ack) survives a crash, so on disk it waits for the
        store's ``JournalSynced`` (one sync covers every write since the last). Answers keep their order.
        One request is in flight at a time: its answer names the highest write synced by then, which
        covers what was written meanwhile in the same batch; ``_synced`` asks again for the rest.
        """
        journal = self.journal
        pager = self.pager
        body = self.last_body
        if not self.on_disk or journal is None or (not self.unconfirmed and journal.last_write <= self.sync_asked
                                                   and self.synced_through >= journal.last_write
                                                   and (pager is None or pager.body_synced(body))):
            self.ctx.reply(answer)
            return
        sender = self.ctx.sender
        assert sender is not None  # only called when someone hears the answer
        self.unconfirmed.append((journal.last_write, body, sender, answer))
        if journal.last_write > self.sync_asked and self.sync_asked <= self.synced_through:
            self._ask_sync(journal)

    def _ask_sync(self, journal: Journal) -> None:
        """Ask the store to say when every write so far is synced (none asked for is still unanswered)."""
        self.sync_asked = journal.last_write
        journal.when_synced(self.ctx.self_ref)

    def _synced(self, through: int) -> None:
        """The store synced this journal's writes up to ``through``: send the answers they held."""
        self.synced_through = max(self.synced_through, through)
        self._send_confirmed()

    def _send_confirmed(self) -> None:
        """Send the held answers whose journal writes are synced (and, paged, their bodies), in order."""
        unconfirmed = self.unconfirmed
        through = self.synced_through
        pager = self.pager
        while unconfirmed and unconfirmed[0][0] <= through and (pager is None or pager.body_synced(unconfirmed[0][1])):
            _, _, sender, answer = unconfirmed.popleft()
            self.ctx.send(sender, answer)
        # Writes after the answered request are still unsynced: ask for them now (an answer held only
        # for its body's sync waits for the body store, not for another journal request).
        if unconfirmed and unconfirmed[-1][0] > through and self.sync_asked <= through and self.journal is not None:
            self._ask_sync(self.journal)

    def _publish(self, payload: Message, immediate: bool) -> Published | PublishRejected:
        return self._outcome(self._enqueue(payload, immediate), payload)

    def _outcome(self, outcome: Entry | PublishRejected, payload: Message) -> Published | PublishRejected:
        """The answer to a publisher: built only when someone hears it (a plain tell has no sender)."""
        if type(outcome) is PublishRejected:
            return outcome
        return Published(self.name, outcome.seq, payload.message_id)

    def _enqueue(self, payload: Message, immediate: bool) -> Entry | PublishRejected:
        """Enqueue one message (or refuse it, naming the limit); returns its entry or the refusal."""
        config = self.config
        entries = self.entries
        if payload.size > config.max_message_bytes:
            return self._reject(payload, f"message of {payload.size} bytes exceeds max_message_bytes="
                                f"{config.max_message_bytes}")
        if immediate and not entries.could_take_now(payload):
            return self._reject(payload, "immediate: no consumer can take it now")
        if config.max_length is not None and entries.available >= config.max_length:
            if config.overflow is Overflow.REJECT_PUBLISH:
                return self._reject(payload, f"queue is full (max_length={config.max_length})")
            with self._one_write():  # a disk error must not drop an entry for a message not kept
                entry = self._enqueue_entry(payload)
                dropped = entries.evict_least_significant()  # maybe the new one: it competes too
                if dropped is not None:
                    self._dead_letter(dropped, "max-length")
                return entry
        return self._enqueue_entry(payload)

    def _enqueue_entry(self, payload: Message) -> Entry:
        # The clock matters to an entry only for its TTL or delay; reading it costs a call per publish.
        now = self.ctx.now() if payload.ttl_s is not None or payload.delay_s else 0.0
        entry = self.entries.publish(payload, now)
        pager = self.pager
        if pager is not None:
            pager.published(entry)
            if pager.durable:
                self.last_body = entry.seq
                if self.bodies_now:
                    self._write_bodies_now()
        if self.ctx.tracing:
            note = EntryEnqueued(self.name, entry.seq, payload)
            if self.after_write is None:
                self.ctx.note(note)
            else:
                self.after_write.append(lambda: self.ctx.note(note))
        return entry

    @contextmanager
    def _one_write(self) -> Iterator[None]:
        """A durable queue's journal writes inside are one write: all of them are kept, or none.

        What they announce (trace notes, dead letters) waits until the write is made, so a failed
        write (a disk error) leaves no sign of the block: the restart rolls the queue back to
        before it and ``retry_failed`` hands the request to the fresh instance, exactly once. A
        nested block joins the outer one; a queue that is not durable runs the block as it is.
        """
        journal = self.journal
        if journal is None or self.after_write is not None:
            yield
            return
        held: list[Callable[[], None]] = []
        self.after_write = held
        try:
            with journal.atomic():
                yield
        finally:
            self.after_write = None
        for announce in held:
            announce()

    def _reject(self, payload: Message, reason: str) -> PublishRejected:
        self.rejected += 1
        if self.journal is not None:
            self.journal.append(PublishRefused())
        return PublishRejected(self.name, payload.message_id, reason)

    # --- consumers ------------------------------------------------------------------------

    def _subscribe(self, request: Subscribe) -> None:
        known = self.by_ref.get(request.consumer)
        if known is not None:  # asked again (its first answer was slow, or lost with a failed handler)
            self.ctx.send(request.consumer, Subscribed(self.name, known))
            return
        consumer_id = self.next_consumer_id
        self.next_consumer_id += 1
        self.entries.add_consumer(consumer_id, request.selector, request.priority, request.acquiring)
        self.entries.set_interest(consumer_id, request.interested)
        self._register(consumer_id, request, request.interested)
        if self.journal is not None:
            self.journal.append(ConsumerRegistered(consumer_id, request))
        self.ctx.watch(request.consumer)
        self._tell_manager(
            AddConsumer(consumer_id, request.consumer, request.priority, request.acquiring, request.interested),
        )
        self.ctx.send(request.consumer, Subscribed(self.name, consumer_id))
        if self.entries.available:
            self._tell_manager(_WORK)

    def _unsubscribe(self, consumer_id: int, reason: str) -> None:
        record = self.consumers.pop(consumer_id, None)
        if record is None:
            return
        del self.by_ref[record.ref]
        self.rejoining.discard(consumer_id)
        now = self.ctx.now()
        with self._one_write():  # the dead letters it owes are written with it
            returned = self.entries.remove_consumer(consumer_id, now)
            if self.journal is not None:
                self.journal.append(ConsumerUnregistered(consumer_id, now))
                for owed in self._owing("remove_consumer", returned):
                    self.journal.append(owed)
        self.ctx.unwatch(record.ref)
        self._tell_manager(RemoveConsumer(consumer_id))
        self._returned(returned, consumer_id, reason)

    def _set_interest(self, consumer_id: int, interested: bool) -> None:
        record = self.consumers.get(consumer_id)
        if record is None:
            return
        record.interested = interested
        if not interested:
            record.pulling = False
        self.entries.set_interest(consumer_id, interested)
        if self.journal is not None:
            self.journal.append(InterestRecorded(consumer_id, interested))
        notices = record.interest_notices
        if notices is None:
            notices = record.interest_notices = (
                InterestChanged(consumer_id, False), InterestChanged(consumer_id, True)
            )
        self._tell_manager(notices[interested])
        if self.entries.available:
            # A consumer that wants work may find some; one that stopped wanting it may let a
            # lower-priority consumer serve what it would have taken.
            self._tell_manager(_WORK)

    def _pull(self, consumer_id: int, max_messages: int, max_bytes: int, reply_to: ActorRef | None = None) -> None:
        """Answer a consumer's pull (to ``reply_to``, or the sender); a paged queue may hold it for a body.

        On a paged queue, a walk that reaches an entry whose body is paged out stops in front of it
        (``EntryList.blocked``). With something taken, the answer says more is there (the consumer
        pulls again); with nothing, the pull waits, unanswered, for the body and is then handled
        anew (``_loaded``), so entries are chosen when they are handed over, as without paging.
        """
        record = self.consumers.get(consumer_id)
        if record is None:
            return
        if reply_to is None and self.ctx.sender is not None and self.ctx.sender != record.ref:
            # A consumer whose subscription a crash took back (never synced) while its id went to another:
            # its pull would move the other's pointer and hand the other's entries to it.
            return
        entries = self.entries
        pager = self.pager
        if pager is not None and any(held[0] == consumer_id for held in self.held_pulls):
            sender = reply_to if reply_to is not None else self.ctx.sender
            self.held_pulls.append((consumer_id, max_messages, max_bytes, sender))  # after the one held
            return
        now = self.ctx.now()
        deadline: float | None = None
        if record.acquiring:
            lease_s = record.lease_s
            deadline = now + (self.config.ack_deadline_s if lease_s is None else lease_s)
            taken, expired, limited = entries.take(consumer_id, now, max_messages, max_bytes, deadline)
            for entry in expired:
                self._settled(entry, "expired", None)
        else:
            taken = entries.browse(consumer_id, max_messages, max_bytes)
            limited = len(taken) >= max_messages
        if pager is not None:
            blocked = entries.blocked
            rank = entries.blocked_rank
            if blocked is not None or rank is not None:
                if blocked is not None:
                    # Held, the pull is handled again as soon as the job is done: read what it will hand over.
                    pager.need(entries.paged_run(blocked, max_messages) if not taken else (blocked,))
                else:
                    assert rank is not None
                    pager.need_delta(rank)
                if not taken:
                    self.held_pulls.append(
                        (consumer_id, max_messages, max_bytes, reply_to if reply_to is not None else self.ctx.sender)
                    )
                    return
                limited = True
            if record.acquiring:
                pager.delivered(taken)
        name = self.name
        record.delivered += len(taken)
        exhausted = not limited
        record.pulling = not exhausted
        if taken or not exhausted:
            deliveries = tuple([delivery_unchecked(name, e.seq, e.message, e.delivery_count, deadline, consumer_id)
                                for e in taken])
            answer = Delivered(name, deliveries, exhausted)
        else:
            nothing = record.nothing
            if nothing is None:
                nothing = record.nothing = Delivered(name, (), True)
            answer = nothing
        if reply_to is None:
            self.ctx.reply(answer)
        else:
            self.ctx.send(reply_to, answer)
        if exhausted:
            notices = record.exhausted_notices
            if notices is None:
                notices = record.exhausted_notices = (
                    ConsumerExhausted(consumer_id, False), ConsumerExhausted(consumer_id, True)
                )
            self._tell_manager(notices[entries.available > 0])
        if taken and deadline is not None and (self.wake_at is None or self.wake_at > deadline):
            self._arm_wake()  # the new leases end at ``deadline``; a timer armed no later covers them

    # --- settling -------------------------------------------------------------------------

    def _ack(self, consumer_id: int, tags: tuple[int, ...], confirm: bool, attempts: tuple[int, ...] = ()) -> None:
        """Settle what an ack names; with ``attempts``, only the deliveries still current (see ``Ack``).

        A stale tag is left out of the core's call (so the journal's ``ack`` is unchanged) and
        counted invalid in the answer, as a tag the consumer no longer holds is.
        """
        entries = self.entries
        stale: tuple[int, ...] = ()
        if attempts:
            current = entries.current_tags(consumer_id, tags, attempts)
            if len(current) != len(tags):
                kept = set(current)
                stale = tuple(tag for tag in tags if tag not in kept)
                tags = current
        grouped = entries.groups_held and any(
            (e := entries.get(tag)) is not None and e.message.group is not None for tag in tags
        )
        acked, invalid = entries.ack(consumer_id, tags)
        if stale:
            invalid = (*invalid, *stale)
        record = self.consumers.get(consumer_id)
        if record is not None:
            record.acked += len(acked)
        if self.ctx.tracing:
            for tag in acked:
                self.ctx.note(EntrySettled(self.name, tag, "acked", consumer_id))
        if confirm and self.ctx.sender is not None:
            self._confirm(AckResult(acked, invalid))  # on disk, once the ack is synced (exactly-once)
        if grouped and entries.available:
            self._tell_manager(_WORK)  # a group may have been freed for other consumers

    def _nack(
        self,
        consumer_id: int,
        tags: tuple[int, ...],
        delay_s: float | None,
        attempts: tuple[int, ...] = (),
        errors: tuple[DeliveryError | None, ...] = (),
    ) -> None:
        """Give back what a nack names; with ``attempts``, only the deliveries still current (see ``Nack``).

        Without attempts or errors the core is called exactly as before, so journals written before
        ``attempts`` (or ``errors``) existed replay unchanged.
        """
        now = self.ctx.now()
        retry = self.config.retry
        entries = self.entries
        if delay_s is not None or retry is None:
            if errors:
                returned = entries.give_back(consumer_id, tags, now, delay_s or 0.0, attempts, errors)
            elif attempts:
                returned = entries.give_back(consumer_id, tags, now, delay_s or 0.0, attempts)
            else:
                returned = entries.give_back(consumer_id, tags, now, delay_s or 0.0)
        else:
            delays = {}
            for tag in tags:
                entry = entries.get(tag)
                if entry is not None:
                    delays[tag] = retry.backoff(entry.delivery_count)
            if errors:
                returned = entries.give_back_with(consumer_id, tags, now, delays, attempts, errors)
            elif attempts:
                returned = entries.give_back_with(consumer_id, tags, now, delays, attempts)
            else:
                returned = entries.give_back_with(consumer_id, tags, now, delays)
        if attempts and self.ctx.tracing:
            self._note_stale(consumer_id, tags, attempts, returned)
        self._returned(returned, consumer_id, "nack")

    def _note_stale(
        self, consumer_id: int, tags: tuple[int, ...], attempts: tuple[int, ...], returned: Returned
    ) -> None:
        """Trace the tags a nack left alone because it named an older delivery than the current one."""
        done = {entry.seq for entry in (*returned.available, *returned.dead_lettered, *returned.expired)}
        for tag, attempt in zip(tags, attempts, strict=True):
            entry = self.entries.get(tag)
            if entry is None or tag in done or entry.consumer != consumer_id:
                continue  # given back, or not held by this consumer (an invalid tag, as without attempts)
            if entry.delivery_count != attempt:
                self.ctx.note(StaleNackIgnored(self.name, tag, consumer_id, attempt, entry.delivery_count))

    def _returned(self, returned: Returned, consumer_id: int, reason: str) -> None:
        if self.pager is not None:
            self.pager.available_again(returned.available)
        if self.ctx.tracing:
            for entry in returned.available:
                self.ctx.note(EntryReturned(self.name, entry.seq, consumer_id, reason, entry.available_at))
        for entry in returned.expired:
            self._settled(entry, "expired", consumer_id)
        for entry in returned.dead_lettered:
            self._dead_letter(entry, "delivery-limit", consumer_id)
        self._work_and_wake()

    def _settled(self, entry: Entry, outcome: str, consumer_id: int | None, reason: str = "") -> None:
        if self.ctx.tracing:
            self.ctx.note(EntrySettled(self.name, entry.seq, outcome, consumer_id, reason))

    def _dead_letter(self, entry: Entry, reason: str, consumer_id: int | None = None) -> None:
        if self.after_write is not None:  # inside _one_write: once the write is made
            self.after_write.append(lambda: self._dead_letter(entry, reason, consumer_id))
            return
        self._settled(entry, "dead_lettered", consumer_id, reason)
        owed = self.owed.get(entry.seq) if self.owed else None
        if owed is not None:  # a durable paged queue's, journaled with its settle (``_owing``)
            self._send_owed(owed, None if entry.paged else entry.message.body)
            return
        target = self.config.dead_letter
        if target is None:
            return
        message = self._dead_letter_message(entry, reason)
        if self.pager is None:
            self.ctx.send(target, Publish(message))
            return
        seq = entry.seq
        self._send_when_loaded(target, (entry,),
                               lambda messages: Publish(attrs.evolve(message, body=messages[seq].body)))

    def _dead_letter_message(self, entry: Entry, reason: str) -> Message:
        """What a dead letter publishes: ``entry``'s message with headers that say why, without TTL or delay."""
        headers = dict(entry.message.headers)
        headers[DEAD_LETTER_REASON] = reason
        headers[DEAD_LETTER_QUEUE] = self.name
        headers[DELIVERY_COUNT] = entry.delivery_count
        error = entry.last_error
        if error is not None:
            headers[LAST_ERROR_TYPE] = error.error_type
            headers[LAST_ERROR] = error.text
        return attrs.evolve(entry.message, headers=headers, ttl_s=None, delay_s=None)

    def _owing(self, method: str, result: Any) -> tuple[DeadLetterOwed, ...]:
        """The dead letters a core call just settled that this durable paged queue will owe: those whose body is
        paged out, and every one behind an owed one. ``journal_calls`` writes them with the call; each keeps its
        body in the store until it is sent (``_dead_letters``)."""
        if method == "evict_least_significant":
            dead: tuple[Entry, ...] = () if result is None else (result,)
            reason = "max-length"
        elif type(result) is Returned:
            dead = result.dead_lettered
            reason = "delivery-limit"
        else:
            return ()
        target = self.config.dead_letter
        pager = self.pager
        if not dead or target is None or pager is None:
            return ()
        owing = []
        for entry in dead:
            if entry.paged or self.owed:
                message = attrs.evolve(self._dead_letter_message(entry, reason), body=b"")
                owed = self.owed[entry.seq] = DeadLetterOwed(entry.seq, target, message, entry.size)
                pager.keep(entry.seq)
                owing.append(owed)
        return tuple(owing)

    def _send_owed(self, owed: DeadLetterOwed, body: bytes | None) -> None:
        """Send an owed dead letter once its body is in hand (None: read it from the store), after every earlier one."""
        pager = self.pager
        assert pager is not None
        seq = owed.seq
        message = owed.message
        held = _Held(owed.target, set(), {seq: message}, lambda messages: Publish(messages[seq]))
        held.owed = seq
        if body is None:
            pager.need_settled(seq, owed.size)
            held.missing.add(seq)
            self.waiting.setdefault(seq, []).append(held)
        else:
            held.messages[seq] = attrs.evolve(message, body=body)
        self.outbox.append(held)
        self._flush_outbox()

    def _flush_outbox(self) -> None:
        """Send the held sends whose bodies are all in, from the oldest; an owed dead letter is journaled sent first."""
        outbox = self.outbox
        while outbox and not outbox[0].missing:
            held = outbox.popleft()
            if held.owed:
                self._dead_letter_sent(held.owed)
            if not held.lost:
                self.ctx.send(held.target, held.build(held.messages))

    def _dead_letter_sent(self, seq: int) -> None:
        """Journal an owed dead letter sent (a failed write fails the handler before the send: the restart sends it)."""
        assert self.journal is not None and self.pager is not None
        self.journal.append(DeadLetterSent(seq))
        del self.owed[seq]
        self.pager.release_kept(seq)

    # --- time -----------------------------------------------------------------------------

    def _wake(self) -> None:
        self.wake_at = None
        self.wake_handle = None
        now = self.ctx.now()
        entries = self.entries
        returned = entries.expire_leases(now)
        if self.pager is not None:
            self.pager.available_again(returned.available)
        if self.ctx.tracing:
            for entry in returned.available:
                self.ctx.note(EntryReturned(self.name, entry.seq, entry.last_consumer, "lease lapsed"))
        for entry in returned.expired:
            self._settled(entry, "expired", None)
        for entry in returned.dead_lettered:
            self._dead_letter(entry, "delivery-limit")
        for entry in entries.expire_ttls(now):
            self._settled(entry, "expired", None)
        entries.release_delays(now)
        self._work_and_wake()

    def _work_and_wake(self) -> None:
        self._signal_work()
        self._arm_wake()

    def _tell_manager(self, message: object) -> None:
        """Every message to the consumer manager goes through here, so ``work_signals`` is exact."""
        assert self.manager is not None
        self.ctx.send(self.manager, message)
        if message is _WORK:
            self.work_signals += 1
        else:
            self.work_signals = 0
            self.wake_limit = None

    def _signal_work(self) -> None:
        """Tell the manager that work is available, unless that could notify nobody.

        The manager's lists change only through this queue's messages, handled in the order
        sent, and each WorkAvailable moves at most one acquiring consumer from Interested to
        Notified (and notifies every browser). Only acquiring consumers this queue counts as
        interested can be on Interested. So once a run of WorkAvailable with nothing between
        them is as long as that count, Interested is empty, and one more would notify nobody:
        the notified consumers pull after this publish and take it, and what they cannot take
        they pass on (``ConsumerExhausted(more_work=True)``). Any other message to the manager
        may put a consumer back on Interested, so it ends the run. With a browser interested
        nothing is skipped. Under a steady publish stream this saves the manager (and the
        dispatcher) a message per publish.
        """
        if not self.entries.available or self.manager is None:
            return
        signals = self.work_signals
        if signals:
            limit = self.wake_limit
            if limit is None:
                limit = self.wake_limit = self._notifiable()
            if signals >= limit:
                return
        if self._someone_to_wake():
            self._tell_manager(_WORK)

    def _notifiable(self) -> int:
        """How many consumers a run of WorkAvailable can notify: see ``_signal_work``."""
        count = 0
        for record in self.consumers.values():
            if record.interested:
                if not record.acquiring:
                    return 1 << 62  # browsers are notified by every one: never skip
                count += 1
        return count

    def _someone_to_wake(self) -> bool:
        """False when every consumer that wants work is already in a pulling run.

        Such consumers pull again and take the new work themselves, so a WorkAvailable
        could wake nobody; skipping it saves the manager a message per publish. A consumer
        notified but not yet pulling counts as someone to wake, so no wake-up is lost.
        """
        for record in self.consumers.values():  # noqa: SIM110 - a loop is cheaper than any() over a generator
            if record.interested and not record.pulling:
                return True
        return False

    def _arm_wake(self) -> None:
        """Keep one timer armed at the earliest lease, TTL or delay deadline."""
        wakeup = self.entries.next_wakeup()
        if wakeup is None or (self.wake_at is not None and self.wake_at <= wakeup):
            return
        if self.wake_handle is not None:
            self.ctx.cancel(self.wake_handle)
        self.wake_at = wakeup
        self.wake_handle = self.ctx.schedule(max(0.0, wakeup - self.ctx.now()), _Wake())

    def _reconfigure(self, config: QueueConfig) -> None:
        """Take new settings in place (``Reconfigure``), keeping the queue's name, levels and durability."""
        own = self.config
        config = attrs.evolve(config, name=own.name, priorities=own.priorities, durable=own.durable,
                              compact_after_events=own.compact_after_events)
        if self.journal is not None:
            self.journal.append(QueueReconfigured(config))  # a failed write changes nothing
        self._use_config(config)

    def _use_config(self, config: QueueConfig) -> None:
        self.config = config
        self.entries.max_deliveries = config.max_deliveries
        if self.pager is not None and config.max_length is not None:
            self.pager.chunk_entries = None  # a ring's victim must be in RAM: no new delta (see make_pager)

    # --- durability -----------------------------------------------------------------------

    def retry_failed(self, message: Any) -> bool:
        """A durable queue handles a request again after a restart if its handler had written nothing.

        Then the restart rolled it back to before the request (its write failed), and the retry is
        exactly-once: a disk error loses no publish, Ack, Nack, lease extension or Pull. Work that
        takes several writes is made one (``_one_write``: a batch of publishes, a publish that drops
        the head), so no request is left half-recorded; only a timer's wake, whose steps are each
        whole, can stop after some of them, and the recovered queue arms it again.
        """
        journal = self.journal
        return journal is not None and journal.writes == self.writes_before

    def _register(self, consumer_id: int, request: Subscribe, interested: bool) -> _Consumer:
        record = self.consumers[consumer_id] = _Consumer(request, interested)
        self.by_ref[request.consumer] = consumer_id
        return record

    def _recover(self) -> bool:
        """Rebuild entries and consumers from the journal (see ``_durable``); True if it held anything.

        From here on every state-changing call on the core is journaled (``journal_calls``).
        """
        journal = self.ctx.journal
        found = bool(journal)
        core = self.entries  # new, from make_entries
        snapshot = journal.snapshot
        if isinstance(snapshot, QueueSnapshot):
            if snapshot.config is not None:
                self._use_config(snapshot.config)
            core.restore(snapshot.core)
            self.owed = {owed.seq: owed for owed in snapshot.owed}
            self.rejected = snapshot.rejected
            self.next_consumer_id = snapshot.next_consumer_id
            for kept in snapshot.consumers:
                restored = self._register(kept.consumer_id, kept.subscribe, kept.interested)
                restored.delivered, restored.acked = kept.delivered, kept.acked
        consumers = self.consumers
        core.replaying = self.pager is not None
        published = 0  # message bytes the events publish (journal_calls counts on from it)
        for event in journal:
            if type(event) is tuple or type(event) is CoreCall:
                call = as_core_call(event)
                method, args = call.method, call.args
                result = replay_call(core, call)
                if method == "publish":
                    published += args[0].size
                if method in ("take", "browse", "ack") and (record := consumers.get(args[0])) is not None:
                    if method == "take":
                        record.delivered += len(result[0])
                    elif method == "browse":
                        record.delivered += len(result)
                    else:
                        record.acked += len(result[0])
            elif type(event) is ConsumerRegistered:
                request = event.subscribe
                core.add_consumer(event.consumer_id, request.selector, request.priority, request.acquiring)
                core.set_interest(event.consumer_id, request.interested)
                self._register(event.consumer_id, request, request.interested)
                self.next_consumer_id = max(self.next_consumer_id, event.consumer_id + 1)
            elif type(event) is ConsumerUnregistered:
                gone = consumers.pop(event.consumer_id, None)
                if gone is not None:
                    del self.by_ref[gone.ref]
                core.remove_consumer(event.consumer_id, event.now)
            elif type(event) is InterestRecorded:
                if (record := consumers.get(event.consumer_id)) is not None:
                    record.interested = event.interested
                core.set_interest(event.consumer_id, event.interested)
            elif type(event) is PublishRefused:
                self.rejected += 1
            elif type(event) is QueueReconfigured:
                self._use_config(event.config)
            elif type(event) is DeadLetterOwed:
                self.owed[event.seq] = event
            elif type(event) is DeadLetterSent:
                self.owed.pop(event.seq, None)
                if self.pager is not None:
                    self.pager.release_kept(event.seq)  # its delete may have died with the instance
            else:
                msg = f"journal of durable queue {self.name!r} holds {event!r}, which it never writes"
                raise TypeError(msg)
        core.replaying = False
        pager = self.pager
        journal_calls(core, journal, self._compact_if_long, self.config.compact_after_events,
                      bodies_elsewhere=pager is not None, published=published,
                      owing=None if pager is None else self._owing)
        self.journal = journal
        self.on_disk = journal.on_disk
        if pager is not None:
            store = self.body_store = self.make_durable_body_store(journal)
            # A job of a dead instance may still come: its batch is stale from now on (PageBatch.generation).
            pager.generation = store.generation = getattr(store, "generation", 0) + 1  # type: ignore[attr-defined]
            # ... or still run (a thread): this instance's jobs wait until it ends.
            turn = self.turn = turn_of(journal.attached)
            token = turn.wait_for(self.ctx.teller_for_threads(self.ctx.self_ref))
            if token:
                job = turn.job
                self.store_free = False
                self.awaited = (token, job[1] if job is not None and job[0] == self.ctx.self_ref else None)
            self.bodies_now = not journal.on_disk
            # Bodies of publishes the journal lost (written, their journal write not): their seqs come again.
            if self.bodies_now:
                self.body_store.forget_from(core.next_seq)  # a dict: at once, before the next write
            else:
                pager.forget_from = core.next_seq  # the next job's first step
            pager.recovered()
            pager.chunk_stored = lambda rank, chunk: journal.append(delta_pushed(rank, chunk))
            pager.hold_chunk_deletes = journal.on_disk
            if self.bodies_now:
                self._write_bodies_now()
            self._resend_owed(pager)
        return found

    def _resend_owed(self, pager: BodyPager) -> None:
        """After recovery: the dead letters the journal owes are sent in order, once their bodies are read."""
        current = self.config.dead_letter
        for owed in self.owed.values():
            pager.keep(owed.seq)
            target = owed.target
            if not target.is_alive and current is not None and current.path == target.path:
                target = current  # journaled before a process restart: its ref came back as a stopped one
            self._send_owed(attrs.evolve(owed, target=target) if target is not owed.target else owed, None)

    def _resume(self) -> None:
        """After recovery: watch the consumers again, tell the new manager of them, re-arm the timer.

        Each acquiring consumer is told to ``Rejoin``: a ``Pull`` the old instance failed on is lost,
        and one still in the mailbox is indistinguishable from it, so both are dropped and the
        consumer pulls again once it has answered ``Rejoined`` with this instance's incarnation id.
        """
        self.incarnation = self.ctx.random.getrandbits(63) + 1  # never 0, the id of a queue never restarted
        for consumer_id, record in self.consumers.items():
            self.ctx.watch(record.ref)
            self._tell_manager(
                AddConsumer(consumer_id, record.ref, record.priority, record.acquiring, record.interested)
            )
            self.rejoining.add(consumer_id)
            self.ctx.send(record.ref, Rejoin(self.name, consumer_id, self.incarnation))
        if self.ctx.tracing:
            self.ctx.note(QueueRecovered(self.name, self.entries.live_tags(), tuple(self.consumers)))
        self._work_and_wake()

    def _compact_if_long(self, held_bytes: int = 0) -> None:
        """After a journaled call: compact when the handler is done (``receive``), if events outgrow the state."""
        asked = self.compaction_asked
        self.compaction_asked = held_bytes if asked is None else max(asked, held_bytes)

    def _compact_now(self, held_bytes: int = 0) -> None:
        """Replace the journal's events by a snapshot once they outgrow the state they describe."""
        journal = self.journal
        if journal is None or journal.in_atomic or not needs_compaction(
            journal, self.entries, held_bytes, self.config.compact_after_events
        ):
            return  # inside a group the snapshot would count its events twice: a later call compacts
        consumers = tuple(
            RegisteredConsumer(cid, record.request, record.interested, record.delivered, record.acked)
            for cid, record in self.consumers.items()
        )
        pager = self.pager
        core = (self.entries.snapshot(pager.unsynced, pager.unsynced_chunks) if pager is not None
                else self.entries.snapshot())
        journal.save_snapshot(QueueSnapshot(core, consumers, self.rejected, self.next_consumer_id, self.config,
                                            tuple(self.owed.values())))

    # --- paging ---------------------------------------------------------------------------

    def _send_when_loaded(
        self, target: ActorRef, entries: Iterable[Entry], build: Callable[[dict[int, Message]], object]
    ) -> None:
        """Send ``build(messages)`` once the bodies of ``entries`` are in RAM, after every send held before."""
        pager = self.pager
        assert pager is not None
        entries = tuple(entries)
        messages = {entry.seq: entry.message for entry in entries}
        missing = pager.need(entries)
        if not missing and not self.outbox:
            self.ctx.send(target, build(messages))
            return
        held = _Held(target, set(missing), messages, build)
        for seq in missing:
            self.waiting.setdefault(seq, []).append(held)
        self.outbox.append(held)

    def _loaded(self, done: PageDone) -> None:
        """The body store's job is done: complete the sends waiting for its bodies, in order."""
        waiting = self.waiting
        for seq, body in done.bodies:
            for held in waiting.pop(seq, ()):
                if body is None:
                    held.lost = True
                else:
                    held.messages[seq] = attrs.evolve(held.messages[seq], body=body)
                held.missing.discard(seq)
        pager = self.pager
        assert pager is not None
        pager.loaded(done)
        if pager.lost:
            self._drop_lost(pager)
        if self.unconfirmed:
            self._send_confirmed()  # their bodies may be synced now
        self._flush_outbox()
        pulls = self.held_pulls
        self.held_pulls = []
        for consumer_id, max_messages, max_bytes, reply_to in pulls:  # their bodies are in RAM until the next balance
            if reply_to is not None:
                self._pull(consumer_id, max_messages, max_bytes, reply_to)

    def _drop_lost(self, pager: BodyPager) -> None:
        """A durable queue's store lacked these bodies: publishes whose journal write outlived their body
        (never confirmed, as a confirm waits for both). Their entries go, as if never published."""
        lost, pager.lost = pager.lost, []
        for entry in self.entries.discard(lost):
            if self.ctx.tracing:
                self.ctx.note(EntrySettled(self.name, entry.seq, "lost", None,
                                           "body lost before its publish was confirmed"))

    def _write_bodies_now(self) -> None:
        """A durable queue with its journal in memory: its store is a dict beside the journal, written at once."""
        pager = self.pager
        assert pager is not None and self.body_store is not None
        writes = pager.take_writes()
        if writes:
            self.body_store.write(writes)

    def _page(self) -> None:
        """After a handler: balance bodies against the target and start the store's next job if none runs."""
        pager = self.pager
        assert pager is not None
        pager.balance()
        if self.ctx.tracing and pager.held_cost != self.noted_held:
            self.noted_held = pager.held_cost
            target = self.config.memory_target_bytes  # the queue's own setting, not the pager's idea of it
            self.ctx.note(BodiesInRam(self.name, self.noted_held, pager.target_bytes if target is None else target))
        if pager.durable and self.on_disk and self.journal is not None:
            self._hold_deletes(pager, self.journal)
        if self.page_job is None and self.store_free:
            batch = pager.take_batch()
            if batch is not None:
                turn = self.turn
                if turn is None:
                    self.page_job = self.ctx.run_job(run_page_batch, self.body_store, batch)
                else:
                    job_id = self.page_job = self.ctx.run_job(run_in_turn, turn, turn.start(), self.body_store, batch)
                    turn.job = (self.ctx.self_ref, job_id)

    def _store_released(self, failed: bool) -> None:
        """The dead instance's job that held the store has ended: this instance's jobs may start.

        If that job failed, the store may be half-changed: it is dropped, and the restart reopens it.
        """
        turn = self.turn
        assert turn is not None
        turn.ended()
        self.store_free = True
        if failed or turn.broken:
            self._drop_store()
            msg = f"queue {self.name!r}: its body store failed in a job of an earlier instance"
            raise PagingFailed(msg)

    def _drop_store(self) -> None:
        """A durable queue's store failed a job: the next instance reopens it on what the disk kept."""
        if self.journal is not None:
            self.journal.attached.pop("bodies", None)
            self.journal.attached.pop("body_turn", None)

    def _hold_deletes(self, pager: BodyPager, journal: Journal) -> None:
        """A settled entry's body is deleted only once the journal write that settled it is synced:
        a crash before would bring the entry back, and its body must still be there."""
        pager.hold_deletes(journal.last_write)
        pager.release_deletes(self.synced_through)
        waits = pager.deletes_held
        if waits > self.sync_asked:
            self.sync_asked = waits
            journal.when_synced(self.ctx.self_ref)

    # --- statistics -----------------------------------------------------------------------

    def stats(self) -> QueueStats:
        """A frozen snapshot of the queue's counters."""
        entries = self.entries
        consumers = tuple(
            ConsumerStats(cid, c.path, c.priority, c.acquiring, c.delivered, c.acked, entries.held_by(cid))
            for cid, c in self.consumers.items()
        )
        return QueueStats(
            queue=self.name,
            depth=entries.available,
            in_flight=entries.acquired,
            published=entries.published,
            delivered=entries.delivered,
            acked=entries.acked,
            redelivered=entries.redelivered,
            dead_lettered=entries.dead_lettered,
            expired=entries.expired,
            rejected=self.rejected,
            consumers=consumers,
            body_bytes_in_ram=None if self.pager is None else self.pager.held_bytes,
            bodies_paged=entries.paged,
            entries_out_of_ram=entries.delta_count,
            returned=entries.returned,
        )
