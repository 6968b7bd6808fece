"""Broker scenarios: a publisher, a queue (and its dead-letter queue), clients with policies.

A scenario is data (``BrokerScenario``); ``spawn_broker_scenario`` builds its actors on
any system, so the same workload runs in the simulator, on trio and on threads, and
the same checkers judge every trace. Clients draw their choices from ``ctx.random``,
so a simulated run is fixed by its seed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, final

import attrs

from conveyor.actors.broker import (
    COMPACT_AFTER_EVENTS,
    Ack,
    AckResult,
    BatchPublished,
    ConsumerActor,
    ConsumerSettings,
    Delivery,
    Message,
    ModifyAckDeadline,
    Nack,
    Overflow,
    Publish,
    PublishBatch,
    Published,
    PublishRejected,
    QueueActor,
    QueueConfig,
    Reconfigure,
    Release,
    RetryPolicy,
)
from conveyor.runtime import Actor, ActorRef, ActorSystemBase, TraceEvent
from conveyor.runtime.lowlevel import register_immutable_type
from conveyor.simulation import DiskFaults, Fault, RunResult, Simulation, Strategy, seeded_random
from conveyor.simulation.checkers import (
    AckConfirmed,
    CheckResult,
    ClientAnswer,
    ConsumerAsked,
    DeliveryReceived,
    DeliverySettled,
    EnqueueAnswered,
    EnqueueInDoubt,
    EnqueueSent,
    SharedTrace,
    accounting,
    ack_confirms,
    acked_stays_acked,
    browser_completeness,
    consumer_credit,
    consumer_priority,
    dead_letter_target,
    delivery_count,
    delivery_limit,
    drained,
    durable_total_queue,
    exclusive_lease,
    expiry,
    expiry_not_early,
    found_order,
    group_exclusivity,
    guarded,
    immediate_publish,
    length_limit,
    not_before,
    priority_order,
    publish_outcomes,
    queue_stats,
    ram_under_target,
    reconfigure,
    selector_match,
    stale_nack,
    strict_order,
    total_queue,
    unsettled_by_clients,
)

from ._callback_clients import CallbackClient
from ._disk_store import open_disk_store
from ._final_browse import browse_what_is_left
from ._final_stats import read_stats
from ._flaky import FLAKY, FlakyActor, Poker
from ._kernel_probe import KernelProbe, probe_kernel

QUEUE = "/queue"
DEAD_LETTERS = "/dead-letters"


@final
@attrs.frozen
class ClientPolicy:
    """What a client does with each delivery, by probability (the rest is acked at once).

    Attributes:
        nack: nack it (redelivered after the queue's backoff).
        release: release it (redelivered at once).
        ignore: never answer (the lease lapses and it is redelivered).
        late_ack: ack after up to ``late_ack_s`` (sometimes after the lease lapsed).
        extend: extend the lease to ``extend_s`` from now (``ModifyAckDeadline``), then ack
            within it.
        crash_after: stop the client (and its consumer) after this many deliveries; 0 never.
        stale_nack: given a redelivery, first nack the delivery before it (``Nack(attempts=...)``
            naming an older attempt): a stale nack, which must change nothing.
        confirm: ask the queue to confirm an ack (``Ack(confirm=True)``), late acks included.
        zero_deadline: answer with ``ModifyAckDeadline(seconds=0)``, Pub/Sub's nack: the lease
            ends now and the queue takes the message back as nacked.
        late_nack: nack within ``late_nack_s``, naming the delivery's attempt; if the lease lapsed
            and the message came back meanwhile, the nack is stale and the queue ignores it.
    """

    nack: float = 0.0
    release: float = 0.0
    ignore: float = 0.0
    late_ack: float = 0.0
    late_ack_s: float = 2.0
    crash_after: int = 0
    extend: float = 0.0
    extend_s: float = 3.0
    stale_nack: float = 0.0
    confirm: float = 0.0
    zero_deadline: float = 0.0
    late_nack: float = 0.0
    late_nack_s: float = 2.0


@final
@attrs.frozen
class BrokerScenario:
    """A broker workload.

    Attributes:
        messages: how many the publisher sends, spread over ``publish_span_s``.
        consumers: one ``ClientPolicy`` per acquiring consumer.
        consumer_priorities: per consumer (default all 0).
        consumer_leases: per consumer, its ``ConsumerSettings.lease_s`` (default: the queue's deadline).
        selectors: per consumer, selector data (None matches everything).
        browsers: number of browsers.
        priorities: message priorities are drawn from this tuple.
        groups: number of message groups (0: no groups).
        colours: header ``colour`` values drawn for each message (for selectors).
        ack_deadline_s, max_deliveries, prefetch: queue and consumer settings.
        durable: the queues keep their state in their journals, so a crashed queue recovers it.
        ttls, delays: each message's ``ttl_s`` / ``delay_s`` is drawn from these (empty: none).
        max_length, overflow: the queue's length limit and what it does past it.
        immediate: the fraction of single publishes sent ``Publish(immediate=True)``.
        batch: publish the messages in ``PublishBatch``es of this many (0 or 1: one by one).
        max_message_bytes: the queue's limit on a message's size (None: the default).
        oversize: the fraction of messages padded to the edge of the size limit in force (the
            limit, one byte over it, or twice it).
        reconfigure_at: when the publisher sends the queue a ``Reconfigure`` (None: never), with
            ``reconfigure_ack_deadline_s``, ``reconfigure_max_message_bytes``,
            ``reconfigure_max_deliveries`` and ``reconfigure_retry`` (None: as before); with
            ``reconfigure_dead_letter`` it also switches the dead letters to a second queue.
        draws: what a swarm scenario drew for this run, in words (noted in the trace; empty otherwise).
        disk: the queues journal on a simulated disk that misbehaves so (None: in memory); their
            process may crash (``ProcessCrash``), and only the clients' word judges the run.
        confirm_timeout_s: the publisher gives up a publish unanswered this long (notes it
            ``EnqueueInDoubt``, as a client whose connection died tells its user); None waits for ever.
        compact_after_events: the durable queues' ``QueueConfig.compact_after_events`` (the fault plans
            that make them durable draw a small one, so runs compact and recover from snapshots).
        pokes: times at which a flaky actor beside the broker is made to fail (``_flaky.py``), to
            spend the kernel's restart budget; empty: no flaky actor. ``pokes_stop``: the flaky actor is
            the poker's child, supervised with ``Directive.STOP``.
        hand_over_waits: the queue's ``hand_over_timeout_s`` is None: a consumer told of work keeps
            it until it pulls or loses interest, however long (Qpid's behaviour).
        memory_target_bytes: the queues page their bodies under this target (``QueueConfig``); None
            keeps every body in RAM. A durable queue pages its bodies only (docs/storage.md).
        kernel_probe: what the kernel probe does once the run is quiet (``_kernel_probe.py``): asks
            answered twice or late, a child that escalates; None: no probe.
        callback_clients: consumers beside ``consumers`` whose client is a callback run as a job
            (``_callback_clients``): the ``ConsumerActor`` path embedded users take.
    """

    messages: int = 50
    consumers: tuple[ClientPolicy, ...] = (ClientPolicy(),)
    consumer_priorities: tuple[int, ...] = ()
    consumer_leases: tuple[float | None, ...] = ()
    selectors: tuple[Any, ...] = ()
    browsers: int = 0
    priorities: tuple[int, ...] = (4,)
    groups: int = 0
    colours: tuple[str, ...] = ("red", "blue")
    publish_span_s: float = 1.0
    ack_deadline_s: float = 1.0
    max_deliveries: int = 5
    prefetch: int = 5
    retry: RetryPolicy | None = attrs.field(factory=lambda: RetryPolicy(0.05, 0.4))
    durable: bool = False
    ttls: tuple[float | None, ...] = ()
    delays: tuple[float | None, ...] = ()
    max_length: int | None = None
    overflow: Overflow = Overflow.REJECT_PUBLISH
    immediate: float = 0.0
    batch: int = 0
    max_message_bytes: int | None = None
    oversize: float = 0.0
    reconfigure_at: float | None = None
    reconfigure_ack_deadline_s: float = 1.0
    reconfigure_max_message_bytes: int | None = None
    reconfigure_max_deliveries: int | None = None
    reconfigure_retry: RetryPolicy | None = None
    reconfigure_dead_letter: bool = False
    draws: str = ""
    disk: DiskFaults | None = None
    confirm_timeout_s: float | None = None
    compact_after_events: int = COMPACT_AFTER_EVENTS
    pokes: tuple[float, ...] = ()
    hand_over_waits: bool = False
    pokes_stop: bool = False
    memory_target_bytes: int | None = None
    kernel_probe: KernelProbe | None = None
    callback_clients: int = 0

    def checkers_that_apply(self) -> tuple[str, ...]:
        """Names of the checkers whose preconditions this scenario meets."""
        if self.disk is not None:  # a crash takes back what the queue had not synced: its notes are no witness
            confirmed = ("acked_stays_acked",) if any(policy.confirm for policy in self.consumers) else ()
            paged = ("ram_under_target",) if self.memory_target_bytes is not None else ()
            return ("found_order", *confirmed, *paged, "durable_total_queue")
        names = ["accounting", "drained", "delivery_count", "delivery_limit", "exclusive_lease", "consumer_credit"]
        # the per-message promises first: they fail at the first broken delivery, so a shrink keeps them
        if any(self.ttls):
            names.append("expiry")
            names.append("expiry_not_early")
        if any(self.delays) or self.retry is not None or self.reconfigure_retry is not None:
            names.append("not_before")
        if self.max_length is not None:
            names.append("length_limit")
        if any(selector is not None for selector in self.selectors):
            names.append("selector_match")
        names += ["priority_order", "consumer_priority"]
        if len(set(self.consumer_priorities or (0,))) == 1:
            names.append("strict_order")
        if self.groups:
            names.append("group_exclusivity")
        if self.browsers:
            names.append("browser_completeness")
        names += self._promise_checkers()
        if self.memory_target_bytes is not None:
            names.append("ram_under_target")
        names.append("total_queue")  # last: a checker that names a cause is the one a shrink keeps failing
        names.append("queue_stats")  # after it: counters that do not add up name no cause
        return tuple(names)


    def _promise_checkers(self) -> list[str]:
        """The checkers of the features only a swarm draws: stale nacks, confirmed acks, immediate, limits."""
        names = []
        if any(policy.stale_nack for policy in self.consumers):
            names.append("stale_nack")
        if any(policy.confirm for policy in self.consumers):
            names += ["ack_confirms", "acked_stays_acked"]
        if self.immediate:
            names.append("immediate_publish")
        if self.batch > 1 or self.max_message_bytes is not None or self.oversize:
            names.append("publish_outcomes")
        if self.reconfigure_at is not None:
            names += ["reconfigure", "dead_letter_target"]
        return names

    @property
    def per_message_draws(self) -> bool:
        """Whether the publisher draws anything per message from its own seeded generator."""
        return bool(self.ttls or self.delays or self.immediate or self.oversize)


@final
@attrs.frozen
class _Reconfigure:
    """The publisher's timer: send the queue its new settings."""


@final
@attrs.frozen
class _PublishNext:
    index: int

    def __attrs_post_init__(self) -> None:
        # Checked once here, so arming its timer (one per message) need not walk it.
        if type(self.index) is not int:
            msg = f"_PublishNext.index must be an int, got {self.index!r}"
            raise TypeError(msg)


register_immutable_type(_PublishNext)


@final
@attrs.frozen
class _GiveUp:
    message_id: str


@final
class ScenarioPublisher(Actor):
    """Publishes the scenario's messages at random instants, with confirms.

    When the system traces, it writes its history (``EnqueueSent``, ``EnqueueAnswered``) for
    ``total_queue``, which judges the queue by its clients' word alone.
    """

    def __init__(self, queue: ActorRef, scenario: BrokerScenario, config: QueueConfig | None = None,
                 next_dead_letter: ActorRef | None = None) -> None:
        self.queue = queue
        self.scenario = scenario
        self.config = config  # the queue's settings, which a ``Reconfigure`` changes
        self.next_dead_letter = next_dead_letter  # where a Reconfigure sends the dead letters from then on
        self.confirmed = 0
        self.queue_path = str(queue.path)
        self.noting = False
        self.salt = 0
        self.waiting: set[str] = set()  # publishes not yet answered, with a confirm timeout

    def on_start(self) -> None:
        """Plan every publish as a timer, from ``ctx.random``; note a swarm's draws first."""
        self.noting = self.ctx.tracing
        scenario = self.scenario
        if scenario.draws:
            self.ctx.note(scenario.draws)
        if scenario.per_message_draws:
            self.salt = self.ctx.random.getrandbits(64)
        step = scenario.batch if scenario.batch > 1 else 1
        for index in range(0, scenario.messages, step):
            self.ctx.schedule(self.ctx.random.uniform(0, scenario.publish_span_s), _PublishNext(index))
        if scenario.reconfigure_at is not None:
            self.ctx.schedule(scenario.reconfigure_at, _Reconfigure())

    def receive(self, message: Any) -> None:
        """Publish one message (or a batch), reconfigure the queue, or count a confirm."""
        cls = type(message)
        if cls is _PublishNext:
            scenario = self.scenario
            if scenario.batch > 1:
                indices = range(message.index, min(message.index + scenario.batch, scenario.messages))
                batch = tuple(self._message(index)[0] for index in indices)
                if self.noting:
                    self.ctx.note(EnqueueSent(self.queue_path, tuple(m.message_id or "" for m in batch), batch))
                self.ctx.send(self.queue, PublishBatch(batch))
                if scenario.confirm_timeout_s is not None:  # a batch unanswered is given up message by message
                    for sent_in_batch in batch:
                        self._wait_for(sent_in_batch.message_id, scenario.confirm_timeout_s)
                return
            sent, immediate = self._message(message.index)
            if self.noting:
                self.ctx.note(EnqueueSent(self.queue_path, (sent.message_id or "",), (sent,)))
            self.ctx.send(self.queue, Publish(sent, immediate) if immediate else Publish(sent))
            if scenario.confirm_timeout_s is not None:
                self._wait_for(sent.message_id, scenario.confirm_timeout_s)
        elif cls is Published:
            self.confirmed += 1
            self.waiting.discard(message.message_id)
            if self.noting:
                self.ctx.note(EnqueueAnswered(self.queue_path, (message.message_id,)))
        elif cls is PublishRejected:
            self.waiting.discard(message.message_id)
            if self.noting:
                self.ctx.note(EnqueueAnswered(self.queue_path, (), (message.message_id,)))
        elif cls is _GiveUp and message.message_id in self.waiting:
            self.waiting.discard(message.message_id)
            if self.noting:
                self.ctx.note(EnqueueInDoubt(self.queue_path, (message.message_id,)))
        elif cls is BatchPublished:
            confirmed = tuple(o.message_id for o in message.outcomes if type(o) is Published)
            self.confirmed += len(confirmed)
            self.waiting.difference_update(o.message_id for o in message.outcomes)
            if self.noting:
                refused = tuple(o.message_id for o in message.outcomes if type(o) is PublishRejected)
                self.ctx.note(EnqueueAnswered(self.queue_path, confirmed, refused))
        elif cls is _Reconfigure and self.config is not None:
            scenario = self.scenario
            limit = scenario.reconfigure_max_message_bytes or self.config.max_message_bytes
            deliveries = scenario.reconfigure_max_deliveries or self.config.max_deliveries
            retry = scenario.reconfigure_retry or self.config.retry
            dead_letter = self.next_dead_letter or self.config.dead_letter
            self.config = attrs.evolve(self.config, ack_deadline_s=scenario.reconfigure_ack_deadline_s,
                                       max_message_bytes=limit, max_deliveries=deliveries, retry=retry,
                                       dead_letter=dead_letter)
            self.ctx.send(self.queue, Reconfigure(self.config))

    def _wait_for(self, message_id: str | None, timeout_s: float) -> None:
        """Give up the publish of ``message_id`` (``EnqueueInDoubt``) if no answer comes within ``timeout_s``."""
        if message_id is not None:
            self.waiting.add(message_id)
            self.ctx.schedule(timeout_s, _GiveUp(message_id))

    def _message(self, index: int) -> tuple[Message, bool]:
        """Message ``index`` as drawn, and whether to publish it ``immediate``."""
        scenario = self.scenario
        rng = self.ctx.random
        group = f"g{rng.randrange(scenario.groups)}" if scenario.groups else None
        name = f"m{index}"
        ttl = delay = None
        if scenario.ttls or scenario.delays:
            # Drawn only when the scenario asks for them (older scenarios keep their schedules), and
            # per message, so a message keeps its TTL and delay when a shrink drops others.
            own = seeded_random(f"{self.salt}:{index}")
            ttl = own.choice(scenario.ttls) if scenario.ttls else None
            delay = own.choice(scenario.delays) if scenario.delays else None
        sent = Message(
            name.encode(),
            headers=(("colour", rng.choice(scenario.colours)), ("index", index)),
            priority=rng.choice(scenario.priorities),
            group=group,
            message_id=name,
            ttl_s=ttl,
            delay_s=delay,
        )
        immediate = False
        if scenario.immediate or scenario.oversize:
            more = seeded_random(f"{self.salt}:{index}:promises")
            immediate = more.random() < scenario.immediate
            if more.random() < scenario.oversize and self.config is not None:
                limit = self.config.max_message_bytes  # as the queue has it: a Reconfigure goes by our channel
                pad = more.choice((limit, limit + 1, 2 * limit)) - sent.size
                if pad > 0:
                    sent = attrs.evolve(sent, body=sent.body + b"x" * pad)
        return sent, immediate


@final
@attrs.frozen
class _LateAck:
    delivery: Delivery
    connection: int = 0


@final
@attrs.frozen
class ConnectionLost:
    """The harness tells a client that the queue's process died: its subscription went with the connection."""


@final
@attrs.frozen
class _LateNack:
    delivery: Delivery
    connection: int = 0


@final
class ScenarioClient(Actor):
    """A client that owns its ConsumerActor (as a child) and answers deliveries by its policy.

    When the system traces, it writes its history: each delivery it is given
    (``DeliveryReceived``, with its own intent to acquire or browse, not what its consumer
    declared) and each answer it sends (``DeliverySettled``).
    """

    def __init__(
        self, queue: ActorRef, policy: ClientPolicy, settings: ConsumerSettings,
        consumer_factory: ConsumerFactory = ConsumerActor,
    ) -> None:
        self.queue = queue
        self.policy = policy
        self.settings = settings
        self.consumer_factory = consumer_factory
        self.deliveries = 0
        self.consumer: ActorRef | None = None
        self.queue_path = str(queue.path)
        self.noting = False
        # The policy's cumulative thresholds, summed once in the order ``receive`` compares them.
        self.below_nack = policy.nack
        self.below_release = policy.nack + policy.release
        self.below_ignore = policy.nack + policy.release + policy.ignore
        self.below_late_ack = policy.nack + policy.release + policy.ignore + policy.late_ack
        self.below_extend = self.below_late_ack + policy.extend
        self.connection = 0  # connections lost so far: a late ack meant for an earlier one is dropped
        self.confirming: dict[int, str] = {}  # tag -> message id of this connection's acks awaiting AckResult
        self.below_late_nack = self.below_extend + policy.late_nack
        self.below_zero_deadline = self.below_late_nack + policy.zero_deadline

    def on_start(self) -> None:
        """Spawn the consumer, supervised by this client."""
        self.noting = self.ctx.tracing
        if self.noting:
            self.ctx.note(ConsumerAsked(self.queue_path, self.settings.selector, self.settings.acquiring))
        self._connect("consumer")

    def _connect(self, name: str) -> None:
        self.consumer = self.ctx.spawn(
            lambda: self.consumer_factory(self.queue, self.ctx.self_ref, self.settings), name=name
        )

    def receive(self, message: Any) -> None:
        """Answer one delivery."""
        cls = type(message)
        if cls is ConnectionLost:  # a new connection, a new subscription; the queue takes back the old one's
            if self.consumer is not None:
                self.ctx.stop(self.consumer)
            self.connection += 1
            self.confirming.clear()  # the old consumer's answers, if any still come, are not this connection's
            self._connect(f"consumer-{self.connection}")
            return
        if cls is AckResult:
            self._acks_confirmed(message)
            return
        if cls is _LateNack:
            if message.connection != self.connection:
                return  # meant for an earlier connection's delivery
            delivery = message.delivery
            assert self.consumer is not None
            if self.noting:
                self._note_answer(delivery, "nack")
            nack = Nack(delivery.consumer_id, (delivery.tag,), attempts=(delivery.delivery_count,))
            self.ctx.send(self.consumer, nack)
            return
        if cls is _LateAck:
            if message.connection != self.connection:
                return
            delivery = message.delivery
            assert self.consumer is not None
            if self.noting:
                self._note_answer(delivery, "ack")
            self.ctx.send(self.consumer, self._ack(delivery))
            return
        if cls is not Delivery:
            return
        self.deliveries += 1
        policy = self.policy
        acquiring = self.settings.acquiring
        noting = self.noting
        if noting:
            self.ctx.note(DeliveryReceived(self.queue_path, message.consumer_id, message.tag,
                                           message.message.message_id, message.delivery_count, acquiring))
        if not acquiring:
            return
        if policy.stale_nack and message.delivery_count > 1 and self.ctx.random.random() < policy.stale_nack:
            # the nack of the delivery before this one, late: the queue must leave this one leased
            self.ctx.reply(Nack(message.consumer_id, (message.tag,), attempts=(message.delivery_count - 1,)))
        draw = self.ctx.random.random()
        if draw < self.below_nack:
            if noting:
                self._note_answer(message, "nack")
            self.ctx.reply(Nack(message.consumer_id, (message.tag,)))
        elif draw < self.below_release:
            if noting:
                self._note_answer(message, "release")
            self.ctx.reply(Release(message.consumer_id, (message.tag,)))
        elif draw < self.below_ignore:
            pass
        elif draw < self.below_late_ack:
            self.ctx.schedule(self.ctx.random.uniform(0, policy.late_ack_s), _LateAck(message, self.connection))
        elif draw < self.below_extend:
            self.ctx.reply(ModifyAckDeadline(message.consumer_id, (message.tag,), policy.extend_s))
            self.ctx.schedule(self.ctx.random.uniform(0.5, 0.9) * policy.extend_s, _LateAck(message, self.connection))
        elif draw < self.below_late_nack:
            self.ctx.schedule(self.ctx.random.uniform(0, policy.late_nack_s), _LateNack(message, self.connection))
        elif draw < self.below_zero_deadline:
            if noting:
                self._note_answer(message, "nack")
            self.ctx.reply(ModifyAckDeadline(message.consumer_id, (message.tag,), 0.0))
        else:
            if noting:
                self._note_answer(message, "ack")
            self.ctx.reply(self._ack(message))
        if policy.crash_after and self.deliveries >= policy.crash_after:
            self.ctx.stop()  # the consumer child stops with us; the queue takes everything back

    def _ack(self, delivery: Delivery) -> Ack:
        """The ack of ``delivery``; with the policy's ``confirm`` chance, one the queue answers (``AckResult``)."""
        confirm = self.policy.confirm
        if confirm and self.ctx.random.random() < confirm:
            if delivery.message.message_id is not None:
                self.confirming[delivery.tag] = delivery.message.message_id
            return Ack(delivery.consumer_id, (delivery.tag,), confirm=True)
        return Ack(delivery.consumer_id, (delivery.tag,))

    def _acks_confirmed(self, result: AckResult) -> None:
        """The queue confirmed acks: note the messages whose acks it says it took (``acked_stays_acked``)."""
        if self.ctx.sender != self.consumer:
            return  # an earlier connection's consumer: its tags are not this connection's
        confirmed = tuple(self.confirming.pop(tag) for tag in result.acked if tag in self.confirming)
        for tag in result.invalid:
            self.confirming.pop(tag, None)
        if confirmed and self.noting:
            self.ctx.note(AckConfirmed(self.queue_path, confirmed))

    def _note_answer(self, delivery: Delivery, outcome: ClientAnswer) -> None:
        self.ctx.note(DeliverySettled(self.queue_path, delivery.consumer_id, delivery.tag,
                                      delivery.message.message_id, delivery.delivery_count, outcome))


QueueFactory = Callable[[QueueConfig], QueueActor]
ConsumerFactory = Callable[[ActorRef, ActorRef | Callable[[Delivery], object], ConsumerSettings], ConsumerActor]
"""Builds a scenario client's consumer from (queue, client, settings): ``ConsumerActor``, or a planted variant;
a callback client's consumer too (its client a callback)."""


def spawn_broker_scenario(
    system: ActorSystemBase, scenario: BrokerScenario, queue_factory: QueueFactory = QueueActor,
    consumer_factory: ConsumerFactory = ConsumerActor,
) -> ActorRef:
    """Spawn the scenario's actors on ``system``; return the queue's ref (path ``/queue``).

    ``queue_factory`` and ``consumer_factory`` let a test run a variant of the queue or of the
    clients' consumers (a planted bug) in the same workload.
    """
    return _spawn_broker_actors(system, scenario, queue_factory, consumer_factory)[0]


def _spawn_broker_actors(
    system: ActorSystemBase, scenario: BrokerScenario, queue_factory: QueueFactory,
    consumer_factory: ConsumerFactory = ConsumerActor,
) -> tuple[ActorRef, tuple[ActorRef, ...]]:
    """Spawn the scenario's actors; return the queue's ref and the dead-letter queues' (the second one a
    ``Reconfigure`` switches to, if the scenario draws one)."""
    target = scenario.memory_target_bytes  # a durable queue pages too (a queue-crash fault makes a swarm's durable)

    def dead_letter_queue(name: str) -> ActorRef:
        return system.spawn(
            lambda: QueueActor(QueueConfig(name, durable=scenario.durable, memory_target_bytes=target,
                                           compact_after_events=scenario.compact_after_events)),
            name=name,
        )

    dead_letters = dead_letter_queue("dead-letters")
    later = dead_letter_queue("dead-letters-2") if scenario.reconfigure_dead_letter else None
    config = QueueConfig(
        "queue",
        ack_deadline_s=scenario.ack_deadline_s,
        max_deliveries=scenario.max_deliveries,
        retry=scenario.retry,
        dead_letter=dead_letters,
        durable=scenario.durable,
        compact_after_events=scenario.compact_after_events,
        max_length=scenario.max_length,
        overflow=scenario.overflow,
        memory_target_bytes=target,
    )
    if scenario.max_message_bytes is not None:
        config = attrs.evolve(config, max_message_bytes=scenario.max_message_bytes)
    if scenario.hand_over_waits:
        config = attrs.evolve(config, hand_over_timeout_s=None)
    queue = system.spawn(lambda: queue_factory(config), name="queue")
    priorities = scenario.consumer_priorities or (0,) * len(scenario.consumers)
    selectors = scenario.selectors or (None,) * len(scenario.consumers)

    def client(policy: ClientPolicy, settings: ConsumerSettings) -> Callable[[], ScenarioClient]:
        return lambda: ScenarioClient(queue, policy, settings, consumer_factory)

    for index, policy in enumerate(scenario.consumers):
        lease_s = scenario.consumer_leases[index] if index < len(scenario.consumer_leases) else None
        settings = ConsumerSettings(
            prefetch_messages=scenario.prefetch, priority=priorities[index], selector=selectors[index], lease_s=lease_s
        )
        system.spawn(client(policy, settings), name=f"client-{index}")
    for index in range(scenario.browsers):
        settings = ConsumerSettings(prefetch_messages=scenario.prefetch, acquiring=False)
        system.spawn(client(ClientPolicy(), settings), name=f"browser-{index}")
    callback_settings = ConsumerSettings(prefetch_messages=scenario.prefetch)
    for index in range(scenario.callback_clients):
        system.spawn(lambda: CallbackClient(queue, callback_settings, consumer_factory), name=f"callback-{index}")
    system.spawn(lambda: ScenarioPublisher(queue, scenario, config, later), name="publisher")
    if scenario.pokes:
        flaky = None if scenario.pokes_stop else system.spawn(FlakyActor, name=FLAKY)
        system.spawn(lambda: Poker(flaky, scenario.pokes), name="poker")
    return queue, (dead_letters,) if later is None else (dead_letters, later)


def random_broker_scenario(seed: int, kind: str = "mixed") -> BrokerScenario:
    """A scenario drawn from ``seed`` (1-20 consumers, priorities, selectors, faults), by kind."""
    rng = seeded_random(f"scenario:{kind}:{seed}")
    count = rng.randint(1, 20)

    def policy() -> ClientPolicy:
        return ClientPolicy(
            nack=rng.choice((0.0, 0.1)),
            release=rng.choice((0.0, 0.05)),
            ignore=rng.choice((0.0, 0.0, 0.05)),
            late_ack=rng.choice((0.0, 0.1)),
            crash_after=rng.choice((0, 0, 0, rng.randint(1, 10))),
        )

    consumers = tuple(policy() for _ in range(count))
    if kind == "priorities":
        return BrokerScenario(
            messages=rng.randint(10, 60),
            consumers=consumers,
            consumer_priorities=tuple(rng.choice((0, 1, 2)) for _ in range(count)),
            selectors=tuple(rng.choice((None, None, {"eq": ["colour", "red"]})) for _ in range(count)),
            priorities=(0, 4, 9),
        )
    if kind == "groups":
        return BrokerScenario(
            messages=rng.randint(10, 60), consumers=consumers, groups=rng.randint(1, 4), browsers=rng.randint(1, 2)
        )
    return BrokerScenario(messages=rng.randint(10, 60), consumers=consumers, priorities=(0, 4, 9))


def run_broker_simulation(
    scenario: BrokerScenario,
    seed: int,
    strategy: Strategy | None = None,
    max_steps: int = 500_000,
    queue_factory: QueueFactory = QueueActor,
    faults: Sequence[Fault] = (),
    consumer_factory: ConsumerFactory = ConsumerActor,
    system: Callable[..., Simulation] = Simulation,
) -> tuple[Simulation, RunResult]:
    """Run ``scenario`` to quiet in a Simulation (with ``faults``), then shut it down (so queues record their end).

    ``system`` builds the Simulation (a planted kernel bug swaps it). If the run went quiet with a
    sent message that the clients' history does not show confirmed and acked, browsers then read
    what is left in the queue and its dead-letter queue and note it (``browse_what_is_left``), so
    ``total_queue`` can tell a message still queued from a lost one without asking the queue. A run
    its clients settled needs no browse and is unchanged by it.
    """
    if scenario.disk is None:
        sim = system(seed=seed, strategy=strategy, faults=faults)
    else:
        sim = system(seed=seed, strategy=strategy, faults=faults, journal_store=open_disk_store, disk=scenario.disk,
                     process=(QUEUE, DEAD_LETTERS))
    queue, dead_letters = _spawn_broker_actors(sim, scenario, queue_factory, consumer_factory)
    if scenario.disk is not None:
        paths = [f"/client-{index}" for index in range(len(scenario.consumers))]
        sim.process_crash_listeners.append(lambda: _connections_lost(sim, paths))
    result = sim.run(max_steps=max_steps)
    if result.quiet and sim.tracer is not None and unsettled_by_clients(sim.trace):
        sim.end_faults()
        browse_what_is_left(sim, ((queue, False), *((dead, True) for dead in dead_letters)))
        more = sim.run(max_steps=max_steps - result.steps)
        result = RunResult(steps=result.steps + more.steps, time=more.time, quiet=more.quiet)
    if result.quiet and sim.tracer is not None and scenario.disk is None:
        read_stats(sim, queue)  # for queue_stats (a crashed process's counters are judged by nobody)
        more = sim.run(max_steps=max_steps - result.steps)
        result = RunResult(steps=result.steps + more.steps, time=more.time, quiet=more.quiet)
    if scenario.kernel_probe is not None and result.quiet:
        probe_kernel(sim, scenario.kernel_probe, max_steps)
    sim.shutdown()
    return sim, result


def _connections_lost(sim: Simulation, paths: Sequence[str]) -> None:
    """The queue's process died: each live consumer client hears its connection went with it."""
    for path in paths:
        client = sim.live_ref(path)
        if client is not None:
            sim.tell_from_thread(client, ConnectionLost())


def _total_queue(trace: Iterable[TraceEvent], queue_path: str) -> CheckResult:
    return total_queue(trace)


def _durable_total_queue(trace: Iterable[TraceEvent], queue_path: str) -> CheckResult:
    return durable_total_queue(trace)


_CHECKERS: dict[str, Callable[[SharedTrace, str], CheckResult]] = {
    "total_queue": _total_queue,
    "accounting": accounting,
    "selector_match": selector_match,
    "drained": drained,
    "strict_order": strict_order,
    "priority_order": priority_order,
    "consumer_priority": consumer_priority,
    "group_exclusivity": group_exclusivity,
    "browser_completeness": browser_completeness,
    "durable_total_queue": _durable_total_queue,
    "found_order": found_order,
    "acked_stays_acked": acked_stays_acked,
    "expiry_not_early": expiry_not_early,
    "queue_stats": queue_stats,
    "ram_under_target": ram_under_target,
}


BROWSERS = ("/browser-", "/final-browse-")
"""Path prefixes of the scenario's browsers (and of the final browse's): the per-message checkers
judge consumers by what the workload made them, not by what they declared."""


def _scenario_checker(name: str, scenario: BrokerScenario) -> Callable[[SharedTrace, str], CheckResult]:
    """The checker called ``name``, given what it needs of the scenario's settings."""
    if name == "expiry":
        return lambda trace, queue: expiry(trace, queue, BROWSERS)
    if name == "consumer_credit":
        return lambda trace, queue: consumer_credit(trace, scenario.prefetch, BROWSERS)
    if name == "not_before":
        return lambda trace, queue: not_before(trace, queue, scenario.retry, BROWSERS)
    if name == "delivery_count":
        return lambda trace, queue: delivery_count(trace, queue, BROWSERS)
    if name == "exclusive_lease":
        return lambda trace, queue: exclusive_lease(trace, queue, BROWSERS)
    if name == "delivery_limit":
        return lambda trace, queue: delivery_limit(trace, queue, scenario.max_deliveries, BROWSERS)
    if name == "length_limit":
        return lambda trace, queue: length_limit(trace, queue, scenario.max_length, scenario.overflow, BROWSERS)
    if name == "stale_nack":
        return lambda trace, queue: stale_nack(trace, queue, BROWSERS)
    if name == "ack_confirms":
        return lambda trace, queue: ack_confirms(trace, queue, BROWSERS)
    if name == "immediate_publish":
        return lambda trace, queue: immediate_publish(trace, queue, BROWSERS)
    if name == "publish_outcomes":
        limit = scenario.max_message_bytes or QueueConfig("default").max_message_bytes
        return lambda trace, queue: publish_outcomes(trace, queue, limit)
    if name == "dead_letter_target":
        return lambda trace, queue: dead_letter_target(trace, queue, DEAD_LETTERS)
    if name == "reconfigure":
        return lambda trace, queue: reconfigure(trace, queue, scenario.ack_deadline_s, BROWSERS)
    return _CHECKERS[name]


def check_broker_run(trace: list[TraceEvent], scenario: BrokerScenario) -> list[CheckResult]:
    """Run every checker that applies to ``scenario`` over the main queue's story.

    A checker that raises fails the run with what it raised (``guarded``); the others still judge it.
    """
    shared = SharedTrace(trace)  # the queue's story is read once for all of them
    results: list[CheckResult] = []
    for name in scenario.checkers_that_apply():
        results += guarded(name, _scenario_checker(name, scenario), shared, QUEUE)
    return results
