"""The Pub/Sub registry and topics as actors: names to actors, and a topic's fan-out to its subscriptions.

``PubSubRegistry`` owns every topic and subscription by name (its children), answers the admin
calls, and forwards data-path requests (publish, pull, streams, acks, seek) to the actor that
serves them inside an ``Envelope`` carrying the asker, so the answer goes straight back without
passing through the registry again. Since every request on a subscription passes through it, it
also enforces ``expiration_policy``: a subscription idle past its TTL, with no client connected,
is deleted (a ``ctx`` timer, never the wall clock). ``TopicActor`` numbers published messages and hands each
subscription the ones its filter accepts; a message a filter refuses is, as in Pub/Sub, never
delivered there (it counts as acknowledged).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final, TypeAlias, final

import attrs

from conveyor.runtime import ActorRef, Journal, JournalSynced, TimerHandle

from . import _snapshots as snapshots
from . import _surface as surface
from ._ackid import KEY_BYTES, AckIdCodec
from ._containment import ContainedActor
from ._edge import publish_refusal
from ._filter import Everything, Filter
from ._model import (
    CreateSubscription,
    CreateTopic,
    DeleteSubscription,
    DeleteTopic,
    Done,
    Failed,
    GetSubscription,
    GetTopic,
    ListSubscriptions,
    ListTopics,
    ListTopicSubscriptions,
    OpenStream,
    Page,
    Publish,
    PublishedIds,
    PubMessage,
    PullMessages,
    ReplaceSubscription,
    ReplaceTopic,
    Reset,
    Seek,
    Settle,
    Shutdown,
    SubscriptionConfig,
    TopicConfig,
)
from ._protocol import (
    BindingCount,
    CountBindings,
    Envelope,
    ListSubscriptionActors,
    PublishInternal,
    ReplayTo,
    Retained,
    Route,
    Routed,
    SubscriptionActors,
    TopicGone,
    UseConfig,
)
from ._schema_actor import NeedsSchema
from ._snapshots import SnapshotConfig, TopicSnapshotKeeper, TopicSnapshots
from ._subscription import SubscriptionActor, shutting_down, unpublishable

DELETED_TOPIC = "_deleted-topic_"
"""What a subscription's topic reads once the topic is deleted, as in Pub/Sub."""
_IDS_PER_TOPIC = 10**12
_EXPIRY_STEP_S: Final = 24 * 3600.0
"""Expiry timers are armed at most a day ahead: a TTL may be 10,000 years, past what a thread timer can wait."""


@final
@attrs.frozen
class AttachSubscription:
    """Registry -> topic: fan out to ``ref`` the messages ``filter`` accepts."""

    name: str
    ref: ActorRef
    filter: Filter


@final
@attrs.frozen
class _ExpiryDue:
    """Registry's timer: subscription ``name`` may have been idle past its TTL."""

    name: str


@final
@attrs.frozen
class DetachSubscription:
    """Registry -> topic: stop fanning out to ``name``."""

    name: str


logger = logging.getLogger("conveyor.pubsub")
_RECORDED: Final = frozenset({CreateTopic, ReplaceTopic, DeleteTopic, CreateSubscription, ReplaceSubscription,
                              DeleteSubscription, Reset}) | snapshots.RECORDED | surface.RECORDED
"""The admin calls a registry on a disk store records, to replay them when the server starts again."""
_TOPIC_COMPACT_AFTER: Final = 1000
"""A topic's journal is replaced by a snapshot once it holds this many publishes."""


@final
@attrs.frozen
class TopicState:
    """A topic's journal: its next message number, retained messages (all, or just added) and latest time."""

    next_id: int
    retained: tuple[PubMessage, ...]
    latest_ns: int
    snapshots: tuple[Any, ...] = ()
    """Only in the journal's snapshot: ``TopicSnapshots.state()``."""


