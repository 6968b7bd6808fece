"""Trace events: immutable records of what happened, in memory or as JSON Lines.

A trace is the evidence every checker reads. Events name actors by path, so a
trace outlives the system that wrote it and can be compared byte for byte.
"""

from __future__ import annotations

import base64
import enum
import hashlib
import importlib
import io
import json
import math
import operator
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, final

import attrs

if TYPE_CHECKING:
    from ._cell import CellBase


class EventKind(enum.Enum):
    """What a trace event records."""

    SENT = "sent"
    DELIVERED = "delivered"
    TIMER_FIRED = "timer_fired"
    FAILED = "failed"
    RESTARTED = "restarted"
    STOPPED = "stopped"
    JOB_DONE = "job_done"
    DEAD_LETTER = "dead_letter"
    NOTE = "note"
    """An actor's own account of a decision (``ctx.note``), for checkers."""
    FAULT = "fault"
    """A fault the simulator injected (crash, pause, delay, failing job, dropped message)."""
    TIMER_ARMED = "timer_armed"
    """A timer was armed (the simulator: ``TimerFired(timer_id, message)`` for the actor that owns it)."""
    TIMER_CANCELLED = "timer_cancelled"
    """A timer was cancelled (the simulator: its ``TimerHandle``; the receiver is the actor running, if any)."""


@final
@attrs.frozen
class RefPath:
    """An ``ActorRef`` as read back from a stored trace: only its path survives."""

    path: str


@final
@attrs.frozen
class RecordedMessage:
    """A message read back from a trace whose class could not be rebuilt."""

    type_name: str
    fields: tuple[tuple[str, Any], ...]


