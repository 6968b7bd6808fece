"""Faults as data: what goes wrong, where and when, so a failing run replays with its faults.

A fault is a frozen value handed to ``Simulation(faults=...)``. The simulation applies
it at its step or virtual time and records it in the trace as a ``FAULT`` event, so
checkers and readers of a trace see what was injected. Scenarios draw concrete
faults from their seed (``simulation.registry``), which keeps a run a function of
(scenario, seed, strategy, faults).
"""

from __future__ import annotations

from typing import Any, TypeAlias, final

import attrs

from conveyor.runtime import ConveyorError
from conveyor.runtime.validators import fail, non_negative_int, non_negative_seconds, positive_int, positive_seconds


class InjectedFault(ConveyorError):
    """The error a fault injects (a crash, a failing job); never raised by real code."""


def _actor_path(instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or not value.startswith("/") or value.endswith("/"):
        fail(type(instance).__name__, attribute.name, "an actor path such as '/client-0'", value)


def covers(prefix: str, path: str) -> bool:
    """Whether the actor at ``path`` is ``prefix`` or one of its descendants."""
    return path == prefix or path.startswith(prefix + "/")


@final
@attrs.frozen
class Crash:
    """Before step ``at_step``, the actor at ``path`` crashes.

    With ``restart`` its cell restarts it at once (fresh instance, children stopped,
    timers cancelled, mailbox kept, as supervision does); otherwise it stops and its
    watchers get ``Terminated`` (what a queue needs to take back a consumer's leases).
    """

    path: str = attrs.field(validator=_actor_path)
    at_step: int = attrs.field(validator=non_negative_int)
    restart: bool = True


def _child_name(instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or not value or "/" in value:
        fail(type(instance).__name__, attribute.name, "an actor's own name such as 'binding'", value)


@final
@attrs.frozen
class CrashAmong:
    """Before step ``at_step``, one live actor under ``prefix`` named ``name`` or ``name-...`` crashes.

    For actors whose paths are made at run time (a Pub/Sub binding per stream, a subscription's
    queue): of the live actors under ``prefix`` whose own name is ``name`` or starts with
    ``name-``, in spawn order (parents first), the ``pick``-th, counted modulo how many there
    are, crashes as ``Crash`` would crash it. None live: the fault is recorded as hitting nothing.
    """

    prefix: str = attrs.field(validator=_actor_path)
    name: str = attrs.field(validator=_child_name)
    at_step: int = attrs.field(validator=non_negative_int)
    pick: int = attrs.field(default=0, validator=non_negative_int)
    restart: bool = True

    def matches(self, path: str, name: str) -> bool:
        """Whether the actor at ``path``, called ``name``, is one this fault may hit."""
        return (name == self.name or name.startswith(self.name + "-")) and path.startswith(self.prefix + "/")


@final
@attrs.frozen
class Pause:
    """At virtual time ``at_time`` the process holding the actors under ``prefix`` freezes.

    For ``duration_s`` they receive nothing (messages, timers, finished jobs wait in their
    channels) while the rest of the system and the clock go on: a GC pause, a stopped
    container, a laptop lid. Then everything they missed arrives at once.
    """

    prefix: str = attrs.field(validator=_actor_path)
    at_time: float = attrs.field(validator=non_negative_seconds)
    duration_s: float = attrs.field(validator=positive_seconds)


@final
@attrs.frozen
class Delay:
    """Before step ``at_step``, the channel ``sender`` -> ``receiver`` stalls for ``duration_s``.

    Messages on it keep their order (the channel is still FIFO) but arrive late, after
    messages other senders sent later.
    """

    sender: str = attrs.field(validator=_actor_path)
    receiver: str = attrs.field(validator=_actor_path)
    at_step: int = attrs.field(validator=non_negative_int)
    duration_s: float = attrs.field(validator=positive_seconds)


@final
@attrs.frozen
class FailJob:
    """The ``nth`` job (counting from 1) started by an actor under ``prefix`` raises ``InjectedFault``."""

    prefix: str = attrs.field(validator=_actor_path)
    nth: int = attrs.field(validator=positive_int)


@final
@attrs.frozen
class FailWrite:
    """The ``nth`` journal write (counting from 1) by an actor under ``prefix`` fails: a disk error.

    The write raises ``InjectedFault`` and changes nothing; the actor fails in the middle of its
    handler and its supervisor restarts it, so it must recover from what it had written before.
    """

    prefix: str = attrs.field(validator=_actor_path)
    nth: int = attrs.field(validator=positive_int)


@final
@attrs.frozen
class ProcessCrash:
    """Before step ``at_step``, the process holding the simulation's durable actors dies (kill -9).

    Its disk (``Simulation(journal_store=...)``) loses what was not synced, perhaps keeping a torn
    prefix of a last write; the journal store is reopened from what the disk kept (the storage
    code's own recovery), and every actor of the process (``Simulation(process=...)``) restarts
    from it. Clients, in other processes, live on. A failed fsync or a full disk crashes the process
    the same way (it panics rather than go on with a disk whose contents it no longer knows).

    With ``after_sent`` (a message class name such as ``'AckResult'``), the kill waits from
    ``at_step`` until an actor of the process sends such a message, and comes at the next step: as
    FoundationDB's BUGGIFY puts faults where bugs hide, right after a promise leaves the process.
    """

    at_step: int = attrs.field(validator=non_negative_int)
    after_sent: str | None = None

    def __attrs_post_init__(self) -> None:
        if self.after_sent is not None and (not isinstance(self.after_sent, str) or not self.after_sent.isidentifier()):
            fail("ProcessCrash", "after_sent", "None or a class name such as 'AckResult'", self.after_sent)


@final
@attrs.frozen
class Drop:
    """From step ``from_step`` on, messages of type ``message_type`` sent by actors under ``sender`` vanish.

    ``Drop(client, "Ack")`` is a consumer that never acks: the queue's leases must lapse.
    """

    sender: str = attrs.field(validator=_actor_path)
    message_type: str
    from_step: int = attrs.field(default=0, validator=non_negative_int)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.message_type, str) or not self.message_type.isidentifier():
            fail("Drop", "message_type", "a class name such as 'Ack'", self.message_type)


def never_acks(path: str) -> Drop:
    """A consumer client at ``path`` whose acks never reach the queue."""
    return Drop(path, "Ack")


Fault: TypeAlias = Crash | CrashAmong | Pause | Delay | FailJob | FailWrite | Drop | ProcessCrash
FAULT_TYPES = (Crash, CrashAmong, Pause, Delay, FailJob, FailWrite, Drop, ProcessCrash)


@final
@attrs.frozen
class FaultApplied:
    """What a FAULT trace event carries: the fault, and what it hit (or why it hit nothing)."""

    fault: Fault
    outcome: str


def check_faults(faults: Any) -> tuple[Fault, ...]:
    """Validate a fault plan at the edge: a sequence of fault values."""
    if isinstance(faults, FAULT_TYPES):
        return (faults,)
    try:
        plan = tuple(faults)
    except TypeError:
        msg = (
            "faults must be a sequence of Crash, CrashAmong, Pause, Delay, FailJob, FailWrite, Drop or ProcessCrash, "
            f"got {type(faults).__qualname__}"
        )
        raise TypeError(msg) from None
    for index, fault in enumerate(plan):
        if not isinstance(fault, FAULT_TYPES):
            msg = (
                f"faults[{index}] must be one of Crash, CrashAmong, Pause, Delay, FailJob, FailWrite, Drop, "
                "ProcessCrash, "
                f"got {type(fault).__qualname__}"
            )
            raise TypeError(msg)
    return plan
