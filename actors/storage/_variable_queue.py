"""The one home of the variable queue's bookkeeping: RabbitMQ's q1, q2, delta, q3, q4 as a sans-IO core (seed 002).

A queue's messages, front to rear, live in five parts, each holding a contiguous run of positions
(``seq_id``) in that order::

    q4 (alphas) < q3 (betas, gammas) < delta (on disk only) < q2 (betas, gammas) < q1 (alphas)

* an **alpha** has its body and its position in RAM (q4, q1);
* a **beta** has its position in RAM and its body on disk (q3, q2);
* a **gamma** is a beta whose index record is on disk as well;
* q3 may also keep an embedded body read back with its index record, while under the target;
* a **delta** message is known only on disk; RAM keeps a count and a range of positions.

A publish goes to the rear of q4 while nothing was paged (q3 is empty), else to q1. A fetch takes
q4's front, else q3's. When q3 runs dry, the next index segment is read into its rear
(``maybe_deltas_to_betas``); once delta is empty q2 follows, and when nothing is left on disk q1
moves to q4. Under a memory target, alphas become betas (q1's front first, then q4's rear) and
betas become deltas (q3's rear first, then q2's front).

The core knows nothing of files, time or actors: it hands out effects (``take_effects``) that the
shell carries out in order, and takes the results of reads back (``loaded_index``,
``loaded_message``, ``synced``). Owned by one actor, so it is unsynchronised.

Three places where a sans-IO queue departs from RabbitMQ's synchronous one:

* the seed's index read in ``fetch_from_q3`` is a ``ReadIndex`` effect: between it and
  ``loaded_index`` q3 may be empty while delta is not; publishes still go to q1, a fetch answers
  ``LoadPending``, q3 is not pushed to delta, and a message requeued into the range being read is
  held aside and merged when it arrives;
* a fetch whose body is on disk takes the message (its place is decided) and answers
  ``ReadPending``; ``loaded_message`` completes it;
* a requeued message whose body was paged out goes back to its place, in q4 too, without being
  read (RabbitMQ reads it synchronously); it is read when fetched, like a beta.

The memory target counts bodies in RAM (ready and unacknowledged), as RabbitMQ's
``target_ram_count`` does; betas (q2 + q3) are capped at the larger of the target and one index
segment, so the deep tail's positions live on disk too.
"""

from __future__ import annotations

import heapq
import itertools
from collections import OrderedDict, deque
from collections.abc import Iterable, Sequence
from typing import final

import attrs

from ._vq_effects import (
    AckIndex,
    DeltaRange,
    Effect,
    Fetched,
    IndexEntry,
    LoadPending,
    MarkDelivered,
    ReadIndex,
    ReadMessage,
    ReadPending,
    RemoveMessages,
    Sync,
    VariableQueueError,
    VariableQueueLayout,
    VariableQueueStatus,
    WriteIndex,
    WriteMessage,
)

__all__ = ["DEFAULT_EMBED_BELOW", "DEFAULT_SEGMENT_ENTRIES", "VariableQueue"]

DEFAULT_EMBED_BELOW = 4096
"""Bodies shorter than this many bytes are written inside their index record (RabbitMQ's
``queue_index_embed_msgs_below``), saving the message store a write and a read."""

DEFAULT_SEGMENT_ENTRIES = 1024
"""Positions per index segment: what one ``ReadIndex`` asks for, and the part of q3 never pushed to delta."""

_LOAD_PENDING = LoadPending()


@attrs.define(eq=False)
class _Msg:
    """One message's status (RabbitMQ's ``msg_status``): where its body and its position are."""

    seq_id: int
    msg_id: str
    size: int
    persistent: bool
    embedded: bool
    """Small enough to live inside its index record rather than in the message store."""
    delivered: bool = False
    body: bytes | None = None
    """None when the body is only on disk."""
    in_store: bool = False
    index_on_disk: bool = False

    def index_entry(self) -> IndexEntry:
        return IndexEntry(self.seq_id, self.msg_id, self.size, self.persistent, self.delivered,
                          self.body if self.embedded else None)


