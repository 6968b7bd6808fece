"""Keeping a serving process's full garbage collections short."""

from __future__ import annotations

import gc


def freeze_start_up_heap() -> int:
    """Collect, then move every object the process holds into the permanent generation; return how many.

    A process that serves holds its modules, classes and protobuf types for its whole life, and CPython's
    full collection walks them all each time: 50-75 ms in the Pub/Sub front, every few seconds under
    publishing, a pause in every stream. Frozen, they are never walked again; a full collection walks
    only what came after (6-15 ms). Call it once, after start-up, in a process the caller owns. Frozen
    objects are still freed when their last reference goes, but never by the cycle collector: a cycle
    alive at the call that becomes garbage later (a cell and its ref, of an actor started before the
    call and stopped after it) stays, a few objects each.
    """
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
