"""Group commit for ``ZkTxBackend``: multis ready while another is in flight go as one ``ZkMulti``.

The backend's writes that decide a transaction, the commit's multi and a fresh take's (check item,
create lock, create meta), go through ``MultiGroups``: one is sent at once, and those that come
while it is in flight wait for its reply and go together. A ZooKeeper multi is all or nothing and a
session's requests are applied in order, so independent transactions may share one: one request,
one log entry, one reply to handle, instead of one each. Each part is told what it would have been
told alone:

- the combined multi applied: each part gets its own slice of the results (created paths);
- it failed on an operation (``ZkMultiFailed``): nothing was applied; every part is sent again alone
  and decided alone (the one that cannot apply fails, the others commit);
- it failed otherwise (a lost connection, an expired or closed session): every part gets that reply;
  a lost reply is resolved by each part as alone: a commit by its own marker, a take by its lock's
  uuid, either of which exists iff the whole multi was applied.

``together()`` holds the sending back while several parts are submitted, so that parts meant to
travel together (a commit and the take ahead it carries) go in one multi even with none in flight.

After a reply, the next multi is held back (``HOLD_S`` at most) until as many transactions have parts
waiting as the answered multi carried plus those that waited for it: the answered ones run their next
step at once and come back within a few handlers, and a multi sent before then would leave without
them (with 8 concurrent, two alternating cohorts of 4 instead of one of 8). A lone transaction never
waits: the hold ends as soon as its own part comes.

Parts are combined while they stay under ``MAX_PARTS`` and ``MAX_BYTES`` (ZooKeeper refuses a
request past its 1 MB ``jute.maxbuffer`` by dropping the connection); a part past them goes alone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from conveyor.runtime.lowlevel import ZkCreate, ZkMulti, ZkMultiFailed, ZkReply, ZkSetData

MAX_PARTS = 16
"""At most this many parts (commits, takes) in one multi."""
MAX_BYTES = 256 * 1024
"""At most about this many bytes of paths and data in one combined multi (a quarter of ZooKeeper's limit)."""
IN_FLIGHT = 1
"""Grouped multis sent and not answered before the next ones wait to be combined."""
HOLD_S = 0.001
"""At most this long after a reply, the next multi waits for the answered transactions' next parts (0: never)."""

Part = tuple[tuple[Any, ...], Callable[[ZkReply], None], int]
"""A part's operations, what to do with its reply, and its arrival (a ``together`` block's parts share one)."""


def _size(operations: Sequence[Any]) -> int:
    """About the bytes ``operations`` take in a request: paths, data, and a little framing each."""
    return sum(len(op.path) + (len(op.data) if isinstance(op, ZkCreate | ZkSetData) else 0) + 32
               for op in operations)


class MultiGroups:
    """Sends multis through ``send``, combining those that wait behind one in flight."""

    def __init__(self, send: Callable[[ZkMulti, Callable[[ZkReply], None]], None],
                 after: Callable[[float, Callable[[], None]], None] | None = None) -> None:
        """``after(seconds, step)`` runs ``step`` in a later handler; without it no multi is held back."""
        self._send = send
        self._after = after
        self._in_flight = 0
        self._waiting: list[Part] = []
        self._holding = 0
        self._arrivals = 0
        """Counts arrivals: a bare ``submit``, or a ``together`` block (a transaction's commit and takes ahead)."""
        self._block_arrival: int | None = None
        self._expected = 0
        """While > 0 (the hold), the next multi waits until this many arrivals have parts waiting."""
        self._hold_number = 0

    def submit(self, operations: tuple[Any, ...], then: Callable[[ZkReply], None]) -> None:
        """Send this multi now, or with the others waiting once the multi in flight is answered."""
        arrival = self._block_arrival
        if arrival is None:
            arrival = self._arrivals
            self._arrivals += 1
        self._waiting.append((operations, then, arrival))
        self._flush()

    @contextlib.contextmanager
    def together(self) -> Iterator[None]:
        """Parts submitted inside wait for its end, then go as one multi if none is in flight."""
        self._holding += 1
        if self._block_arrival is None:
            self._block_arrival = self._arrivals
            self._arrivals += 1
        try:
            yield
        finally:
            self._holding -= 1
            if not self._holding:
                self._block_arrival = None
            self._flush()

    def held_back(self) -> bool:
        """Whether parts wait for the hold after a reply (for tests and measurements)."""
        return bool(self._waiting) and not self._in_flight and not self._holding and self._expected > 0

    def _flush(self) -> None:
        """Send the parts waiting as one multi, unless one is in flight or a ``together`` block is open."""
        if not self._waiting or self._in_flight >= IN_FLIGHT or self._holding:
            return
        if self._expected:
            if len({arrival for *_, arrival in self._waiting}) < min(self._expected, MAX_PARTS):
                return
            self._expected = 0
        group, size = [self._waiting[0]], _size(self._waiting[0][0])
        for part in self._waiting[1:MAX_PARTS]:
            size += _size(part[0])
            if size > MAX_BYTES:
                break
            group.append(part)
        del self._waiting[:len(group)]
        self._in_flight += 1
        answered = len({arrival for *_, arrival in group})
        if len(group) == 1:
            operations, then, _ = group[0]
            self._send(ZkMulti(operations), lambda reply: self._answered(answered, lambda: then(reply)))
        else:
            combined = tuple(op for operations, *_ in group for op in operations)
            self._send(ZkMulti(combined),
                       lambda reply: self._answered(answered, lambda: self._split(group, reply)))

    def _answered(self, answered: int, tell: Callable[[], None]) -> None:
        """The multi's reply: hold the next one for the ``answered`` transactions' next parts, then tell them."""
        self._in_flight -= 1
        expected = answered + len({arrival for *_, arrival in self._waiting})
        if self._after is not None and HOLD_S > 0 and expected > 1 and not self._in_flight:
            self._expected = expected
            self._hold_number += 1
            number = self._hold_number
            self._after(HOLD_S, lambda: self._hold_passed(number))
        tell()
        self._flush()

    def _hold_passed(self, number: int) -> None:
        """The hold's bound: send what waits, unless that hold ended already (and another may be on)."""
        if number == self._hold_number and self._expected:
            self._expected = 0
            self._flush()

    def _split(self, group: list[Part], reply: ZkReply) -> None:
        """Tell each part of a combined multi what it would have been told alone."""
        if reply.error is None:
            values = reply.value if isinstance(reply.value, tuple) else ()
            start = 0
            for operations, then, _ in group:
                then(ZkReply(reply.request_id, values[start:start + len(operations)]))
                start += len(operations)
        elif isinstance(reply.value, ZkMultiFailed):  # nothing applied: each alone decides its own fate
            for operations, then, _ in group:
                self._send(ZkMulti(operations), then)
        else:  # lost, expired, closed: alike for every part, each resolves it by its own marker
            for _, then, _ in group:
                then(reply)
