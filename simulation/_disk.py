"""SimDisk: files in memory behind a page cache, for the simulator's durable actors.

It offers the operations of ``conveyor.actors.storage.FileSystem`` (the segment log's only way to the
disk), so the simulator runs the real storage code, recovery included, on it. Every file has what a
reader sees (the page cache) and what a crash leaves (the durable bytes): ``fsync`` makes the first
the second, ``fsync_dir`` makes a directory's names (creations, renames, deletions) durable, and
``crash`` throws the cache away, as a kill -9 followed by a power cut would. Its faults are drawn from
a generator the simulation makes with ``seeded_random``, so they are choices of the run's stream and
replay (and shrink) with it:

* a torn write: at a crash a file keeps a prefix of its unsynced tail (part of its last record);
* a failed fsync (``EIO``): nothing is made durable and the caller must assume the worst;
* a full disk (``ENOSPC``): for a while, every write that would grow the data fails, then space is freed.
"""

from __future__ import annotations

import errno
import os
import random
from typing import final

import attrs

from conveyor.runtime.validators import fail, non_negative_int


def _probability(instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if type(value) not in (int, float) or not 0.0 <= value <= 1.0:
        fail(type(instance).__name__, attribute.name, "a probability from 0.0 to 1.0", value)


@final
@attrs.frozen
class DiskFaults:
    """How a ``SimDisk`` misbehaves; every decision is drawn from the run's choice stream.

    Attributes:
        torn_write: at a crash, the chance that a file with unsynced bytes keeps a prefix of them.
        fsync_failure: the chance that an ``fsync`` fails with ``EIO`` (at most ``fsync_failures`` do).
        fsync_failures: how many fsyncs may fail over the run.
        full_after: the disk fills once this many bytes were written (None: never).
        full_for: how many writes fail with ``ENOSPC`` once it is full, before space is freed.
    """

    torn_write: float = attrs.field(default=0.0, validator=_probability)
    fsync_failure: float = attrs.field(default=0.0, validator=_probability)
    fsync_failures: int = attrs.field(default=1, validator=non_negative_int)
    full_after: int | None = attrs.field(default=None)
    full_for: int = attrs.field(default=1, validator=non_negative_int)

    def __attrs_post_init__(self) -> None:
        if self.full_after is not None and (type(self.full_after) is not int or self.full_after < 0):
            fail("DiskFaults", "full_after", "None or a number of bytes >= 0", self.full_after)


@final
class _File:
    """One file: what readers see (``cached``) and what survives a crash (``durable``)."""

    __slots__ = ("cached", "durable")

    def __init__(self) -> None:
        self.cached = bytearray()
        self.durable = b""


@final
class SimDisk:
    """An in-memory file system with a page cache (see the module); one simulation's disk.

    Args:
        rng: where its faults are drawn from (``seeded_random``, so a run's stream).
        faults: how it misbehaves (none by default).
    """

    def __init__(self, rng: random.Random, faults: DiskFaults | None = None) -> None:
        self._rng = rng
        self.faults = faults or DiskFaults()
        self._names: dict[str, _File] = {}  # what readers see
        self._durable_names: dict[str, _File] = {}  # what a crash leaves
        self._directories: set[str] = set()
        self._fds: dict[int, tuple[str, _File]] = {}
        self._next_fd = 3
        self.written = 0
        """Bytes written since the disk was made (what ``full_after`` counts)."""
        self.fsync_failed = 0
        self.full_refusals = 0
        self.crashes = 0
        self.torn: list[tuple[str, int]] = []
        """Every torn write a crash left: (path, bytes of its unsynced tail kept)."""
        self.events: list[str] = []
        """What went wrong, in words, in order (the simulation records each in its trace)."""

    # -- the FileSystem operations -----------------------------------------------------------

    def makedirs(self, directory: str) -> None:
        """Create ``directory`` (directories are only names here: durable at once)."""
        self._directories.add(directory.rstrip("/"))

    def listdir(self, directory: str) -> list[str]:
        """The names in ``directory`` as readers see them."""
        prefix = directory.rstrip("/") + "/"
        return sorted(path[len(prefix):] for path in self._names
                      if path.startswith(prefix) and "/" not in path[len(prefix):])

    def read(self, path: str) -> bytes:
        """The whole content of ``path``."""
        return bytes(self._file(path).cached)

    def size(self, path: str) -> int:
        """The length of ``path``."""
        return len(self._file(path).cached)

    def open_append(self, path: str) -> int:
        """Open ``path`` for appending, creating it (its name is durable only after ``fsync_dir``)."""
        file = self._names.get(path)
        if file is None:
            file = self._names[path] = _File()
        return self._open(path, file)

    def open_read(self, path: str) -> int:
        """Open ``path`` for reading."""
        return self._open(path, self._file(path))

    def write(self, fd: int, data: bytes | bytearray | memoryview) -> None:
        """Append ``data`` to the page cache; refused whole with ``ENOSPC`` while the disk is full."""
        _, file = self._fd(fd)
        size = len(data)
        faults = self.faults
        if faults.full_after is not None and self.written + size > faults.full_after \
                and self.full_refusals < faults.full_for:
            self.full_refusals += 1
            self.events.append(f"disk full: a write of {size} bytes refused "
                               f"({self.full_refusals} of {faults.full_for})")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        file.cached += data
        self.written += size

    def pread(self, fd: int, size: int, offset: int) -> bytes:
        """Up to ``size`` bytes at ``offset``."""
        return bytes(self._fd(fd)[1].cached[offset : offset + size])

    def fsync(self, fd: int) -> None:
        """Make the file's bytes durable, or fail with ``EIO`` (as drawn) leaving them as they were."""
        path, file = self._fd(fd)
        faults = self.faults
        if faults.fsync_failure and self.fsync_failed < faults.fsync_failures \
                and self._rng.random() < faults.fsync_failure:
            self.fsync_failed += 1
            self.events.append(f"fsync of {path} failed (EIO)")
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        file.durable = bytes(file.cached)

    def path_of(self, fd: int) -> str:
        """The path ``fd`` was opened with."""
        return self._fd(fd)[0]

    def close(self, fd: int) -> None:
        """Close ``fd``."""
        self._fd(fd)
        del self._fds[fd]

    def truncate(self, path: str, size: int) -> None:
        """Cut ``path`` to ``size`` bytes, durably (as the real one fsyncs)."""
        file = self._file(path)
        del file.cached[size:]
        file.durable = bytes(file.cached)

    def rename(self, source: str, destination: str) -> None:
        """Give ``source`` the name ``destination`` (durable after ``fsync_dir``)."""
        self._names[destination] = self._file(source)
        del self._names[source]

    def unlink(self, path: str) -> None:
        """Delete ``path`` (durable after ``fsync_dir``)."""
        self._file(path)
        del self._names[path]

    def fsync_dir(self, directory: str) -> None:
        """Make the names in ``directory`` durable: what it holds now is what a crash leaves."""
        prefix = directory.rstrip("/") + "/"

        def inside(path: str) -> bool:
            return path.startswith(prefix) and "/" not in path[len(prefix):]

        durable = {path: file for path, file in self._durable_names.items() if not inside(path)}
        durable.update((path, file) for path, file in self._names.items() if inside(path))
        self._durable_names = durable

    # -- faults --------------------------------------------------------------------------------

    def crash(self) -> None:
        """The process dies and the page cache is lost: each durable name keeps its durable bytes.

        A file whose unsynced bytes extend its durable ones may keep a prefix of them (a torn
        write, as ``torn_write`` draws). Every open file is closed.
        """
        self.crashes += 1
        self._fds.clear()
        survivors: dict[str, _File] = {}
        kept: dict[int, _File] = {}
        for path, file in sorted(self._durable_names.items()):
            copy = kept.get(id(file))
            if copy is None:
                copy = kept[id(file)] = self._survivor(path, file)
            survivors[path] = copy
        self._names = dict(survivors)
        self._durable_names = survivors

    def _survivor(self, path: str, file: _File) -> _File:
        """What a crash leaves of ``file``: its durable bytes, perhaps with a prefix of the unsynced tail."""
        survivor = _File()
        data = file.durable
        tail = len(file.cached) - len(data)
        if tail > 0 and self.faults.torn_write and file.cached.startswith(data) \
                and self._rng.random() < self.faults.torn_write:
            keep = self._rng.randrange(1, tail + 1)
            data = bytes(file.cached[: len(data) + keep])
            self.torn.append((path, keep))
            self.events.append(f"torn write: {path} keeps {keep} of its {tail} unsynced bytes")
        survivor.cached = bytearray(data)
        survivor.durable = data
        return survivor

    def take_events(self) -> list[str]:
        """What went wrong since the last call, in order."""
        events, self.events = self.events, []
        return events

    @property
    def paths(self) -> tuple[str, ...]:
        """Every file's path, as readers see them."""
        return tuple(sorted(self._names))

    # -- helpers ----------------------------------------------------------------------------

    def _open(self, path: str, file: _File) -> int:
        fd = self._next_fd
        self._next_fd += 1
        self._fds[fd] = (path, file)
        return fd

    def _fd(self, fd: int) -> tuple[str, _File]:
        opened = self._fds.get(fd)
        if opened is None:
            raise OSError(errno.EBADF, f"{os.strerror(errno.EBADF)}: {fd}")
        return opened

    def _file(self, path: str) -> _File:
        file = self._names.get(path)
        if file is None:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        return file
