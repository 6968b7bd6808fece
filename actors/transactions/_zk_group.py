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

Part = tuple[tuple[Any, ...], Callable[[ZkReply], None]]
"""A part's operations, and what to do with its reply."""


def _size(operations: Sequence[Any]) -> int:
    """About the bytes ``operations`` take in a request: paths, data, and a little framing each."""
    return sum(len(op.path) + (len(op.data) if isinstance(op, ZkCreate | ZkSetData) else 0) + 32
               for op in operations)


class MultiGroups:
    """Sends multis through ``send``, combining those that wait behind one in flight."""

    def __init__(self, send: Callable[[ZkMulti, Callable[[ZkReply], None]], None]) -> None:
        self._send = send
        self._in_flight = 0
        self._waiting: list[Part] = []
        self._holding = 0

    def submit(self, operations: tuple[Any, ...], then: Callable[[ZkReply], None]) -> None:
        """Send this multi now, or with the others waiting once the multi in flight is answered."""
        self._waiting.append((operations, then))
        self._flush()

    @contextlib.contextmanager
    def together(self) -> Iterator[None]:
        """Parts submitted inside wait for its end, then go as one multi if none is in flight."""
        self._holding += 1
        try:
            yield
        finally:
            self._holding -= 1
            self._flush()

    def _flush(self) -> None:
        """Send the parts waiting as one multi, unless one is in flight or a ``together`` block is open."""
        if not self._waiting or self._in_flight >= IN_FLIGHT or self._holding:
            return
        group, size = [self._waiting[0]], _size(self._waiting[0][0])
        for part in self._waiting[1:MAX_PARTS]:
            size += _size(part[0])
            if size > MAX_BYTES:
                break
            group.append(part)
        del self._waiting[:len(group)]
        self._in_flight += 1
        if len(group) == 1:
            operations, then = group[0]
            self._send(ZkMulti(operations), lambda reply: self._answered(lambda: then(reply)))
        else:
            combined = tuple(op for operations, _ in group for op in operations)
            self._send(ZkMulti(combined), lambda reply: self._answered(lambda: self._split(group, reply)))

    def _answered(self, tell: Callable[[], None]) -> None:
        self._in_flight -= 1
        tell()
        self._flush()

    def _split(self, group: list[Part], reply: ZkReply) -> None:
        """Tell each part of a combined multi what it would have been told alone."""
        if reply.error is None:
            values = reply.value if isinstance(reply.value, tuple) else ()
            start = 0
            for operations, then in group:
                then(ZkReply(reply.request_id, values[start:start + len(operations)]))
                start += len(operations)
        elif isinstance(reply.value, ZkMultiFailed):  # nothing applied: each alone decides its own fate
            for operations, then in group:
                self._send(ZkMulti(operations), then)
        else:  # lost, expired, closed: alike for every part, each resolves it by its own marker
            for _, then in group:
                then(reply)
