"""The segment record codec, with no I/O: frame, unframe and scan a byte buffer, find where it stops being valid.

A segment file is a run of records, each ``crc32 (u32 LE) | length (u32 LE) | payload``. The CRC
covers the length field and the payload (contiguous, so one ``crc32`` call checks a record), so a
zero-filled tail (a file the kernel extended but never wrote) fails the check instead of reading as
an empty record. The payload is one ``Entry``: a
``Put`` (key, value), a ``Delete`` (a tombstone naming the segment that held the put it cancels) or a
``Compacted`` (the first record of a segment written by garbage collection, naming its sources).
Every put and delete carries a sequence number: recovery resolves a key by the highest one on disk,
so a segment's file number never decides which record wins.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable
from typing import Final, Literal, final

import attrs

from conveyor.runtime import ConveyorError

HEADER: Final = struct.Struct("<II")
"""A record's header: the CRC32 of the length field and the payload, then the payload's length."""
_LENGTH: Final = struct.Struct("<I")
MAX_PAYLOAD: Final = 1 << 30
"""The largest payload a record may hold (1 GiB): a longer length field is corruption, not data."""
MAX_KEY: Final = 0xFFFF
"""The longest key, in bytes (its length is a u16)."""

_PUT: Final = 1
_DELETE: Final = 2
_COMPACTED: Final = 3
_PUT_HEAD: Final = struct.Struct("<BQH")  # kind, seq, key length; then key, value
_DELETE_HEAD: Final = struct.Struct("<BQIH")  # kind, seq, target segment, key length; then key
_COMPACTED_HEAD: Final = struct.Struct("<BI")  # kind, number of sources; then a u32 per source
_SOURCE: Final = struct.Struct("<I")


class CorruptRecord(ConveyorError, ValueError):
    """Bytes that should hold a record do not: wrong CRC, impossible length or unknown entry kind."""


@final
@attrs.frozen
class Put:
    """``key`` holds ``value`` from sequence number ``seq`` on."""

    seq: int
    key: bytes
    value: bytes


@final
@attrs.frozen
class Delete:
    """``key`` is gone from ``seq`` on; the put it cancels was in segment ``target``.

    The tombstone matters only while ``target`` exists: once that segment is deleted, no older put
    of the key is left to cancel, and garbage collection may drop the tombstone.
    """

    seq: int
    key: bytes
    target: int


@final
@attrs.frozen
class Compacted:
    """First record of a segment written by garbage collection: the segments it replaces.

    Recovery that finds this record in a whole segment finishes the collection by deleting any
    source still present (the copy was complete before the segment got its name).
    """

    sources: tuple[int, ...]


Entry = Put | Delete | Compacted


@final
@attrs.frozen
class Damage:
    """Where a buffer stops holding valid records, and why.

    ``kind`` is ``"torn"`` when the bad record is the last thing in the buffer (a write cut short by a
    crash: an incomplete record, or a complete one whose CRC fails and that nothing or
    only zeros follow it), and ``"corrupt"`` when other bytes follow it (damage in the middle: an
    append cut short cannot do that). ``discarded`` counts the bytes from ``offset`` to the end.
    """

    offset: int
    kind: Literal["torn", "corrupt"]
    reason: str
    discarded: int


@final
@attrs.frozen
class Scan:
    """What a buffer holds: the records' spans ``(offset, size)`` in order, where validity ends, and why."""

    spans: tuple[tuple[int, int], ...]
    end: int
    damage: Damage | None


def frame(payload: bytes) -> bytes:
    """One record: ``payload`` behind its length and CRC."""
    if not 0 < len(payload) <= MAX_PAYLOAD:
        msg = f"payload length {len(payload)} is outside 1..{MAX_PAYLOAD}"
        raise ValueError(msg)
    length = _LENGTH.pack(len(payload))
    return _LENGTH.pack(zlib.crc32(payload, zlib.crc32(length))) + length + payload


_FRAMED_PUT_HEAD: Final = struct.Struct("<IBQH")  # the length field, then a put's head


