"""ActorRef: the opaque, hashable handle through which actors are reached."""

from __future__ import annotations

from typing import TYPE_CHECKING, final

from ._immutability import SCALAR_TYPES, ensure_immutable, register_immutable_type

if TYPE_CHECKING:
    from ._cell import CellBase
    from ._messages import Terminated


@final
class ActorRef:
    """A handle to one actor; equal only to itself, safe to put inside messages."""

    __slots__ = ("cell",)

    def __init__(self, cell: CellBase) -> None:
        self.cell = cell
        """The kernel's side of the handle (``conveyor.runtime.lowlevel``); actor code never needs it."""

    @property
    def path(self) -> str:
        """Where the actor sits in its system's tree, e.g. ``/broker/queue-1``."""
        return self.cell.path

    @property
    def name(self) -> str:
        """The last component of ``path``."""
        return self.cell.name

    @property
    def is_alive(self) -> bool:
        """False once the actor has stopped (a snapshot: it may stop right after)."""
        return self.cell.alive

    @property
    def termination(self) -> Terminated | None:
        """How the actor stopped (``reason`` and ``error``), or None while it runs."""
        return getattr(self.cell, "termination", None)

    def tell(self, message: object) -> None:
        """Send ``message`` without waiting.

        Inside a handler the sender is the running actor (so ``ctx.reply`` works);
        outside one there is no sender.

        Raises:
            MutableMessageError: the message is not deeply immutable.
            ActorDeadError: called from outside any actor and the target has stopped.
                (From inside an actor such a message becomes a dead letter instead,
                because the sender cannot know yet; it learns through ``watch``.)
        """
        if type(message) not in SCALAR_TYPES:
            ensure_immutable(message)
        cell = self.cell
        cell.system.tell(cell, message)

    def __repr__(self) -> str:
        return f"<ActorRef {self.cell.path}>"


register_immutable_type(ActorRef)