@final
@attrs.frozen
class TraceEvent:
    """One thing that happened, at ``time`` seconds on the system's clock.

    ``sender`` and ``receiver`` are actor paths; ``None`` means outside code, a
    timer or a job. ``error`` holds the exception's repr for FAILED / RESTARTED.
    """

    kind: EventKind
    time: float
    sender: str | None
    receiver: str | None
    message: Any = attrs.field(eq=False)
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict; ``message`` is encoded by ``encode_value``."""
        return {
            "kind": self.kind.value,
            "time": self.time,
            "sender": self.sender,
            "receiver": self.receiver,
            "message": encode_value(self.message),
            "error": self.error,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TraceEvent:
        """Rebuild an event written by ``to_json``."""
        return cls(
            kind=EventKind(data["kind"]),
            time=float(data["time"]),
            sender=data["sender"],
            receiver=data["receiver"],
            message=decode_value(data["message"]),
            error=data.get("error"),
        )


def _event_maker() -> Callable[[EventKind, float, str | None, str | None, object, str | None], TraceEvent]:
    """A ``TraceEvent`` constructor a third cheaper than the class's own, for ``Tracer.record``'s hot path.

    attrs' frozen ``__init__`` sets each slot through ``object.__setattr__``; this sets them
    through the slots' own descriptors, fetched once. The event is the same (equal, same hash
    of its trace): ``tests/runtime/test_units.py`` compares the two.
    """
    new = object.__new__
    slots = vars(TraceEvent)
    set_kind, set_time, set_sender, set_receiver, set_message, set_error = (
        slots[name].__set__ for name in ("kind", "time", "sender", "receiver", "message", "error")
    )

    def make(
        kind: EventKind, time: float, sender: str | None, receiver: str | None, message: object, error: str | None
    ) -> TraceEvent:
        event = new(TraceEvent)
        set_kind(event, kind)
        set_time(event, time)
        set_sender(event, sender)
        set_receiver(event, receiver)
        set_message(event, message)
        set_error(event, error)
        return event

    return make


make_trace_event = _event_maker()
"""``make_trace_event(kind, time, sender, receiver, message, error)``: a ``TraceEvent``, built faster."""


class Tracer:
    """Collects events in memory; systems call ``record`` only when tracing is on."""

    __slots__ = ("events",)

    def __init__(self) -> None:
        self.events: list[TraceEvent] = []

    def record(
        self,
        kind: EventKind,
        time: float,
        sender: CellBase | None,
        receiver: CellBase | None,
        message: object,
        *,
        error: str | None = None,
    ) -> None:
        """Append one event (list.append is atomic, so threads may share a tracer)."""
        self.events.append(
            make_trace_event(
                kind,
                time,
                None if sender is None else sender.path,
                None if receiver is None else receiver.path,
                message,
                error,
            )
        )


# --- encoding -------------------------------------------------------------------------------


def _qualified(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def encode_value(value: Any) -> Any:
    """Encode a message (or part of one) as JSON-ready data, deterministically."""
    from ._ref import ActorRef

    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, enum.Enum):
        return {"$enum": _qualified(type(value)), "name": value.name}
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else {"$float": repr(value)}
    if isinstance(value, bytes):
        return {"$bytes": base64.b64encode(value).decode("ascii")}
    if isinstance(value, ActorRef):
        return {"$ref": value.path}
    if isinstance(value, RefPath):
        return {"$ref": value.path}
    if isinstance(value, RecordedMessage):
        return {"$type": value.type_name, "fields": {k: encode_value(v) for k, v in value.fields}}
    if attrs.has(type(value)):
        fields = {a.name: encode_value(getattr(value, a.name)) for a in attrs.fields(type(value)) if a.init}
        return {"$type": _qualified(type(value)), "fields": fields}
    if isinstance(value, tuple):
        return {"$tuple": [encode_value(v) for v in value]}
    if isinstance(value, frozenset):
        items = [encode_value(v) for v in value]
        items.sort(key=lambda item: json.dumps(item, sort_keys=True))
        return {"$frozenset": items}
    if isinstance(value, BaseException):
        return {"$error": repr(value)}
    return {"$repr": repr(value)}


def _import_qualified(name: str) -> Any:
    module_name, _, qualname = name.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def decode_value(data: Any) -> Any:
    """Inverse of ``encode_value``; unknown classes come back as ``RecordedMessage``."""
    if not isinstance(data, dict):
        return data
    if "$tuple" in data:
        return tuple(decode_value(v) for v in data["$tuple"])
    if "$frozenset" in data:
        return frozenset(decode_value(v) for v in data["$frozenset"])
    if "$bytes" in data:
        return base64.b64decode(data["$bytes"])
    if "$ref" in data:
        return RefPath(data["$ref"])
    if "$float" in data:
        return float(data["$float"])
    if "$enum" in data:
        try:
            return _import_qualified(data["$enum"])[data["name"]]
        except (ImportError, AttributeError, KeyError):
            return RecordedMessage(data["$enum"], (("name", data["name"]),))
    if "$type" in data:
        fields = {k: decode_value(v) for k, v in data["fields"].items()}
        try:
            cls = _import_qualified(data["$type"])
            return cls(**fields)
        except Exception:  # noqa: BLE001 - any failure to rebuild keeps the raw record
            rebuilt = _with_ref_paths(data["$type"], fields)
            return rebuilt if rebuilt is not None else RecordedMessage(data["$type"], tuple(fields.items()))
    if "$error" in data:
        return RecordedMessage("$error", (("repr", data["$error"]),))
    if "$repr" in data:
        return RecordedMessage("$repr", (("repr", data["$repr"]),))
    msg = f"cannot decode trace value {data!r}"
    raise ValueError(msg)


def _with_ref_paths(name: str, fields: dict[str, Any]) -> Any:
    """A frozen attrs message whose ``ActorRef`` fields came back as ``RefPath``s, as recorded.

    Its validators want a live ref (``Subscribe.consumer``), which a stored trace cannot give;
    checkers need only the path. Built without them, so only when every field is an init field
    and a direct one is a ``RefPath``; else None (the caller keeps a ``RecordedMessage``).
    """
    if not any(type(value) is RefPath for value in fields.values()):
        return None
    try:
        cls = _import_qualified(name)
        names = [a.name for a in attrs.fields(cls)]
    except Exception:  # noqa: BLE001 - not an importable attrs class
        return None
    if sorted(names) != sorted(fields) or not all(a.init for a in attrs.fields(cls)):
        return None
    instance = object.__new__(cls)
    for field_name in names:
        object.__setattr__(instance, field_name, fields[field_name])
    return instance


def _line(event: TraceEvent) -> str:
    return json.dumps(event.to_json(), sort_keys=True, separators=(",", ":"))


def write_jsonl(events: Iterable[TraceEvent], destination: str | os.PathLike[str] | IO[str]) -> int:
    """Write events one JSON object per line; return how many were written."""
    if isinstance(destination, (str, os.PathLike)):
        with Path(destination).open("w", encoding="utf-8") as handle:
            return write_jsonl(events, handle)
    count = 0
    for event in events:
        destination.write(_line(event))
        destination.write("\n")
        count += 1
    return count


def iter_jsonl(source: str | os.PathLike[str] | IO[str]) -> Iterator[TraceEvent]:
    """Read events written by ``write_jsonl``, lazily."""
    if isinstance(source, (str, os.PathLike)):
        with Path(source).open(encoding="utf-8") as handle:
            yield from iter_jsonl(handle)
        return
    for number, line in enumerate(source, start=1):
        if not line.strip():
            continue
        try:
            yield TraceEvent.from_json(json.loads(line))
        except (ValueError, KeyError) as error:
            msg = f"trace line {number} is not a trace event: {error}"
            raise ValueError(msg) from error


def read_jsonl(source: str | os.PathLike[str] | IO[str]) -> list[TraceEvent]:
    """Read a whole JSON Lines trace into memory."""
    return list(iter_jsonl(source))


def trace_hash(events: Iterable[TraceEvent]) -> str:
    """SHA-256 of the canonical JSON Lines form: equal hashes mean identical traces.

    The lines are written by ``_CanonicalWriter``, which gives the very text ``write_jsonl``
    writes but encodes each message object once (a message is recorded when sent and again
    when delivered, and a broker ``Message`` rides in several notes) and learns each attrs
    class's field layout once: 3-4x faster, then 1.5-1.7x again.
    """
    digest = hashlib.sha256()
    line = _CanonicalWriter().line
    lines: list[str] = []
    for event in events:
        lines.append(line(event))
        if len(lines) == _LINES_PER_UPDATE:
            lines.append("")  # so the chunk ends with a newline, as every line does
            digest.update("\n".join(lines).encode("ascii"))
            lines.clear()
    if lines:
        lines.append("")
        digest.update("\n".join(lines).encode("ascii"))
    return digest.hexdigest()


_ESCAPE = json.encoder.encode_basestring_ascii  # what json.dumps uses for str with ensure_ascii
_LINES_PER_UPDATE = 512
"""Lines hashed per ``digest.update``: one call per line cost as much as writing a short line."""
_KIND_TEXT = {id(kind): _ESCAPE(kind.value) for kind in EventKind}
"""Each kind's JSON text, by the member's id: hashing an Enum member is a Python-level call."""


@final
class _AttrsLayout:
    """How an attrs class is written as ``{"$type":..., "fields":{...}}``: learnt once per class."""

    __slots__ = ("fields", "head", "keys")

    def __init__(self, cls: type) -> None:
        names = sorted(a.name for a in attrs.fields(cls) if a.init)
        self.head = f'{{"$type":{_ESCAPE(_qualified(cls))},"fields":{{'
        self.keys = tuple(f"{_ESCAPE(name)}:" for name in names)
        getter = operator.attrgetter(*names) if names else None
        # attrgetter of one name returns the value itself, of several a tuple: always a tuple here.
        self.fields: Callable[[Any], tuple[Any, ...]] = (
            (lambda _: ()) if getter is None else (lambda value: (getter(value),)) if len(names) == 1 else getter
        )


_LAYOUTS: dict[type, _AttrsLayout] = {}
"""Attrs classes met by any writer (only classes ``_composite`` writes as ``$type``)."""


class _CanonicalWriter:
    """Writes ``json.dumps(event.to_json(), sort_keys=True, separators=(",", ":"))`` directly.

    Encodings of composite values are remembered by ``id`` for the writer's life: the
    events being hashed keep every such value alive, so an id cannot be reused meanwhile.
    Actor paths, which every line repeats, are escaped once each.
    """

    __slots__ = ("_memo", "_paths")

    def __init__(self) -> None:
        self._memo: dict[int, str] = {}
        self._paths: dict[str, str] = {}

    def line(self, event: TraceEvent) -> str:
        """One event's canonical line (keys in sorted order: error, kind, message, receiver, sender, time)."""
        error = "null" if event.error is None else _ESCAPE(event.error)
        paths = self._paths
        receiver, sender = event.receiver, event.sender
        # An escaped path is never empty (it has its quotes), so ``or`` only escapes a new one.
        receiver_text = "null" if receiver is None else paths.get(receiver) or self._new_path(receiver)
        sender_text = "null" if sender is None else paths.get(sender) or self._new_path(sender)
        time = event.time
        if type(time) is float and math.isfinite(time):
            clock = float.__repr__(time)
        else:
            clock = self.value(time) if type(time) is int or math.isfinite(time) else json.dumps(time)
        return (
            f'{{"error":{error},"kind":{_KIND_TEXT[id(event.kind)]},"message":{self.value(event.message)},'
            f'"receiver":{receiver_text},"sender":{sender_text},"time":{clock}}}'
        )

    def _new_path(self, path: str) -> str:
        text = self._paths[path] = _ESCAPE(path)
        return text

    def value(self, value: Any) -> str:
        """The canonical JSON of ``encode_value(value)``."""
        cls = type(value)
        if cls is str:
            return _ESCAPE(value)
        if value is None:
            return "null"
        if cls is bool:
            return "true" if value else "false"
        if cls is int:
            return int.__repr__(value)
        if cls is float and math.isfinite(value):
            return float.__repr__(value)
        key = id(value)
        text = self._memo.get(key)
        if text is None:
            layout = _LAYOUTS.get(cls)
            if layout is not None:
                text = self._laid_out(layout, value)
            elif cls is tuple:
                encode = self.value
                text = '{"$tuple":[' + ",".join([encode(item) for item in value]) + "]}"
            else:
                text = self._composite(value)
            self._memo[key] = text
        return text

    def _composite(self, value: Any) -> str:
        from ._ref import ActorRef

        if isinstance(value, str):
            return _ESCAPE(value)
        if isinstance(value, enum.Enum):
            return f'{{"$enum":{_ESCAPE(_qualified(type(value)))},"name":{_ESCAPE(value.name)}}}'
        if isinstance(value, int):
            return int.__repr__(int(value))
        if isinstance(value, float):
            number = float(value)
            return float.__repr__(number) if math.isfinite(number) else f'{{"$float":{_ESCAPE(repr(number))}}}'
        if isinstance(value, bytes):
            return f'{{"$bytes":"{base64.b64encode(value).decode("ascii")}"}}'
        if isinstance(value, (ActorRef, RefPath)):
            return f'{{"$ref":{_ESCAPE(value.path)}}}'
        if isinstance(value, RecordedMessage):
            pairs = sorted(value.fields, key=lambda pair: pair[0])
            return self._typed(_ESCAPE(value.type_name), [(name, item) for name, item in pairs])
        if attrs.has(type(value)):
            # Every later value of this class takes the learnt layout straight from ``value``.
            layout = _LAYOUTS[type(value)] = _AttrsLayout(type(value))
            return self._laid_out(layout, value)
        if isinstance(value, tuple):
            return '{"$tuple":[' + ",".join([self.value(item) for item in value]) + "]}"
        # Rare (frozensets sort by another JSON form; errors and reprs): the reference path.
        return json.dumps(encode_value(value), sort_keys=True, separators=(",", ":"))

    def _laid_out(self, layout: _AttrsLayout, value: Any) -> str:
        encode = self.value
        body = ",".join([key + encode(item) for key, item in zip(layout.keys, layout.fields(value), strict=True)])
        return f"{layout.head}{body}}}}}"

    def _typed(self, type_name: str, fields: list[tuple[str, Any]]) -> str:
        body = ",".join(f"{_ESCAPE(name)}:{self.value(item)}" for name, item in fields)
        return f'{{"$type":{type_name},"fields":{{{body}}}}}'


def dumps_jsonl(events: Iterable[TraceEvent]) -> str:
    """The canonical JSON Lines text of ``events``."""
    buffer = io.StringIO()
    write_jsonl(events, buffer)
    return buffer.getvalue()
