"""The journal store a disk scenario's process opens on the simulated disk: the real one, no thread."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from conveyor.actors.storage import DiskJournalStore, FileSystem
from conveyor.simulation import OpenStore, SimDisk

DATA_DIR: Final = "/data/journals"
SEGMENT_SIZE: Final = 4096
"""Small segments, so that a short run rotates through several (and recovery reads several)."""
GC_EVERY: Final = 2
"""Group commits between garbage collections: often, so that a short run compacts, and crashes around it."""


def disk_store_opener(files: Callable[[SimDisk], FileSystem] | None = None) -> OpenStore:
    """Opens ``DiskJournalStore`` on the disk (through ``files(disk)``, a planted bug's, if given).

    No writer thread (the simulation flushes it); writes are numbered from the number it is given.
    """

    def open_store(disk: SimDisk, first_write: int) -> DiskJournalStore:
        return DiskJournalStore(DATA_DIR, fs=disk if files is None else files(disk), segment_size=SEGMENT_SIZE,
                                threaded=False, first_write=first_write, gc_every=GC_EVERY)

    return open_store


open_disk_store: Final = disk_store_opener()
"""The disk scenarios' store: ``DiskJournalStore`` on the simulated disk itself."""
