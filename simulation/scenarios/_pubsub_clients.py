"""Clients of the Pub/Sub front for the simulator: publishers, subscribers and a forger.

They speak the front's actor protocol directly, as the gRPC glue does (no gRPC): a
``FrontPublisher`` sends ``Publish`` to the registry and waits for ``PublishedIds`` or
``Failed``; a ``FrontSubscriber`` opens a stream (``OpenStream`` -> ``StreamOpened``, then
``NextBatch`` to the binding -> ``Batch``, reopening when the stream ends or its binding dies)
or pulls (``PullMessages`` -> ``Batch``), and settles through the registry (``Settle`` ->
``SettleOutcome``), one ``Settle`` in flight at a time. What each does with a delivery (ack,
nack, let the lease lapse, ack late, extend, ack twice, settle an earlier delivery's id again)
is drawn by its ``ClientPlan`` from a generator of its own for that delivery, seeded by the
run's seed, the client and the message's data and attempt (``fate``), as what a publisher
sends is drawn per publish: a message's fate does not depend on how many others came before,
so a shrunk workload keeps the fates that made a run fail. After ``drain_at_s`` a client acks
everything at once, so the run drains. A client with ``forge`` set also settles, on the victim subscription,
the ack ids it was given on its own and ids it makes up. Every client writes its history as
trace notes (``conveyor.simulation.checkers``: ``PublishSent``, ``PublishDone``,
``StreamBound``, ``BatchReceived``, ``SettleSent``, ``SettleDone``), which the checkers judge.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from typing import Any, final

import attrs

from conveyor.actors.pubsub import (
    Batch,
    Detach,
    Done,
    Failed,
    NextBatch,
    OpenStream,
    Publish,
    PublishedIds,
    PubMessage,
    PullMessages,
    Seek,
    Settle,
    SettleKind,
    SettleOutcome,
    StreamClosed,
    StreamOpened,
    StreamSettings,
    stored_size,
)
from conveyor.runtime import Actor, ActorRef, Terminated
from conveyor.simulation import seeded_random
from conveyor.simulation.checkers import (
    BatchReceived,
    PublishDone,
    PublishSent,
    SeekDone,
    SeekSent,
    SettleDone,
    SettleSent,
    StreamBound,
)

POISON_ATTRIBUTE = ("", "poison")
"""What makes a message one the broker refuses: an attribute with an empty key (issue 15, item 1)."""
MAX_IDS_PER_SETTLE = 100
"""The most ack ids a client puts in one ``Settle`` (queued settlements of one kind go together)."""
_SEAL_CHARS = 24  # hex characters of an ack id's seal (``SEAL_BYTES`` of ``_ackid``)


@final
@attrs.frozen
class PublisherPlan:
    """One publisher: ``publishes`` publishes of 1 to ``max_batch`` messages, one in flight at a time.

    Attributes:
        publishes: how many publishes it sends.
        max_batch: most messages in one publish.
        poison: the probability that a publish carries one message the broker refuses.
        keys: ordering keys drawn for its messages (``k0``.. or none, equally likely); 0: none.
        gap_s: the most it waits between an answer and its next publish.
        size: pad each message's data so that it counts exactly this many bytes in a Pull's ``max_bytes``
            (``stored_size``), so that Pulls of a multiple of it fit exactly; 0: no padding.
    """

    publishes: int = 4
    max_batch: int = 3
    poison: float = 0.0
    keys: int = 0
    gap_s: float = 0.5
    size: int = 0


@final
@attrs.frozen
class ClientPlan:
    """One subscriber client: its subscription, how it receives, and what it does with each delivery.

    The probabilities are of one delivery's fate before ``drain_at_s`` (the rest is acked at once):
    ``nack`` (MODACK 0), ``ignore`` (its lease lapses), ``late`` (acked up to two deadlines later,
    often after the lease lapsed), ``extend`` (MODACK of two deadlines, then acked after one).
    Beside its fate, ``duplicate`` acks it a second time later, and ``stale``, when a message comes
    back, settles the earlier delivery's id again (ack or nack).

    Attributes:
        subscription: the index of its subscription in the scenario.
        pull: receive with ``PullMessages`` (True) or a stream.
        max_messages: the stream's flow control, or a pull's size.
        forge: the index of a victim subscription on which it also settles the ids it is given and
            ids it makes up (None: an honest client).
        seek_at: when it seeks its subscription (None: never), to ``seek_back_s`` before then
            (after, if negative).
        max_bytes: a pulling client's ``max_bytes`` per Pull (0: no limit).
    """

    subscription: int = 0
    pull: bool = False
    max_messages: int = 5
    nack: float = 0.0
    ignore: float = 0.0
    late: float = 0.0
    extend: float = 0.0
    duplicate: float = 0.0
    stale: float = 0.0
    forge: int | None = None
    seek_at: float | None = None
    seek_back_s: float = 1.0
    max_bytes: int = 0

    @property
    def plain(self) -> bool:
        """Acks everything at once (whether it forges or not)."""
        return not (self.nack or self.ignore or self.late or self.extend or self.duplicate or self.stale)


def fate(seed: int, *keys: object) -> random.Random:
    """The generator of one client decision: a function of the run's seed and what the decision is about."""
    return seeded_random(f"pubsub-client:{seed}:" + ":".join(str(key) for key in keys))


