"""The storage layer on its own, for the memory and recovery rows of ``benchmarks/storage.py``.

Until the broker queue pages (issue 18 item 2), what can hold a million messages under a memory
target is the storage layer itself: the ``VariableQueue`` core with a thin loop that carries out its
effects on real files, as the broker's shell will. The loop keeps two directories: the queue index
(``SeqRangeIndex``: segment files of 16,384 seq ids, a publish record per message with the 1 KiB
body embedded in it, as below ``embed_below`` RabbitMQ does too, and a small delivery-mark and ack
record each; its RAM is a bitmap and counters per segment, nothing per message) and the message
store (a ``SegmentLog`` of the bodies at least ``embed_below`` long). A delivery mark waits for the
next sync and is never written if its message is acked first, as RabbitMQ's queue-index journal
cancels a publish, delivery and ack that meet in it. Each run is a
child process (``python -m conveyor.benchmarks._storage_core``), so its resident size and timings
are its own; it prints one JSON line of figures.
"""

from __future__ import annotations

import argparse
import json
import resource
import struct
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from conveyor.actors.storage import (
    SNAPSHOT_NAME,
    AckIndex,
    Effect,
    Fetched,
    IndexEntry,
    LoadPending,
    MarkDelivered,
    ReadIndex,
    ReadMessage,
    ReadPending,
    RemoveMessages,
    SegmentLog,
    SeqRangeIndex,
    Sync,
    VariableQueue,
    WriteIndex,
    WriteMessage,
)

LOGS: Final = ("index", "store")
"""The directories of a queue driven by ``CoreQueue``: its ``SeqRangeIndex`` and its message store."""
_HEAD: Final = struct.Struct("<QIBH")  # seq_id, size, flags, msg_id length
_PERSISTENT: Final = 1
_EMBEDDED: Final = 2


def encode_entry(entry: IndexEntry) -> bytes:
    """An index record: the entry's fields, then its msg_id and its body when embedded."""
    msg_id = entry.msg_id.encode()
    flags = (_PERSISTENT if entry.persistent else 0) | (_EMBEDDED if entry.body is not None else 0)
    return _HEAD.pack(entry.seq_id, entry.size, flags, len(msg_id)) + msg_id + (entry.body or b"")


def decode_entry(data: bytes, delivered: bool) -> IndexEntry:
    """The entry ``encode_entry`` wrote; ``delivered`` comes from the delivery marks."""
    seq_id, size, flags, id_length = _HEAD.unpack_from(data)
    start = _HEAD.size + id_length
    return IndexEntry(seq_id, data[_HEAD.size:start].decode(), size, bool(flags & _PERSISTENT), delivered,
                      data[start:] if flags & _EMBEDDED else None)


def distinct_body(number: int, size: int) -> bytes:
    """A body of ``size`` bytes of its own (a shared one would make a million queued bodies cost one)."""
    return number.to_bytes(8, "big")[:size].ljust(size, b"\0")


def _key(seq_id: int) -> bytes:
    return seq_id.to_bytes(8, "big")


def disk_bytes(directory: Path) -> int:
    """Bytes of every file under ``directory``."""
    return sum(path.stat().st_size for path in directory.rglob("*") if path.is_file())