@attrs.define
class _Unconfirmed:
    """A publish the topic has not confirmed yet (on a disk store)."""

    reply_to: ActorRef
    answer: PublishedIds
    subscriptions: set[str]
    write: int


@final
class TopicActor(ContainedActor):
    """One topic: numbers messages, keeps the publish order, fans out to matching subscriptions.

    With ``message_retention_duration`` set it also keeps every message published within that
    long of the latest publish (or Seek), so that a Seek on any of its subscriptions can replay
    them: acked ones, and ones published before the subscription existed.
    """

    def __init__(self, config: TopicConfig, id_base: int) -> None:
        self.config = config
        self.next_id = id_base + 1
        self.subscriptions: dict[str, tuple[ActorRef, Filter]] = {}
        self.retained: OrderedDict[str, PubMessage] = OrderedDict()
        self.latest_ns = 0
        self.journal: Journal | None = None  # on a disk store: message numbers and retained messages
        # Publishes not yet confirmed, by token: who asked, the answer, the subscriptions still
        # to confirm their copy, and the topic's own write number (0 once synced).
        self.unconfirmed: dict[int, _Unconfirmed] = {}
        self.next_token = 1
        self.snapshots = TopicSnapshotKeeper(config.name)  # the messages of this topic's snapshots

    def on_start(self) -> None:
        """On a disk store: carry on numbering (and retaining) where the journal left off."""
        if not self.ctx.journal_on_disk:
            return
        journal = self.journal = self.ctx.journal
        state = journal.snapshot
        if isinstance(state, TopicState):
            self.next_id, self.latest_ns = state.next_id, state.latest_ns
            self.retained.update((m.message_id, m) for m in state.retained)
            self.snapshots.book = TopicSnapshots.restore(getattr(state, "snapshots", ()))
        for event in journal:
            if self.snapshots.recover(event):
                continue
            if isinstance(event, TopicState):
                self.next_id = event.next_id
                self.retained.update((m.message_id, m) for m in event.retained)
                self._prune(event.latest_ns)
        self.snapshots.unfinished_lost(journal)

    def on_stop(self) -> None:
        """Deleted, the topic's journal goes too; a shutdown keeps it for the next start."""
        if self.journal is not None and not shutting_down(self.ctx.self_ref):
            self.journal.clear()

    def handle(self, message: Any) -> None:
        """Publish, replay for a Seek, attach and detach subscriptions, replace settings."""
        match message:
            case Envelope(request=Publish(messages=messages), reply_to=reply_to):
                # checked whole, before anything is numbered or stored: the front's limits, then the broker's
                refused = publish_refusal(messages) or unpublishable(messages)
                if refused is not None:
                    if reply_to is not None:
                        self.ctx.send(reply_to, Failed("INVALID_ARGUMENT", refused))
                    return
                if self.journal is not None:
                    self._publish_durably(messages, reply_to)
                    return
                ids = self._publish(messages)
                if reply_to is not None:
                    self.ctx.send(reply_to, PublishedIds(ids))
            case Routed(token=token, subscription=name):
                self._routed(token, name)
            case JournalSynced(through=through):
                for token, waiting in list(self.unconfirmed.items()):
                    if waiting.write <= through:
                        waiting.write = 0
                        self._maybe_confirm(token)
            case Envelope(request=ReplayTo(seek=seek, subscription=ref, filter=accepts), reply_to=reply_to):
                self._prune(seek.now_ns)
                since = seek.time_ns
                chosen = tuple(m for m in self.retained.values()
                               if m.publish_time_ns >= since and _accepts(accepts, m))
                self.ctx.send(ref, Envelope(Retained(seek, chosen), reply_to))
            case AttachSubscription(name=name, ref=ref, filter=accepts):
                self.subscriptions[name] = (ref, accepts)
            case DetachSubscription(name=name):
                self.subscriptions.pop(name, None)
                for token in list(self.unconfirmed):
                    self._routed(token, name)
            case TopicConfig():
                self.config = message
                self._prune(self.latest_ns)
            case _:
                self.snapshots.handle(message, self.ctx.send, self.journal)

    def _publish_durably(self, messages: tuple[PubMessage, ...], reply_to: ActorRef | None) -> None:
        """Number, record and route; the answer waits for the topic's write and each subscription's copy."""
        journal = self.journal
        assert journal is not None
        token = 0
        if reply_to is not None:
            token = self.next_token
            self.next_token += 1
        routed_to: list[str] = []
        ids = self._publish(messages, token, routed_to)
        retained = tuple(self.retained[i] for i in ids if i in self.retained)
        journal.append(TopicState(self.next_id, retained, self.latest_ns))
        if len(journal) >= _TOPIC_COMPACT_AFTER:
            journal.save_snapshot(TopicState(self.next_id, tuple(self.retained.values()), self.latest_ns,
                                             self.snapshots.book.state()))
        if reply_to is None:
            return
        self.unconfirmed[token] = _Unconfirmed(reply_to, PublishedIds(ids), set(routed_to), journal.last_write)
        journal.when_synced(self.ctx.self_ref)

    def _routed(self, token: int, name: str) -> None:
        waiting = self.unconfirmed.get(token)
        if waiting is not None:
            waiting.subscriptions.discard(name)
            self._maybe_confirm(token)

    def _maybe_confirm(self, token: int) -> None:
        waiting = self.unconfirmed[token]
        if not waiting.subscriptions and not waiting.write:
            del self.unconfirmed[token]
            self.ctx.send(waiting.reply_to, waiting.answer)

    def _publish(self, messages: tuple[PubMessage, ...], token: int = 0,
                 routed_to: list[str] | None = None) -> tuple[str, ...]:
        first = self.next_id
        self.next_id += len(messages)
        numbered = tuple(
            attrs.evolve(m, message_id=str(first + i)) for i, m in enumerate(messages)
        )
        for name, (ref, accepts) in self.subscriptions.items():
            if type(accepts) is Everything:
                chosen = numbered
            else:
                chosen = tuple(m for m in numbered if accepts.matches(dict(m.attributes)))
            if chosen:
                self.ctx.send(ref, Route(chosen, token))
                if routed_to is not None:
                    routed_to.append(name)
        if self.snapshots.book:
            self.snapshots.record(numbered, self.journal)
        if self.config.retention_s is not None:
            retained = self.retained
            for m in numbered:
                retained[m.message_id] = m
            self._prune(numbered[-1].publish_time_ns)
        return tuple(m.message_id for m in numbered)

    def _prune(self, now_ns: int) -> None:
        """Forget retained messages older than the retention before ``now_ns`` (all, without retention)."""
        self.latest_ns = max(self.latest_ns, now_ns)
        retention = self.config.retention_s
        retained = self.retained
        if retention is None:
            retained.clear()
            return
        horizon = self.latest_ns - int(retention * 1e9)
        while retained:
            oldest = next(iter(retained.values()))
            if oldest.publish_time_ns >= horizon:
                break
            retained.popitem(last=False)


