"""Durable queues: the queue's state written to its journal as it changes, and rebuilt from it.

A durable ``QueueActor`` (``QueueConfig(durable=True)``) records in ``ctx.journal``:

* every state-changing call on its sans-IO ``EntryList`` (``CoreCall``), after the call
  returned, with the arguments it was given; the core is deterministic and reads no clock
  (it is told the time), so replaying the calls on a fresh list rebuilds it exactly: every
  entry in its place and state, every lease and its deadline, every consumer's pointer,
  group owners, delivery counts and counters;
* each change of its consumer registry as one event (``ConsumerRegistered``,
  ``ConsumerUnregistered``, ``InterestRecorded``) whose replay also makes the core calls that
  went with it (``REGISTRY_CALLS``): a step of the registry is one write, so a failed write
  (a disk error) cannot leave half of it recorded; and refused publishes (``PublishRefused``);
* now and then a ``QueueSnapshot`` (the core's ``EntryListSnapshot`` and the registry, all
  immutable) that replaces the events before it, so the journal stays proportional to the
  queue's contents.

After a crash, the fresh instance rebuilds from the journal in ``on_start``: leases still run,
consumers keep their ids and their acks still count, and nothing published and confirmed is
lost (``tests/actors/broker/test_durable.py``, the ``queue-crash`` simulation scenario).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, final

import attrs

from conveyor.runtime import Journal

from ._client_protocol import Subscribe
from ._entries import EntryList, EntryListSnapshot
from ._values import COMPACT_AFTER_EVENTS, Message, QueueConfig

REGISTRY_CALLS = frozenset({"add_consumer", "remove_consumer", "set_interest"})
"""Core calls a queue makes only while its consumer registry changes: the registry's event (one
journal write per change, so a failed write leaves nothing half-recorded) makes them on replay."""

RECORDED_CALLS = frozenset({
    "publish",
    "publish_stored",
    "discard",
    "evict_least_significant",
    "take",
    "browse",
    "ack",
    "give_back",
    "give_back_with",
    "extend",
    "expire_leases",
    "expire_ttls",
    "release_delays",
})
"""The other ``EntryList`` methods that change its state, each journaled as a ``CoreCall``."""

COMPACT_AFTER_BYTES = 4 * 1024 * 1024
"""... or once the messages its events hold pass this many bytes and ``COMPACT_FACTOR`` times the live ones'.

Events keep the messages they published: without this, a queue whose few large messages were all
acked would keep their bodies until a thousand events had passed (a Pub/Sub server's memory budget
saw acked megabytes stay resident)."""
COMPACT_FACTOR = 4


@final
@attrs.frozen
class CoreCall:
    """One state-changing call on the queue's ``EntryList``, as it was made."""

    method: str
    args: tuple[Any, ...]


@final
@attrs.frozen
class ConsumerRegistered:
    """The queue accepted ``subscribe`` as consumer ``consumer_id``."""

    consumer_id: int
    subscribe: Subscribe


@final
@attrs.frozen
class ConsumerUnregistered:
    """Consumer ``consumer_id`` left the queue (unsubscribed or stopped) at ``now``."""

    consumer_id: int
    now: float


@final
@attrs.frozen
class InterestRecorded:
    """Consumer ``consumer_id`` said it wants work (or not)."""

    consumer_id: int
    interested: bool


@final
@attrs.frozen
class QueueReconfigured:
    """The queue took new settings (``Reconfigure``), from this point of its history on."""

    config: QueueConfig


@final
@attrs.frozen
class PublishRefused:
    """A publish was refused (counted in the queue's statistics)."""


@final
@attrs.frozen
class RegisteredConsumer:
    """A consumer as a snapshot keeps it: its subscription, interest and counters."""

    consumer_id: int
    subscribe: Subscribe
    interested: bool
    delivered: int
    acked: int


@final
@attrs.frozen
class QueueSnapshot:
    """Everything a durable queue must recover, at one moment; replaces the events before it."""

    core: EntryListSnapshot
    consumers: tuple[RegisteredConsumer, ...]
    rejected: int
    next_consumer_id: int
    config: QueueConfig | None = None
    """The settings at the snapshot, if a ``Reconfigure`` changed them (None: the queue's own)."""


_KEPT_AS_IS = frozenset({int, float, str, bool, type(None), tuple, frozenset, Message})
"""Argument types the journal keeps as they are: immutable."""


def _frozen(value: object) -> object:
    """An argument as the journal keeps it: an iterable a later change could alter becomes a tuple."""
    if type(value) in _KEPT_AS_IS:
        return value
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, (list, set, Iterator)):  # an iterator would be spent by the call it is given to
        return tuple(value)
    return value


