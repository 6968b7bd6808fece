"""The journal store a disk scenario's process opens on the simulated disk: the real one, no thread."""

from __future__ import annotations

from typing import Final

from conveyor.actors.storage import DiskJournalStore
from conveyor.simulation import SimDisk

DATA_DIR: Final = "/data/journals"
SEGMENT_SIZE: Final = 4096
"""Small segments, so that a short run rotates through several (and recovery reads several)."""
GC_EVERY: Final = 8
"""Group commits between garbage collections: often, so that a short run compacts, and crashes around it."""


def open_disk_store(disk: SimDisk, first_write: int) -> DiskJournalStore:
    """``DiskJournalStore`` on ``disk`` with no writer thread (the simulation flushes it), numbering from ``first_write``."""
    return DiskJournalStore(DATA_DIR, fs=disk, segment_size=SEGMENT_SIZE, threaded=False, first_write=first_write,
                            gc_every=GC_EVERY)
