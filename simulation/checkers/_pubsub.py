"""Checkers of the Pub/Sub front's promises, judged from its clients' history, as Jepsen's total-queue does.

The clients of a ``pubsub`` scenario speak the front's actor protocol and write down what they
did and what they were told, as trace notes: ``PublishSent`` / ``PublishDone`` (a publish, then
the topic's ids or the failure), ``StreamBound`` (a stream was given a binding),
``BatchReceived`` (deliveries: ack id, message, attempt), ``SettleSent`` / ``SettleDone`` (acks
and deadline changes, then the ids an exactly-once subscription refused). The checkers compare
that history with the subscriptions' terms (``SubscriptionTerms``): what was confirmed must be
delivered and acked (unless a Seek, ``SeekSent`` / ``SeekDone``, marked it acked), what was
refused must never be delivered, a settlement that took effect at
a subscription's queue must come from a client that was given that delivery, and an
exactly-once subscription never gives out a message again once a client's ack of it was
confirmed. Only ``acks_from_receivers`` reads the queues' own notes, to see which settlements
took effect; what they must match is the clients' word. Relating events of different actors
relies on the simulator's trace being one causal order (it is: one delivery at a time).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import final

import attrs

from conveyor.actors.broker import Delivered, EntryEnqueued, EntryReturned, EntrySettled, Subscribed
from conveyor.actors.pubsub import Batch, Filter, PubMessage, SettleKind
from conveyor.runtime import EventKind, TraceEvent

from ._result import CheckResult

DEAD_LETTER_SOURCE = "CloudPubSubDeadLetterSourceSubscription"
"""The attribute a dead-lettered message carries: the short name of the subscription it left."""

# --- the clients' history ------------------------------------------------------------------------


@final
@attrs.frozen
class PublishSent:
    """Client history: a publish of ``messages`` to ``topic`` was sent (its answer may never come)."""

    topic: str
    messages: tuple[PubMessage, ...]


@final
@attrs.frozen
class PublishDone:
    """Client history: the answer to a publish: the topic's ``ids`` (confirmed) or a ``failure`` (refused)."""

    topic: str
    messages: tuple[PubMessage, ...]
    ids: tuple[str, ...]
    failure: str = ""


@final
@attrs.frozen
class StreamBound:
    """Client history: a stream on ``subscription`` was given the binding at path ``binding``."""

    subscription: str
    binding: str


@final
@attrs.frozen
class BatchReceived:
    """Client history: the binding at ``binding`` gave these deliveries (ack id, message, attempt)."""

    subscription: str
    binding: str
    received: tuple[tuple[str, PubMessage, int], ...]


@final
@attrs.frozen
class SettleSent:
    """Client history: a ``Settle`` of ``ack_ids`` on ``subscription`` was sent (``seconds`` for a MODACK)."""

    subscription: str
    kind: SettleKind
    seconds: int
    ack_ids: tuple[str, ...]


@final
@attrs.frozen
class SettleDone:
    """Client history: a ``Settle``'s answer: the ids reported ``invalid`` (exactly-once), or a ``failure``."""

    subscription: str
    kind: SettleKind
    seconds: int
    ack_ids: tuple[str, ...]
    invalid: tuple[str, ...] = ()
    failure: str = ""


@final
@attrs.frozen
class SeekSent:
    """Client history: a Seek of ``subscription`` to ``time_ns`` (publish time, in ns) was sent."""

    subscription: str
    time_ns: int


@final
@attrs.frozen
class SeekDone:
    """Client history: the Seek of ``subscription`` to ``time_ns`` was answered (``failure``: refused)."""

    subscription: str
    time_ns: int
    failure: str = ""


@final
@attrs.frozen
class SubscriptionTerms:
    """What a subscription promised, as created: its topic, filter, delivery mode, dead-letter topic and ordering."""

    name: str
    topic: str
    filter: Filter = attrs.field(eq=False)
    exactly_once: bool = False
    dead_letter_topic: str | None = None
    ordered: bool = False

    @property
    def short_name(self) -> str:
        """The name after ``/subscriptions/``, as dead-lettered messages name their source."""
        return self.name.rpartition("/subscriptions/")[2]


_NOTE = EventKind.NOTE


def _parent(path: str) -> str:
    return path.rpartition("/")[0]


def _label(message: PubMessage) -> str:
    return message.data.decode(errors="replace")


# --- (a) no confirmed message lost, nothing refused delivered ------------------------------------


@final
class _Subscription:
    """One subscription's side of the history: who was given which message, who acked it."""

    __slots__ = ("acked", "confirmed", "given", "ids", "sources")

    def __init__(self) -> None:
        self.given: dict[bytes, int] = defaultdict(int)  # data -> deliveries of it to clients
        self.ids: dict[tuple[str, str], bytes] = {}  # (client, ack id it was given) -> data
        self.sources: dict[bytes, set[str]] = defaultdict(set)  # data -> dead-letter sources it named
        self.acked: set[bytes] = set()  # data a client of it acked with an id it was given
        self.confirmed: set[bytes] = set()  # data whose ack an exactly-once answer confirmed


