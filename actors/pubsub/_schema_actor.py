"""``SchemaActor``: the schema service's state as an actor, and the values the glue asks it.

It owns a ``SchemaBook``, draws revision ids from ``ctx.random`` (seeded in the simulator) and
stamps revisions with the time the glue passes in (actors never read a clock). It never compiles
a definition: the glue checks one before it asks (a compile can take a subprocess and 100 ms).
On a disk store it journals every change it made, with the revision ids it drew, and replays them
when it starts, so schemas outlive a restart as the registry's topics do.
"""

from __future__ import annotations

import logging
from typing import Any, final

import attrs

from ._containment import ContainedActor
from ._model import Done, Failed, Page
from ._schema_book import Revision, SchemaBook, SchemaRefused, SchemaSettings, new_revision_id

logger = logging.getLogger("conveyor.pubsub")


@final
@attrs.frozen
class CreateSchema:
    """Create schema ``name`` with a first revision; answered with the ``Revision`` or ``Failed``."""

    name: str
    type: str
    definition: str
    now_ns: int


@final
@attrs.frozen
class CommitSchema:
    """Add a revision to ``name``; answered with the new ``Revision``."""

    name: str
    type: str
    definition: str
    now_ns: int


@final
@attrs.frozen
class RollbackSchema:
    """Add a revision copying ``revision_id``'s definition; answered with the new ``Revision``."""

    name: str
    revision_id: str
    now_ns: int


@final
@attrs.frozen
class GetSchema:
    """Revision ``revision_id`` of ``name`` (empty: the latest); answered with a ``Revision``."""

    name: str
    revision_id: str = ""


@final
@attrs.frozen
class ListSchemas:
    """The latest revision of each schema of ``project``, as a ``Page`` after ``after`` (a name)."""

    project: str
    page_size: int
    after: str


@final
@attrs.frozen
class ListSchemaRevisions:
    """The revisions of ``name``, newest first, as a ``Page`` after ``after`` (a revision id)."""

    name: str
    page_size: int
    after: str


@final
@attrs.frozen
class DeleteSchemaRevision:
    """Delete one revision; answered with the deleted ``Revision``."""

    name: str
    revision_id: str


@final
@attrs.frozen
class DeleteSchema:
    """Delete a schema and its revisions; answered with ``Done``."""

    name: str


@final
@attrs.frozen
class BindSchema:
    """Check a topic's ``schema_settings`` against the schema now; answered with the bound settings."""

    settings: SchemaSettings


@final
@attrs.frozen
class SchemaAlive:
    """Whether a topic's schema still exists; answered with ``SchemaLiveness``."""

    settings: SchemaSettings


@final
@attrs.frozen
class SchemaLiveness:
    """The answer to ``SchemaAlive``."""

    alive: bool


@final
@attrs.frozen
class AllowedRevisions:
    """The revisions a topic's publish may match, newest first; answered with ``Revisions``."""

    settings: SchemaSettings


@final
@attrs.frozen
class Revisions:
    """Revisions, newest first."""

    revisions: tuple[Revision, ...]


@final
@attrs.frozen
class NeedsSchema:
    """Registry -> glue: the topic validates its publishes against ``settings``; check and publish again."""

    settings: SchemaSettings


@final
@attrs.frozen
class ResetSchemas:
    """Forget every schema (``PubSubServer.reset``); answered with ``Done``."""


@final
@attrs.frozen
class RevisionAdded:
    """Journal event: ``revision`` was added (``created``: as the first of a new schema)."""

    revision: Revision
    created: bool


@final
@attrs.frozen
class RevisionDeleted:
    """Journal event: one revision was deleted."""

    name: str
    revision_id: str


@final
@attrs.frozen
class SchemaDeleted:
    """Journal event: a schema was deleted."""

    name: str