def put_record(seq: int, key: bytes, value: bytes) -> bytes:
    """``frame(encode_entry(Put(seq, key, value)))`` without building the entry: the publish path."""
    _check_key(key)
    length = _PUT_HEAD.size + len(key) + len(value)
    if length > MAX_PAYLOAD:
        msg = f"payload length {length} is outside 1..{MAX_PAYLOAD}"
        raise ValueError(msg)
    head = _FRAMED_PUT_HEAD.pack(length, _PUT, seq, len(key))
    return _LENGTH.pack(zlib.crc32(value, zlib.crc32(key, zlib.crc32(head)))) + head + key + value


def unframe(buffer: bytes | memoryview, offset: int = 0) -> memoryview:
    """The payload of the record at ``offset``, checked against its CRC.

    Raises:
        CorruptRecord: the record is incomplete, too long, or its CRC does not match.
    """
    view = memoryview(buffer)
    problem = _check(view, offset)
    if problem is not None:
        msg = f"record at offset {offset}: {problem[1]}"
        raise CorruptRecord(msg)
    length = _LENGTH.unpack_from(view, offset + 4)[0]
    return view[offset + HEADER.size : offset + HEADER.size + length]


def _check(view: memoryview, offset: int) -> tuple[bool, str] | None:
    """None if a valid record starts at ``offset``; else (runs past the end?, what is wrong)."""
    available = len(view) - offset
    if available < HEADER.size:
        return True, f"header cut short: {available} of {HEADER.size} bytes"
    crc, length = HEADER.unpack_from(view, offset)
    if length == 0 or length > MAX_PAYLOAD:
        return False, f"length field {length} is outside 1..{MAX_PAYLOAD}"
    if available - HEADER.size < length:
        return True, f"payload cut short: {available - HEADER.size} of {length} bytes"
    if zlib.crc32(view[offset + 4 : offset + HEADER.size + length]) != crc:
        return False, f"CRC mismatch over {length} payload bytes"
    return None


def scan(buffer: bytes | memoryview) -> Scan:
    """Every valid record from the start of ``buffer``, stopping at the first bad one.

    Why stop there rather than skip ahead: after a bad length field the next record boundary is
    unknowable, and searching for bytes that pass a CRC could take part of a payload (a stored body
    that happens to contain an encoded record) for a record, inventing or resurrecting data. A
    reported loss is better than an invented record.
    """
    view = memoryview(buffer)
    spans: list[tuple[int, int]] = []
    offset = 0
    size = len(view)
    unpack, crc32, header = HEADER.unpack_from, zlib.crc32, HEADER.size
    while offset < size:
        if size - offset >= header:  # the common case inline: recovery scans every record
            crc, length = unpack(view, offset)
            end = offset + header + length
            if 0 < length <= MAX_PAYLOAD and end <= size and crc32(view[offset + 4 : end]) == crc:
                spans.append((offset, end - offset))
                offset = end
                continue
        runs_past_end, reason = _check(view, offset) or (False, "unreachable")
        record_end = size if runs_past_end else offset + header + _LENGTH.unpack_from(view, offset + 4)[0]
        zero_tail = not bytes(view[offset:]).rstrip(b"\0")  # a file the kernel extended but never wrote
        torn = runs_past_end or record_end >= size or zero_tail
        kind: Literal["torn", "corrupt"] = "torn" if torn else "corrupt"
        return Scan(tuple(spans), offset, Damage(offset, kind, reason, size - offset))
    return Scan(tuple(spans), offset, None)


Head = tuple[int, int, int, bytes, int]
"""A put or delete as recovery needs it: (offset, size, seq, key, target segment or -1 for a put)."""


@final
@attrs.frozen
class Heads:
    """What recovery reads from a segment's records: the compaction record it starts with, if any, and
    every put's and delete's head; ``bad_offset`` and ``reason`` when a record passed its CRC but
    is no entry (the segment is then treated as corrupt from there)."""

    compacted: Compacted | None
    heads: list[Head]
    bad_offset: int | None
    reason: str