def no_confirmed_loss(trace: Iterable[TraceEvent], terms: Sequence[SubscriptionTerms]) -> CheckResult:
    """Every confirmed message reaches every subscription whose filter accepts it and is acked there.

    From the clients' history: each message of a publish answered with ids (``PublishDone``)
    that a subscription's filter accepts must be given to a client of that subscription, which
    then acks it with an id it was given, unless it was dead-lettered: then a client of a
    subscription of the dead-letter topic was given it (its source attribute naming the
    subscription) and acked it there. Nothing of a refused publish (``failure``) is ever given
    to anyone, and nothing is given that no publish carried (a phantom), or under another id
    than its topic confirmed. Messages are told apart by their data, unique per published
    message in a scenario.

    On an exactly-once subscription an ack the answer reported invalid still counts: Pub/Sub
    promises that a confirmed ack is final (``exactly_once`` checks that), not that a refused
    one brings the message back. The metric ``unconfirmed`` counts messages acked there whose
    every ack was reported invalid (a lapsed lease, or a binding that crashed with the ack on
    its way to the queue, which took it).
    """
    confirmed: dict[bytes, tuple[str, PubMessage]] = {}  # data -> (topic, message with its id)
    refused: dict[bytes, str] = {}
    sent: set[bytes] = set()
    subs: dict[str, _Subscription] = defaultdict(_Subscription)
    seeks: dict[str, int] = {}  # subscription -> the latest time a Seek of it marked everything before acked
    violations: list[str] = []
    given = 0
    for event in trace:
        if event.kind is not _NOTE:
            continue
        note = event.message
        cls = type(note)
        client = event.sender or "?"
        if cls is PublishSent:
            sent.update(m.data for m in note.messages)
        elif cls is PublishDone:
            if note.failure:
                refused.update((m.data, note.failure) for m in note.messages)
            else:
                for message, message_id in zip(note.messages, note.ids, strict=True):
                    confirmed[message.data] = (note.topic, attrs.evolve(message, message_id=message_id))
        elif cls is SeekSent:
            seeks[note.subscription] = max(seeks.get(note.subscription, 0), note.time_ns)
        elif cls is BatchReceived:
            sub = subs[note.subscription]
            for ack_id, message, _ in note.received:
                given += 1
                data = message.data
                sub.given[data] += 1
                sub.ids[(client, ack_id)] = data
                source = _dead_letter_source(message)
                if source is not None:
                    sub.sources[data].add(source)
                problem = _given_wrongly(message, source, refused, sent, confirmed)
                if problem:
                    violations.append(f"t={event.time:g}: {client} was given {_label(message)} on "
                                      f"{note.subscription}, {problem}")
        elif cls is SettleSent and note.kind is SettleKind.ACK:
            sub = subs[note.subscription]
            for ack_id in note.ack_ids:
                data_acked = sub.ids.get((client, ack_id))
                if data_acked is not None:
                    sub.acked.add(data_acked)
        elif cls is SettleDone and note.kind is SettleKind.ACK and not note.failure:
            sub = subs[note.subscription]
            invalid = set(note.invalid)
            for ack_id in note.ack_ids:
                data_confirmed = sub.ids.get((client, ack_id))
                if data_confirmed is not None and ack_id not in invalid:
                    sub.confirmed.add(data_confirmed)
    lost = _report_unsettled(confirmed, terms, subs, violations, seeks)
    unconfirmed = sum(len(subs[term.name].acked - subs[term.name].confirmed)
                      for term in terms if term.exactly_once and term.name in subs)
    return CheckResult.of("no_confirmed_loss", violations, confirmed=len(confirmed), refused=len(refused),
                          given=given, lost=lost, unconfirmed=unconfirmed)


def _dead_letter_source(message: PubMessage) -> str | None:
    for key, value in message.attributes:
        if key == DEAD_LETTER_SOURCE:
            return value
    return None


def _given_wrongly(
    message: PubMessage, source: str | None, refused: Mapping[bytes, str], sent: set[bytes],
    confirmed: Mapping[bytes, tuple[str, PubMessage]],
) -> str:
    """What is wrong with a client being given ``message`` ("" if nothing)."""
    data = message.data
    if data in refused:
        return f"a message of a publish that was refused ({refused[data]})"
    if data not in sent:
        return "which no client published (a phantom)"
    known = confirmed.get(data)
    if known is not None and source is None and message.message_id != known[1].message_id:
        return f"as message {message.message_id}, but its topic had confirmed it as {known[1].message_id}"
    return ""


