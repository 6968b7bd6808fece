"""Failures contained per request in the front's stateful actors, so that one bad request loses nothing.

The registry, a topic and a subscription hold state nobody else has (names, message numbers, the
Seek log, the bindings and the queue as children). Restarting one of them, the kernel's answer to
a raise, would start it empty and stop its children: every unacked message of a subscription
would go. So these actors contain a failure to the request that caused it: the handler's error is
logged with its traceback, noted in the trace (``HandlerFailed``), and the asker, if any, gets
``Failed("INTERNAL", ...)``; the actor keeps its state and goes on. Their handlers are written to
decide before they change anything, so a raise leaves nothing half-applied. The queue under a
subscription is durable instead (its journal rebuilds it after a restart).
"""

from __future__ import annotations

import logging
from typing import Any, final

import attrs

from conveyor.runtime import Actor

from ._model import Failed
from ._protocol import Envelope

log = logging.getLogger("conveyor.pubsub")
_SHOWN_CHARS = 200  # of an error's text, in the answer to a client


@final
@attrs.frozen
class HandlerFailed:
    """Trace note: ``actor`` raised handling a ``request`` (a type name); the failure was contained."""

    actor: str
    request: str
    error: str


class ContainedActor(Actor):
    """An actor whose ``handle`` failures are contained to the request (see the module's docstring)."""

    def receive(self, message: Any) -> None:
        """Handle ``message``; a raise is logged, noted and answered, and the actor's state kept."""
        try:
            self.handle(message)
        except Exception as error:  # noqa: BLE001 - contained on purpose: a restart would lose the state
            self._contain(message, error)

    def handle(self, message: Any) -> None:
        """Handle one message (subclasses)."""
        raise NotImplementedError

    def _contain(self, message: object, error: Exception) -> None:
        request = message.request if type(message) is Envelope else message
        kind = type(request).__qualname__
        path = self.ctx.self_ref.path
        log.error("%s failed handling %s; the failure is contained and its state kept: %r", path, kind, error,
                  exc_info=error)
        text = repr(error)[:_SHOWN_CHARS]
        if self.ctx.tracing:
            self.ctx.note(HandlerFailed(path, kind, text))
        reply_to = message.reply_to if type(message) is Envelope else self.ctx.sender
        if reply_to is not None:
            self.ctx.send(reply_to, Failed("INTERNAL", f"{kind} failed inside conveyor's Pub/Sub front: {text}"))
