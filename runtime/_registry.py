"""ActorRegistry: find a system's live actors by name or by class.

A view, not a store: each lookup reads the system's live actors (``Backend.live_cells``), so
nothing is registered or unregistered, an actor leaves the registry the moment it stops, and the
registry adds no state to guard (pykka's registry is one global list behind a lock; this one is
per system and holds nothing).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, final

from ._errors import ConveyorError, quote

if TYPE_CHECKING:
    from ._cell import ActorCell
    from ._ref import ActorRef


@final
class ActorRegistry:
    """A system's live actors: ``all()``, ``by_name(name)``, ``by_class(cls)``, each in spawn order.

    Each answer is a snapshot: an actor may stop right after it (then asking or telling it says so).
    """

    __slots__ = ("_live_cells",)

    def __init__(self, live_cells: Callable[[], Iterable[ActorCell]]) -> None:
        self._live_cells = live_cells

    def _cells(self) -> list[ActorCell]:
        return sorted(self._live_cells(), key=lambda cell: cell.uid)

    def all(self) -> tuple[ActorRef, ...]:
        """Every live actor, in the order they were spawned (so parents before their children)."""
        return tuple(cell.ref for cell in self._cells())

    def by_name(self, name: str) -> ActorRef | None:
        """The live actor called ``name``, or at path ``name`` when it starts with ``/``; None if there is none.

        Raises:
            TypeError: ``name`` is not a str.
            ValueError: ``name`` is empty.
            ConveyorError: several live actors are called ``name`` (children of different parents);
                the message names their paths, and a path finds one.
        """
        if not isinstance(name, str):
            msg = f"by_name() name must be a str (an actor's name or its path), got {quote(name)}"
            raise TypeError(msg)
        if not name:
            msg = "by_name() name must be a non-empty str (an actor's name or its path), got ''"
            raise ValueError(msg)
        by_path = name.startswith("/")
        found = [cell for cell in self._cells() if (cell.path if by_path else cell.name) == name]
        if len(found) > 1:
            paths = ", ".join(sorted(cell.path for cell in found))
            msg = f"{len(found)} live actors are called {name!r} ({paths}); find one by its path"
            raise ConveyorError(msg)
        return found[0].ref if found else None

    def by_class(self, actor_class: type) -> tuple[ActorRef, ...]:
        """Every live actor that is an instance of ``actor_class`` (subclasses included), in spawn order.

        Raises:
            TypeError: ``actor_class`` is not a class.
        """
        if not isinstance(actor_class, type):
            msg = f"by_class() actor_class must be a class, got {quote(actor_class)}"
            raise TypeError(msg)
        return tuple(cell.ref for cell in self._cells() if isinstance(cell.actor, actor_class))