def _accepts(accepts: Filter, message: PubMessage) -> bool:
    return type(accepts) is Everything or accepts.matches(dict(message.attributes))


def _page(names: list[str], page_size: int, after: str) -> tuple[list[str], str]:
    """One page of sorted ``names`` after ``after``; the token is the last name when more follow."""
    remaining = [n for n in sorted(names) if n > after] if after else sorted(names)
    size = page_size if page_size > 0 else len(remaining)
    chosen = remaining[:size]
    return chosen, (chosen[-1] if len(remaining) > size and chosen else "")


TopicFactory: TypeAlias = Callable[[TopicConfig, int], TopicActor]
"""Builds a topic's actor from its config and its first message number (``TopicActor``'s arguments)."""
SubscriptionFactory: TypeAlias = Callable[[SubscriptionConfig, ActorRef, int, AckIdCodec], SubscriptionActor]
"""Builds a subscription's actor from ``SubscriptionActor``'s arguments (config, registry, number, codec)."""


@final
class PubSubRegistry(ContainedActor):
    """Topics and subscriptions by name; routes every request to the actor that serves it.

    Args:
        ack_key: the key that seals every ack id its subscriptions issue (``AckIdCodec``): give
            one drawn from the operating system's secure source per server start
            (``PubSubServer`` does); None draws it from ``ctx.random`` (seeded, so replayable, in
            the simulator; not secret).
        start: which start of the server's data directory this is (``PubSubServer`` counts them
            there; 0 without one). It is the high half of every subscription's number, so an ack id
            issued before a restart, sealed with the same key, still names its message but no live
            subscription or binding: its lease ended with the process, and it settles nothing.
        topic_factory, subscription_factory: build the topics' and subscriptions' actors; the
            real ones by default. The simulator's planted bugs swap in broken variants here.
    """

    def __init__(
        self,
        ack_key: bytes | None = None,
        *,
        start: int = 0,
        topic_factory: TopicFactory = TopicActor,
        subscription_factory: SubscriptionFactory = SubscriptionActor,
    ) -> None:
        self.topics: dict[str, tuple[TopicConfig, ActorRef]] = {}
        self.subscriptions: dict[str, tuple[SubscriptionConfig, ActorRef]] = {}
        self.spawned = 0
        self.codec = AckIdCodec(ack_key) if ack_key is not None else None
        if type(start) is not int or not 0 <= start < 1 << 31:
            msg = f"PubSubRegistry start must be an int from 0 to 2**31 - 1, got {start!r}"
            raise ValueError(msg)
        self.first_number = start << 32  # subscription numbers of this start: above every earlier start's
        self.topic_factory = topic_factory
        self.subscription_factory = subscription_factory
        self.activity: dict[str, int] = {}  # subscription -> requests seen (an expiry check compares it)
        self.active_at: dict[str, float] = {}  # subscription -> ctx.now() of its latest request
        self.expiry: dict[str, TimerHandle] = {}  # subscription -> its expiry timer
        self.journal: Journal | None = None  # on a disk store: the admin calls, replayed at start
        self.replaying = False
        self.snapshots: dict[str, SnapshotConfig] = {}  # snapshot name -> settings (the topic keeps its messages)
        self.snapshots_pending: dict[str, str] = {}  # snapshots being made -> their subscription
        self.next_snapshot_expiry = 0  # the earliest expiry among them (ns), 0 with none
        self.iam: dict[str, surface.IamPolicy] = {}  # resource -> the policy set on it
        self.iam_version = 0

    def on_start(self) -> None:
        """Draw the ack-id key if none was given; on a disk store, replay the admin calls it recorded.

        Replaying them spawns the topics and subscriptions again under the same names, so each
        recovers its own journal (message numbers, the queue with its messages and attempts).
        """
        if self.codec is None:
            self.codec = AckIdCodec(self.ctx.random.randbytes(KEY_BYTES))
        if not self.ctx.journal_on_disk:
            return
        journal = self.ctx.journal
        self.replaying = True
        try:
            for request in list(journal):
                try:
                    self.handle(request)
                except Exception as error:  # noqa: BLE001 - it failed the same way when first made
                    logger.error("replaying %s from the registry's journal failed: %r", type(request).__name__,
                                 error)
        finally:
            self.replaying = False
        self.journal = journal

    def _reply(self, answer: object) -> None:
        """Answer the caller; nobody is asking while the journal is replayed."""
        if not self.replaying:
            self.ctx.reply(answer)

    def handle(self, message: Any) -> None:
        """Answer admin calls; forward data-path calls in an ``Envelope``."""
        if self.journal is not None and type(message) in _RECORDED:
            if type(message) is Reset:
                self.journal.clear()  # nothing before it matters any more
            else:
                self.journal.append(message)  # replayed on the next start: the same answer, the same names
        match message:
            case _ if isinstance(message, snapshots.REGISTRY_REQUESTS):
                snapshots.handle_snapshot_request(self, message)
            case _ if isinstance(message, surface.REGISTRY_REQUESTS):
                surface.handle_surface_request(self, message)
            case Publish(topic=name):
                if self.snapshots:
                    snapshots.expire_snapshots(self, message.messages[0].publish_time_ns if message.messages else 0)
                known = self.topics.get(name)
                if known is None:
                    self._reply(Failed("NOT_FOUND", f"Topic not found: {name}"))
                elif known[0].schema is not None and not message.schema_checked:
                    self._reply(NeedsSchema(known[0].schema))  # the glue checks the messages, then publishes again
                else:
                    self.ctx.send(known[1], Envelope(message, self.ctx.sender))
            case PublishInternal(topic=name, messages=messages):
                known_topic = self.topics.get(name)
                if known_topic is not None:
                    self.ctx.send(known_topic[1], Envelope(Publish(name, messages), None))
            case Seek(subscription=name):
                self._seek(name, message)
            case Settle() | PullMessages():
                self._forward(message.subscription, message)
            case OpenStream(settings=settings):
                self._forward(settings.subscription, message)
            case CreateTopic(config=config):
                self._create_topic(config)
            case GetTopic(name=name):
                known = self.topics.get(name)
                self._reply(known[0] if known else Failed("NOT_FOUND", f"Topic not found: {name}"))
            case ReplaceTopic(config=config):
                known = self.topics.get(config.name)
                if known is None:
                    self._reply(Failed("NOT_FOUND", f"Topic not found: {config.name}"))
                else:
                    self.topics[config.name] = (config, known[1])
                    self.ctx.send(known[1], config)
                    self._reply(config)
            case DeleteTopic(name=name):
                self._delete_topic(name)
            case ListTopics(project=project, page_size=size, after=after):
                names, token = _page([n for n in self.topics if n.startswith(project + "/topics/")], size, after)
                self._reply(Page(tuple(self.topics[n][0] for n in names), token))
            case ListTopicSubscriptions(topic=topic, page_size=size, after=after):
                if topic not in self.topics:
                    self._reply(Failed("NOT_FOUND", f"Topic not found: {topic}"))
                    return
                names, token = _page([n for n, (c, _) in self.subscriptions.items() if c.topic == topic], size, after)
                self._reply(Page(tuple(names), token))
            case CreateSubscription(config=config):
                self._create_subscription(config)
            case GetSubscription(name=name):
                known_sub = self.subscriptions.get(name)
                self._reply(known_sub[0] if known_sub else Failed("NOT_FOUND", f"Subscription not found: {name}"))
            case ReplaceSubscription(config=config):
                self._replace_subscription(config)
            case DeleteSubscription(name=name):
                if self._delete_subscription(name):
                    self._reply(Done())
                else:
                    self._reply(Failed("NOT_FOUND", f"Subscription not found: {name}"))
            case ListSubscriptions(project=project, page_size=size, after=after):
                prefix = project + "/subscriptions/"
                names, token = _page([n for n in self.subscriptions if n.startswith(prefix)], size, after)
                self._reply(Page(tuple(self.subscriptions[n][0] for n in names), token))
            case Shutdown():
                for _, ref in self.subscriptions.values():
                    self.ctx.send(ref, message)
                if self.ctx.sender is not None:
                    self._reply(Done())
            case Reset():
                for _, ref in (*self.topics.values(), *self.subscriptions.values()):
                    self.ctx.stop(ref)  # a stream still open on a subscription ends with NOT_FOUND
                for timer in self.expiry.values():
                    self.ctx.cancel(timer)
                self.topics.clear()
                self.subscriptions.clear()
                self.snapshots.clear()
                self.snapshots_pending.clear()
                self.iam.clear()
                self.expiry.clear()
                self.activity.clear()
                self.active_at.clear()
                self._reply(Done())
            case ListSubscriptionActors():
                self._reply(SubscriptionActors(tuple((name, ref) for name, (_, ref) in self.subscriptions.items())))
            case _ExpiryDue(name=name):
                self._expiry_due(name)
            case BindingCount():
                self._binding_count(message)

    def _forward(self, name: str, request: object) -> None:
        known = self.subscriptions.get(name)
        if known is None:
            self._reply(Failed("NOT_FOUND", f"Subscription not found: {name}"))
        elif known[0].detached and isinstance(request, PullMessages | OpenStream):
            self._reply(Failed("FAILED_PRECONDITION", f"Subscription {name} is detached from its topic: it receives "
                                                      "no messages (DetachSubscription)"))
        else:
            self._touch(name)
            self.ctx.send(known[1], Envelope(request, self.ctx.sender))

    # --- expiration_policy ------------------------------------------------------------------

    def _touch(self, name: str) -> None:
        """Subscription ``name`` is active now (a pull, stream, ack, deadline change, Seek or update)."""
        self.activity[name] = self.activity.get(name, 0) + 1
        self.active_at[name] = self.ctx.now()

    def _arm_expiry(self, name: str) -> None:
        """(Re)arm the expiry timer of ``name`` for when its TTL runs out, at most a day ahead."""
        handle = self.expiry.pop(name, None)
        if handle is not None:
            self.ctx.cancel(handle)
        ttl = self.subscriptions[name][0].expiration_ttl_s
        if ttl is None:
            return
        left = self.active_at[name] + ttl - self.ctx.now()
        self.expiry[name] = self.ctx.schedule(min(max(left, 0.0), _EXPIRY_STEP_S), _ExpiryDue(name))

    def _expiry_due(self, name: str) -> None:
        """Idle past its TTL? Then ask the subscription whether a client is still connected."""
        self.expiry.pop(name, None)
        known = self.subscriptions.get(name)
        ttl = None if known is None else known[0].expiration_ttl_s
        if known is None or ttl is None:
            return
        if self.ctx.now() < self.active_at[name] + ttl:
            self._arm_expiry(name)
            return
        self.ctx.send(known[1], CountBindings(name, self.activity[name]))
        # Asked again a day later should the answer never come; an answer re-arms or deletes.
        self.expiry[name] = self.ctx.schedule(_EXPIRY_STEP_S, _ExpiryDue(name))

    def _binding_count(self, answer: BindingCount) -> None:
        """The subscription's answer to an expiry check: connected clients keep it, else it goes."""
        name = answer.name
        known = self.subscriptions.get(name)
        if known is None or self.ctx.sender != known[1]:
            return  # deleted meanwhile, or an earlier subscription of that name
        if answer.bindings:
            self._touch(name)  # a stream is open: a connected subscriber counts as active
            self._arm_expiry(name)
        elif self.activity[name] != answer.activity:
            self._arm_expiry(name)  # a request came while the question was out
        else:
            self._delete_subscription(name)

    def _delete_subscription(self, name: str) -> bool:
        """Delete ``name`` (its streams close, its messages go); False if there is no such subscription."""
        known_sub = self.subscriptions.pop(name, None)
        if known_sub is None:
            return False
        handle = self.expiry.pop(name, None)
        if handle is not None:
            self.ctx.cancel(handle)
        self.activity.pop(name, None)
        self.active_at.pop(name, None)
        self.iam.pop(name, None)
        snapshots.abandon_pending_snapshots(self, name, known_sub[0].topic)
        its_topic = self.topics.get(known_sub[0].topic)
        if its_topic is not None:
            self.ctx.send(its_topic[1], DetachSubscription(name))
        self.ctx.stop(known_sub[1])
        return True

    def _seek(self, name: str, seek: Seek) -> None:
        """Through the topic if it retains messages (they may be replayed), else to the subscription."""
        known = self.subscriptions.get(name)
        topic = None if known is None else self.topics.get(known[0].topic)
        if known is None or topic is None or topic[0].retention_s is None:
            self._forward(name, seek)
        else:
            self._touch(name)
            self.ctx.send(topic[1], Envelope(ReplayTo(seek, known[1], known[0].filter), self.ctx.sender))

    def _child_name(self, kind: str) -> str:
        self.spawned += 1
        return f"{kind}-{self.spawned}"

    def _create_topic(self, config: TopicConfig) -> None:
        if config.name in self.topics:
            self._reply(Failed("ALREADY_EXISTS", f"Topic already exists: {config.name}"))
            return
        name = self._child_name("topic")
        base = self.spawned * _IDS_PER_TOPIC
        make = self.topic_factory
        ref = self.ctx.spawn(lambda: make(config, base), name=name)
        self.topics[config.name] = (config, ref)
        for sub_name, (sub_config, sub_ref) in self.subscriptions.items():
            if sub_config.topic == config.name:  # never: subscriptions of a deleted topic are detached
                self.ctx.send(ref, AttachSubscription(sub_name, sub_ref, sub_config.filter))
        self._reply(config)

    def _delete_topic(self, name: str) -> None:
        known = self.topics.pop(name, None)
        if known is None:
            self._reply(Failed("NOT_FOUND", f"Topic not found: {name}"))
            return
        self.ctx.stop(known[1])
        snapshots.forget_topic_snapshots(self, name)
        self.iam.pop(name, None)
        for sub_name, (config, ref) in list(self.subscriptions.items()):
            if config.topic == name:
                detached = attrs.evolve(config, topic=DELETED_TOPIC)
                self.subscriptions[sub_name] = (detached, ref)
                self.ctx.send(ref, TopicGone())
        self._reply(Done())

    def _create_subscription(self, config: SubscriptionConfig) -> None:
        if config.name in self.subscriptions:
            self._reply(Failed("ALREADY_EXISTS", f"Subscription already exists: {config.name}"))
            return
        topic = self.topics.get(config.topic)
        if topic is None:
            self._reply(Failed("NOT_FOUND", f"Topic not found: {config.topic}"))
            return
        if config.dead_letter is not None and config.dead_letter.topic not in self.topics:
            self._reply(Failed("NOT_FOUND", f"dead_letter_policy.dead_letter_topic not found: "
                                               f"{config.dead_letter.topic}"))
            return
        me, codec = self.ctx.self_ref, self.codec
        assert codec is not None
        name = self._child_name("subscription")
        # Never reused, in this process or a later start: an ack id of a deleted subscription, or of an
        # earlier process, names another number. (``spawned`` alone names the actor: a restart replays it.)
        number = self.first_number + self.spawned
        make = self.subscription_factory
        ref = self.ctx.spawn(lambda: make(config, me, number, codec), name=name)
        self.subscriptions[config.name] = (config, ref)
        self._touch(config.name)
        self._arm_expiry(config.name)
        self.ctx.send(topic[1], AttachSubscription(config.name, ref, config.filter))
        self._reply(config)

    def _replace_subscription(self, config: SubscriptionConfig) -> None:
        known = self.subscriptions.get(config.name)
        if known is None:
            self._reply(Failed("NOT_FOUND", f"Subscription not found: {config.name}"))
            return
        if config.dead_letter is not None and config.dead_letter.topic not in self.topics:
            self._reply(Failed("NOT_FOUND", f"dead_letter_policy.dead_letter_topic not found: "
                                               f"{config.dead_letter.topic}"))
            return
        config = attrs.evolve(config, detached=known[0].detached)  # only DetachSubscription detaches
        self.subscriptions[config.name] = (config, known[1])
        self._touch(config.name)  # an update is activity, and may change the TTL
        self._arm_expiry(config.name)
        self.ctx.send(known[1], UseConfig(config))
        self._reply(config)
