"""``google.pubsub.v1.SchemaService`` on the ``SchemaActor``, and schema checks on a topic's publishes (glue).

Like ``_server``, this runs on grpcio's worker threads: it validates each request (naming the
field), compiles definitions (``_schema_codec``, cached), asks the ``SchemaActor`` and answers a
protobuf. A Publish to a topic with ``schema_settings`` goes: the registry answers
``NeedsSchema``; the glue asks the schema actor which revisions the topic allows, checks every
message against them here (newest first: the first that matches stamps the message with
``googclient_schemaname``, ``googclient_schemaencoding`` and ``googclient_schemarevisionid``, as
Pub/Sub does) and publishes again, marked checked. A schema changed between the two asks is seen
by the next publish.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final, final

import attrs
import grpc
from google.protobuf import empty_pb2
from google.pubsub_v1 import types

from . import _convert as convert
from ._limits import quote
from ._model import Publish, PubMessage, TopicConfig
from ._schema_actor import (
    AllowedRevisions,
    BindSchema,
    CommitSchema,
    CreateSchema,
    DeleteSchema,
    DeleteSchemaRevision,
    GetSchema,
    ListSchemaRevisions,
    ListSchemas,
    Revisions,
    RollbackSchema,
    SchemaAlive,
    SchemaLiveness,
)
from ._schema_book import DELETED_SCHEMA, SCHEMA_STAMPS, Revision, SchemaSettings
from ._schema_codec import Compiled, SchemaInvalid, compile_schema

SCHEMA_SERVICE: Final = "google.pubsub.v1.SchemaService"
SCHEMA_NAME: Final = "googclient_schemaname"
SCHEMA_ENCODING: Final = "googclient_schemaencoding"
SCHEMA_REVISION: Final = "googclient_schemarevisionid"
_SCHEMA: Final = re.compile(r"^projects/[^/]+/schemas/[A-Za-z][A-Za-z0-9\-_.~+%]{2,254}$")
_SCHEMA_ID: Final = re.compile(r"^[A-Za-z][A-Za-z0-9\-_.~+%]{2,254}$")
_TYPES: Final = {1: "PROTOCOL_BUFFER", 2: "AVRO"}
_TYPE_NUMBERS: Final = {name: number for number, name in _TYPES.items()}
_ENCODINGS: Final = {0: "ENCODING_UNSPECIFIED", 1: "JSON", 2: "BINARY"}
_BASIC: Final = 1
_FULL: Final = 2
SchemaPb: Any = types.Schema.pb()

Ask = Callable[[grpc.ServicerContext, object, Any], Any]


def schema_name(value: str, field: str = "name") -> str:
    """A checked ``projects/P/schemas/S``."""
    if _SCHEMA.match(value) is None or value.split("/")[3].startswith("goog"):
        raise convert.BadRequest(f"{field}: {quote(value, 64)} is not a schema name (projects/PROJECT/schemas/ID: "
                                 "3-255 characters, starting with a letter, not with 'goog')")
    return value


def revision_name(value: str, field: str = "name") -> tuple[str, str]:
    """``projects/P/schemas/S`` or ``...@REVISION``, split into (schema name, revision id or '')."""
    name, _, revision_id = value.partition("@")
    return schema_name(name, field), revision_id


def _type_name(schema: Any, field: str = "schema.type") -> str:
    type_name = _TYPES.get(schema.type_)
    if type_name is None:
        raise convert.BadRequest(f"{field}: Invalid schema type (AVRO or PROTOCOL_BUFFER), got {schema.type_}")
    return type_name


def _compiled(type_name: str, definition: str, field: str = "schema.definition") -> Compiled:
    if not definition:
        raise convert.BadRequest(f"{field}: the definition is required")
    try:
        return compile_schema(type_name, definition)
    except SchemaInvalid as error:
        raise convert.BadRequest(f"{field}: {error}") from None


def settings_from_pb(topic: Any) -> SchemaSettings | None:
    """A topic's ``schema_settings`` checked (unbound: ``uid`` 0), or None without any."""
    if not topic.HasField("schema_settings"):
        return None
    settings = topic.schema_settings
    if settings.schema == DELETED_SCHEMA:
        return SchemaSettings(DELETED_SCHEMA, _ENCODINGS.get(settings.encoding, "JSON"), settings.first_revision_id,
                              settings.last_revision_id, uid=-1)
    if not settings.schema:
        raise convert.BadRequest("schema_settings.schema: required (projects/PROJECT/schemas/ID)")
    schema_name(settings.schema, "schema_settings.schema")
    encoding = _ENCODINGS.get(settings.encoding)
    if encoding is None:
        raise convert.BadRequest(f"schema_settings.encoding: JSON or BINARY, got {settings.encoding}")
    return SchemaSettings(settings.schema, encoding, settings.first_revision_id, settings.last_revision_id)