# --- publishers ----------------------------------------------------------------------------------------


@final
@attrs.frozen
class _PublishNext:
    """Publisher's timer: time for the next publish."""


@final
class FrontPublisher(Actor):
    """Publishes its plan's messages to ``topic`` through the registry, one publish in flight at a time.

    Each message's data is ``p{number}.{publish}.{index}``, unique in the run; attributes carry a
    colour (for filters); a poison publish puts one message with an empty attribute key among them.
    """

    def __init__(self, registry: ActorRef, topic: str, number: int, plan: PublisherPlan,
                 colours: tuple[str, ...], seed: int) -> None:
        self.registry = registry
        self.seed = seed
        self.topic = topic
        self.number = number
        self.plan = plan
        self.colours = colours
        self.sent = 0
        self.waiting: tuple[PubMessage, ...] | None = None

    def on_start(self) -> None:
        """Plan the first publish."""
        if self.plan.publishes:
            self._plan_next()

    def _plan_next(self) -> None:
        rng = fate(self.seed, self.ctx.self_ref.path, self.sent, "gap")
        self.ctx.schedule(rng.uniform(0, self.plan.gap_s), _PublishNext())

    def receive(self, message: Any) -> None:
        """Publish the next batch, or take an answer and plan the next."""
        if type(message) is _PublishNext:
            self._publish()
        elif type(message) is PublishedIds or type(message) is Failed:
            messages, self.waiting = self.waiting, None
            if messages is None:
                return
            if type(message) is PublishedIds:
                done = PublishDone(self.topic, messages, message.message_ids)
            else:
                done = PublishDone(self.topic, messages, (), f"{message.code}: {message.message[:80]}")
            self.ctx.note(done)
            if self.sent < self.plan.publishes:
                self._plan_next()

    def _publish(self) -> None:
        plan, rng = self.plan, fate(self.seed, self.ctx.self_ref.path, self.sent)
        count = rng.randint(1, plan.max_batch)
        poison = rng.randrange(count) if rng.random() < plan.poison else -1
        now_ns = int(self.ctx.now() * 1e9)
        messages = []
        for index in range(count):
            attributes: tuple[tuple[str, str], ...] = (("colour", rng.choice(self.colours)),)
            if index == poison:
                attributes = (*attributes, POISON_ATTRIBUTE)
            key = rng.randrange(plan.keys + 1) if plan.keys else plan.keys
            data = f"p{self.number}.{self.sent}.{index}".encode()
            message = PubMessage(data, attributes, f"k{key}" if key < plan.keys else "", now_ns)
            if plan.size and index != poison:  # a poison message is refused anyway (and has no broker size)
                message = attrs.evolve(message, data=data + b"." * max(0, plan.size - stored_size(message)))
            messages.append(message)
        batch = tuple(messages)
        self.sent += 1
        self.waiting = batch
        self.ctx.note(PublishSent(self.topic, batch))
        self.ctx.send(self.registry, Publish(self.topic, batch))


