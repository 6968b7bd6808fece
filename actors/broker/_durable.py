"""Durable queues: the queue's state written to its journal as it changes, and rebuilt from it.

A durable ``QueueActor`` (``QueueConfig(durable=True)``) records in ``ctx.journal``:

* every state-changing call on its sans-IO ``EntryList``, after the call returned, with the
  arguments it was given, as a plain tuple (``recorded_call``: ``(method, *args)``, a publish
  with its message's fields flattened), which pickles without a class to look up or an attrs
  ``__getstate__`` to run: about a fifth of the cost of pickling a ``CoreCall`` holding a
  ``Message``, on the durable publish path once per message. The core is deterministic and
  reads no clock (it is told the time), so replaying the calls on a fresh list rebuilds it
  exactly: every entry in its place and state, every lease and its deadline, every consumer's
  pointer, group owners, delivery counts and counters; journals written as ``CoreCall``
  objects before still replay;
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
from typing import Any, TypeAlias, final

import attrs

from conveyor.runtime import Journal

from ._client_protocol import Subscribe
from ._dead_letters import DeadLetterOwed
from ._entries import DeltaChunk, EntryList, EntryListSnapshot
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
    "load_delta",
})
"""The other ``EntryList`` methods that change its state, each journaled as a call (``recorded_call``)."""

PUSH_DELTA = "push_delta_run"
"""A durable paged queue's delta push, journaled once its chunk is synced in the body store
(``delta_pushed``); replayed by ``EntryList.push_delta_run``, never called live."""

COMPACT_AFTER_BYTES = 4 * 1024 * 1024
"""... or once the messages its events hold pass this many bytes and ``COMPACT_FACTOR`` times the live ones'.

Events keep the messages they published: without this, a queue whose few large messages were all
acked would keep their bodies until a thousand events had passed (a Pub/Sub server's memory budget
saw acked megabytes stay resident)."""
COMPACT_FACTOR = 4


@final
@attrs.frozen
class CoreCall:
    """One state-changing call on the queue's ``EntryList``, as it was made.

    How journals recorded calls before ``recorded_call``'s tuples; still replayed, and what
    ``as_core_call`` turns a recorded call back into.
    """

    method: str
    args: tuple[Any, ...]


PUBLISH = "publish"

RecordedCall: TypeAlias = "tuple[Any, ...]"
"""A call as the journal keeps it: ``(method, *args)``; a publish is ``(PUBLISH, now, *message fields)``."""


def recorded_call(method: str, args: tuple[Any, ...]) -> RecordedCall:
    """The journal event for ``EntryList.<method>(*args)``: a plain tuple, cheap to pickle.

    A publish's message is flattened into its fields in ``Message``'s order (``_message_fields``),
    so the event holds only bytes, str, numbers, None and tuples of them; other calls keep their
    arguments as they are (numbers, tuples of tags, a dict of delays, ``DeliveryError`` values).
    """
    if method == PUBLISH:
        message, now = args
        return (PUBLISH, now, *_message_fields(message))
    return (method, *args)


def _message_fields(message: Message) -> tuple[Any, ...]:
    """``Message``'s init fields in order: ``Message(*fields)`` builds it again (new fields go last, with defaults)."""
    return (message.body, message.headers, message.priority, message.ttl_s, message.delay_s, message.group,
            message.message_id)


