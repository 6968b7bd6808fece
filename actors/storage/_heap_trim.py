"""Give freed heap back to the system now and then, from the threads that do the storage's I/O.

glibc gives each thread that allocates its own arena; memory a thread freed stays in that arena
(reused by the same thread, never by another) until ``malloc_trim`` returns it. The storage's
threads (a paged queue's store jobs, the journal's writer) build and free many record buffers of a
segment's size, so a process with a bounded queue kept tens of MiB of freed buffers resident: the
durable queue of issue 18's memory row peaked at 209 MiB, 164 MiB with the arenas trimmed
(docs/storage.md). Trimming walks every arena (about 3 ms with 100 MiB live), so it runs once per
``TRIM_EVERY_BYTES`` handled, not per batch. Elsewhere than glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable
from typing import Final

TRIM_EVERY_BYTES: Final = 16 * 1024 * 1024
"""Bytes written or read by the storage's threads between two trims."""


def _find_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where there is none (musl, macOS, Windows)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim: Callable[[int], int] = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


_TRIM: Final = _find_trim()
_handled = [0]  # bytes since the last trim; threads race on it harmlessly (a trim a little early or late)


def note_bytes_handled(count: int) -> bool:
    """Count ``count`` bytes a storage thread wrote or read; trim the heap once enough have passed.

    Returns True when this call trimmed. Call it off the actor (from a job or an I/O thread): a trim
    takes milliseconds.
    """
    if _TRIM is None:
        return False
    _handled[0] += count
    if _handled[0] < TRIM_EVERY_BYTES:
        return False
    _handled[0] = 0
    _TRIM(0)
    return True