# --- subscribers ---------------------------------------------------------------------------------------


@final
@attrs.frozen
class _Later:
    """Subscriber's timer: settle ``ack_ids`` now (a late ack, the ack after an extension, a duplicate)."""

    subscription: str
    kind: SettleKind
    seconds: int
    ack_ids: tuple[str, ...]


@final
@attrs.frozen
class _PullAgain:
    """Subscriber's timer: pull ``serial`` had no answer in time (its binding may have crashed); pull again."""

    serial: int


@final
@attrs.frozen
class _Drain:
    """Subscriber's timer: from now on ack everything at once, so the run drains.

    A stream client also ends its stream and opens a new one: a broker consumer learns of no
    lapsed lease, so each delivery a client let lapse keeps one unit of its stream's flow
    control for as long as the stream lasts (docs/simulation.md); a new stream starts with all
    of it.
    """


@final
@attrs.frozen
class _Seek:
    """Subscriber's timer: seek the subscription to ``ClientPlan.seek_back_s`` ago."""


@final
@attrs.frozen
class StopClient:
    """Runner -> client: the run is over; end the stream and stop."""


@final
class FrontSubscriber(Actor):
    """A subscriber client of one subscription (and, if it forges, an attacker of another).

    Args:
        registry: the front's registry.
        subscription: the name of its subscription.
        plan: how it receives and what it does with each delivery.
        deadline_s: its subscription's ack deadline (late acks and extensions are measured in it).
        wait_s: how long a ``NextBatch`` or a ``PullMessages`` waits for a first message.
        drain_at_s: from this virtual time on it acks everything at once.
        seed: the run's seed, from which each delivery's fate is drawn (``fate``).
        victim: the subscription it forges settlements on (``plan.forge``), or None.
    """

    def __init__(self, registry: ActorRef, subscription: str, plan: ClientPlan, deadline_s: int, wait_s: float,
                 drain_at_s: float, seed: int, victim: str | None = None) -> None:
        self.registry = registry
        self.seed = seed
        self.subscription = subscription
        self.plan = plan
        self.deadline_s = deadline_s
        self.wait_s = wait_s
        self.drain_at_s = drain_at_s
        self.victim = victim
        self.binding: ActorRef | None = None
        self.opening = False
        self.pull_serial = 0
        self.draining = False
        self.stopped = False
        self.queue: deque[Settle] = deque()
        self.in_flight: Settle | None = None
        self.ids_of: dict[str, list[tuple[str, int]]] = {}  # message id -> (ack id, attempt) given, in order
        self.seeking: int | None = None  # the time of a Seek sent and not yet answered

    def on_start(self) -> None:
        """Plan the drain (and a Seek), then start receiving."""
        self.ctx.schedule(self.drain_at_s, _Drain())
        if self.plan.seek_at is not None:
            self.ctx.schedule(self.plan.seek_at, _Seek())
        self._receive_more()

    def receive(self, message: Any) -> None:
        """Batches in, settlements out, streams reopened."""
        cls = type(message)
        if cls is Batch:
            self._batch(message)
        elif cls is SettleOutcome or cls is Failed:
            self._answered(message)
        elif cls is _Later:
            self._settle(message.subscription, message.kind, message.seconds, message.ack_ids)
        elif cls is StreamOpened:
            self.opening = False
            self.binding = message.binding
            self.ctx.note(StreamBound(self.subscription, message.binding.path))
            if self.stopped:
                self.ctx.send(message.binding, Detach())
                return
            self.ctx.watch(message.binding)
            self.ctx.send(message.binding, NextBatch(self.wait_s))
        elif cls is StreamClosed:
            if self.ctx.sender == self.binding:
                self._stream_gone()
        elif cls is Terminated:
            if message.ref == self.binding:
                self._stream_gone()
        elif cls is _PullAgain:
            if message.serial == self.pull_serial:
                self._receive_more()
        elif cls is _Drain:
            self.draining = True
            if self.binding is not None:  # a fresh stream: see ``_Drain``
                self.ctx.send(self.binding, Detach())
                self._stream_gone()
        elif cls is _Seek:
            if not self.stopped:
                now_ns = int(self.ctx.now() * 1e9)
                self.seeking = max(0, now_ns - int(self.plan.seek_back_s * 1e9))
                self.ctx.note(SeekSent(self.subscription, self.seeking))
                self.ctx.send(self.registry, Seek(self.subscription, self.seeking, now_ns))
        elif cls is Done:
            if self.seeking is not None:
                self.ctx.note(SeekDone(self.subscription, self.seeking))
                self.seeking = None
        elif cls is StopClient:
            self.stopped = True
            if self.binding is not None:
                self.ctx.send(self.binding, Detach())
            self.ctx.stop()

    # --- receiving ----------------------------------------------------------------------------

    def _receive_more(self) -> None:
        if self.stopped:
            return
        plan = self.plan
        if plan.pull:
            self.pull_serial += 1
            pull = PullMessages(self.subscription, plan.max_messages, self.wait_s)
            self.ctx.send(self.registry, attrs.evolve(pull, max_bytes=plan.max_bytes) if plan.max_bytes else pull)
            self.ctx.schedule(self.wait_s + 5 * self.deadline_s, _PullAgain(self.pull_serial))
        elif self.binding is not None:
            self.ctx.send(self.binding, NextBatch(self.wait_s))
        elif not self.opening:
            self.opening = True
            settings = StreamSettings(self.subscription, 0, plan.max_messages, 0)
            self.ctx.send(self.registry, OpenStream(settings))

    def _stream_gone(self) -> None:
        if self.binding is not None:
            self.ctx.unwatch(self.binding)
        self.binding = None
        self._receive_more()

    def _batch(self, batch: Batch) -> None:
        sender = self.ctx.sender
        from_stream = sender is not None and sender == self.binding
        if batch.received:
            path = sender.path if sender is not None else "?"
            self.ctx.note(BatchReceived(self.subscription, path, batch.received))
            for ack_id, message, attempt in batch.received:
                self._handle(ack_id, message, attempt)
        if from_stream or self.plan.pull:
            self._receive_more()

    def _handle(self, ack_id: str, message: PubMessage, attempt: int) -> None:
        """Decide one delivery's fate from the plan, drawn for this delivery alone (``fate``)."""
        plan, name = self.plan, self.subscription
        given_before = len(self.ids_of.get(message.message_id, ()))
        rng = fate(self.seed, self.ctx.self_ref.path, message.data, attempt, given_before)
        earlier = self.ids_of.setdefault(message.message_id, [])
        if earlier and plan.stale and rng.random() < plan.stale:
            old = earlier[-1][0]  # an id of an earlier delivery, after the message came back
            self._settle(name, SettleKind.ACK if rng.random() < 0.5 else SettleKind.MODACK, 0, (old,))
        earlier.append((ack_id, attempt))
        if self.victim is not None:
            self._forge(ack_id, rng)
        if plan.duplicate and rng.random() < plan.duplicate:
            self.ctx.schedule(rng.uniform(0, self.deadline_s), _Later(name, SettleKind.ACK, 0, (ack_id,)))
        if self.draining:
            self._settle(name, SettleKind.ACK, 0, (ack_id,))
            return
        draw = rng.random()
        if draw < plan.nack:
            self._settle(name, SettleKind.MODACK, 0, (ack_id,))
        elif draw < plan.nack + plan.ignore:
            pass  # the lease lapses and the message comes back
        elif draw < plan.nack + plan.ignore + plan.late:
            self.ctx.schedule(rng.uniform(0, 2 * self.deadline_s), _Later(name, SettleKind.ACK, 0, (ack_id,)))
        elif draw < plan.nack + plan.ignore + plan.late + plan.extend:
            self._settle(name, SettleKind.MODACK, 2 * self.deadline_s, (ack_id,))
            self.ctx.schedule(rng.uniform(self.deadline_s, 1.5 * self.deadline_s),
                              _Later(name, SettleKind.ACK, 0, (ack_id,)))
        else:
            self._settle(name, SettleKind.ACK, 0, (ack_id,))

    def _forge(self, ack_id: str, rng: random.Random) -> None:
        """Settle, on the victim, the id given on our own subscription and one made up from it; again later.

        Now, and once more within a deadline (when the victim's clients may hold what it names).
        """
        victim = self.victim
        assert victim is not None
        for delay in (0.0, rng.uniform(0, self.deadline_s)):
            kind = SettleKind.ACK if rng.random() < 0.5 else SettleKind.MODACK
            forged = (ack_id, made_up(ack_id, rng.random))
            if delay:
                self.ctx.schedule(delay, _Later(victim, kind, 0, forged))
            else:
                self._settle(victim, kind, 0, forged)

    # --- settling -----------------------------------------------------------------------------

    def _settle(self, subscription: str, kind: SettleKind, seconds: int, ack_ids: tuple[str, ...]) -> None:
        """Queue a ``Settle``; one is in flight at a time, and queued ones of one kind go together."""
        queue = self.queue
        last = queue[-1] if queue else None
        if (last is not None and (last.subscription, last.kind, last.seconds) == (subscription, kind, seconds)
                and len(last.ack_ids) + len(ack_ids) <= MAX_IDS_PER_SETTLE):
            queue[-1] = attrs.evolve(last, ack_ids=last.ack_ids + ack_ids)
        else:
            queue.append(Settle(subscription, kind, ack_ids, seconds))
        if self.in_flight is None:
            self._send_next()

    def _send_next(self) -> None:
        if not self.queue:
            return
        request = self.in_flight = self.queue.popleft()
        self.ctx.note(SettleSent(request.subscription, request.kind, request.seconds, request.ack_ids))
        self.ctx.send(self.registry, request)

    def _answered(self, answer: SettleOutcome | Failed) -> None:
        request, self.in_flight = self.in_flight, None
        if request is None:
            return
        if type(answer) is SettleOutcome:
            done = SettleDone(request.subscription, request.kind, request.seconds, request.ack_ids, answer.invalid)
        else:
            done = SettleDone(request.subscription, request.kind, request.seconds, request.ack_ids,
                              failure=f"{answer.code}: {answer.message[:80]}")
        self.ctx.note(done)
        self._send_next()


def made_up(ack_id: str, draw: Callable[[], float]) -> str:
    """An id with an ack id's shape near ``ack_id``: the binding, tag and attempt moved, any seal.

    ``draw`` is a generator's ``random`` (the delivery's ``fate``). A front that reads ids without verifying their
    seal would take it for the delivery it names; the real one ignores it.
    """
    body, _, seal = ack_id.rpartition(".")
    parts = body.split("-", 5)
    if len(parts) != 6 or not all(part.isdecimal() for part in parts[:5]):
        return ack_id + "0"
    subscription, generation, binding, tag, _ = (int(part) for part in parts[:5])
    binding = max(1, binding + int(draw() * 3) - 1)
    tag = max(1, tag + int(draw() * 5) - 2)
    fake = "".join("0123456789abcdef"[int(draw() * 16)] for _ in range(_SEAL_CHARS)) if draw() < 0.5 else seal
    return f"{subscription}-{generation}-{binding}-{tag}-1-{parts[5]}.{fake}"