def read_heads(buffer: bytes | memoryview, spans: Iterable[tuple[int, int]]) -> Heads:
    """The heads of the entries at ``spans`` (already checked by ``scan``), without copying values."""
    view = memoryview(buffer)
    heads: list[Head] = []
    compacted = None
    put_head, delete_head = _PUT_HEAD.unpack_from, _DELETE_HEAD.unpack_from
    header = HEADER.size
    for offset, size in spans:
        start = offset + header
        kind = view[start]
        if kind == _PUT and size >= header + _PUT_HEAD.size:
            _, seq, key_length = put_head(view, start)
            key_start = start + _PUT_HEAD.size
            if key_start + key_length <= offset + size:
                heads.append((offset, size, seq, bytes(view[key_start : key_start + key_length]), -1))
                continue
        elif kind == _DELETE and size >= header + _DELETE_HEAD.size:
            _, seq, target, key_length = delete_head(view, start)
            key_start = start + _DELETE_HEAD.size
            if key_start + key_length == offset + size:
                heads.append((offset, size, seq, bytes(view[key_start : key_start + key_length]), target))
                continue
        try:
            entry = decode_entry(view[start : offset + size])
        except CorruptRecord as error:
            return Heads(compacted, heads, offset, str(error))
        if not isinstance(entry, Compacted) or heads or compacted is not None:
            return Heads(compacted, heads, offset, f"unexpected {type(entry).__name__} entry inside a segment")
        compacted = entry
    return Heads(compacted, heads, None, "")


def encode_entry(entry: Entry) -> bytes:
    """The payload bytes of ``entry``."""
    match entry:
        case Put(seq, key, value):
            _check_key(key)
            return _PUT_HEAD.pack(_PUT, seq, len(key)) + key + value
        case Delete(seq, key, target):
            _check_key(key)
            return _DELETE_HEAD.pack(_DELETE, seq, target, len(key)) + key
        case Compacted(sources):
            return _COMPACTED_HEAD.pack(_COMPACTED, len(sources)) + b"".join(_SOURCE.pack(s) for s in sources)
    msg = f"entry must be Put, Delete or Compacted, got {type(entry).__name__}"
    raise TypeError(msg)


def _check_key(key: bytes) -> None:
    if not isinstance(key, bytes) or len(key) > MAX_KEY:
        msg = f"key must be bytes of at most {MAX_KEY} bytes, got {type(key).__name__} of length {len(key)}"
        raise ValueError(msg)


def decode_entry(payload: bytes | memoryview) -> Entry:
    """The entry a record's payload holds.

    Raises:
        CorruptRecord: the payload is not a well-formed entry (it passed the CRC, so a bug wrote it).
    """
    view = memoryview(payload)
    try:
        kind = view[0]
        if kind == _PUT:
            _, seq, key_length = _PUT_HEAD.unpack_from(view)
            start = _PUT_HEAD.size
            if start + key_length > len(view):
                raise CorruptRecord(f"put's key length {key_length} runs past its {len(view)}-byte payload")
            return Put(seq, bytes(view[start : start + key_length]), bytes(view[start + key_length :]))
        if kind == _DELETE:
            _, seq, target, key_length = _DELETE_HEAD.unpack_from(view)
            key = bytes(view[_DELETE_HEAD.size :])
            if len(key) != key_length:
                raise CorruptRecord(f"delete's key length {key_length} does not match its {len(key)} bytes")
            return Delete(seq, key, target)
        if kind == _COMPACTED:
            _, count = _COMPACTED_HEAD.unpack_from(view)
            if _COMPACTED_HEAD.size + count * _SOURCE.size != len(view):
                raise CorruptRecord(f"compaction record names {count} sources in {len(view)} bytes")
            return Compacted(tuple(s for (s,) in _SOURCE.iter_unpack(view[_COMPACTED_HEAD.size :])))
    except (struct.error, IndexError) as error:
        msg = f"entry payload of {len(view)} bytes is cut short: {error}"
        raise CorruptRecord(msg) from error
    msg = f"unknown entry kind {kind}: expected {_PUT} (put), {_DELETE} (delete) or {_COMPACTED} (compacted)"
    raise CorruptRecord(msg)


def encode_records(entries: Iterable[Entry]) -> bytes:
    """The framed records of ``entries``, back to back: what a segment holding them contains."""
    return b"".join(frame(encode_entry(entry)) for entry in entries)
