"""Pub/Sub schemas and their revisions as plain data (sans-IO): the rules of the schema service.

``SchemaBook`` holds every schema by name, each an ordered list of revisions (oldest first), and
answers what the service answers: a new revision for Create, Commit and Rollback, the one only
revision that cannot be deleted, and which revisions a topic's ``first_revision_id`` /
``last_revision_id`` allow. Each revision keeps its place in the order even once deleted, so a
topic whose first (last) revision is deleted validates against the next (previous) one, as Pub/Sub
documents. Nothing here compiles a definition (``_schema_codec`` does, in the gRPC glue) or reads a
clock or a random source: the actor passes the time and the drawn revision id in.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final, final

import attrs

SCHEMA_TYPES: Final = ("PROTOCOL_BUFFER", "AVRO")
"""The schema types the front validates (``Schema.Type`` names)."""
ENCODINGS: Final = ("ENCODING_UNSPECIFIED", "JSON", "BINARY")
"""A topic's ``schema_settings.encoding`` names; unspecified validates as JSON."""
DELETED_SCHEMA: Final = "_deleted-schema_"
"""What a topic's ``schema_settings.schema`` reads once its schema is deleted, as in Pub/Sub."""
SCHEMA_STAMPS: Final = frozenset({"googclient_schemaname", "googclient_schemaencoding", "googclient_schemarevisionid"})
"""The attributes Pub/Sub adds to a message validated against a schema; only the service sets them."""
REVISION_ID: Final = re.compile(r"^[0-9a-f]{8}$")
"""Revision ids are 8 lowercase hex digits (Pub/Sub's look like ``c7cfa2a8``)."""


class SchemaRefused(Exception):
    """A schema request the service refuses; ``code`` names the gRPC status."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@final
@attrs.frozen
class Revision:
    """One revision of a schema: its id, type, definition, creation time and place in the order."""

    schema: str
    revision_id: str
    type: str
    definition: str
    created_ns: int
    ordinal: int


@final
@attrs.frozen
class SchemaSettings:
    """A topic's ``schema_settings``; ``uid`` names the schema's incarnation (0: not bound yet).

    A schema deleted and created again under the same name is another incarnation: the topic stays
    on the deleted one (its publishes fail) until ``schema_settings`` is set again, as in Pub/Sub.
    """

    schema: str
    encoding: str = "ENCODING_UNSPECIFIED"
    first_revision_id: str = ""
    last_revision_id: str = ""
    uid: int = 0


@attrs.define
class _Schema:
    uid: int
    revisions: list[Revision]  # live ones, oldest first
    ordinals: dict[str, int]  # every revision id ever given, deleted ones too
    next_ordinal: int = 1


def allowed(ordinal: int, first: int | None, last: int | None) -> bool:
    """Whether a revision at ``ordinal`` lies in a topic's inclusive range (None: open on that side)."""
    return (first is None or ordinal >= first) and (last is None or ordinal <= last)


def new_revision_id(taken: Callable[[str], bool], draw: Callable[[], int]) -> str:
    """A revision id (8 hex digits from ``draw()``'s 32 bits) that ``taken`` says is free."""
    while True:
        revision_id = f"{draw() & 0xFFFFFFFF:08x}"
        if not taken(revision_id):
            return revision_id


