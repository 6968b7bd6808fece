"""ActorRef: the opaque, hashable handle through which actors are reached."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, final

from ._errors import ConveyorError
from ._immutability import SCALAR_TYPES, ensure_immutable, register_immutable_type

if TYPE_CHECKING:
    from ._cell import CellBase
    from ._messages import Terminated

T = TypeVar("T")


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

    def ask(self, message: object, timeout: float = 5.0) -> Any:
        """Ask this actor: whatever its system's ``ask`` returns for ``message``.

        An awaitable on ``TrioSystem`` (``await ref.ask(msg)``); the answer itself on
        ``ThreadSystem`` (blocking the caller) and in the ``Simulation`` (stepping it).

        Raises:
            ConveyorError: called from inside an actor's handler, which must not wait (send the
                question with ``ctx.send`` and handle the answer as a message).
            ActorDeadError: the actor has stopped (its system shut down, say) or stops before answering.
            AskTimeout: no answer within ``timeout`` seconds (virtual in the simulator).
            Exception: whatever the actor raised while handling the question.
        """
        system = self.cell.system
        running = system.current_cell()
        if running is not None:
            msg = (f"{running.path} called ask() on {self.path} inside its handler, which must not wait; "
                   "send the question with ctx.send() and handle the answer as a message")
            raise ConveyorError(msg)
        return system.ask(self, message, timeout)

    def proxy(self, interface: Callable[..., T], *, timeout: float = 5.0) -> T:
        """A proxy of this ``MethodActor`` typed as ``interface`` (see ``ActorSystemBase.proxy``).

        ``proxy.method(args)`` asks the actor a ``MethodCall`` and returns what ``ask`` returns:
        declare the interface's methods ``async def`` on trio, plain ``def`` on threads and in
        the simulator.
        """
        return self.cell.system.proxy(self, interface, timeout=timeout)

    def __repr__(self) -> str:
        return f"<ActorRef {self.cell.path}>"


register_immutable_type(ActorRef)
