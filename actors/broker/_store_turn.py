"""One job at a time on a durable queue's body store, across the queue's instances, without a lock.

A durable paged queue's body store lives beside its journal (``Journal.attached``), so the queue's
next instance reuses it. On trio and threads a job is a real thread: a queue that fails leaves its
job running, and the restarted instance (the same cell, or a new one at the same path) would start
its own beside it, two threads in one ``SegmentLog``. The batch's generation check stops a late job
only when it starts. So a ``StoreTurn``, kept beside the store, says which job holds it: an
instance starts a job only when none runs (``start``); one that recovers while a dead instance's job
still runs waits (``wait_for``), and that job, at its end, tells it (``StoreFree``); in the same cell
the job's own ``JobDone`` or ``JobFailed`` says so too (a fault may fail a job before it runs).

The hand-over needs no lock, only two writes and two reads in opposite orders (Dekker's): the
waiting instance writes ``waiter``, then reads ``running``; the job clears ``running``, then reads
``waiter``. CPython runs one bytecode at a time (the GIL), so the four happen in some single order:
if the instance saw the job running, the job's clear came later, and its read later still, which
finds the waiter. Both may happen; a ``StoreFree`` nobody waits for is ignored.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import final

import attrs

from ._body_store import BodyStore, PageBatch, PageDone, run_page_batch


@final
@attrs.frozen
class StoreFree:
    """The body store's job ``token`` (a dead instance's) has ended: the instance waiting may start its own."""

    token: int


@final
class StoreTurn:
    """Which job holds a durable queue's body store, and which instance waits for it (see the module)."""

    __slots__ = ("broken", "job", "running", "started", "waiter")

    def __init__(self) -> None:
        self.running = 0
        """The token of the job that holds the store (0: none). Set by a handler, cleared by the job."""
        self.waiter: Callable[[object], None] | None = None
        """Tells the instance waiting for the store (``Context.teller_for_threads``), if one waits."""
        self.broken = False
        """A job raised: the store may be half-changed, and the instance that waited for it must not use it."""
        self.started = 0
        self.job: tuple[object, int] | None = None
        """The latest job started: (its cell's ref, its job id), so an instance of the same cell knows its outcome."""

    def start(self) -> int:
        """A handler starts a job on the store (none runs): its token."""
        self.started += 1
        self.running = self.started
        return self.started

    def wait_for(self, tell: Callable[[object], None]) -> int:
        """A recovered instance asks for the store: 0 if free now; else the token of the job that holds it,
        and ``tell(StoreFree(token))`` comes once that job ends."""
        self.waiter = tell
        running = self.running
        if not running:
            self.waiter = None
        return running

    def ended(self) -> None:
        """The instance waiting learnt that the job ended (``StoreFree``, or that job's own outcome)."""
        self.running = 0
        self.waiter = None


def run_in_turn(turn: StoreTurn, token: int, store: BodyStore, batch: PageBatch) -> PageDone:
    """A durable queue's job: carry out ``batch``, then give the store back and wake the instance waiting."""
    failed = True
    try:
        done = run_page_batch(store, batch)
        failed = False
    finally:
        if failed:
            turn.broken = True
        turn.running = 0  # first give it back, then look for a waiter: see the module
        waiter = turn.waiter
        if waiter is not None:
            waiter(StoreFree(token))
    return done


def turn_of(attached: dict[str, object]) -> StoreTurn:
    """The turn kept beside a durable queue's body store (``Journal.attached``), made on first use."""
    turn = attached.get("body_turn")
    if not isinstance(turn, StoreTurn):
        turn = attached["body_turn"] = StoreTurn()
    return turn
