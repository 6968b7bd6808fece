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

    __slots__ = ("_cell",)

    def __init__(self, cell: CellBase) -> None:
        self._cell = cell

    @property
    def path(self) -> str:
        """Where the actor sits in its system's tree, e.g. ``/broker/queue-1``."""
        return self._cell.path

    @property
    def name(self) -> str:
        """The last component of ``path``."""
        return self._cell.name

    @property
    def is_alive(self) -> bool:
        """False once the actor has stopped (a snapshot: it may stop right after)."""
        return self._cell.alive

    @property
    def termination(self) -> Terminated | None:
        """How the actor stopped (``reason`` and ``error``), or None while it runs."""
        return getattr(self._cell, "termination", None)

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
        cell = self._cell
        cell.system._tell(cell, message)  # noqa: SLF001

    def __repr__(self) -> str:
        return f"<ActorRef {self._cell.path}>"


register_immutable_type(ActorRef)