def refuse_stamps(messages: tuple[PubMessage, ...]) -> None:
    """Refuse a publisher's message carrying an attribute only the service sets (``googclient_schema*``)."""
    for index, message in enumerate(messages):
        for key, _ in message.attributes:
            if key in SCHEMA_STAMPS:
                raise convert.BadRequest(f"messages[{index}].attributes[{quote(key)}]: keys starting with 'goog' "
                                         "are reserved")


def revision_pb(revision: Revision, view: int = _FULL) -> Any:
    """The ``Schema`` of one revision; the BASIC view leaves out the definition."""
    schema = SchemaPb(name=revision.schema, type_=_TYPE_NUMBERS[revision.type], revision_id=revision.revision_id)
    schema.revision_create_time.FromNanoseconds(revision.created_ns)
    if view == _FULL:
        schema.definition = revision.definition
    return schema


@final
class SchemaService:
    """The schema calls and the publish checks, asking ``ref`` (a ``SchemaActor``) through ``ask``.

    Args:
        ask: the server's ``_ask``: (context, request, actor) -> answer, aborting on ``Failed``.
        ref: the schema actor.
        clock: wall-clock nanoseconds, for revision creation times.
    """

    def __init__(self, ask: Ask, ref: Any, clock: Callable[[], int]) -> None:
        self.ask = ask
        self.ref = ref
        self.clock = clock

    def method_handlers(self, guard: Callable[[str, Callable[[Any, grpc.ServicerContext], Any]], Any]) -> Any:
        """The service's gRPC handler, each call wrapped by the server's ``guard``."""
        calls: dict[str, tuple[Callable[[Any, grpc.ServicerContext], Any], Any]] = {
            "CreateSchema": (self._create, types.CreateSchemaRequest),
            "GetSchema": (self._get, types.GetSchemaRequest),
            "ListSchemas": (self._list, types.ListSchemasRequest),
            "ListSchemaRevisions": (self._list_revisions, types.ListSchemaRevisionsRequest),
            "CommitSchema": (self._commit, types.CommitSchemaRequest),
            "RollbackSchema": (self._rollback, types.RollbackSchemaRequest),
            "DeleteSchemaRevision": (self._delete_revision, types.DeleteSchemaRevisionRequest),
            "DeleteSchema": (self._delete, types.DeleteSchemaRequest),
            "ValidateSchema": (self._validate_schema, types.ValidateSchemaRequest),
            "ValidateMessage": (self._validate_message, types.ValidateMessageRequest),
        }
        handlers = {
            name: grpc.unary_unary_rpc_method_handler(
                guard(name, fn), request_deserializer=request.pb().FromString,
                response_serializer=lambda message: message.SerializeToString())
            for name, (fn, request) in calls.items()
        }
        return grpc.method_handlers_generic_handler(SCHEMA_SERVICE, handlers)

    # --- the schema service -------------------------------------------------------------

    def _create(self, request: Any, context: grpc.ServicerContext) -> Any:
        convert.project_name(request.parent, "parent")
        if _SCHEMA_ID.match(request.schema_id) is None or request.schema_id.startswith("goog"):
            raise convert.BadRequest(f"schema_id: {quote(request.schema_id, 64)} is not a schema id (3-255 "
                                     "characters, starting with a letter, not with 'goog')")
        type_name = _type_name(request.schema)
        _compiled(type_name, request.schema.definition)
        name = f"{request.parent}/schemas/{request.schema_id}"
        revision = self.ask(context, CreateSchema(name, type_name, request.schema.definition, self.clock()),
                            self.ref)
        return revision_pb(revision)

    def _get(self, request: Any, context: grpc.ServicerContext) -> Any:
        name, revision_id = revision_name(request.name)
        return revision_pb(self.ask(context, GetSchema(name, revision_id), self.ref), request.view or _FULL)

    def _list(self, request: Any, context: grpc.ServicerContext) -> Any:
        convert.project_name(request.parent, "parent")
        page = self.ask(context, ListSchemas(request.parent, request.page_size, request.page_token), self.ref)
        response = types.ListSchemasResponse.pb()(next_page_token=page.next_after)
        response.schemas.extend(revision_pb(r, request.view or _BASIC) for r in page.items)
        return response

    def _list_revisions(self, request: Any, context: grpc.ServicerContext) -> Any:
        name = schema_name(request.name)
        page = self.ask(context, ListSchemaRevisions(name, request.page_size, request.page_token), self.ref)
        response = types.ListSchemaRevisionsResponse.pb()(next_page_token=page.next_after)
        response.schemas.extend(revision_pb(r, request.view or _BASIC) for r in page.items)
        return response

    def _commit(self, request: Any, context: grpc.ServicerContext) -> Any:
        name = schema_name(request.name)
        type_name = _type_name(request.schema)
        _compiled(type_name, request.schema.definition)
        return revision_pb(self.ask(context, CommitSchema(name, type_name, request.schema.definition, self.clock()),
                                    self.ref))

    def _rollback(self, request: Any, context: grpc.ServicerContext) -> Any:
        name = schema_name(request.name)
        if not request.revision_id:
            raise convert.BadRequest("revision_id: required (the revision to roll back to)")
        return revision_pb(self.ask(context, RollbackSchema(name, request.revision_id, self.clock()), self.ref))

    def _delete_revision(self, request: Any, context: grpc.ServicerContext) -> Any:
        name, revision_id = revision_name(request.name)
        revision_id = revision_id or request.revision_id
        if not revision_id:
            raise convert.BadRequest("name: name the revision as projects/PROJECT/schemas/ID@REVISION")
        return revision_pb(self.ask(context, DeleteSchemaRevision(name, revision_id), self.ref))

    def _delete(self, request: Any, context: grpc.ServicerContext) -> Any:
        self.ask(context, DeleteSchema(schema_name(request.name)), self.ref)
        return empty_pb2.Empty()

    def _validate_schema(self, request: Any, context: grpc.ServicerContext) -> Any:
        convert.project_name(request.parent, "parent")
        _compiled(_type_name(request.schema), request.schema.definition)
        return types.ValidateSchemaResponse.pb()()

    def _validate_message(self, request: Any, context: grpc.ServicerContext) -> Any:
        convert.project_name(request.parent, "parent")
        if request.name:
            name, revision_id = revision_name(request.name)
            revision = self.ask(context, GetSchema(name, revision_id), self.ref)
            compiled = _compiled(revision.type, revision.definition)
        elif request.HasField("schema"):
            compiled = _compiled(_type_name(request.schema), request.schema.definition)
        else:
            raise convert.BadRequest("name: name a schema, or give one inline in schema")
        encoding = _ENCODINGS.get(request.encoding, "JSON")
        problem = compiled.problem(request.message, "BINARY" if encoding == "BINARY" else "JSON")
        if problem is not None:
            raise convert.BadRequest(f"message: Could not parse message ({encoding}): {problem}")
        return types.ValidateMessageResponse.pb()()

    # --- topics with schema_settings ------------------------------------------------------

    def bind(self, context: grpc.ServicerContext, config: TopicConfig) -> TopicConfig:
        """``config`` with its ``schema_settings`` checked against the schema and bound to its incarnation."""
        settings = config.schema
        if settings is None or settings.uid != 0:
            return config
        return attrs.evolve(config, schema=self.ask(context, BindSchema(settings), self.ref))

    def topic_pb(self, context: grpc.ServicerContext, config: TopicConfig) -> Any:
        """The ``Topic`` for ``config``, its schema shown as ``_deleted-schema_`` once deleted."""
        topic = convert.topic_pb(config)
        settings = config.schema
        if settings is None:
            return topic
        alive: SchemaLiveness = self.ask(context, SchemaAlive(settings), self.ref)
        topic.schema_settings.schema = settings.schema if alive.alive else DELETED_SCHEMA
        topic.schema_settings.encoding = {v: k for k, v in _ENCODINGS.items()}[settings.encoding]
        topic.schema_settings.first_revision_id = settings.first_revision_id
        topic.schema_settings.last_revision_id = settings.last_revision_id
        return topic

    def publish(self, context: grpc.ServicerContext, topic: str, messages: tuple[PubMessage, ...],
                settings: SchemaSettings) -> Any:
        """Check ``messages`` against the revisions the topic allows, stamp them, and publish them checked."""
        allowed: Revisions = self.ask(context, AllowedRevisions(settings), self.ref)
        stamped = tuple(self._stamp(index, message, settings, allowed.revisions)
                        for index, message in enumerate(messages))
        return self.ask(context, Publish(topic, stamped, schema_checked=True), None)

    @staticmethod
    def _stamp(index: int, message: PubMessage, settings: SchemaSettings,
               revisions: tuple[Revision, ...]) -> PubMessage:
        encoding = "BINARY" if settings.encoding == "BINARY" else "JSON"
        problems = []
        for revision in revisions:  # newest first: the newest that matches names the message's revision
            problem = _compiled(revision.type, revision.definition).problem(message.data, encoding)
            if problem is None:
                stamps = ((SCHEMA_NAME, settings.schema), (SCHEMA_ENCODING, encoding),
                          (SCHEMA_REVISION, revision.revision_id))
                return attrs.evolve(message, attributes=tuple(sorted((*message.attributes, *stamps))))
            problems.append(f"{revision.revision_id}: {problem}")
        tried = "; ".join(problems) if problems else "no revision of the schema is in the topic's range"
        raise convert.BadRequest(f"messages[{index}]: Could not parse message as {encoding} against "
                                 f"{settings.schema} ({tried})"[:1000])