class CoreQueue:
    """A ``VariableQueue`` whose effects a loop carries out at once on the segment logs in ``directory``."""

    def __init__(
        self, directory: Path, queue: VariableQueue | None = None, *, target_ram_count: int | None = None,
    ) -> None:
        for name in LOGS:
            (directory / name).mkdir(parents=True, exist_ok=True)
        self.index = SeqRangeIndex(directory / "index")
        self.store = SegmentLog(directory / "store")
        self.confirmed = 0
        self.fetched: list[Fetched] = []
        self.marks: set[int] = set()  # delivery marks not yet written: the next sync writes them
        if queue is None:
            span = self.index.span()
            if span is not None:
                queue = VariableQueue.recover(start=span[0], end=span[1], count=len(self.index),
                                              target_ram_count=target_ram_count)
            else:
                queue = VariableQueue(durable=True, target_ram_count=target_ram_count)
        self.queue = queue
        self.run_effects()

    def run_effects(self) -> None:
        """Carry out every effect the core asked for, and those its answers ask for, in order."""
        handlers: dict[type, Callable[[Effect], None]] = {
            WriteMessage: self._write_message, WriteIndex: self._write_index, MarkDelivered: self._mark,
            AckIndex: self._ack_index, RemoveMessages: self._remove, ReadIndex: self._read_index,
            ReadMessage: self._read_message, Sync: self._sync,
        }
        effects = self.queue.take_effects()
        while effects:
            for effect in effects:
                handlers[type(effect)](effect)
            effects = self.queue.take_effects()

    def fetch(self) -> Fetched | None:
        """The front message, its body read if it was on disk; None when the queue is empty."""
        while True:
            got = self.queue.fetch()
            if got is None:
                return None
            self.run_effects()
            if type(got) is Fetched:
                return got
            if type(got) is ReadPending:
                return self.fetched.pop()
            assert type(got) is LoadPending  # the index read ran with the effects: fetch again

    def _write_message(self, effect: Effect) -> None:
        assert type(effect) is WriteMessage
        self.store.put(_key(effect.seq_id), effect.body)

    def _write_index(self, effect: Effect) -> None:
        assert type(effect) is WriteIndex
        self.index.publish(effect.entry.seq_id, encode_entry(effect.entry))

    def _mark(self, effect: Effect) -> None:
        assert type(effect) is MarkDelivered
        self.marks.update(effect.seq_ids)

    def _ack_index(self, effect: Effect) -> None:
        assert type(effect) is AckIndex
        for seq_id in effect.seq_ids:
            self.index.ack(seq_id)
            self.marks.discard(seq_id)

    def _remove(self, effect: Effect) -> None:
        assert type(effect) is RemoveMessages
        for seq_id in effect.seq_ids:
            self.store.delete(_key(seq_id))

    def _read_index(self, effect: Effect) -> None:
        assert type(effect) is ReadIndex
        marks = self.marks
        entries = [decode_entry(record.entry, record.delivered or record.seq_id in marks)
                   for record in self.index.read_range(effect.start, effect.end)]
        self.queue.loaded_index(entries)

    def _read_message(self, effect: Effect) -> None:
        assert type(effect) is ReadMessage
        if effect.embedded:
            body = decode_entry(self.index.read(effect.seq_id), delivered=True).body
            assert body is not None
        else:
            body = self.store.get(_key(effect.seq_id))
        self.fetched.append(self.queue.loaded_message(effect.seq_id, body))

    def _sync(self, effect: Effect) -> None:
        assert type(effect) is Sync
        self._write_marks()
        self.index.sync()
        self.store.sync()
        self.confirmed += len(self.queue.synced(effect.token))

    def _write_marks(self) -> None:
        for seq_id in sorted(self.marks):
            self.index.deliver(seq_id)
        self.marks.clear()

    def collect_garbage(self) -> None:
        """Rewrite the index's sparse segments, compact the store's."""
        self.index.collect_garbage()
        self.store.collect_garbage()

    def close(self) -> None:
        """Sync and close the files (a clean stop: the store saves its table; the index has nothing to save)."""
        self._write_marks()
        self.index.close()
        self.store.close()


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def fill(directory: Path, messages: int, size: int, target_ram_count: int | None, batch: int) -> dict[str, float]:
    """Publish ``messages`` persistent bodies of ``size`` bytes under the target, a sync per ``batch``."""
    core = CoreQueue(directory, VariableQueue(durable=True, target_ram_count=target_ram_count))
    start = time.perf_counter()
    publish = core.queue.publish
    for number in range(messages):
        publish(str(number), distinct_body(number, size), persistent=True)
        if number % batch == batch - 1:
            core.run_effects()
    core.run_effects()
    seconds = time.perf_counter() - start
    status = core.queue.status()
    if core.confirmed != messages or status.len != messages:
        msg = f"core queue: {core.confirmed} confirmed and {status.len} queued of {messages} published"
        raise RuntimeError(msg)
    queued_peak = _peak_rss()  # before the clean close (the store saves its table, empty for 1 KiB bodies)
    core.close()
    return {"publish_per_s": messages / seconds, "peak_rss": float(_peak_rss()), "queued_peak_rss": float(queued_peak),
            "ram_msg_count": float(status.ram_msg_count), "ram_index_count": float(status.ram_index_count),
            "delta": float(status.delta)}


def recover(directory: Path, messages: int, size: int, target_ram_count: int | None, batch: int) -> dict[str, float]:
    """Reopen the queue ``fill`` left (clean, then as after a crash), drain it acking 90%, collect garbage."""
    figures: dict[str, float] = {"disk_per_live_byte": disk_bytes(directory) / (messages * size)}
    for name in ("clean", "crash"):
        if name == "crash":
            for log in LOGS:
                (directory / log / SNAPSHOT_NAME).unlink(missing_ok=True)
        start = time.perf_counter()
        core = CoreQueue(directory, target_ram_count=target_ram_count)
        first = core.fetch()
        figures[f"reopen_{name}_s"] = time.perf_counter() - start
        if first is None or core.queue.status().len + 1 != messages:
            msg = f"reopened core queue holds {core.queue.status().len + (first is not None)} of {messages}"
            raise RuntimeError(msg)
        if name == "clean":
            core.queue.requeue([first.seq_id])
            core.run_effects()
            core.close()
    acked = kept = 0
    pending: list[int] = []
    start = time.perf_counter()
    got: Fetched | None = first
    while got is not None:
        if int(got.msg_id) % 10:
            pending.append(got.seq_id)
        else:
            kept += 1
        if len(pending) >= batch:
            core.queue.ack(pending)
            acked += len(pending)
            pending = []
            core.run_effects()
        got = core.fetch()
    core.queue.ack(pending)
    acked += len(pending)
    core.run_effects()
    figures["drain_per_s"] = messages / (time.perf_counter() - start)
    if acked + kept != messages:
        msg = f"drained {acked + kept} of {messages}"
        raise RuntimeError(msg)
    live = kept * size
    figures["acked_disk_per_live_byte"] = disk_bytes(directory) / live
    start = time.perf_counter()
    core.collect_garbage()
    figures["gc_s"] = time.perf_counter() - start
    figures["gc_disk_per_live_byte"] = disk_bytes(directory) / live
    for log in LOGS:  # where the bytes are
        figures[f"gc_{log}_per_live_byte"] = disk_bytes(directory / log) / live
    core.close()
    figures["peak_rss"] = float(_peak_rss())
    return figures


def _cli() -> None:
    parser = argparse.ArgumentParser(description="one storage-core run of benchmarks/storage.py")
    parser.add_argument("what", choices=("fill", "recover"))
    parser.add_argument("--dir", required=True)
    parser.add_argument("--messages", type=int, required=True)
    parser.add_argument("--size", type=int, required=True)
    parser.add_argument("--target-ram-count", type=int, default=None)
    parser.add_argument("--batch", type=int, default=1000)
    arguments = parser.parse_args()
    run = fill if arguments.what == "fill" else recover
    figures = run(Path(arguments.dir), arguments.messages, arguments.size, arguments.target_ram_count,
                  arguments.batch)
    print(json.dumps(figures))


if __name__ == "__main__":
    _cli()