def _report_unsettled(
    confirmed: Mapping[bytes, tuple[str, PubMessage]], terms: Sequence[SubscriptionTerms],
    subs: Mapping[str, _Subscription], violations: list[str], seeks: Mapping[str, int],
) -> int:
    """Report each confirmed message a subscription accepted but no client of it acked (nor dead-lettered).

    A message published before the time of a Seek of the subscription counts as acked there (``seeks``).
    """
    by_topic: dict[str, list[SubscriptionTerms]] = defaultdict(list)
    for term in terms:
        by_topic[term.topic].append(term)
    lost = 0
    for data, (topic, message) in confirmed.items():
        attributes = dict(message.attributes)
        for term in by_topic.get(topic, ()):
            if not term.filter.matches(attributes):
                continue
            sub = subs.get(term.name)
            if (sub is not None and data in sub.acked) or message.publish_time_ns < seeks.get(term.name, 0):
                continue
            if term.dead_letter_topic is not None and _dead_lettered(
                data, term.short_name, by_topic.get(term.dead_letter_topic, ()), subs
            ):
                continue
            lost += 1
            where = "never given to a client" if sub is None or data not in sub.given else "given but never acked"
            violations.append(f"{_label(message)} (message {message.message_id}), confirmed to its publisher, "
                              f"was {where} on {term.name}")
    return lost


def _dead_lettered(
    data: bytes, source: str, targets: Iterable[SubscriptionTerms], subs: Mapping[str, _Subscription]
) -> bool:
    """Whether a client of a subscription of the dead-letter topic was given ``data`` from ``source`` and acked it."""
    for target in targets:
        sub = subs.get(target.name)
        if sub is not None and source in sub.sources.get(data, ()) and data in sub.acked:
            return True
    return False


# --- (b) a settlement takes effect only for a client that was given the delivery -----------------


@final
class _Claims:
    """Who may settle what: per (subscription, binding path, message id), the settles of clients given it."""

    __slots__ = ("claims", "given", "paths")

    def __init__(self) -> None:
        self.given: dict[tuple[str, str], dict[str, tuple[str, str, int]]] = defaultdict(dict)
        """(client, subscription) -> ack id it was given -> (binding path, message id, attempt)."""
        self.claims: dict[tuple[str, str, str], list[tuple[bool, int]]] = defaultdict(list)
        """(subscription, binding path, message id) -> (is an ack, attempt) of each settle by a client given it."""
        self.paths: dict[str, str] = {}
        """Subscription actor path -> subscription name, as the clients' bindings show it."""

    def see(self, client: str, note: object) -> None:
        cls = type(note)
        if cls is BatchReceived:
            assert isinstance(note, BatchReceived)
            self.paths.setdefault(_parent(note.binding), note.subscription)
            given = self.given[(client, note.subscription)]
            for ack_id, message, attempt in note.received:
                given[ack_id] = (note.binding, message.message_id, attempt)
        elif cls is StreamBound:
            assert isinstance(note, StreamBound)
            self.paths.setdefault(_parent(note.binding), note.subscription)
        elif cls is SettleSent:
            assert isinstance(note, SettleSent)
            acking = note.kind is SettleKind.ACK
            if not acking and note.seconds:
                return  # a deadline extension: the queues note nothing to hold it against
            given = self.given.get((client, note.subscription), {})
            for ack_id in note.ack_ids:
                known = given.get(ack_id)
                if known is not None:
                    binding, message_id, attempt = known
                    self.claims[(note.subscription, binding, message_id)].append((acking, attempt))

    def backed(self, subscription: str, binding: str, message_id: str, attempt: int, acked: bool) -> bool:
        """An ack of delivery ``attempt`` (or an earlier one by that binding), a nack of exactly that one."""
        for acking, claimed in self.claims.get((subscription, binding, message_id), ()):
            if acking == acked and (claimed <= attempt if acked else claimed == attempt):
                return True
        return False