class SchemaBook:
    """Every schema by name with its revisions; each method applies one call or raises ``SchemaRefused``."""

    def __init__(self) -> None:
        self.schemas: dict[str, _Schema] = {}
        self.next_uid = 1

    def __len__(self) -> int:
        return len(self.schemas)

    def _known(self, name: str) -> _Schema:
        schema = self.schemas.get(name)
        if schema is None:
            raise SchemaRefused("NOT_FOUND", f"Schema not found: {name}")
        return schema

    def taken(self, name: str, revision_id: str) -> bool:
        """Whether ``revision_id`` was ever given to schema ``name`` (deleted revisions keep their id)."""
        schema = self.schemas.get(name)
        return schema is not None and revision_id in schema.ordinals

    def create(self, name: str, type_name: str, definition: str, revision_id: str, now_ns: int) -> Revision:
        """A new schema with its first revision; ALREADY_EXISTS if the name is taken."""
        if name in self.schemas:
            raise SchemaRefused("ALREADY_EXISTS", f"Schema already exists: {name}")
        self.schemas[name] = _Schema(self.next_uid, [], {})
        self.next_uid += 1
        return self.add(name, type_name, definition, revision_id, now_ns)

    def commit(self, name: str, type_name: str, definition: str, revision_id: str, now_ns: int) -> Revision:
        """A new latest revision; the type cannot change (INVALID_ARGUMENT naming ``schema.type``)."""
        current = self.latest(name)
        if type_name != current.type:
            raise SchemaRefused("INVALID_ARGUMENT", f"schema.type: a revision of {name} must be {current.type}, "
                                                    f"got {type_name}")
        return self.add(name, type_name, definition, revision_id, now_ns)

    def rollback(self, name: str, target: str, revision_id: str, now_ns: int) -> Revision:
        """A new latest revision copying revision ``target``'s definition."""
        old = self.get(name, target)
        return self.add(name, old.type, old.definition, revision_id, now_ns)

    def add(self, name: str, type_name: str, definition: str, revision_id: str, now_ns: int) -> Revision:
        """Append a revision to ``name`` as given (no type check: Commit's check is ``commit``)."""
        schema = self._known(name)
        if revision_id in schema.ordinals:
            raise SchemaRefused("ALREADY_EXISTS", f"revision {revision_id} of {name} exists already")
        revision = Revision(name, revision_id, type_name, definition, now_ns, schema.next_ordinal)
        schema.next_ordinal += 1
        schema.ordinals[revision_id] = revision.ordinal
        schema.revisions.append(revision)
        return revision

    def get(self, name: str, revision_id: str = "") -> Revision:
        """Revision ``revision_id`` of ``name``, or its latest; NOT_FOUND naming what is missing."""
        schema = self._known(name)
        if not revision_id:
            return schema.revisions[-1]
        for revision in schema.revisions:
            if revision.revision_id == revision_id:
                return revision
        raise SchemaRefused("NOT_FOUND", f"Schema revision not found: {name}@{revision_id}")

    def latest(self, name: str) -> Revision:
        """The newest revision of ``name``."""
        return self.get(name)

    def revisions(self, name: str) -> tuple[Revision, ...]:
        """Every live revision of ``name``, newest first (as ListSchemaRevisions answers)."""
        return tuple(reversed(self._known(name).revisions))

    def delete_revision(self, name: str, revision_id: str) -> Revision:
        """Delete one revision; the only one left cannot go (FAILED_PRECONDITION: delete the schema)."""
        schema = self._known(name)
        revision = self.get(name, revision_id)
        if len(schema.revisions) == 1:
            raise SchemaRefused("FAILED_PRECONDITION", f"{name}@{revision_id} is the schema's only revision: "
                                                       "delete the schema instead")
        schema.revisions.remove(revision)
        return revision

    def delete(self, name: str) -> None:
        """Delete a schema and every revision; topics bound to it fail their publishes from then on."""
        self._known(name)
        del self.schemas[name]

    def reset(self) -> None:
        """Forget every schema (incarnation numbers keep counting up)."""
        self.schemas.clear()

    def bind(self, settings: SchemaSettings) -> SchemaSettings:
        """``settings`` checked against the schema now (it exists, its revision ids do, first <= last), bound.

        Raises:
            SchemaRefused: NOT_FOUND for a missing schema, INVALID_ARGUMENT naming the revision field.
        """
        schema = self._known(settings.schema)
        first = self._ordinal(schema, settings.first_revision_id, "schema_settings.first_revision_id")
        last = self._ordinal(schema, settings.last_revision_id, "schema_settings.last_revision_id")
        if first is not None and last is not None and first > last:
            raise SchemaRefused("INVALID_ARGUMENT", "schema_settings.first_revision_id: "
                                f"{settings.first_revision_id} was created after last_revision_id "
                                f"{settings.last_revision_id}")
        return attrs.evolve(settings, uid=schema.uid)

    @staticmethod
    def _ordinal(schema: _Schema, revision_id: str, field: str) -> int | None:
        if not revision_id:
            return None
        if revision_id not in schema.ordinals:  # a deleted one keeps its place: the next (previous) one serves
            raise SchemaRefused("INVALID_ARGUMENT", f"{field}: no revision {revision_id!r} of the schema")
        return schema.ordinals[revision_id]

    def alive(self, settings: SchemaSettings) -> bool:
        """Whether the schema incarnation a topic is bound to still exists."""
        schema = self.schemas.get(settings.schema)
        return schema is not None and schema.uid == settings.uid

    def allowed_revisions(self, settings: SchemaSettings) -> tuple[Revision, ...]:
        """The live revisions a topic's publishes may match, newest first.

        A deleted first (last) revision keeps its place, so the next (previous) one is used instead.

        Raises:
            SchemaRefused: NOT_FOUND once the topic's schema is deleted (Pub/Sub's answer to a publish).
        """
        if not self.alive(settings):
            raise SchemaRefused("NOT_FOUND", "Schema associated with topic deleted.")
        schema = self.schemas[settings.schema]
        first = schema.ordinals.get(settings.first_revision_id) if settings.first_revision_id else None
        last = schema.ordinals.get(settings.last_revision_id) if settings.last_revision_id else None
        return tuple(r for r in reversed(schema.revisions) if allowed(r.ordinal, first, last))

    def names(self, project: str) -> list[str]:
        """Names of the schemas of ``project`` (``projects/p``)."""
        prefix = project + "/schemas/"
        return [name for name in self.schemas if name.startswith(prefix)]
