"""The thin file shell under the segment log: every system call it makes, behind one small interface.

``SegmentLog`` reaches the disk only through a ``FileSystem``, so a test can stop it after any one
operation (a crash at that point) and a simulator can put its own disk underneath. ``OsFileSystem``
is the real one: plain ``os`` calls, blocking, so it belongs in a job or an I/O actor's thread,
never in an actor's handler.
"""

from __future__ import annotations

import os
from typing import Protocol, final


class FileSystem(Protocol):
    """The file operations a segment log makes; paths are strings, open files are descriptors."""

    def makedirs(self, directory: str) -> None:
        """Create ``directory`` (and its parents) if missing."""

    def listdir(self, directory: str) -> list[str]:
        """The names in ``directory``."""

    def read(self, path: str) -> bytes:
        """The whole content of ``path``."""

    def size(self, path: str) -> int:
        """The length of ``path`` in bytes."""

    def open_append(self, path: str) -> int:
        """Open ``path`` for appending, creating it if missing."""

    def open_read(self, path: str) -> int:
        """Open ``path`` for reading at offsets."""

    def write(self, fd: int, data: bytes | bytearray | memoryview) -> None:
        """Append all of ``data``."""

    def pread(self, fd: int, size: int, offset: int) -> bytes:
        """Up to ``size`` bytes at ``offset``."""

    def fsync(self, fd: int) -> None:
        """Make what was written to ``fd`` durable."""

    def close(self, fd: int) -> None:
        """Close ``fd``."""

    def truncate(self, path: str, size: int) -> None:
        """Cut ``path`` to ``size`` bytes and make that durable."""

    def rename(self, source: str, destination: str) -> None:
        """Atomically give ``source`` the name ``destination``."""

    def unlink(self, path: str) -> None:
        """Delete ``path``."""

    def fsync_dir(self, directory: str) -> None:
        """Make the names in ``directory`` (creations, renames, deletions) durable."""


@final
class OsFileSystem:
    """``FileSystem`` on the real disk, through ``os``."""

    def makedirs(self, directory: str) -> None:
        """Create ``directory`` (and its parents) if missing."""
        os.makedirs(directory, exist_ok=True)

    def listdir(self, directory: str) -> list[str]:
        """The names in ``directory``."""
        return os.listdir(directory)

    def read(self, path: str) -> bytes:
        """The whole content of ``path``."""
        with open(path, "rb") as file:
            return file.read()

    def size(self, path: str) -> int:
        """The length of ``path`` in bytes."""
        return os.stat(path).st_size

    def open_append(self, path: str) -> int:
        """Open ``path`` for appending, creating it if missing."""
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def open_read(self, path: str) -> int:
        """Open ``path`` for reading at offsets."""
        return os.open(path, os.O_RDONLY)

    def write(self, fd: int, data: bytes | bytearray | memoryview) -> None:
        """Append all of ``data`` (``os.write`` may write less than asked)."""
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]

    def pread(self, fd: int, size: int, offset: int) -> bytes:
        """Up to ``size`` bytes at ``offset``."""
        return os.pread(fd, size, offset)

    def fsync(self, fd: int) -> None:
        """Make what was written to ``fd`` durable."""
        os.fsync(fd)

    def close(self, fd: int) -> None:
        """Close ``fd``."""
        os.close(fd)

    def truncate(self, path: str, size: int) -> None:
        """Cut ``path`` to ``size`` bytes and make that durable."""
        fd = os.open(path, os.O_WRONLY)
        try:
            os.ftruncate(fd, size)
            os.fsync(fd)
        finally:
            os.close(fd)

    def rename(self, source: str, destination: str) -> None:
        """Atomically give ``source`` the name ``destination``."""
        os.rename(source, destination)

    def unlink(self, path: str) -> None:
        """Delete ``path``."""
        os.unlink(path)

    def fsync_dir(self, directory: str) -> None:
        """Make the names in ``directory`` durable (a new file's name is not, until its directory is synced)."""
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
