"""Compile Avro and protocol buffer schema definitions, and check messages against them (glue, not actors).

* Avro: ``fastavro`` (maintained, C-accelerated): ``parse_schema`` compiles; binary messages are
  read with ``schemaless_reader`` and must be consumed to the last byte; JSON messages are read in
  Avro's JSON encoding (unions as ``{"type": value}``) by ``json_reader`` and then ``validate``d.
* Protocol buffers: the ``protoc`` bundled in ``grpcio-tools`` (Google's own compiler, so the
  service's grammar, imports of the well-known types included) turns the definition into a
  ``FileDescriptorSet``; protobuf's ``descriptor_pool`` and ``message_factory`` build the message
  class, which parses binary messages (then ``IsInitialized`` for proto2's required fields) and
  JSON ones (``json_format``, unknown fields refused). protoc runs as a subprocess, so its errors
  can be read and a crash cannot take the server with it.

Compiling is slow (protoc is a process: ~100 ms), so ``compile_schema`` is cached by (type,
definition): every revision is compiled once, and a rollback reuses its twin's compile. Checking
a message against a compiled schema is cheap (microseconds for small messages). Both run on the
gRPC worker threads, never in an actor's handler. The libraries come with the ``pubsub`` extra and
are imported here, on first use.
"""

from __future__ import annotations

import functools
import io
import json
import os
import subprocess
import sys
import tempfile
from typing import Any, Final, Protocol, final

_PROTOC_TIMEOUT_S: Final = 30.0
_CACHED_COMPILES: Final = 512
_DETAIL_CHARS: Final = 300


class SchemaInvalid(ValueError):
    """A definition that does not compile; the message says where."""


class Compiled(Protocol):
    """A compiled schema: ``problem(data, encoding)`` says why a message does not match, or None."""

    def problem(self, data: bytes, encoding: str) -> str | None:
        """Why ``data`` in ``encoding`` (``JSON`` or ``BINARY``) does not match, or None if it does."""


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _DETAIL_CHARS else text[:_DETAIL_CHARS] + "..."


@final
class _Avro:
    def __init__(self, definition: str) -> None:
        import fastavro

        try:
            self.parsed = fastavro.parse_schema(json.loads(definition))
        except Exception as error:  # noqa: BLE001 - fastavro raises many kinds for a bad schema
            msg = f"Could not parse schema definition: {type(error).__name__}: {_clip(str(error))}"
            raise SchemaInvalid(msg) from None

    def problem(self, data: bytes, encoding: str) -> str | None:
        import fastavro
        from fastavro.validation import validate

        try:
            if encoding == "BINARY":
                stream = io.BytesIO(data)
                fastavro.schemaless_reader(stream, self.parsed, None)
                if stream.tell() != len(data):
                    return f"{len(data) - stream.tell()} bytes follow the Avro record"
                return None
            raw = json.loads(data.decode("utf-8"))
        except Exception as error:  # noqa: BLE001 - a malformed message raises anything from the reader
            return f"{type(error).__name__}: {_clip(str(error))}"
        try:
            records = list(fastavro.json_reader(io.StringIO(json.dumps(raw)), self.parsed))  # one line, as it reads
            if len(records) == 1 and validate(records[0], self.parsed, raise_errors=False):
                return None
        except Exception:  # noqa: BLE001 - the reader's errors name no field: the check below does
            pass
        return f"the JSON does not match the Avro schema: {_field_problems(raw, self.parsed)}"


def _field_problems(raw: object, parsed: Any) -> str:
    """Which fields of a JSON record break the schema, as fastavro's validator names them (unions unwrapped)."""
    from fastavro.validation import ValidationError, validate

    try:
        validate(raw, parsed, raise_errors=True)
    except ValidationError as error:
        return _clip("; ".join(str(problem) for problem in error.errors))
    except Exception as error:  # noqa: BLE001 - the validator chokes on some shapes: say what it said
        return f"{type(error).__name__}: {_clip(str(error))}"
    return "a union's value must be wrapped as {\"type\": value} (Avro's JSON encoding)"


@final
class _Proto:
    def __init__(self, definition: str) -> None:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

        files = descriptor_pb2.FileDescriptorSet.FromString(_protoc(definition))
        main = files.file[-1]
        if len(main.message_type) != 1:
            msg = (f"Could not parse schema definition: a protocol buffer schema defines exactly one top-level "
                   f"message type (nested types may follow inside it), this one defines {len(main.message_type)}")
            raise SchemaInvalid(msg)
        pool = descriptor_pool.DescriptorPool()
        full = f"{main.package}.{main.message_type[0].name}" if main.package else main.message_type[0].name
        try:
            for file in files.file:
                pool.Add(file)
            self.message_class: Any = message_factory.GetMessageClass(pool.FindMessageTypeByName(full))
        except (TypeError, KeyError, ValueError) as error:  # protoc accepted it: not expected, but said clearly
            msg = f"Could not parse schema definition: {type(error).__name__}: {_clip(str(error))}"
            raise SchemaInvalid(msg) from None

    def problem(self, data: bytes, encoding: str) -> str | None:
        from google.protobuf import json_format
        from google.protobuf.message import DecodeError

        message = self.message_class()
        try:
            if encoding == "BINARY":
                message.ParseFromString(data)
                if not message.IsInitialized():
                    return f"required fields missing: {', '.join(message.FindInitializationErrors())}"
            else:
                json_format.Parse(data.decode("utf-8"), message)
        except (DecodeError, json_format.ParseError, UnicodeDecodeError, ValueError) as error:
            return f"{type(error).__name__}: {_clip(str(error))}"
        return None


def _protoc(definition: str) -> bytes:
    """The ``FileDescriptorSet`` protoc makes of ``definition`` (with the well-known types it imports)."""
    import grpc_tools

    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    with tempfile.TemporaryDirectory(prefix="conveyor-schema-") as directory:
        with open(os.path.join(directory, "schema.proto"), "w", encoding="utf-8") as file:
            file.write(definition)
        out = os.path.join(directory, "schema.pb")
        try:
            done = subprocess.run(
                [sys.executable, "-m", "grpc_tools.protoc", f"-I{directory}", f"-I{include}", "--include_imports",
                 f"--descriptor_set_out={out}", "schema.proto"],
                capture_output=True, text=True, cwd=directory, timeout=_PROTOC_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            msg = f"Could not parse schema definition: protoc took over {_PROTOC_TIMEOUT_S:.0f} s"
            raise SchemaInvalid(msg) from None
        if done.returncode != 0:
            detail = done.stderr.replace(directory + os.sep, "")
            raise SchemaInvalid(f"Could not parse schema definition: {_clip(detail) or 'protoc failed'}")
        with open(out, "rb") as file:
            return file.read()


@functools.lru_cache(maxsize=_CACHED_COMPILES)
def compile_schema(type_name: str, definition: str) -> Compiled:
    """The compiled schema of a ``type_name`` (``AVRO`` / ``PROTOCOL_BUFFER``) definition; cached.

    Raises:
        SchemaInvalid: the definition does not compile (the message quotes the compiler), or the type is unknown.
    """
    if type_name == "AVRO":
        return _Avro(definition)
    if type_name == "PROTOCOL_BUFFER":
        return _Proto(definition)
    msg = f"Invalid schema type: {type_name} (AVRO or PROTOCOL_BUFFER)"
    raise SchemaInvalid(msg)
