"""Pub/Sub snapshots: what a snapshot holds (a sans-IO core), its requests, and the registry's side of them.

A snapshot holds the messages its subscription had not acked when it was made and everything
published to the topic after, until it expires (Pub/Sub: 7 days less the age of the oldest
unacked message; a snapshot that would live under an hour is refused). The topic keeps the
messages (``TopicSnapshots``: it sees every publish); the registry keeps each snapshot's
settings (``SnapshotConfig``), decides expiry from the times requests carry (never a clock),
and records them for ``--data-dir``. A Seek to a snapshot hands its messages to the subscription,
whose Seek log marks them unacked and everything else acked (``SeekLog.seek_snapshot``).

Creation crosses three actors in order, so no message falls between the two halves: the
registry asks the topic, which starts recording every later publish and then asks the
subscription (after every ``Route`` it sent before) for its unacked messages; the
subscription's answer goes back to the topic, which completes the snapshot and tells the
registry its expiry.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final, final

import attrs

from conveyor.runtime import ActorRef

from ._filter import Everything, Filter
from ._model import Attributes, Done, Failed, Page, PubMessage
from ._protocol import Envelope
from ._seek_log import SNAPSHOT, Row, from_row, rows

if TYPE_CHECKING:
    from ._registry import PubSubRegistry
    from ._subscription import SubscriptionActor

SNAPSHOT_LIFETIME_S: Final = 7 * 24 * 3600.0
"""A snapshot lives at most 7 days after its oldest message was published (Pub/Sub)."""
MIN_SNAPSHOT_LIFETIME_S: Final = 3600.0
"""Pub/Sub refuses a snapshot that would expire within an hour of its creation."""
_SNAPSHOT: Final = re.compile(r"^projects/([^/]+)/snapshots/([A-Za-z][A-Za-z0-9\-_.~+%]{2,254})$")


def snapshot_name_refusal(value: str, field: str = "snapshot") -> str | None:
    """Why ``value`` is not a snapshot name (``field: why``), or None."""
    match = _SNAPSHOT.match(value)
    if match is None or match.group(2).startswith("goog"):
        shown = value if len(value) <= 64 else value[:64] + f"... ({len(value)} characters)"
        return (f"{field}: {shown!r} is not a snapshot name (projects/PROJECT/snapshots/NAME: 3-255 characters, "
                "starting with a letter, not with 'goog')")
    return None


def snapshot_lifetime_end(held_times_ns: Iterable[int], now_ns: int) -> int:
    """When a snapshot made at ``now_ns`` of messages published at ``held_times_ns`` expires (Pub/Sub's rule)."""
    oldest = min(held_times_ns, default=now_ns)
    return min(oldest, now_ns) + int(SNAPSHOT_LIFETIME_S * 1e9)


# --- values ---------------------------------------------------------------------------------


@final
@attrs.frozen
class SnapshotConfig:
    """A snapshot's settings: its topic, expiry (ns since the epoch) and labels; ``latest_ns`` bounds updates."""

    name: str
    topic: str
    expire_ns: int
    labels: Attributes = ()
    latest_ns: int = 0
    """The latest expiry an update may set: the one Pub/Sub gave it at creation."""


@final
@attrs.frozen
class CreateSnapshot:
    """Glue -> registry: snapshot ``subscription`` as ``name``; answered with ``SnapshotConfig`` or ``Failed``."""

    name: str
    subscription: str
    labels: Attributes
    now_ns: int


@final
@attrs.frozen
class GetSnapshot:
    """Answered with the ``SnapshotConfig`` or ``Failed(NOT_FOUND)`` (an expired one is gone)."""

    name: str
    now_ns: int


@final
@attrs.frozen
class ListSnapshots:
    """Snapshots of ``project``, as a ``Page`` of configs."""

    project: str
    page_size: int
    after: str
    now_ns: int


@final
@attrs.frozen
class ReplaceSnapshot:
    """Replace a snapshot's labels and expiry (the glue merged the update mask); answered with the config."""

    config: SnapshotConfig
    now_ns: int


@final
@attrs.frozen
class DeleteSnapshot:
    """Delete a snapshot; ``Done`` or ``Failed(NOT_FOUND)``."""

    name: str


@final
@attrs.frozen
class SeekSnapshot:
    """Seek ``subscription`` to ``snapshot``: what it holds counts as unacked, everything else as acked."""

    subscription: str
    snapshot: str
    now_ns: int


# --- between actors -------------------------------------------------------------------------


@final
@attrs.frozen
class StartSnapshot:
    """Registry -> topic: record publishes for snapshot ``name`` from now, then ask ``subscription``."""

    name: str
    subscription: ActorRef
    labels: Attributes
    now_ns: int
    registry: ActorRef


@final
@attrs.frozen
class TakeSnapshot:
    """Topic -> subscription (in an ``Envelope``): answer ``SnapshotHeld`` with the unacked messages."""

    name: str
    now_ns: int


@final
@attrs.frozen
class SnapshotHeld:
    """Subscription -> topic (in an ``Envelope``): the unacked messages snapshot ``name`` holds."""

    name: str
    messages: tuple[PubMessage, ...]


@final
@attrs.frozen
class SnapshotMade:
    """Topic -> registry: snapshot complete (recorded in the registry's journal); None ``config``: refused."""

    name: str
    config: SnapshotConfig | None


@final
@attrs.frozen
class DropSnapshot:
    """Registry -> topic: forget snapshot ``name`` (deleted or expired)."""

    name: str


@final
@attrs.frozen
class AbandonSnapshot:
    """Registry -> topic: the subscription of snapshot ``name`` was deleted; if still being made, it fails."""

    name: str


@final
@attrs.frozen
class ReplaySnapshot:
    """Registry -> topic (in an ``Envelope``): give ``subscription`` what snapshot ``name`` holds."""

    name: str
    subscription: ActorRef
    filter: Filter
    now_ns: int


@final
@attrs.frozen
class SnapshotContents:
    """Topic -> subscription (in an ``Envelope``): seek to these messages (the snapshot, filtered)."""

    messages: tuple[PubMessage, ...]
    now_ns: int


# --- the topic's core -----------------------------------------------------------------------

RECORD: Final = "snapshot-record"  # (RECORD, rows): published while snapshots exist
START: Final = "snapshot-start"  # (START, name): recording for name starts
HOLD: Final = "snapshot-hold"  # (HOLD, name, rows): the subscription's unacked messages join name
FORGET: Final = "snapshot-forget"  # (FORGET, name)


def _publish_order(message: PubMessage) -> tuple[int, int]:
    number = int(message.message_id) if message.message_id.isdecimal() else 0
    return message.publish_time_ns, number


@final
class TopicSnapshots:
    """The messages of a topic's snapshots: each holds its subscription's unacked ones and every later publish.

    Sans-IO; every change is also an event of plain values (``replay``), so a topic on a disk store
    journals it and a new process rebuilds the same snapshots.
    """

    def __init__(self) -> None:
        self.held: dict[str, OrderedDict[str, PubMessage]] = {}
        self.making: set[str] = set()
        """Snapshots started whose subscription has not answered yet."""

    def __bool__(self) -> bool:
        return bool(self.held)

    def start(self, name: str) -> None:
        """Snapshot ``name`` records every publish from now (a start again begins anew)."""
        self.held[name] = OrderedDict()
        self.making.add(name)

    def record(self, messages: Iterable[PubMessage]) -> None:
        """Published messages join every snapshot."""
        batch = list(messages)
        for kept in self.held.values():
            for message in batch:
                kept[message.message_id] = message

    def hold(self, name: str, messages: Iterable[PubMessage]) -> None:
        """The subscription's unacked messages join ``name``, everything in publish order (no-op if forgotten)."""
        kept = self.held.get(name)
        if kept is None:
            return
        self.making.discard(name)
        merged = {m.message_id: m for m in messages}
        merged.update(kept)
        self.held[name] = OrderedDict(sorted(merged.items(), key=lambda item: _publish_order(item[1])))

    def forget(self, name: str) -> None:
        """Snapshot ``name`` is deleted or expired (or was never finished)."""
        self.held.pop(name, None)
        self.making.discard(name)

    def contents(self, name: str, accepts: Filter | None = None) -> tuple[PubMessage, ...] | None:
        """What ``name`` holds (that ``accepts`` accepts), in publish order; None if there is no such snapshot."""
        kept = self.held.get(name)
        if kept is None:
            return None
        if accepts is None or type(accepts) is Everything:
            return tuple(kept.values())
        return tuple(m for m in kept.values() if accepts.matches(dict(m.attributes)))

    # --- journal ------------------------------------------------------------------------------

    def state(self) -> tuple[tuple[str, tuple[Row, ...], bool], ...]:
        """Everything it holds, in plain values (for the topic's journal snapshot): name, messages, being made."""
        return tuple((name, rows(kept.values()), name in self.making) for name, kept in self.held.items())

    @classmethod
    def restore(cls, state: Iterable[tuple[str, tuple[Row, ...], bool]]) -> TopicSnapshots:
        """The snapshots ``state()`` described."""
        book = cls()
        for name, kept, making in state:
            book.held[name] = OrderedDict((row[4], from_row(row)) for row in kept)
            if making:
                book.making.add(name)
        return book

    def replay(self, event: tuple[Any, ...]) -> None:
        """Apply one journaled event.

        Raises:
            ValueError: not an event this class writes.
        """
        match event:
            case (str() as kind, rows_) if kind == RECORD:
                self.record(map(from_row, rows_))
            case (str() as kind, str() as name) if kind == START:
                self.start(name)
            case (str() as kind, str() as name, rows_) if kind == HOLD:
                self.hold(name, map(from_row, rows_))
            case (str() as kind, str() as name) if kind == FORGET:
                self.forget(name)
            case _:
                msg = f"TopicSnapshots.replay: {event!r:.200} is not a snapshot event"
                raise ValueError(msg)


def is_snapshot_event(event: object) -> bool:
    """Whether a topic's journal event is one of ``TopicSnapshots``'."""
    return type(event) is tuple and bool(event) and event[0] in (RECORD, START, HOLD, FORGET)


# --- the registry's side ----------------------------------------------------------------------

REGISTRY_REQUESTS: Final = (CreateSnapshot, GetSnapshot, ListSnapshots, ReplaceSnapshot, DeleteSnapshot, SeekSnapshot,
                            SnapshotMade)
RECORDED: Final = frozenset({SnapshotMade, ReplaceSnapshot, DeleteSnapshot})
"""What a registry on a disk store records of snapshots (a create is recorded once the topic completed it)."""


def expire_snapshots(registry: PubSubRegistry, now_ns: int) -> None:
    """Forget every snapshot whose expiry is at or before ``now_ns`` (the topics drop their messages)."""
    snapshots = registry.snapshots
    if not snapshots or now_ns < registry.next_snapshot_expiry:
        return
    for name, config in list(snapshots.items()):
        if config.expire_ns <= now_ns:
            forget_snapshot(registry, name, record=True)
    registry.next_snapshot_expiry = min((c.expire_ns for c in snapshots.values()), default=0)


def forget_snapshot(registry: PubSubRegistry, name: str, *, record: bool) -> None:
    """Drop snapshot ``name`` here and in its topic; ``record``: journal it as a delete (an expiry)."""
    config = registry.snapshots.pop(name, None)
    if config is None:
        return
    registry.iam.pop(name, None)
    if record and registry.journal is not None:
        registry.journal.append(DeleteSnapshot(name))
    topic = registry.topics.get(config.topic)
    if topic is not None:
        registry.ctx.send(topic[1], DropSnapshot(name))


def forget_topic_snapshots(registry: PubSubRegistry, topic: str) -> None:
    """A topic was deleted: its snapshots (whose messages it kept) go with it."""
    for name, config in list(registry.snapshots.items()):
        if config.topic == topic:
            registry.snapshots.pop(name)
            registry.iam.pop(name, None)
    for name, sub_name in list(registry.snapshots_pending.items()):
        known = registry.subscriptions.get(sub_name)
        if known is None or known[0].topic == topic:
            registry.snapshots_pending.pop(name)  # its asker times out: the topic that would answer is gone


def abandon_pending_snapshots(registry: PubSubRegistry, subscription: str, topic: str) -> None:
    """Subscription ``subscription`` (of ``topic``) is being deleted: snapshots of it still being made fail."""
    known = registry.topics.get(topic)
    for name, sub_name in registry.snapshots_pending.items():
        if sub_name == subscription and known is not None:
            registry.ctx.send(known[1], AbandonSnapshot(name))


def _arm(registry: PubSubRegistry, config: SnapshotConfig) -> None:
    registry.snapshots[config.name] = config
    expiry = registry.next_snapshot_expiry
    registry.next_snapshot_expiry = config.expire_ns if not expiry else min(expiry, config.expire_ns)


def handle_snapshot_request(registry: PubSubRegistry, message: object) -> None:
    """The registry's answer to a snapshot request (``REGISTRY_REQUESTS``)."""
    reply = registry._reply  # noqa: SLF001 - this module is the registry's, split out
    now = getattr(message, "now_ns", None)
    if now is not None:
        expire_snapshots(registry, now)
    match message:
        case CreateSnapshot(name=name, subscription=sub_name, labels=labels, now_ns=now_ns):
            if name in registry.snapshots or name in registry.snapshots_pending:
                reply(Failed("ALREADY_EXISTS", f"Snapshot already exists: {name}"))
                return
            known = registry.subscriptions.get(sub_name)
            if known is None:
                reply(Failed("NOT_FOUND", f"Subscription not found: {sub_name}"))
                return
            topic = registry.topics.get(known[0].topic)
            if topic is None or known[0].detached:
                reply(Failed("FAILED_PRECONDITION", f"subscription: {sub_name} is detached from its topic (or the "
                                                    "topic was deleted): it has no messages to snapshot"))
                return
            registry.snapshots_pending[name] = sub_name
            registry.ctx.send(topic[1], Envelope(StartSnapshot(name, known[1], labels, now_ns, registry.ctx.self_ref),
                                                       registry.ctx.sender))
        case SnapshotMade(name=name, config=config):
            registry.snapshots_pending.pop(name, None)
            if config is not None:
                _arm(registry, config)
        case GetSnapshot(name=name):
            found = registry.snapshots.get(name)
            reply(found if found is not None else Failed("NOT_FOUND", f"Snapshot not found: {name}"))
        case ListSnapshots(project=project, page_size=size, after=after):
            from ._registry import _page  # the registry imports this module: imported when used

            names, token = _page([n for n in registry.snapshots if n.startswith(project + "/snapshots/")], size, after)
            reply(Page(tuple(registry.snapshots[n] for n in names), token))
        case ReplaceSnapshot(config=config, now_ns=now_ns):
            current = registry.snapshots.get(config.name)
            if current is None:
                reply(Failed("NOT_FOUND", f"Snapshot not found: {config.name}"))
                return
            if config.expire_ns != current.expire_ns and not now_ns < config.expire_ns <= current.latest_ns:
                reply(Failed("INVALID_ARGUMENT", f"expire_time: must be after now and no later than "
                                                 f"{current.latest_ns} ns since the epoch (7 days after the "
                                                 f"snapshot's oldest message), got {config.expire_ns}"))
                return
            updated = attrs.evolve(current, labels=config.labels, expire_ns=config.expire_ns)
            _arm(registry, updated)
            registry.next_snapshot_expiry = min(c.expire_ns for c in registry.snapshots.values())
            reply(updated)
        case DeleteSnapshot(name=name):
            if name not in registry.snapshots:
                reply(Failed("NOT_FOUND", f"Snapshot not found: {name}"))
                return
            forget_snapshot(registry, name, record=False)
            reply(Done())
        case SeekSnapshot(subscription=sub_name, snapshot=name, now_ns=now_ns):
            seek_snapshot(registry, sub_name, name, now_ns)


def seek_snapshot(registry: PubSubRegistry, sub_name: str, name: str, now_ns: int) -> None:
    """Seek ``sub_name`` to snapshot ``name``, through the topic that keeps the snapshot's messages."""
    reply = registry._reply  # noqa: SLF001
    known = registry.subscriptions.get(sub_name)
    if known is None:
        reply(Failed("NOT_FOUND", f"Subscription not found: {sub_name}"))
        return
    config = registry.snapshots.get(name)
    if config is None:
        reply(Failed("NOT_FOUND", f"Snapshot not found: {name}"))
        return
    if known[0].topic != config.topic:
        reply(Failed("FAILED_PRECONDITION", f"snapshot: {name} is of topic {config.topic}, but subscription "
                                            f"{sub_name} is of {known[0].topic}: seek to a snapshot of its own topic"))
        return
    topic = registry.topics.get(config.topic)
    if topic is None:
        reply(Failed("NOT_FOUND", f"Topic not found: {config.topic}"))
        return
    registry._touch(sub_name)  # noqa: SLF001 - a Seek is activity (expiration_policy)
    registry.ctx.send(topic[1], Envelope(ReplaySnapshot(name, known[1], known[0].filter, now_ns),
                                         registry.ctx.sender))



# --- the topic's side -----------------------------------------------------------------------


@final
@attrs.frozen
class _Pending:
    """A snapshot the topic records for, waiting for its subscription's unacked messages."""

    labels: Attributes
    now_ns: int
    registry: ActorRef
    reply_to: ActorRef | None


@final
class TopicSnapshotKeeper:
    """A topic's snapshots with the requests that reach them: ``TopicSnapshots`` plus the topic's journal.

    ``send(to, message)`` and ``journal`` are the topic actor's; ``topic`` names it.
    """

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.book = TopicSnapshots()
        self.pending: dict[str, _Pending] = {}

    def record(self, messages: tuple[PubMessage, ...], journal: Any) -> None:
        """Published messages join every snapshot (journaled first, on a disk store)."""
        if journal is not None:
            journal.append((RECORD, rows(messages)))
        self.book.record(messages)

    def unfinished_lost(self, journal: Any) -> None:
        """After a restart: snapshots whose subscription never answered never will (the asker is gone)."""
        for name in sorted(self.book.making):
            if journal is not None:
                journal.append((FORGET, name))
            self.book.forget(name)

    def recover(self, event: object) -> bool:
        """Replay one of the topic's journal events if it is a snapshot's; whether it was."""
        if not is_snapshot_event(event):
            return False
        self.book.replay(event)  # type: ignore[arg-type]
        return True

    def handle(self, message: object, send: Any, journal: Any) -> bool:
        """Serve a snapshot message sent to the topic; whether it was one."""
        match message:
            case Envelope(request=StartSnapshot(name=name, subscription=ref, labels=labels, now_ns=now_ns,
                                                registry=registry), reply_to=reply_to):
                if journal is not None:
                    journal.append((START, name))
                self.book.start(name)
                self.pending[name] = _Pending(labels, now_ns, registry, reply_to)
                # after every Route sent before: the subscription answers with all it holds
                send(ref, Envelope(TakeSnapshot(name, now_ns), reply_to))
            case Envelope(request=SnapshotHeld(name=name, messages=held), reply_to=reply_to):
                self._complete(name, held, reply_to, send, journal)
            case AbandonSnapshot(name=name):
                pending = self.pending.pop(name, None)
                if pending is not None:  # its subscription is gone before it answered: nothing to snapshot
                    if journal is not None:
                        journal.append((FORGET, name))
                    self.book.forget(name)
                    send(pending.registry, SnapshotMade(name, None))
                    if pending.reply_to is not None:
                        send(pending.reply_to, Failed("NOT_FOUND", f"Snapshot {name}: its subscription was deleted "
                                                                   "while the snapshot was being made"))
            case DropSnapshot(name=name):
                self.pending.pop(name, None)
                if journal is not None:
                    journal.append((FORGET, name))
                self.book.forget(name)
            case Envelope(request=ReplaySnapshot(name=name, subscription=ref, filter=accepts, now_ns=now_ns),
                          reply_to=reply_to):
                contents = self.book.contents(name, accepts)
                if contents is None:
                    if reply_to is not None:
                        send(reply_to, Failed("NOT_FOUND", f"Snapshot not found: {name}"))
                else:
                    send(ref, Envelope(SnapshotContents(contents, now_ns), reply_to))
            case _:
                return False
        return True

    def _complete(self, name: str, held: tuple[PubMessage, ...], reply_to: ActorRef | None, send: Any,
                  journal: Any) -> None:
        pending = self.pending.pop(name, None)
        if pending is None:
            return
        now_ns = pending.now_ns
        expire_ns = snapshot_lifetime_end((m.publish_time_ns for m in held), now_ns)
        if expire_ns - now_ns < int(MIN_SNAPSHOT_LIFETIME_S * 1e9):
            if journal is not None:
                journal.append((FORGET, name))
            self.book.forget(name)
            send(pending.registry, SnapshotMade(name, None))
            if reply_to is not None:
                age_h = (now_ns - expire_ns) / 3.6e12 + SNAPSHOT_LIFETIME_S / 3600
                send(reply_to, Failed("FAILED_PRECONDITION", f"subscription: its oldest unacked message is "
                                                             f"{age_h:.1f} hours old, so a snapshot of it would "
                                                             "expire within an hour (7 days after that message)"))
            return
        if journal is not None:
            journal.append((HOLD, name, rows(held)))
        self.book.hold(name, held)
        config = SnapshotConfig(name, self.topic, expire_ns, pending.labels, expire_ns)
        send(pending.registry, SnapshotMade(name, config))
        if reply_to is not None:
            send(reply_to, config)


# --- the subscription's side ------------------------------------------------------------------


def serve_on_subscription(sub: SubscriptionActor, request: object, reply_to: ActorRef | None) -> bool:
    """A snapshot request the topic sent a subscription; whether it was one.

    ``TakeSnapshot``: answer the topic with every unacked message the Seek log holds.
    ``SnapshotContents``: a Seek to a snapshot, journaled like any Seek, then a new queue generation.
    """
    match request:
        case TakeSnapshot(name=name, now_ns=now_ns):
            horizon = now_ns - int(sub.config.retention_s * 1e9)  # older ones are past the retention by now
            held = tuple(message for message, _ in sub.memory.unacked(sub.config.retention_s)
                         if message.publish_time_ns > horizon)
            sender = sub.ctx.sender
            if sender is not None:
                sub.ctx.send(sender, Envelope(SnapshotHeld(name, held), reply_to))
        case SnapshotContents(messages=messages, now_ns=now_ns):
            retain = sub.config.retain_acked_messages
            sub._record((SNAPSHOT, rows(messages), now_ns, retain), sum(len(m.data) for m in messages))  # noqa: SLF001
            sub.memory.seek_snapshot(messages, now_ns, retain)
            sub._rebuild()  # noqa: SLF001 - this module is the subscription's, split out
            if reply_to is not None:
                sub.ctx.send(reply_to, Done())
        case _:
            return False
    return True
