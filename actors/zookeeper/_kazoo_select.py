"""A kazoo client whose connection thread waits with one ``select(2)`` call and runs completions itself.

kazoo's connection thread waits on its sockets about five times a request (the loop's wait, the
write's, each read's) through ``selector_select``, which builds, registers, polls and closes an epoll
selector every time. The transactions benchmark showed that thread at 0.37 ms of CPU a transaction
with 8 concurrent, 40 % of the client's; one ``select.select`` does the same wait in one system call
(0.21 ms). ``select`` refuses descriptors past FD_SETSIZE (why kazoo moved to selectors): for those,
and any other descriptor it refuses, kazoo's own selector answers, so behaviour is kazoo's.

kazoo hands each answered request's callbacks (``rawlink``) to a completion thread through a queue:
a queue put, a condition's notify and a thread switch a reply, about a tenth of the client's CPU
with 8 concurrent transactions. ``InlineCompletions`` runs them on the connection thread as the
answer is read, in the answers' order, as kazoo itself does once its handler is stopped. That
thread must never block, so a callback must not either: ``KazooSession``'s only tell (a
thread-safe send), and kazoo's own (``makepath``'s creates, ``sync``) only chain further async calls.
A callback that raises is logged, as kazoo's completion thread does, and the connection goes on.
"""

from __future__ import annotations

import logging
import select
from typing import Any

from kazoo.client import KazooClient
from kazoo.handlers.threading import AsyncResult, SequentialThreadingHandler
from kazoo.handlers.utils import selector_select

log = logging.getLogger(__name__)


def select_once(rlist: list[Any], wlist: list[Any], xlist: list[Any],
                timeout: float | None = None) -> tuple[list[Any], list[Any], list[Any]]:
    """kazoo's ``select``: the ready objects of each list; one ``select(2)``, kazoo's selector past its limit."""
    try:
        return select.select(rlist, wlist, xlist, timeout)
    except ValueError:  # a descriptor past FD_SETSIZE, or a closed one: kazoo's selector answers (or raises) alike
        ready: tuple[list[Any], list[Any], list[Any]] = selector_select(rlist, wlist, xlist, timeout)
        return ready


class InlineCompletions(AsyncResult):  # type: ignore[misc]  # kazoo is untyped
    """kazoo's result whose callbacks run where it is set (or where one is linked to a result already set)."""

    def _do_callbacks(self) -> None:
        for callback in self._callbacks:
            try:
                callback(self)
            except Exception:
                log.exception("a kazoo completion callback failed")


class SelectOnceHandler(SequentialThreadingHandler):  # type: ignore[misc]  # kazoo is untyped
    """kazoo's threading handler with ``select_once`` as its wait and ``InlineCompletions`` as its results."""

    def select(self, *args: Any, **kwargs: Any) -> tuple[list[Any], list[Any], list[Any]]:
        return select_once(*args, **kwargs)

    def async_result(self) -> InlineCompletions:
        return InlineCompletions(self)


def kazoo_client(**kwargs: Any) -> KazooClient:
    """A ``KazooClient`` of ``kwargs`` whose connection waits cost one system call and whose completions run on
    its connection thread (``KazooSession``'s default)."""
    kwargs.setdefault("handler", SelectOnceHandler())
    return KazooClient(**kwargs)
