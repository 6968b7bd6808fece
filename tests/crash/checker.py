"""The total-queue checker: does a recorded history keep a durable queue's promises? (a pure function)

As Jepsen's ``total-queue`` checker reads an enqueue/dequeue history, ``check_history`` reads the
crash test's (``tests/crash/history.py``) after a final drain and sorts every message:

- **lost**: its publish was confirmed, it was never received. Must be none.
- **unexpected**: received, never sent. Must be none.
- **bad duplicates**: received again after its ack was confirmed (a confirmed ack promises the
  message never comes back). Must be none. A duplicate before that (an ack that was plain, or not
  yet confirmed, when the process died) is at-least-once delivery: counted, allowed.
- **order violations**: within each priority level, messages are first received in the order they
  were sent. Only first receptions count: a redelivery goes back to its old place, which is behind
  what was delivered since. Must be none.
- **recovered**: received though its publish was never confirmed (the process died before the
  confirm came). Allowed, counted.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from .history import AckConfirmed, Confirmed, Event, QueueSeen, Received, Sent


@attrs.frozen
class OrderViolation:
    """``late`` (sent earlier) was first received after ``early`` (sent later), both at ``priority``."""

    priority: int
    early: str
    late: str


@attrs.frozen
class QueueVerdict:
    """What ``check_history`` found; ``ok`` when nothing broke a promise."""

    sent: int
    confirmed: int
    received: int
    deliveries: int
    recovered: int
    duplicated: int
    lost: tuple[str, ...]
    unexpected: tuple[str, ...]
    bad_duplicates: tuple[str, ...]
    order_violations: tuple[OrderViolation, ...]

    @property
    def ok(self) -> bool:
        return not (self.lost or self.unexpected or self.bad_duplicates or self.order_violations)

    def summary(self) -> str:
        """One line of counts, as the harness prints it."""
        return (
            f"sent {self.sent}, confirmed {self.confirmed}, received {self.received} "
            f"({self.deliveries} deliveries), recovered {self.recovered}, duplicated {self.duplicated}: "
            f"lost {len(self.lost)}, unexpected {len(self.unexpected)}, "
            f"bad duplicates {len(self.bad_duplicates)}, order violations {len(self.order_violations)}"
        )


def check_history(events: Iterable[Event], *, check_order: bool = True) -> QueueVerdict:
    """Sort the messages of a drained history (see the module's doc); ``check_order=False`` skips order."""
    sent_at: dict[str, int] = {}  # key -> its place among the sends
    confirmed: set[str] = set()
    ack_confirmed: set[str] = set()
    received: dict[str, int] = {}  # key -> receptions
    unexpected: list[str] = []
    bad_duplicates: list[str] = []
    violations: list[OrderViolation] = []
    latest_first: dict[int, str] = {}  # priority -> the latest-sent key first received so far
    deliveries = 0
    for event in events:
        match event:
            case Sent(key=key):
                sent_at.setdefault(key, len(sent_at))
            case Confirmed(key=key):
                confirmed.add(key)
            case AckConfirmed(key=key):
                ack_confirmed.add(key)
            case Received(key=key, priority=priority):
                deliveries += 1
                times = received.get(key, 0)
                received[key] = times + 1
                if key not in sent_at:
                    if times == 0:
                        unexpected.append(key)
                    continue
                if times:
                    if key in ack_confirmed and key not in bad_duplicates:
                        bad_duplicates.append(key)
                    continue
                if check_order:
                    latest = latest_first.get(priority)
                    if latest is None or sent_at[latest] < sent_at[key]:
                        latest_first[priority] = key
                    else:
                        violations.append(OrderViolation(priority, latest, key))
    return QueueVerdict(
        sent=len(sent_at),
        confirmed=len(confirmed),
        received=len(received),
        deliveries=deliveries,
        recovered=sum(1 for key in received if key in sent_at and key not in confirmed),
        duplicated=sum(1 for times in received.values() if times > 1),
        lost=tuple(key for key in sent_at if key in confirmed and key not in received),
        unexpected=tuple(unexpected),
        bad_duplicates=tuple(bad_duplicates),
        order_violations=tuple(violations),
    )


@attrs.frozen
class PagingSeen:
    """What the lives saw of a paged queue: how many recorded a look (``QueueSeen``), how many of them
    had entries in delta chunks, how many still had some at their last look (within 0.1 s of the kill),
    the most entries out of RAM and the most body bytes in RAM at a look."""

    lives_looked: int
    lives_with_deltas: int
    lives_ending_with_deltas: int
    most_entries_out_of_ram: int
    most_body_bytes_in_ram: int

    def summary(self) -> str:
        """One line, as the harness appends it to the checker's."""
        return (f"paging: {self.lives_with_deltas} of {self.lives_looked} lives had entries out of RAM "
                f"({self.lives_ending_with_deltas} at their last look, up to {self.most_entries_out_of_ram}), "
                f"bodies in RAM up to {self.most_body_bytes_in_ram} bytes")


def paging_seen(events: Iterable[Event]) -> PagingSeen | None:
    """Sum the ``QueueSeen`` looks of a history by life; None when no life recorded one (not paged)."""
    most_out: dict[int, int] = {}  # run -> most entries out of RAM it saw
    last_out: dict[int, int] = {}  # run -> entries out of RAM at its last look
    most_bytes = 0
    for event in events:
        if type(event) is QueueSeen:
            most_out[event.run] = max(most_out.get(event.run, 0), event.entries_out_of_ram)
            last_out[event.run] = event.entries_out_of_ram
            most_bytes = max(most_bytes, event.body_bytes_in_ram)
    if not most_out:
        return None
    return PagingSeen(lives_looked=len(most_out), lives_with_deltas=sum(1 for n in most_out.values() if n > 0),
                      lives_ending_with_deltas=sum(1 for n in last_out.values() if n > 0),
                      most_entries_out_of_ram=max(most_out.values()), most_body_bytes_in_ram=most_bytes)