def acks_from_receivers(trace: Iterable[TraceEvent]) -> CheckResult:
    """A settlement takes effect at a subscription's queue only for a client that was given that delivery.

    Each ack (``EntrySettled`` acked) and nack (``EntryReturned`` nack) that a queue under a
    subscription noted, for the delivery its consumer held (a binding's consumer), must be backed
    by a ``Settle`` on that same subscription, sent before it by a client that had been given,
    by that binding, an ack id of that message: for a nack, of that very delivery (attempt); for
    an ack, of it or an earlier delivery to the same binding (an ack names no attempt, so an ack
    that meets a redelivery to the same binding on its way takes the newer one). Another
    subscription's ids, a deleted subscription's, made-up ones and ids of someone else's
    deliveries back nothing. Deadline extensions are not checked (the queues note none).
    """
    claims = _Claims()
    consumers: dict[tuple[str, int], str] = {}  # (queue path, consumer id) -> consumer path
    messages: dict[tuple[str, int], str] = {}  # (queue path, tag) -> message id
    held: dict[tuple[str, int, int], int] = {}  # (queue path, consumer id, tag) -> attempt delivered
    violations: list[str] = []
    checked = 0
    sent, note_kind = EventKind.SENT, _NOTE
    for event in trace:
        kind = event.kind
        message = event.message
        cls = type(message)
        if kind is sent:
            if cls is Delivered and event.sender is not None:
                for delivery in message.deliveries:
                    held[(event.sender, delivery.consumer_id, delivery.tag)] = delivery.delivery_count
            elif cls is Subscribed and event.sender is not None and event.receiver is not None:
                consumers[(event.sender, message.consumer_id)] = event.receiver
            continue
        if kind is not note_kind or event.sender is None:
            continue
        path = event.sender
        if cls is EntryEnqueued:
            messages[(path, message.tag)] = message.message.message_id
            continue
        if cls is EntrySettled:
            if message.outcome != "acked" or message.consumer_id is None:
                continue
            acked = True
        elif cls is EntryReturned:
            if message.reason != "nack":
                continue
            acked = False
        else:
            claims.see(path, message)
            continue
        subscription = claims.paths.get(_parent(path))  # None: no client ever bound there
        checked += 1
        consumer = consumers.get((path, message.consumer_id), "?")
        binding = _parent(consumer)
        message_id = messages.get((path, message.tag), "?")
        attempt = held.get((path, message.consumer_id, message.tag), 0)
        if subscription is not None and claims.backed(subscription, binding, message_id, attempt, acked):
            continue
        what = "acked" if acked else "nacked"
        violations.append(
            f"t={event.time:g}: {path} {what} message {message_id} (tag {message.tag}, delivery {attempt}) held "
            f"by {binding}, but no client given an ack id of it by that binding had "
            f"{'acked' if acked else 'nacked'} it on {subscription or 'its subscription'}"
        )
    return CheckResult.of("acks_from_receivers", violations, checked=checked)


# --- (c) exactly-once: nothing given out again after a confirmed ack ------------------------------


def exactly_once(trace: Iterable[TraceEvent], terms: Sequence[SubscriptionTerms]) -> CheckResult:
    """On an exactly-once subscription, no message is given out again once a client's ack of it was confirmed.

    A client's ack is confirmed when the answer to its ``Settle`` (``SettleDone``) does not
    list the id among the invalid ones. From then on, no binding of that subscription may send
    a client a ``Batch`` holding that message (by message id): the send, not the receipt,
    counts, so a batch sent before the confirmation and received after it (its client was
    paused) is not held against the front.
    """
    exact = {term.name for term in terms if term.exactly_once}
    paths: dict[str, str] = {}  # subscription path -> name
    given: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)  # (client, sub) -> ack id -> message id
    confirmed_at: dict[tuple[str, str], tuple[float, str]] = {}  # (sub, message id) -> (time, client)
    violations: list[str] = []
    confirmed = 0
    for event in trace:
        kind = event.kind
        message = event.message
        cls = type(message)
        if kind is EventKind.SENT:
            if cls is not Batch or event.sender is None:
                continue
            subscription = paths.get(_parent(event.sender))
            if subscription is None or subscription not in exact:
                continue
            for _, pub, attempt in message.received:
                earlier = confirmed_at.get((subscription, pub.message_id))
                if earlier is not None:
                    violations.append(
                        f"t={event.time:g}: {event.sender} gave {event.receiver} message {pub.message_id} "
                        f"({_label(pub)}, attempt {attempt}) on {subscription} after {earlier[1]}'s ack of it was "
                        f"confirmed at t={earlier[0]:g}"
                    )
            continue
        if kind is not _NOTE:
            continue
        client = event.sender or "?"
        if cls is BatchReceived or cls is StreamBound:
            paths.setdefault(_parent(message.binding), message.subscription)
            if cls is BatchReceived:
                ids = given[(client, message.subscription)]
                for ack_id, pub, _ in message.received:
                    ids[ack_id] = pub.message_id
        elif cls is SettleDone and message.kind is SettleKind.ACK and not message.failure:
            if message.subscription not in exact:
                continue
            ids = given.get((client, message.subscription), {})
            invalid = set(message.invalid)
            for ack_id in message.ack_ids:
                message_id = ids.get(ack_id)
                if message_id is not None and ack_id not in invalid:
                    confirmed += 1
                    confirmed_at.setdefault((message.subscription, message_id), (event.time, client))
    return CheckResult.of("exactly_once", violations, confirmed_acks=confirmed, subscriptions=len(exact))
