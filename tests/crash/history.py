"""The crash test's history: what a client did and saw, one JSON line per event, append-only.

A process writes each event with one ``os.write`` on an ``O_APPEND`` file *before* the action it
describes (a send, an ack) or right after what it records (a confirm, a delivery): a write that
returned is in the kernel and survives a SIGKILL of the writer, so the file is always an exact
prefix of what happened. ``flush`` fsyncs too (a power cut is not what the harness tests, but the
file then survives one as well). Reading stops at a torn last line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import attrs


@attrs.frozen
class Sent:
    """A publish about to be sent: ``key`` names the message in the history, ``priority`` its level."""

    key: str
    priority: int = 0


@attrs.frozen
class Confirmed:
    """The broker confirmed the publish of ``key`` (synced to disk, it promises)."""

    key: str


@attrs.frozen
class PublishFailed:
    """The publish of ``key`` got an error or no answer: it may or may not be in the queue."""

    key: str


@attrs.frozen
class Received:
    """A delivery of ``key`` reached the consumer; ``delivery_count`` as the broker numbered it."""

    key: str
    priority: int = 0
    delivery_count: int = 1


@attrs.frozen
class AckSent:
    """An ack of ``key`` about to be sent; ``confirm`` when the client asked for its confirm."""

    key: str
    confirm: bool = False


@attrs.frozen
class AckConfirmed:
    """The broker confirmed the ack of ``key``: it promised the message never comes back."""

    key: str


@attrs.frozen
class Started:
    """A client process started: ``run`` counts the processes, ``mode`` says what it does."""

    run: int
    mode: str


@attrs.frozen
class QueueSeen:
    """What life ``run`` saw of a paged queue (``GetStats``): ready ``depth``, entries in delta chunks
    (out of RAM) and the bytes of bodies held in RAM. Not a promise: it shows the run really paged."""

    run: int
    depth: int
    entries_out_of_ram: int
    body_bytes_in_ram: int


Event = Sent | Confirmed | PublishFailed | Received | AckSent | AckConfirmed | Started | QueueSeen

_KINDS: dict[str, type[Event]] = {
    "sent": Sent,
    "confirmed": Confirmed,
    "publish_failed": PublishFailed,
    "received": Received,
    "ack_sent": AckSent,
    "ack_confirmed": AckConfirmed,
    "started": Started,
    "queue_seen": QueueSeen,
}
_NAMES: dict[type[Event], str] = {kind: name for name, kind in _KINDS.items()}


def encode(event: Event) -> bytes:
    """One event as its history line (JSON, newline-terminated)."""
    return (json.dumps({"op": _NAMES[type(event)], **attrs.asdict(event)}, separators=(",", ":")) + "\n").encode()


def decode(line: bytes) -> Event:
    """The event a history line holds; a line naming no known event is an error naming ``op``."""
    fields = json.loads(line)
    op = fields.pop("op", None)
    kind = _KINDS.get(op)
    if kind is None:
        msg = f"history line: op must be one of {sorted(_KINDS)}, got {op!r}"
        raise ValueError(msg)
    return kind(**fields)


class HistoryWriter:
    """Appends events to a history file; each ``record`` is one ``os.write``, so a SIGKILL keeps it."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def record(self, event: Event) -> None:
        """Append ``event`` now (call it before the action it describes)."""
        line = encode(event)
        written = os.write(self.fd, line)
        if written != len(line):  # a regular file takes a small write whole; say so if it ever did not
            msg = f"history: short write, {written} of {len(line)} bytes"
            raise OSError(msg)

    def flush(self) -> None:
        """fsync what was recorded so far."""
        os.fsync(self.fd)

    def close(self) -> None:
        os.fsync(self.fd)
        os.close(self.fd)


def read_history(path: str | os.PathLike[str]) -> Iterator[Event]:
    """The events of a history file in order; a last line without its newline (torn) is skipped."""
    data = Path(path).read_bytes()
    lines = data.split(b"\n")
    for line in lines[:-1]:  # the part after the last newline is empty, or a torn line
        if line:
            yield decode(line)