def _page(items: list[Any], key: Any, page_size: int, after: str) -> Page:
    """One page of ``items`` (in order) after the one whose ``key`` is ``after``; the token is the last key."""
    if after:
        keys = [key(item) for item in items]
        items = items[keys.index(after) + 1:] if after in keys else []
    size = page_size if page_size > 0 else len(items)
    chosen = items[:size]
    return Page(tuple(chosen), key(chosen[-1]) if len(items) > size and chosen else "")


@final
class SchemaActor(ContainedActor):
    """The schema service's state: schemas, revisions, topic bindings; journaled on a disk store."""

    def __init__(self) -> None:
        self.book = SchemaBook()
        self.journal: Any = None

    def on_start(self) -> None:
        """On a disk store, replay the changes journaled before (the same ids, the same incarnations)."""
        if not self.ctx.journal_on_disk:
            return
        journal = self.ctx.journal
        for event in list(journal):
            try:
                self._apply(event)
            except SchemaRefused as error:  # it failed the same way when first made
                logger.error("replaying %s from the schema journal failed: %s", type(event).__name__, error)
        self.journal = journal

    def _apply(self, event: object) -> None:
        """Apply one journaled change to the book (on replay)."""
        book = self.book
        match event:
            case RevisionAdded(revision=r, created=created):
                if created:
                    book.create(r.schema, r.type, r.definition, r.revision_id, r.created_ns)
                else:
                    book.add(r.schema, r.type, r.definition, r.revision_id, r.created_ns)
            case RevisionDeleted(name=name, revision_id=revision_id):
                book.delete_revision(name, revision_id)
            case SchemaDeleted(name=name):
                book.delete(name)
            case ResetSchemas():
                book.reset()

    def _record(self, event: object) -> None:
        """Journal a change the book took (a reset too, not a clear: replayed, it keeps incarnations counting)."""
        if self.journal is not None:
            self.journal.append(event)

    def _new_id(self, name: str) -> str:
        return new_revision_id(lambda rid: self.book.taken(name, rid), lambda: self.ctx.random.getrandbits(32))

    def handle(self, message: Any) -> None:
        """Answer one schema call with its result or ``Failed(code, message)``."""
        try:
            answer = self._answer(message)
        except SchemaRefused as error:
            answer = Failed(error.code, error.message)
        if answer is not None and self.ctx.sender is not None:
            self.ctx.reply(answer)

    def _answer(self, message: Any) -> Any:
        book = self.book
        match message:
            case CreateSchema(name=name, type=type_name, definition=definition, now_ns=now):
                revision = book.create(name, type_name, definition, self._new_id(name), now)
                self._record(RevisionAdded(revision, created=True))
                return revision
            case CommitSchema(name=name, type=type_name, definition=definition, now_ns=now):
                revision = book.commit(name, type_name, definition, self._new_id(name), now)
                self._record(RevisionAdded(revision, created=False))
                return revision
            case RollbackSchema(name=name, revision_id=target, now_ns=now):
                revision = book.rollback(name, target, self._new_id(name), now)
                self._record(RevisionAdded(revision, created=False))
                return revision
            case GetSchema(name=name, revision_id=revision_id):
                return book.get(name, revision_id)
            case ListSchemas(project=project, page_size=size, after=after):
                latest = [book.latest(name) for name in sorted(book.names(project))]
                return _page(latest, lambda r: r.schema, size, after)
            case ListSchemaRevisions(name=name, page_size=size, after=after):
                return _page(list(book.revisions(name)), lambda r: r.revision_id, size, after)
            case DeleteSchemaRevision(name=name, revision_id=revision_id):
                deleted = book.delete_revision(name, revision_id)
                self._record(RevisionDeleted(name, revision_id))
                return deleted
            case DeleteSchema(name=name):
                book.delete(name)
                self._record(SchemaDeleted(name))
                return Done()
            case BindSchema(settings=settings):
                return book.bind(settings)
            case SchemaAlive(settings=settings):
                return SchemaLiveness(book.alive(settings))
            case AllowedRevisions(settings=settings):
                return Revisions(book.allowed_revisions(settings))
            case ResetSchemas():
                book.reset()
                self._record(message)
                return Done()
        return None
