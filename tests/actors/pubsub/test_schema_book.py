"""Property tests of ``SchemaBook``: revision ids, the order of revisions, and a topic's revision range."""

from __future__ import annotations

import pickle
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conveyor.actors.pubsub import TopicConfig
from conveyor.actors.pubsub._schema_book import (
    REVISION_ID,
    SchemaBook,
    SchemaRefused,
    SchemaSettings,
    allowed,
    new_revision_id,
)

NAME = "projects/p/schemas/things"

# An operation: ("commit",), ("rollback", k) or ("delete", k), k picking a live revision by index.
operations = st.lists(st.one_of(st.tuples(st.just("commit")),
                                st.tuples(st.just("rollback"), st.integers(0, 50)),
                                st.tuples(st.just("delete"), st.integers(0, 50))), max_size=30)


def play(ops: list[tuple[object, ...]], seed: int) -> tuple[SchemaBook, list[str]]:
    """A book after ``ops`` on one schema; the ids given, in order (deleted ones too)."""
    draw = random.Random(seed)
    book = SchemaBook()
    given_ids: list[str] = []

    def fresh() -> str:
        revision_id = new_revision_id(lambda rid: book.taken(NAME, rid), lambda: draw.getrandbits(8))
        given_ids.append(revision_id)
        return revision_id

    book.create(NAME, "AVRO", "d0", fresh(), 0)
    for step, op in enumerate(ops, start=1):
        live = book.revisions(NAME)
        if op[0] == "commit":
            book.commit(NAME, "AVRO", f"d{step}", fresh(), step)
        elif op[0] == "rollback":
            book.rollback(NAME, live[int(op[1]) % len(live)].revision_id, fresh(), step)  # type: ignore[call-overload]
        elif len(live) > 1:
            book.delete_revision(NAME, live[int(op[1]) % len(live)].revision_id)  # type: ignore[call-overload]
    return book, given_ids


@settings(max_examples=200, deadline=None)
@given(operations, st.integers(0, 2**32))
def test_revision_ids_are_new_well_formed_and_listed_newest_first(ops: list[tuple[object, ...]], seed: int) -> None:
    book, given_ids = play(ops, seed)
    assert len(set(given_ids)) == len(given_ids)  # never reused, not even a deleted one's (8 bits: many collide)
    assert all(REVISION_ID.match(rid) for rid in given_ids)
    listed = book.revisions(NAME)
    assert [r.ordinal for r in listed] == sorted((r.ordinal for r in listed), reverse=True)
    assert [r.revision_id for r in reversed(listed)] == [rid for rid in given_ids if book.taken(NAME, rid)
                                                          and any(r.revision_id == rid for r in listed)]
    assert book.latest(NAME) == listed[0]


@settings(max_examples=200, deadline=None)
@given(operations, st.integers(0, 2**32), st.integers(0, 60), st.integers(0, 60), st.integers(0, 50))
def test_the_range_keeps_its_place_when_its_ends_are_deleted(ops: list[tuple[object, ...]], seed: int, low: int,
                                                             high: int, victim: int) -> None:
    book, given_ids = play(ops, seed)
    live = book.revisions(NAME)
    first = live[low % len(live)].revision_id if low < 50 else ""  # some topics leave an end open
    last = live[high % len(live)].revision_id if high < 50 else ""
    topic = SchemaSettings(NAME, "JSON", first, last)
    try:
        bound = book.bind(topic)
    except SchemaRefused as refused:
        assert "created after" in refused.message
        assert given_ids.index(first) > given_ids.index(last)
        return
    before = book.allowed_revisions(bound)
    lo = given_ids.index(first) if first else -1
    hi = given_ids.index(last) if last else len(given_ids)
    assert {r.revision_id for r in before} == {r.revision_id for r in live if lo <= given_ids.index(r.revision_id)
                                               <= hi}
    if len(live) > 1:  # delete any revision, the range's ends included: the others keep their verdict
        gone = live[victim % len(live)].revision_id
        book.delete_revision(NAME, gone)
        after = book.allowed_revisions(bound)
        assert [r.revision_id for r in after] == [r.revision_id for r in before if r.revision_id != gone]
        assert book.bind(topic).uid == bound.uid  # a deleted end still names its place


@given(st.integers(1, 20), st.integers(1, 20), st.integers(1, 20))
def test_allowed_is_the_inclusive_interval(ordinal: int, first: int, last: int) -> None:
    assert allowed(ordinal, first, last) == (first <= ordinal <= last)
    assert allowed(ordinal, None, last) == (ordinal <= last)
    assert allowed(ordinal, first, None) == (first <= ordinal)
    assert allowed(ordinal, None, None)


def test_a_schema_deleted_and_created_again_is_another_incarnation() -> None:
    book = SchemaBook()
    book.create(NAME, "AVRO", "d", "00000001", 0)
    bound = book.bind(SchemaSettings(NAME))
    assert book.allowed_revisions(bound)
    book.delete(NAME)
    book.create(NAME, "AVRO", "d", "00000001", 1)
    assert not book.alive(bound)
    with pytest.raises(SchemaRefused, match="Schema associated with topic deleted"):
        book.allowed_revisions(bound)
    assert book.alive(book.bind(SchemaSettings(NAME)))


def test_the_only_revision_cannot_be_deleted_and_types_do_not_change() -> None:
    book = SchemaBook()
    book.create(NAME, "AVRO", "d", "00000001", 0)
    with pytest.raises(SchemaRefused, match="only revision") as refused:
        book.delete_revision(NAME, "00000001")
    assert refused.value.code == "FAILED_PRECONDITION"
    with pytest.raises(SchemaRefused, match=r"schema\.type"):
        book.commit(NAME, "PROTOCOL_BUFFER", "p", "00000002", 1)
    with pytest.raises(SchemaRefused) as missing:
        book.get(NAME, "ffffffff")
    assert missing.value.code == "NOT_FOUND"


def test_a_topic_config_journaled_before_schemas_existed_loads_without_one() -> None:
    config = TopicConfig("projects/p/topics/kept", (("team", "a"),), 600.0, SchemaSettings(NAME, "BINARY", uid=4))
    assert pickle.loads(pickle.dumps(config)) == config
    older = TopicConfig.__new__(TopicConfig)
    older.__setstate__({"name": "projects/p/topics/old", "labels": (), "retention_s": None})  # an older journal's
    assert older == TopicConfig("projects/p/topics/old")
