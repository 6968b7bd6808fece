"""Messages the runtime itself delivers to actors, and its private system messages."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, final

import attrs

if TYPE_CHECKING:
    from ._ref import ActorRef


@final
@attrs.frozen
class Terminated:
    """A watched actor has stopped.

    Attributes:
        ref: the actor that stopped.
        reason: ``"stopped"`` (it or its parent asked), ``"failed"`` (an exception its
            supervisor did not restart), ``"shutdown"`` (the system closed), or ``"gone"`` (an
            actor of an earlier process, named in a journal recovered from disk).
        error: ``repr`` of the exception for ``"failed"``, else ``None``.
    """

    ref: ActorRef
    reason: str
    error: str | None = None


@final
@attrs.frozen
class JobDone:
    """A job started with ``ctx.run_job`` returned; ``result`` is now owned by the actor."""

    job_id: int
    result: Any = attrs.field(eq=False)


@final
@attrs.frozen
class JobFailed:
    """A job started with ``ctx.run_job`` raised ``error``."""

    job_id: int
    error: BaseException = attrs.field(eq=False)


@final
@attrs.frozen
class AskFailed:
    """Trace note of ``ctx.fail_ask``: the actor answered the ask (the note's receiver) with an error.

    ``error`` is the exception's ``repr``; the asker's ``ask`` raised the exception itself.
    """

    error: str


@final
@attrs.frozen
class TimerHandle:
    """Names one scheduled timer so that ``ctx.cancel`` can find it."""

    timer_id: int


# --- System messages: created only by the runtime, handled by ActorCell, never by user code.


class SystemMessage:
    """Marker base class of the runtime's private lifecycle messages."""

    __slots__ = ()


@final
@attrs.frozen
class Start(SystemMessage):
    """First message of every incarnation: run ``on_start`` on the actor's own thread."""


@final
@attrs.frozen
class TimerFired(SystemMessage):
    """A timer came due; the owner delivers ``message`` unless it cancelled the timer since."""

    timer_id: int
    message: Any


@final
@attrs.frozen
class Stop(SystemMessage):
    """Stop the receiver once it reaches this message."""

    reason: str = "stopped"


@final
@attrs.frozen
class Watch(SystemMessage):
    """Register ``watcher`` to receive ``Terminated`` when the receiver stops."""

    watcher: ActorRef


@final
@attrs.frozen
class Unwatch(SystemMessage):
    """Undo a ``Watch``."""

    watcher: ActorRef


@final
@attrs.frozen
class ChildTerminated(SystemMessage):
    """Tells a parent that one of its children stopped, freeing the child's name."""

    child: ActorRef


@final
@attrs.frozen
class Escalate(SystemMessage):
    """A child's supervisor said ESCALATE: the parent treats ``error`` as its own failure."""

    child: ActorRef
    error: BaseException = attrs.field(eq=False)


SYSTEM_MESSAGE_TYPES: frozenset[type] = frozenset(SystemMessage.__subclasses__())
