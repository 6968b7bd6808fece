"""File systems that count or refuse operations, and a crash, for the segment log's tests."""

from __future__ import annotations

from conveyor.actors.storage import OsFileSystem, SegmentLog, SeqRangeIndex

MUTATING = ("open_append", "write", "fsync", "truncate", "rename", "unlink", "fsync_dir")
"""The operations that change the disk; a simulated crash stops before one of them."""


class InjectedCrash(OSError):
    """The failure the test injected: the process 'died' before this operation."""


class RecordingFileSystem:
    """The real file system, recording each operation that changes the disk, and failing one on request.

    ``fail_at`` is the index (among the operations recorded from now on) that raises instead of running.
    """

    def __init__(self, fail_at: int | None = None) -> None:
        self._os = OsFileSystem()
        self.operations: list[str] = []
        self.fail_at = fail_at

    def _do(self, name: str) -> None:
        if self.fail_at is not None and len(self.operations) == self.fail_at:
            raise InjectedCrash(f"injected failure before operation {self.fail_at} ({name})")
        self.operations.append(name)

    def makedirs(self, directory: str) -> None:
        self._os.makedirs(directory)

    def listdir(self, directory: str) -> list[str]:
        return self._os.listdir(directory)

    def read(self, path: str) -> bytes:
        return self._os.read(path)

    def size(self, path: str) -> int:
        return self._os.size(path)

    def open_append(self, path: str) -> int:
        self._do("open_append")
        return self._os.open_append(path)

    def open_read(self, path: str) -> int:
        return self._os.open_read(path)

    def write(self, fd: int, data: bytes | bytearray | memoryview) -> None:
        self._do("write")
        self._os.write(fd, data)

    def pread(self, fd: int, size: int, offset: int) -> bytes:
        return self._os.pread(fd, size, offset)

    def fsync(self, fd: int) -> None:
        self._do("fsync")
        self._os.fsync(fd)

    def close(self, fd: int) -> None:
        self._os.close(fd)

    def truncate(self, path: str, size: int) -> None:
        self._do("truncate")
        self._os.truncate(path, size)

    def rename(self, source: str, destination: str) -> None:
        self._do("rename")
        self._os.rename(source, destination)

    def unlink(self, path: str) -> None:
        self._do("unlink")
        self._os.unlink(path)

    def fsync_dir(self, directory: str) -> None:
        self._do("fsync_dir")
        self._os.fsync_dir(directory)


def crash(log: SegmentLog) -> None:
    """Drop ``log`` as a killed process would: what is still buffered is lost, nothing more is written."""
    log._failed = InjectedCrash("simulated crash")
    log.close()


def key(number: int) -> bytes:
    """A message id-like key."""
    return b"msg-%06d" % number


def crash_index(index: SeqRangeIndex) -> None:
    """Drop ``index`` as a killed process would: its unsynced buffers are lost, nothing more is written."""
    index._failed = InjectedCrash("simulated crash")
    index.close()