@attrs.define
class _Delta:
    """Messages known only on disk: ``count`` of them, positioned in ``start <= seq_id < end``."""

    start: int = 0
    end: int = 0
    count: int = 0

    def add(self, seq_id: int) -> None:
        if self.count == 0:
            self.start, self.end = seq_id, seq_id + 1
        else:
            self.start, self.end = min(self.start, seq_id), max(self.end, seq_id + 1)
        self.count += 1


@attrs.define
class _Load:
    """An index read in flight, and what changed in its range since it was asked for."""

    start: int
    end: int
    skip: frozenset[int]
    """Positions in the range unacknowledged when the read was issued: their records are not delta's."""
    extra: list[_Msg] = attrs.Factory(list)
    """Messages requeued into the range after the read was issued: the read does not see them."""


def _by_seq(message: _Msg) -> int:
    return message.seq_id


def _merged(queue: deque[_Msg], items: list[_Msg]) -> deque[_Msg]:
    """``queue`` with ``items`` (sorted) merged in by position."""
    if not items:
        return queue
    if not queue or items[0].seq_id > queue[-1].seq_id:
        queue.extend(items)
        return queue
    if items[-1].seq_id < queue[0].seq_id:
        queue.extendleft(reversed(items))
        return queue
    return deque(heapq.merge(queue, items, key=_by_seq))


