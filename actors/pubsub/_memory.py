"""The Pub/Sub server's memory budget: a publish is refused before the process grows past it.

Glue, not an actor: it reads the process's resident size from ``/proc/self/statm`` (about 3 us
a read, one per Publish request), so it counts everything the process holds (every queue, log
and retained message in the actors, gRPC's buffers, the interpreter) without asking the actors,
whose state the glue cannot see. Memory that Python's allocator keeps after messages are settled
still counts; before refusing, the budget gives glibc's free heap pages back (``malloc_trim``, at
most once a second) and reads again, so a refusal reflects memory really held. docs/pubsub.md
("Memory budget") has the measurements behind the choice.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import os
import re
import time
from collections.abc import Callable
from typing import Final, final

_PAGE: Final = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_STATM: Final = "/proc/self/statm"
_UNITS: Final = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}
_SIZE: Final = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")
_PER_MESSAGE: Final = 2048
"""Bytes a stored message costs beyond its data (measured: about 1 KiB with one subscription)."""
_SLACK: Final = 2**20
"""Bytes a request's handling may add beyond its copies and messages (the interpreter's and gRPC's own
growth: a server with 64 MiB of budget was seen 0.5 MB past it after 4 MB requests counted twice, with
no slack; with this slack, 57 KB past it in one run of five, until the next request was counted too)."""
_TRIM_EVERY_S: Final = 1.0


def _size_error(value: object) -> ValueError:
    return ValueError(f"max_memory must be a number of bytes >= 1, or a size such as 512MB or 2GiB "
                      f"(units: B, KB, MB, GB, TB = powers of 1000; KiB, MiB, GiB, TiB = powers of 1024), "
                      f"got {value!r:.60}")


def parse_byte_size(value: int | str) -> int:
    """Bytes from an int or a size such as ``512MB``, ``2GiB``, ``1.5 GB`` or ``1048576``.

    MB and the like are powers of 1000, MiB and the like powers of 1024; case is ignored.

    Raises:
        ValueError: not a whole number of bytes >= 1, or an unknown unit (the error lists the units).
    """
    if type(value) is int:
        if value < 1:
            raise _size_error(value)
        return value
    if not isinstance(value, str):
        raise _size_error(value)
    match = _SIZE.match(value)
    if match is None or match.group(2).lower() not in _UNITS:
        raise _size_error(value)
    number, unit = float(match.group(1)), _UNITS[match.group(2).lower()]
    size = number * unit
    if not math.isfinite(size) or size < 1 or size != math.floor(size):
        raise _size_error(value)
    return int(size)


def resident_bytes() -> int:
    """The process's resident set size, from ``/proc/self/statm`` (Linux).

    Raises:
        OSError: no ``/proc/self/statm`` (not Linux).
    """
    fd = os.open(_STATM, os.O_RDONLY)
    try:
        return int(os.read(fd, 128).split()[1]) * _PAGE
    finally:
        os.close(fd)


def _glibc_trim() -> Callable[[], object] | None:
    """glibc's ``malloc_trim(0)``, which gives free heap pages back to the system; None elsewhere."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        trim: Callable[[int], object] = libc.malloc_trim
    except (OSError, AttributeError, TypeError):
        return None
    return lambda: trim(0)


_TRIM: Final = _glibc_trim()


def _megabytes(size: int) -> str:
    return f"{size / 1e6:,.1f} MB"


@final
class MemoryBudget:
    """Refuses a publish that could take the process's resident size past ``limit`` bytes.

    Args:
        limit: the budget, in bytes.
        resident: reads the resident size (injected: tests fake it).
        trim: gives free allocator memory back to the system, or None.
        clock: seconds, for trimming at most once a second.
    """

    def __init__(
        self,
        limit: int,
        resident: Callable[[], int] = resident_bytes,
        trim: Callable[[], object] | None = _TRIM,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = limit
        self.resident = resident
        self.trim = trim
        self.clock = clock
        self._trimmed_at = -math.inf

    def describe(self) -> str:
        """The budget as errors name it."""
        return f"max_memory = {self.limit:,} bytes ({_megabytes(self.limit)})"

    def refusal(self, request_bytes: int, messages: int) -> str | None:
        """None if a publish of ``messages`` in ``request_bytes`` fits, else the error that names the budget.

        A request is counted three times: its protobuf and its stored copy, both alive at the peak,
        and the next request of its size, which gRPC receives and parses before that one's own check
        can refuse it (a refused request has grown the process already); then some 1-2 KiB a message
        and up to a MiB of the process's own growth. Past the budget by that much, it is refused.
        """
        need = 3 * request_bytes + _PER_MESSAGE * messages + _SLACK
        held = self.resident()
        if held + need <= self.limit:
            return None
        now = self.clock()
        if self.trim is not None and now - self._trimmed_at >= _TRIM_EVERY_S:
            self._trimmed_at = now
            self.trim()
            held = self.resident()
            if held + need <= self.limit:
                return None
        return (f"the server's memory budget is spent: {_megabytes(held)} resident and about {_megabytes(need)} "
                f"for this request would pass {self.describe()}; publish again once subscribers have caught up")