def journal_calls(
    core: EntryList, journal: Journal, after: Callable[[int], None], after_events: int = COMPACT_AFTER_EVENTS,
    bodies_elsewhere: bool = False,
) -> None:
    """Make ``core`` record each of its state-changing calls in ``journal`` once the call returns.

    Each method named in ``RECORDED_CALLS`` is wrapped on this instance only (reads are not
    touched, so they cost nothing more). A call that raises is not recorded, so the journal holds
    only calls that succeeded and replaying it cannot fail where the original did not. Only the
    outermost call is recorded: a call the core makes to itself (``remove_consumer`` gives back
    what the consumer held) is part of the outer one and replays with it. ``REGISTRY_CALLS`` are
    wrapped too, but record nothing: the queue's registry event replays them. ``after`` runs after
    every recorded call once the journal is long (``after_events`` events, or ``COMPACT_AFTER_BYTES``
    of published messages): the queue compacts it there.

    ``bodies_elsewhere`` (a durable paged queue, whose body store keeps every body): a publish is
    recorded as ``publish_stored`` with the message's body left out, so the journal holds no body,
    and a take or browse with one more argument, the seq whose paged body stopped it (replay sets
    ``EntryList.stop_at`` from it, as ``EntryList.replaying`` pages nothing).
    """
    append = journal.append
    depth = [0]  # calls of this core in progress: only the outermost one is recorded
    # Message bytes the journal's events published (since the last snapshot), and that snapshot's count.
    held = [published_bytes(journal), journal.snapshots_saved]

    def wrap(name: str, method: Callable[..., Any], record: bool) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            if depth[0]:
                return method(*args)  # made by the core itself, inside a call that is recorded
            frozen: tuple[Any, ...] = tuple([_frozen(arg) for arg in args])
            depth[0] = 1
            try:
                result = method(*frozen)
            finally:
                depth[0] = 0
            if record:
                if bodies_elsewhere and name == "publish":
                    full: Message = frozen[0]
                    append(CoreCall("publish_stored", (attrs.evolve(full, body=b""), frozen[1], full.size)))
                elif bodies_elsewhere and name in {"take", "browse"}:
                    # Which body stopped the walk depends on paging, which replay does not redo: say it.
                    blocked = core.blocked
                    append(CoreCall(name, (*frozen, 0 if blocked is None else blocked.seq)))
                else:
                    append(CoreCall(name, frozen))
                if name == "publish" and not bodies_elsewhere:
                    published: Message = frozen[0]
                    held[0] += published.size
                # Below both thresholds compaction is never due: skip the call.
                if len(journal) >= after_events or held[0] >= COMPACT_AFTER_BYTES:
                    after(held[0])
                    if journal.snapshots_saved != held[1]:
                        held[:] = [0, journal.snapshots_saved]
            return result

        return call

    for name in RECORDED_CALLS | REGISTRY_CALLS:
        setattr(core, name, wrap(name, getattr(core, name), name in RECORDED_CALLS))


def published_bytes(journal: Journal) -> int:
    """Bytes of the messages the journal's events published (its snapshot's are not counted)."""
    total = 0
    for event in journal:
        if type(event) is CoreCall and event.method == "publish":
            message: Message = event.args[0]
            total += message.size
    return total


def needs_compaction(
    journal: Journal, core: EntryList, held_bytes: int = 0, after_events: int = COMPACT_AFTER_EVENTS
) -> bool:
    """Whether the journal's events outgrow the state they describe: in number, or in the message bytes they hold.

    ``held_bytes`` is what ``published_bytes`` would say, kept up to date by ``journal_calls``;
    ``after_events`` the queue's ``QueueConfig.compact_after_events``.
    """
    events = len(journal)
    if events >= after_events:
        size = core.available + core.acquired + core.consumer_count
        if events > COMPACT_FACTOR * size:
            return True
    return held_bytes >= COMPACT_AFTER_BYTES and held_bytes > COMPACT_FACTOR * core.live_bytes


_WALK_ARGS = {"take": 5, "browse": 3}
"""The arguments of the walks; one more recorded is the seq that stopped it (``journal_calls``)."""


def replay_call(core: EntryList, call: CoreCall) -> Any:
    """Make one recorded call again on ``core`` and return its result."""
    method = call.method
    if method not in RECORDED_CALLS and method not in REGISTRY_CALLS:
        allowed = sorted(RECORDED_CALLS | REGISTRY_CALLS)
        msg = f"journal holds a call to EntryList.{method}, which is not one of {allowed}"
        raise ValueError(msg)
    args = call.args
    walk = _WALK_ARGS.get(method)
    if walk is not None and len(args) > walk:  # a durable paged queue's: where a paged body stopped it
        core.stop_at = args[walk]
        try:
            return getattr(type(core), method)(core, *args[:walk])
        finally:
            core.stop_at = 0
    return getattr(type(core), method)(core, *args)
