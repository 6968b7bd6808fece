"""A kazoo client whose connection thread waits with one ``select(2)`` call instead of a new epoll selector.

kazoo's connection thread waits on its sockets about five times a request (the loop's wait, the
write's, each read's) through ``selector_select``, which builds, registers, polls and closes an epoll
selector every time. The transactions benchmark showed that thread at 0.37 ms of CPU a transaction
with 8 concurrent, 40 % of the client's; one ``select.select`` does the same wait in one system call
(0.21 ms). ``select`` refuses descriptors past FD_SETSIZE (why kazoo moved to selectors): for those,
and any other descriptor it refuses, kazoo's own selector answers, so behaviour is kazoo's.
"""

from __future__ import annotations

import select
from typing import Any

from kazoo.client import KazooClient
from kazoo.handlers.threading import SequentialThreadingHandler
from kazoo.handlers.utils import selector_select


def select_once(rlist: list[Any], wlist: list[Any], xlist: list[Any],
                timeout: float | None = None) -> tuple[list[Any], list[Any], list[Any]]:
    """kazoo's ``select``: the ready objects of each list; one ``select(2)``, kazoo's selector past its limit."""
    try:
        return select.select(rlist, wlist, xlist, timeout)
    except ValueError:  # a descriptor past FD_SETSIZE, or a closed one: kazoo's selector answers (or raises) alike
        ready: tuple[list[Any], list[Any], list[Any]] = selector_select(rlist, wlist, xlist, timeout)
        return ready


class SelectOnceHandler(SequentialThreadingHandler):  # type: ignore[misc]  # kazoo is untyped
    """kazoo's threading handler with ``select_once`` as its wait."""

    def select(self, *args: Any, **kwargs: Any) -> tuple[list[Any], list[Any], list[Any]]:
        return select_once(*args, **kwargs)


def kazoo_client(**kwargs: Any) -> KazooClient:
    """A ``KazooClient`` of ``kwargs`` whose connection waits cost one system call (``KazooSession``'s default)."""
    kwargs.setdefault("handler", SelectOnceHandler())
    return KazooClient(**kwargs)