def _check_count(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        msg = f"{name} must be an int >= 0, got {value!r}"
        raise VariableQueueError(msg)
    return value


def _check_target(value: object) -> int | None:
    if value is None:
        return None
    return _check_count("target_ram_count", value)


@final
class VariableQueue:
    """A queue's messages split between RAM and disk under a memory target, its disk work as effects.

    Args:
        durable: the queue survives a restart, so its persistent messages are written at publish.
        target_ram_count: how many bodies may stay in RAM; None for no limit (nothing is paged).
        embed_below: bodies shorter than this many bytes are embedded in their index record.
        segment_entries: positions per index segment (what one ``ReadIndex`` covers).
    """

    def __init__(self, *, durable: bool = True, target_ram_count: int | None = None,
                 embed_below: int = DEFAULT_EMBED_BELOW, segment_entries: int = DEFAULT_SEGMENT_ENTRIES) -> None:
        self._durable = bool(durable)
        self._target = _check_target(target_ram_count)
        self._embed_below = _check_count("embed_below", embed_below)
        if _check_count("segment_entries", segment_entries) == 0:
            msg = "segment_entries must be >= 1, got 0"
            raise VariableQueueError(msg)
        self._segment_entries = segment_entries
        self._q1: deque[_Msg] = deque()
        self._q2: deque[_Msg] = deque()
        self._delta = _Delta()
        self._q3: deque[_Msg] = deque()
        self._q4: deque[_Msg] = deque()
        self._load: _Load | None = None
        self._next_seq_id = 0
        self._unacked: dict[int, _Msg] = {}
        self._ram_unacked: dict[int, _Msg] = {}
        """The unacknowledged messages whose body is in RAM, oldest delivery first."""
        self._reading: dict[int, tuple[_Msg, bool]] = {}
        """Fetched messages whose body is being read, with their redelivered flag."""
        self._ram_ready = 0
        self._ram_bytes = 0
        self._persistent = 0
        self._effects: list[Effect] = []
        self._dirty = False
        self._unconfirmed: list[str] = []
        self._sync_token = 0
        self._syncing: OrderedDict[int, tuple[str, ...]] = OrderedDict()

    @classmethod
    def recover(cls, *, start: int, end: int, count: int, target_ram_count: int | None = None,
                embed_below: int = DEFAULT_EMBED_BELOW,
                segment_entries: int = DEFAULT_SEGMENT_ENTRIES) -> VariableQueue:
        """A durable queue reopened from its index: ``count`` persistent messages in ``[start, end)``, all in delta.

        The first segment's ``ReadIndex`` is among the effects at once, as RabbitMQ loads q3 at init.
        """
        queue = cls(durable=True, target_ram_count=target_ram_count, embed_below=embed_below,
                    segment_entries=segment_entries)
        _check_count("start", start)
        _check_count("count", count)
        if _check_count("end", end) < start or count > end - start:
            msg = f"recovered range must hold 0 <= count <= end - start, got start={start} end={end} count={count}"
            raise VariableQueueError(msg)
        queue._next_seq_id = end
        if count:
            queue._delta = _Delta(start, end, count)
            queue._persistent = count
            queue._start_load()
        return queue

    # ---- the operations

    def publish(self, msg_id: str, body: bytes, *, persistent: bool = False) -> int:
        """Take a new message at the rear; returns its position.

        A persistent message on a durable queue is written at once (its body to the message store,
        or embedded in its index record) and confirmed by the ``Sync`` that follows (``synced``).
        """
        if not isinstance(msg_id, str):
            msg = f"msg_id must be a str, got {msg_id!r}"
            raise VariableQueueError(msg)
        if not isinstance(body, bytes):
            msg = f"body must be bytes, got {type(body).__name__}"
            raise VariableQueueError(msg)
        message = _Msg(self._next_seq_id, msg_id, len(body), persistent=self._durable and bool(persistent),
                       embedded=len(body) < self._embed_below, body=body)
        self._next_seq_id += 1
        self._ram_ready += 1
        self._ram_bytes += message.size
        if message.persistent:
            self._persistent += 1
            self._to_disk(message, index=True)
            self._unconfirmed.append(msg_id)
        # Once anything was paged (q3 not empty) a new message must queue behind it, in q1. Delta is
        # non-empty with q3 empty only while delta's next segment is being read.
        if self._q3 or self._delta.count:
            self._q1.append(message)
        else:
            self._q4.append(message)
        self._reduce_memory_use()
        return message.seq_id

    def fetch(self) -> Fetched | ReadPending | LoadPending | None:
        """Take the front message: ``Fetched``, or ``ReadPending`` if its body is on disk; None when empty.

        ``LoadPending`` means the queue is not empty but its next messages are still being read
        from the index: fetch again after ``loaded_index``.
        """
        message = self._take_front()
        if message is None:
            return _LOAD_PENDING if self._load is not None else None
        redelivered = message.delivered
        # Any record already on disk must learn of the delivery, not only a persistent one: a transient
        # message paged to delta after a requeue is read back from it (RabbitMQ's maybe_write_delivered).
        if message.index_on_disk and not redelivered:
            self._effects.append(MarkDelivered((message.seq_id,)))
        message.delivered = True
        if message.body is None:
            self._reading[message.seq_id] = (message, redelivered)
            self._effects.append(ReadMessage(message.seq_id, message.msg_id, message.embedded))
            return ReadPending(message.seq_id, message.msg_id)
        self._ram_ready -= 1
        self._unacked[message.seq_id] = message
        self._ram_unacked[message.seq_id] = message
        return Fetched(message.seq_id, message.msg_id, message.body, message.persistent, redelivered)

    def ack(self, seq_ids: Iterable[int]) -> None:
        """Forget these delivered messages: their index records and stored bodies are removed."""
        messages = self._take_unacked(seq_ids, "ack")
        index: list[int] = []
        stored: list[_Msg] = []
        for message in messages:
            if self._ram_unacked.pop(message.seq_id, None) is not None:
                self._ram_bytes -= message.size
            if message.persistent:
                self._persistent -= 1
                self._dirty = True
            if message.index_on_disk:
                index.append(message.seq_id)
            if message.in_store:
                stored.append(message)
        if index:
            self._effects.append(AckIndex(tuple(index)))
        if stored:
            self._effects.append(RemoveMessages(tuple(m.seq_id for m in stored), tuple(m.msg_id for m in stored)))

    def requeue(self, seq_ids: Iterable[int]) -> None:
        """Give these delivered messages back, each to its old place (by position), marked redelivered."""
        messages = sorted(self._take_unacked(seq_ids, "requeue"), key=_by_seq)
        to_q4: list[_Msg] = []
        to_q3: list[_Msg] = []
        delta = self._delta
        disk_start = delta.start if delta.count else None
        q4_end = self._q3[0].seq_id if self._q3 else disk_start
        for message in messages:
            if self._ram_unacked.pop(message.seq_id, None) is not None:
                self._ram_ready += 1
            if q4_end is None or message.seq_id < q4_end:
                to_q4.append(message)
                continue
            self._drop_body(message)
            if disk_start is None or message.seq_id < disk_start:
                to_q3.append(message)
                continue
            self._to_disk(message, index=True)
            delta.add(message.seq_id)
            if self._load is not None and message.seq_id < self._load.end:
                self._load.extra.append(message)
        self._q4 = _merged(self._q4, to_q4)
        self._q3 = _merged(self._q3, to_q3)
        self._reduce_memory_use()

    def set_target(self, target_ram_count: int | None) -> None:
        """Change how many bodies may stay in RAM (None: no limit), paging out at once what is over it."""
        self._target = _check_target(target_ram_count)
        self._reduce_memory_use()
        if self._target is None:
            return
        # Embedded bodies read with their index records stay in q3 only while under the target.
        over = self._ram_count() - self._target
        for message in reversed(self._q3):
            if over <= 0:
                break
            if message.body is not None:
                self._drop_body(message)
                over -= 1

    # ---- results coming back from the disk

    def loaded_index(self, entries: Sequence[IndexEntry]) -> None:
        """The records the in-flight ``ReadIndex`` found: delta's messages among them go to q3's rear."""
        load = self._load
        if load is None:
            msg = "loaded_index without a ReadIndex in flight"
            raise VariableQueueError(msg)
        found: dict[int, IndexEntry] = {}
        for entry in entries:
            if not isinstance(entry, IndexEntry) or not load.start <= entry.seq_id < load.end or entry.seq_id in found:
                msg = (f"entries must be distinct IndexEntry values with {load.start} <= seq_id < {load.end}"
                       f" (the ReadIndex in flight), got {entry!r}")
                raise VariableQueueError(msg)
            if entry.seq_id not in load.skip:
                found[entry.seq_id] = entry
        delta = self._delta
        if len(found) + len(load.extra) > delta.count:
            msg = (f"the index holds {len(found)} messages in [{load.start}, {load.end}),"
                   f" delta only {delta.count - len(load.extra)}")
            raise VariableQueueError(msg)
        loaded = list(load.extra)
        for entry in found.values():
            message = _Msg(entry.seq_id, entry.msg_id, entry.size, entry.persistent, embedded=entry.body is not None,
                           delivered=entry.delivered, in_store=entry.body is None, index_on_disk=True)
            if entry.body is not None and (self._target is None or self._ram_count() < self._target):
                self._keep_body(message, entry.body)
            loaded.append(message)
        loaded.sort(key=_by_seq)
        self._q3.extend(loaded)
        self._load = None
        delta.count -= len(loaded)
        if delta.count == 0:
            # Nothing left on disk: q2's messages come right after, at q3's rear.
            self._delta = _Delta()
            self._q3.extend(self._q2)
            self._q2.clear()
        elif load.end >= delta.end:
            msg = f"the index is missing {delta.count} of delta's messages in [{delta.start}, {delta.end})"
            raise VariableQueueError(msg)
        else:
            delta.start = load.end
        if not self._q3:
            self._q3_ran_dry()
        self._reduce_memory_use()

    def loaded_message(self, seq_id: int, body: bytes) -> Fetched:
        """The body a ``ReadMessage`` read: completes the fetch that answered ``ReadPending``."""
        if seq_id not in self._reading:
            msg = f"seq_id {seq_id!r} has no ReadMessage in flight"
            raise VariableQueueError(msg)
        message, redelivered = self._reading[seq_id]
        if not isinstance(body, bytes) or len(body) != message.size:
            msg = f"body for seq_id {seq_id} must be {message.size} bytes, got {body!r:.60}"
            raise VariableQueueError(msg)
        del self._reading[seq_id]
        message.body = body
        self._ram_bytes += message.size
        self._unacked[seq_id] = message
        self._ram_unacked[seq_id] = message
        self._reduce_memory_use()
        return Fetched(seq_id, message.msg_id, body, message.persistent, redelivered)

    def take_effects(self) -> tuple[Effect, ...]:
        """The disk work asked for since the last call, in order; one ``Sync`` last if a durable write needs it."""
        if self._dirty:
            self._sync_token += 1
            self._effects.append(Sync(self._sync_token))
            self._syncing[self._sync_token] = tuple(self._unconfirmed)
            self._unconfirmed.clear()
            self._dirty = False
        effects = tuple(self._effects)
        self._effects.clear()
        return effects

    def synced(self, token: int) -> tuple[str, ...]:
        """``Sync(token)`` is done: the ids of the persistent messages it (and every earlier sync) confirms."""
        if token not in self._syncing:
            msg = f"token {token!r} is not a Sync in flight (in flight: {list(self._syncing)})"
            raise VariableQueueError(msg)
        confirmed: list[str] = []
        while self._syncing:
            first, msg_ids = self._syncing.popitem(last=False)
            confirmed.extend(msg_ids)
            if first == token:
                break
        return tuple(confirmed)

    # ---- the paging primitives (the seed's names); ``set_target`` and every operation run them by policy

    def push_alphas_to_betas(self, q1_quota: int, q4_quota: int) -> int:
        """Page out up to ``q1_quota`` bodies from q1's front, then ``q4_quota`` from q4's rear; returns how many moved.

        q1's messages go to q2's rear while anything is on disk, else to q3's rear; q4's go to
        q3's front. A body not yet on disk is written first.
        """
        q1_quota = _check_count("q1_quota", q1_quota)
        q4_quota = _check_count("q4_quota", q4_quota)
        moved = 0
        while moved < q1_quota and self._q1:
            message = self._q1.popleft()
            self._drop_body(message)
            (self._q2 if self._delta.count else self._q3).append(message)
            moved += 1
        for _ in range(q4_quota):
            if not self._q4:
                break
            message = self._q4.pop()
            self._drop_body(message)
            self._q3.appendleft(message)
            moved += 1
        return moved

    def push_betas_to_deltas(self, quota: int) -> int:
        """Move up to ``quota`` positions to disk: q3's rear first, then q2's front; returns how many moved.

        q3 keeps its front segment (so a fetch has something to take while the next one is read),
        and is left alone while an index read is in flight.
        """
        quota = _check_count("quota", quota)
        moved = 0
        if self._load is None and self._q3:
            keep_below = self._segment_end(self._q3[0].seq_id)
            while moved < quota and self._q3[-1].seq_id >= keep_below:
                self._to_delta(self._q3.pop())
                moved += 1
        while moved < quota and self._q2:
            self._to_delta(self._q2.popleft())
            moved += 1
        return moved

    # ---- what the queue reports

    def __len__(self) -> int:
        """Ready messages."""
        return len(self._q1) + len(self._q2) + self._delta.count + len(self._q3) + len(self._q4)

    def status(self) -> VariableQueueStatus:
        """A snapshot of the bookkeeping (RabbitMQ's ``backing_queue_status``)."""
        held_aside = len(self._load.extra) if self._load is not None else 0
        unacked = len(self._unacked) + len(self._reading)
        in_ram = len(self._q1) + len(self._q2) + len(self._q3) + len(self._q4)
        return VariableQueueStatus(
            q1=len(self._q1), q2=len(self._q2), delta=self._delta.count, q3=len(self._q3), q4=len(self._q4),
            len=len(self), unacked=unacked, ram_msg_count=self._ram_ready, ram_ack_count=len(self._ram_unacked),
            ram_bytes=self._ram_bytes, ram_index_count=in_ram + held_aside + unacked,
            persistent_count=self._persistent, target_ram_count=self._target, next_seq_id=self._next_seq_id,
            loading=self._load is not None)

    def layout(self) -> VariableQueueLayout:
        """Each part's positions, front to rear (O(length): for tests and debugging)."""
        delta = self._delta
        return VariableQueueLayout(
            q1=tuple(m.seq_id for m in self._q1), q2=tuple(m.seq_id for m in self._q2),
            delta=DeltaRange(delta.start, delta.end, delta.count) if delta.count else DeltaRange(0, 0, 0),
            q3=tuple(m.seq_id for m in self._q3), q4=tuple(m.seq_id for m in self._q4))

    # ---- internals

    def _take_front(self) -> _Msg | None:
        """The seed's ``queue_out``: q4's front, else q3's (``fetch_from_q3``)."""
        if self._q4:
            return self._q4.popleft()
        if not self._q3:
            return None
        message = self._q3.popleft()
        if not self._q3:
            self._q3_ran_dry()
        return message

    def _q3_ran_dry(self) -> None:
        """Bring the next messages forward: read delta's next segment, or, with nothing on disk, move q1 to q4."""
        if self._load is not None:
            return
        if self._delta.count:
            self._start_load()
            return
        # Nothing on disk, so q2 is empty and q1's messages are next: queue_out reads only q4.
        self._q4.extend(self._q1)
        self._q1.clear()

    def _start_load(self) -> None:
        """The seed's ``maybe_deltas_to_betas``, first half: ask for the index records of delta's front segment."""
        start = self._delta.start
        end = min(self._delta.end, self._segment_end(start))
        skip = frozenset(s for s in itertools.chain(self._unacked, self._reading) if start <= s < end)
        self._load = _Load(start, end, skip)
        self._effects.append(ReadIndex(start, end))

    def _segment_end(self, seq_id: int) -> int:
        return (seq_id // self._segment_entries + 1) * self._segment_entries

    def _to_disk(self, message: _Msg, *, index: bool) -> None:
        """Make sure the body is on disk, and the index record too if ``index`` (``maybe_write_to_disk``)."""
        if message.embedded:
            index = True  # the body is on disk only inside its index record
        elif not message.in_store:
            assert message.body is not None, "a body only in RAM is never dropped"
            self._effects.append(WriteMessage(message.seq_id, message.msg_id, message.body, message.persistent))
            message.in_store = True
            self._dirty |= message.persistent
        if index and not message.index_on_disk:
            self._effects.append(WriteIndex(message.index_entry()))
            message.index_on_disk = True
            self._dirty |= message.persistent

    def _drop_body(self, message: _Msg) -> None:
        """Page a ready message's body out of RAM, writing it first if it is not on disk yet."""
        if message.body is None:
            return
        self._to_disk(message, index=False)
        message.body = None
        self._ram_ready -= 1
        self._ram_bytes -= message.size

    def _keep_body(self, message: _Msg, body: bytes) -> None:
        message.body = body
        self._ram_ready += 1
        self._ram_bytes += message.size

    def _to_delta(self, message: _Msg) -> None:
        self._to_disk(message, index=True)
        self._drop_body(message)
        self._delta.add(message.seq_id)

    def _ram_count(self) -> int:
        return self._ram_ready + len(self._ram_unacked)

    def _reduce_memory_use(self) -> None:
        """The seed's ``reduce_memory_use``: bring the bodies in RAM down to the target, and cap the betas."""
        target = self._target
        if target is None:
            return
        # Unacknowledged bodies first (needed again only if requeued), newest delivery first.
        while self._ram_count() > target and self._ram_unacked:
            _, message = self._ram_unacked.popitem()
            self._to_disk(message, index=False)
            message.body = None
            self._ram_bytes -= message.size
        over = self._ram_count() - target
        if over > 0 and self._q1:
            self.push_alphas_to_betas(over, 0)
        # A q4 message requeued with its body on disk frees nothing when pushed: go on until under.
        while self._ram_count() > target and self._q4:
            self.push_alphas_to_betas(0, self._ram_count() - target)
        betas_over = len(self._q2) + len(self._q3) - max(target, self._segment_entries)
        if betas_over > 0:
            self.push_betas_to_deltas(betas_over)

    def _take_unacked(self, seq_ids: Iterable[int], verb: str) -> list[_Msg]:
        """Remove and return these unacknowledged messages, or change nothing and raise if one is not."""
        wanted = list(seq_ids)
        if len(set(wanted)) != len(wanted):
            msg = f"seq_ids to {verb} must be distinct, got {wanted}"
            raise VariableQueueError(msg)
        for seq_id in wanted:
            if seq_id in self._reading:
                msg = f"cannot {verb} seq_id {seq_id}: its body is still being read (call loaded_message first)"
                raise VariableQueueError(msg)
            if seq_id not in self._unacked:
                msg = f"cannot {verb} seq_id {seq_id!r}: not an unacknowledged message of this queue"
                raise VariableQueueError(msg)
        return [self._unacked.pop(seq_id) for seq_id in wanted]