def as_core_call(event: object) -> CoreCall:
    """The ``CoreCall`` a recorded call (or a ``CoreCall`` from an older journal) stands for."""
    if type(event) is CoreCall:
        return event
    if type(event) is not tuple or not event or type(event[0]) is not str:
        msg = f"a recorded call is a tuple (method, *args), got {event!r}"
        raise ValueError(msg)
    method = event[0]
    if method == PUBLISH:
        return CoreCall(PUBLISH, (Message(*event[2:]), event[1]))
    return CoreCall(method, tuple(event[1:]))


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
    owed: tuple[DeadLetterOwed, ...] = ()
    """A durable paged queue's dead letters settled and not yet sent, in order (``_dead_letters``)."""


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
    bodies_elsewhere: bool = False, published: int | None = None,
    owing: Callable[[str, Any], tuple[object, ...]] | None = None,
) -> None:
    """Make ``core`` record each of its state-changing calls in ``journal`` once the call returns.

    Each method named in ``RECORDED_CALLS`` is wrapped on this instance only (reads are not
    touched, so they cost nothing more). A call that raises is not recorded, so the journal holds
    only calls that succeeded and replaying it cannot fail where the original did not. Only the
    outermost call is recorded: a call the core makes to itself (``remove_consumer`` gives back
    what the consumer held) is part of the outer one and replays with it. ``REGISTRY_CALLS`` are
    wrapped too, but record nothing: the queue's registry event replays them. ``after`` runs after
    a recorded call once compaction is due (``needs_compaction``: the events outgrow the state they
    describe, in number or in the message bytes they hold): the queue compacts there. It is judged
    here, once per call, rather than by ``after``: a long journal of a growing queue (a publish
    burst) is not due, and asking after every publish cost a tenth of the handler's time.

    ``bodies_elsewhere`` (a durable paged queue, whose body store keeps every body): a publish is
    recorded as ``publish_stored`` with the message's body left out, so the journal holds no body,
    and a take or browse with one more argument, what stopped it (``walk_stop``: the seq of a paged
    body, or the position of a delta; replay sets ``EntryList.stop_at`` or ``stop_before`` from it, as
    ``EntryList.replaying`` pages nothing). A delta's load (``load_delta``) is recorded with its
    chunk's records; its push is appended by the queue once the chunk is synced (``delta_pushed``).

    ``published`` is what ``published_bytes(journal)`` says, counted by the caller's replay (None: scan
    the journal for it, which reads a disk store's events back once more).

    ``owing(method, result)`` (a durable paged queue's): events that must be written with the call, in
    the same write (the dead letters it settled that the queue owes, ``_dead_letters``).
    """
    append = journal.append
    depth = [0]  # calls of this core in progress: only the outermost one is recorded
    # Message bytes the journal's events published (since the last snapshot), and that snapshot's count.
    held = [published_bytes(journal) if published is None else published, journal.snapshots_saved]

    def recorded(event: RecordedCall, published: int = 0) -> None:
        append(event)
        if journal.snapshots_saved != held[1]:  # compacted since: the snapshot holds what earlier events published
            held[:] = [0, journal.snapshots_saved]
        held[0] += published
        # Below both thresholds compaction is never due: skip the full check.
        if (len(journal) >= after_events or held[0] >= COMPACT_AFTER_BYTES) and needs_compaction(
            journal, core, held[0], after_events
        ):
            after(held[0])

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
                extra = () if owing is None or name in _NEVER_OWING else owing(name, result)
                if extra:  # one write: the call and what it makes the queue owe
                    with journal.atomic():
                        recorded(recorded_call(name, frozen))
                        for event in extra:
                            append(event)
                elif bodies_elsewhere and name == PUBLISH:
                    full: Message = frozen[0]
                    recorded(recorded_call("publish_stored", (attrs.evolve(full, body=b""), frozen[1], full.size)))
                elif bodies_elsewhere and name in _WALK_ARGS:
                    # Which body or delta stopped the walk depends on paging, which replay does not redo: say it.
                    recorded(recorded_call(name, (*frozen, walk_stop(core))))
                else:
                    recorded(recorded_call(name, frozen))
            return result

        return call

    core_publish = core.publish

    def publish(message: Message, now: float) -> Any:
        # The hot path, once per message: ``call`` above with its generic steps resolved for a
        # publish (a Message and a float are kept as they are; the event is ``recorded_call``'s).
        if depth[0]:
            return core_publish(message, now)
        depth[0] = 1
        try:
            result = core_publish(message, now)
        finally:
            depth[0] = 0
        recorded((PUBLISH, now, *_message_fields(message)), message.size)
        return result

    for name in RECORDED_CALLS | REGISTRY_CALLS:
        if name != PUBLISH or bodies_elsewhere:
            setattr(core, name, wrap(name, getattr(core, name), name in RECORDED_CALLS))
    if not bodies_elsewhere:
        core.publish = publish  # type: ignore[method-assign]


def published_bytes(journal: Journal) -> int:
    """Bytes of the messages the journal's events published (its snapshot's are not counted)."""
    total = 0
    for event in journal:
        if type(event) is tuple and event and event[0] == PUBLISH:
            total += Message(*event[2:]).size
        elif type(event) is CoreCall and event.method == PUBLISH:
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
"""The arguments of the walks; one more recorded is what stopped it (``walk_stop``)."""
_NEVER_OWING = frozenset({PUBLISH, "publish_stored", *_WALK_ARGS})
"""Calls that dead-letter nothing: ``owing`` is not asked (their records have forms of their own)."""


def walk_stop(core: EntryList) -> int | tuple[int, int]:
    """What stopped the core's last take or browse, as the journal records it: the seq of the paged body
    (0: none), or the position (rank, first seq) of the delta. Replay stops there (``replay_call``)."""
    if core.blocked_rank is not None:
        return (core.blocked_rank, core.blocked_seq)
    blocked = core.blocked
    return 0 if blocked is None else blocked.seq


def delta_pushed(rank: int, chunk: DeltaChunk) -> RecordedCall:
    """The journal event of a delta chunk now synced in the body store: replay moves its entries out of RAM."""
    return (PUSH_DELTA, rank, chunk.key, chunk.seqs[0], len(chunk.seqs))


def replay_call(core: EntryList, event: object) -> Any:
    """Make one recorded call (``recorded_call``'s tuple, or an older journal's ``CoreCall``) again on ``core``."""
    call = as_core_call(event)
    method = call.method
    if method not in RECORDED_CALLS and method not in REGISTRY_CALLS and method != PUSH_DELTA:
        allowed = sorted(RECORDED_CALLS | REGISTRY_CALLS | {PUSH_DELTA})
        msg = f"journal holds a call to EntryList.{method}, which is not one of {allowed}"
        raise ValueError(msg)
    args = call.args
    walk = _WALK_ARGS.get(method)
    if walk is not None and len(args) > walk:  # a durable paged queue's: where a paged body or a delta stopped it
        stop = args[walk]
        if type(stop) is tuple:
            core.stop_before = stop
        else:
            core.stop_at = stop
        try:
            return getattr(type(core), method)(core, *args[:walk])
        finally:
            core.stop_at = 0
            core.stop_before = None
    return getattr(type(core), method)(core, *args)
