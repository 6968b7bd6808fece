"""Schemas through Google's unmodified clients: the schema service, and topics that validate their publishes."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fastavro
import pytest
from google.api_core import exceptions
from google.cloud import pubsub_v1
from google.pubsub_v1.types import Encoding, Schema, SchemaView

from conveyor.actors.pubsub import PubSubServer

PROJECT = "projects/proj"
STATE: dict[str, Any] = {"type": "record", "name": "State", "fields": [{"name": "name", "type": "string"},
                                                         {"name": "post_abbr", "type": "string"}]}
CITY: dict[str, Any] = {"type": "record", "name": "City", "fields": [{"name": "name", "type": "string"},
                                                       {"name": "population", "type": "long"}]}
PROTO = 'syntax = "proto3";\nmessage Point {\n  string name = 1;\n  int64 count = 2;\n}\n'
PROTO_GOOD_BINARY = b"\x0a\x05hello\x10\x07"  # name = "hello", count = 7, encoded by hand
PROTO_BAD_BINARY = b"\x0a\x05he"  # the string runs past the end


def avro_binary(schema: dict[str, Any], record: dict[str, object]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


@pytest.fixture
def schemas(pubsub_shared_server: PubSubServer) -> Iterator[pubsub_v1.SchemaServiceClient]:
    """Google's schema client on the shared server (emptied of schemas, topics, subscriptions)."""
    yield pubsub_v1.SchemaServiceClient()


@pytest.fixture
def clients(pubsub_shared_server: PubSubServer) -> Iterator[tuple[pubsub_v1.PublisherClient,
                                                                  pubsub_v1.SubscriberClient]]:
    publisher = pubsub_v1.PublisherClient(batch_settings=pubsub_v1.types.BatchSettings(max_latency=0.01))
    subscriber = pubsub_v1.SubscriberClient()
    yield publisher, subscriber
    publisher.stop()
    subscriber.close()


def create(client: pubsub_v1.SchemaServiceClient, schema_id: str, kind: int, definition: str) -> Schema:
    created: Schema = client.create_schema(request={"parent": PROJECT, "schema_id": schema_id,
                                                    "schema": Schema(type_=kind, definition=definition)})
    return created


def topic_with(publisher: pubsub_v1.PublisherClient, subscriber: pubsub_v1.SubscriberClient, name: str,
               settings: dict[str, object]) -> tuple[str, str]:
    topic = f"{PROJECT}/topics/{name}"
    subscription = f"{PROJECT}/subscriptions/{name}-sub"
    publisher.create_topic(request={"name": topic, "schema_settings": settings})
    subscriber.create_subscription(request={"name": subscription, "topic": topic})
    return topic, subscription


def pulled_attributes(subscriber: pubsub_v1.SubscriberClient, subscription: str) -> list[dict[str, str]]:
    response = subscriber.pull(request={"subscription": subscription, "max_messages": 10}, timeout=10)
    return [dict(m.message.attributes) for m in response.received_messages]


# --- the schema service ------------------------------------------------------------------


def test_create_get_list_delete(schemas: pubsub_v1.SchemaServiceClient) -> None:
    created = create(schemas, "states", Schema.Type.AVRO, json.dumps(STATE))
    assert created.name == f"{PROJECT}/schemas/states"
    assert created.type_ == Schema.Type.AVRO
    assert len(created.revision_id) == 8
    full = schemas.get_schema(request={"name": created.name})
    assert full.definition == json.dumps(STATE)  # GetSchema's default view is FULL
    basic = schemas.get_schema(request={"name": created.name, "view": SchemaView.BASIC})
    assert basic.definition == "" and basic.type_ == Schema.Type.AVRO
    create(schemas, "points", Schema.Type.PROTOCOL_BUFFER, PROTO)
    listed = list(schemas.list_schemas(request={"parent": PROJECT}))
    assert [s.name for s in listed] == [f"{PROJECT}/schemas/points", f"{PROJECT}/schemas/states"]
    assert all(s.definition == "" for s in listed)  # ListSchemas' default view is BASIC
    full_list = list(schemas.list_schemas(request={"parent": PROJECT, "view": SchemaView.FULL, "page_size": 1}))
    assert [s.definition for s in full_list] == [PROTO, json.dumps(STATE)]  # two pages of one
    with pytest.raises(exceptions.AlreadyExists):
        create(schemas, "states", Schema.Type.AVRO, json.dumps(STATE))
    schemas.delete_schema(request={"name": created.name})
    with pytest.raises(exceptions.NotFound):
        schemas.get_schema(request={"name": created.name})
    with pytest.raises(exceptions.NotFound):
        schemas.delete_schema(request={"name": created.name})


@pytest.mark.parametrize(("kind", "definition", "says"), [
    (Schema.Type.AVRO, "{not json", "Could not parse schema definition"),
    (Schema.Type.AVRO, json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "nope"}]}),
     "Could not parse schema definition"),
    (Schema.Type.PROTOCOL_BUFFER, 'syntax = "proto3";\nmessage P {\n  strin name = 1;\n}\n', '"strin" is not defined'),
    (Schema.Type.PROTOCOL_BUFFER, 'syntax = "proto3";\nmessage A { string a = 1; }\nmessage B { string b = 1; }\n',
     "exactly one top-level message"),
    (Schema.Type.TYPE_UNSPECIFIED, json.dumps(STATE), "Invalid schema type"),
])
def test_bad_definitions_are_refused_naming_the_problem(schemas: pubsub_v1.SchemaServiceClient, kind: int,
                                                        definition: str, says: str) -> None:
    with pytest.raises(exceptions.InvalidArgument, match=says):
        create(schemas, "broken", kind, definition)
    with pytest.raises(exceptions.InvalidArgument, match=says):
        schemas.validate_schema(request={"parent": PROJECT, "schema": Schema(type_=kind, definition=definition)})
    with pytest.raises(exceptions.NotFound):
        schemas.get_schema(request={"name": f"{PROJECT}/schemas/broken"})


def test_schema_ids_are_checked(schemas: pubsub_v1.SchemaServiceClient) -> None:
    for bad in ("ab", "9lives", "goog-schema"):
        with pytest.raises(exceptions.InvalidArgument, match="schema_id"):
            create(schemas, bad, Schema.Type.AVRO, json.dumps(STATE))


def test_revisions_commit_list_get_rollback_delete(schemas: pubsub_v1.SchemaServiceClient) -> None:
    first = create(schemas, "places", Schema.Type.AVRO, json.dumps(STATE))
    second = schemas.commit_schema(request={"name": first.name,
                                            "schema": Schema(type_=Schema.Type.AVRO, definition=json.dumps(CITY))})
    assert second.revision_id != first.revision_id
    assert schemas.get_schema(request={"name": first.name}).revision_id == second.revision_id  # the latest
    old = schemas.get_schema(request={"name": f"{first.name}@{first.revision_id}"})
    assert old.definition == json.dumps(STATE)
    listed = list(schemas.list_schema_revisions(request={"name": first.name, "view": SchemaView.FULL}))
    assert [r.revision_id for r in listed] == [second.revision_id, first.revision_id]  # newest first
    rolled = schemas.rollback_schema(request={"name": first.name, "revision_id": first.revision_id})
    assert rolled.revision_id not in (first.revision_id, second.revision_id)
    assert rolled.definition == json.dumps(STATE)
    paged = list(schemas.list_schema_revisions(request={"name": first.name, "page_size": 2}))
    assert [r.revision_id for r in paged] == [rolled.revision_id, second.revision_id, first.revision_id]
    assert all(r.definition == "" for r in paged)  # BASIC by default
    deleted = schemas.delete_schema_revision(request={"name": f"{first.name}@{second.revision_id}"})
    assert deleted.revision_id == second.revision_id
    with pytest.raises(exceptions.NotFound):
        schemas.get_schema(request={"name": f"{first.name}@{second.revision_id}"})
    with pytest.raises(exceptions.NotFound):
        schemas.rollback_schema(request={"name": first.name, "revision_id": second.revision_id})
    schemas.delete_schema_revision(request={"name": f"{first.name}@{first.revision_id}"})
    with pytest.raises(exceptions.FailedPrecondition, match="only revision"):
        schemas.delete_schema_revision(request={"name": f"{first.name}@{rolled.revision_id}"})
    with pytest.raises(exceptions.InvalidArgument, match=r"schema\.type"):
        schemas.commit_schema(request={"name": first.name,
                                       "schema": Schema(type_=Schema.Type.PROTOCOL_BUFFER, definition=PROTO)})
    with pytest.raises(exceptions.InvalidArgument, match="Could not parse schema definition"):
        schemas.commit_schema(request={"name": first.name,
                                       "schema": Schema(type_=Schema.Type.AVRO, definition="{")})
    with pytest.raises(exceptions.NotFound):
        schemas.commit_schema(request={"name": f"{PROJECT}/schemas/nowhere",
                                       "schema": Schema(type_=Schema.Type.AVRO, definition=json.dumps(STATE))})


CASES = [
    (Schema.Type.AVRO, json.dumps(STATE), Encoding.JSON, b'{"name": "Alaska", "post_abbr": "AK"}',
     b'{"name": "Alaska", "post_abbr": 7}'),
    (Schema.Type.AVRO, json.dumps(STATE), Encoding.BINARY, avro_binary(STATE, {"name": "Alaska", "post_abbr": "AK"}),
     avro_binary(STATE, {"name": "Alaska", "post_abbr": "AK"}) + b"\x00"),
    (Schema.Type.PROTOCOL_BUFFER, PROTO, Encoding.JSON, b'{"name": "hello", "count": "7"}', b'{"nmae": "hello"}'),
    (Schema.Type.PROTOCOL_BUFFER, PROTO, Encoding.BINARY, PROTO_GOOD_BINARY, PROTO_BAD_BINARY),
]
IDS = ["avro-json", "avro-binary", "proto-json", "proto-binary"]


@pytest.mark.parametrize(("kind", "definition", "encoding", "good", "bad"), CASES, ids=IDS)
def test_validate_message(schemas: pubsub_v1.SchemaServiceClient, kind: int, definition: str,
                          encoding: int, good: bytes, bad: bytes) -> None:
    created = create(schemas, "checked", kind, definition)
    for where in ({"name": created.name}, {"name": f"{created.name}@{created.revision_id}"},
                  {"schema": Schema(type_=kind, definition=definition)}):
        schemas.validate_message(request={"parent": PROJECT, "message": good, "encoding": encoding, **where})
        with pytest.raises(exceptions.InvalidArgument, match="Could not parse message"):
            schemas.validate_message(request={"parent": PROJECT, "message": bad, "encoding": encoding, **where})
    with pytest.raises(exceptions.NotFound):
        schemas.validate_message(request={"parent": PROJECT, "name": f"{PROJECT}/schemas/missing", "message": good,
                                          "encoding": encoding})


# --- topics with schema_settings ---------------------------------------------------------


@pytest.mark.parametrize(("kind", "definition", "encoding", "good", "bad"), CASES, ids=IDS)
def test_publishes_are_validated_and_stamped(schemas: pubsub_v1.SchemaServiceClient, clients: tuple[
        pubsub_v1.PublisherClient, pubsub_v1.SubscriberClient], kind: int, definition: str,
        encoding: int, good: bytes, bad: bytes) -> None:
    publisher, subscriber = clients
    created = create(schemas, "checked", kind, definition)
    topic, subscription = topic_with(publisher, subscriber, "checked", {"schema": created.name, "encoding": encoding})
    shown = publisher.get_topic(request={"topic": topic}).schema_settings
    assert (shown.schema, shown.encoding) == (created.name, encoding)
    publisher.publish(topic, good, origin="test").result(timeout=10)
    with pytest.raises(exceptions.InvalidArgument, match="Could not parse message"):
        publisher.publish(topic, bad).result(timeout=10)
    assert pulled_attributes(subscriber, subscription) == [{
        "origin": "test",
        "googclient_schemaname": created.name,
        "googclient_schemaencoding": Encoding(encoding).name,
        "googclient_schemarevisionid": created.revision_id,
    }]


def test_a_publish_matches_any_revision_in_the_topics_range(schemas: pubsub_v1.SchemaServiceClient, clients: tuple[
        pubsub_v1.PublisherClient, pubsub_v1.SubscriberClient]) -> None:
    publisher, subscriber = clients
    state = b'{"name": "Alaska", "post_abbr": "AK"}'
    city = b'{"name": "Anchorage", "population": 291000}'
    first = create(schemas, "places", Schema.Type.AVRO, json.dumps(STATE))
    second = schemas.commit_schema(request={"name": first.name,
                                            "schema": Schema(type_=Schema.Type.AVRO, definition=json.dumps(CITY))})
    any_topic, any_sub = topic_with(publisher, subscriber, "any", {"schema": first.name, "encoding": Encoding.JSON})
    publisher.publish(any_topic, state).result(timeout=10)
    publisher.publish(any_topic, city).result(timeout=10)
    stamped = sorted(a["googclient_schemarevisionid"] for a in pulled_attributes(subscriber, any_sub))
    assert stamped == sorted([first.revision_id, second.revision_id])
    old_topic, _ = topic_with(publisher, subscriber, "old", {"schema": first.name, "encoding": Encoding.JSON,
                                                              "last_revision_id": first.revision_id})
    publisher.publish(old_topic, state).result(timeout=10)
    with pytest.raises(exceptions.InvalidArgument):
        publisher.publish(old_topic, city).result(timeout=10)
    new_topic, _ = topic_with(publisher, subscriber, "new", {"schema": first.name, "encoding": Encoding.JSON,
                                                              "first_revision_id": second.revision_id})
    publisher.publish(new_topic, city).result(timeout=10)
    with pytest.raises(exceptions.InvalidArgument):
        publisher.publish(new_topic, state).result(timeout=10)
    # The topic's first revision deleted: the next one serves, so the range still excludes the older one.
    third = schemas.commit_schema(request={"name": first.name,
                                           "schema": Schema(type_=Schema.Type.AVRO, definition=json.dumps(STATE))})
    schemas.delete_schema_revision(request={"name": f"{first.name}@{second.revision_id}"})
    publisher.publish(new_topic, state).result(timeout=10)  # matches the third
    with pytest.raises(exceptions.InvalidArgument):
        publisher.publish(old_topic, city).result(timeout=10)
    assert third.revision_id


def test_schema_settings_are_checked_at_create(schemas: pubsub_v1.SchemaServiceClient, clients: tuple[
        pubsub_v1.PublisherClient, pubsub_v1.SubscriberClient]) -> None:
    publisher, _ = clients
    first = create(schemas, "places", Schema.Type.AVRO, json.dumps(STATE))
    second = schemas.commit_schema(request={"name": first.name,
                                            "schema": Schema(type_=Schema.Type.AVRO, definition=json.dumps(CITY))})
    topic = f"{PROJECT}/topics/bad"
    with pytest.raises(exceptions.NotFound, match="Schema not found"):
        publisher.create_topic(request={"name": topic, "schema_settings": {"schema": f"{PROJECT}/schemas/nope"}})
    with pytest.raises(exceptions.InvalidArgument, match="first_revision_id"):
        publisher.create_topic(request={"name": topic, "schema_settings": {"schema": first.name,
                                                                            "first_revision_id": "0badf00d"}})
    with pytest.raises(exceptions.InvalidArgument, match="created after"):
        publisher.create_topic(request={"name": topic, "schema_settings": {
            "schema": first.name, "first_revision_id": second.revision_id, "last_revision_id": first.revision_id}})
    with pytest.raises(exceptions.InvalidArgument, match=r"schema_settings\.schema"):
        publisher.create_topic(request={"name": topic, "schema_settings": {"schema": "states"}})
    with pytest.raises(exceptions.NotFound):
        publisher.get_topic(request={"topic": topic})


def test_a_publisher_cannot_set_the_schema_attributes(clients: tuple[pubsub_v1.PublisherClient,
                                                                      pubsub_v1.SubscriberClient]) -> None:
    publisher, _ = clients
    topic = publisher.create_topic(request={"name": f"{PROJECT}/topics/plain"}).name
    with pytest.raises(exceptions.InvalidArgument, match="reserved"):
        publisher.publish(topic, b"x", googclient_schemaname="forged").result(timeout=10)


def test_deleting_the_schema_fails_the_topics_publishes(schemas: pubsub_v1.SchemaServiceClient, clients: tuple[
        pubsub_v1.PublisherClient, pubsub_v1.SubscriberClient]) -> None:
    publisher, subscriber = clients
    created = create(schemas, "states", Schema.Type.AVRO, json.dumps(STATE))
    topic, _ = topic_with(publisher, subscriber, "states", {"schema": created.name, "encoding": Encoding.JSON})
    good = b'{"name": "Alaska", "post_abbr": "AK"}'
    publisher.publish(topic, good).result(timeout=10)
    schemas.delete_schema(request={"name": created.name})
    assert publisher.get_topic(request={"topic": topic}).schema_settings.schema == "_deleted-schema_"
    listed = list(publisher.list_topics(request={"project": PROJECT}))
    assert listed[0].schema_settings.schema == "_deleted-schema_"
    with pytest.raises(exceptions.NotFound, match="Schema associated with topic deleted"):
        publisher.publish(topic, good).result(timeout=10)
    create(schemas, "states", Schema.Type.AVRO, json.dumps(STATE))  # the same name again: another schema
    with pytest.raises(exceptions.NotFound, match="Schema associated with topic deleted"):
        publisher.publish(topic, good).result(timeout=10)


def test_update_topic_sets_and_removes_schema_settings(schemas: pubsub_v1.SchemaServiceClient, clients: tuple[
        pubsub_v1.PublisherClient, pubsub_v1.SubscriberClient]) -> None:
    publisher, _ = clients
    created = create(schemas, "states", Schema.Type.AVRO, json.dumps(STATE))
    topic = publisher.create_topic(request={"name": f"{PROJECT}/topics/later"}).name
    publisher.publish(topic, b"anything").result(timeout=10)
    updated = publisher.update_topic(request={
        "topic": {"name": topic, "schema_settings": {"schema": created.name, "encoding": Encoding.JSON}},
        "update_mask": {"paths": ["schema_settings"]}})
    assert updated.schema_settings.schema == created.name
    with pytest.raises(exceptions.InvalidArgument, match="Could not parse message"):
        publisher.publish(topic, b"anything").result(timeout=10)
    publisher.update_topic(request={"topic": {"name": topic, "labels": {"team": "a"}},
                                    "update_mask": {"paths": ["labels"]}})  # other fields leave the schema be
    with pytest.raises(exceptions.InvalidArgument, match="Could not parse message"):
        publisher.publish(topic, b"anything").result(timeout=10)
    with pytest.raises(exceptions.InvalidArgument, match="first_revision_id"):
        publisher.update_topic(request={
            "topic": {"name": topic, "schema_settings": {"schema": created.name, "first_revision_id": "0badf00d"}},
            "update_mask": {"paths": ["schema_settings"]}})
    removed = publisher.update_topic(request={"topic": {"name": topic}, "update_mask": {"paths": ["schema_settings"]}})
    assert not removed.schema_settings.schema
    publisher.publish(topic, b"anything").result(timeout=10)


def test_reset_forgets_schemas(pubsub_shared_server: PubSubServer, schemas: pubsub_v1.SchemaServiceClient) -> None:
    created = create(schemas, "states", Schema.Type.AVRO, json.dumps(STATE))
    pubsub_shared_server.reset()
    with pytest.raises(exceptions.NotFound):
        schemas.get_schema(request={"name": created.name})


def test_schemas_survive_a_restart_on_a_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    good = b'{"name": "Alaska", "post_abbr": "AK"}'
    with PubSubServer(data_dir=tmp_path) as server:
        monkeypatch.setenv("PUBSUB_EMULATOR_HOST", server.address)
        client = pubsub_v1.SchemaServiceClient()
        first = create(client, "states", Schema.Type.AVRO, json.dumps(STATE))
        second = client.commit_schema(request={"name": first.name,
                                               "schema": Schema(type_=Schema.Type.AVRO, definition=json.dumps(CITY))})
        create(client, "gone", Schema.Type.AVRO, json.dumps(STATE))
        client.delete_schema(request={"name": f"{PROJECT}/schemas/gone"})
        publisher = pubsub_v1.PublisherClient()
        topic = publisher.create_topic(request={"name": f"{PROJECT}/topics/kept", "schema_settings": {
            "schema": first.name, "encoding": Encoding.JSON, "last_revision_id": first.revision_id}}).name
        publisher.stop()
    with PubSubServer(data_dir=tmp_path) as server:
        monkeypatch.setenv("PUBSUB_EMULATOR_HOST", server.address)
        client = pubsub_v1.SchemaServiceClient()
        revisions = list(client.list_schema_revisions(request={"name": first.name}))
        assert [r.revision_id for r in revisions] == [second.revision_id, first.revision_id]
        assert [s.name for s in client.list_schemas(request={"parent": PROJECT})] == [first.name]
        publisher = pubsub_v1.PublisherClient()
        assert publisher.get_topic(request={"topic": topic}).schema_settings.schema == first.name
        publisher.publish(topic, good).result(timeout=10)
        with pytest.raises(exceptions.InvalidArgument):
            publisher.publish(topic, b'{"name": "Anchorage", "population": 1}').result(timeout=10)
        publisher.stop()


def test_a_proto2_schema_in_a_package_checks_required_fields(schemas: pubsub_v1.SchemaServiceClient) -> None:
    definition = ('syntax = "proto2";\npackage utilities;\nmessage StateProto {\n  required string name = 1;\n'
                  '  optional string post_abbr = 2;\n}\n')
    created = create(schemas, "us-states", Schema.Type.PROTOCOL_BUFFER, definition)
    request = {"parent": PROJECT, "name": created.name, "encoding": Encoding.BINARY}
    schemas.validate_message(request={**request, "message": b"\x0a\x06Alaska\x12\x02AK"})
    with pytest.raises(exceptions.InvalidArgument, match="required fields missing: name"):
        schemas.validate_message(request={**request, "message": b"\x12\x02AK"})
    schemas.validate_message(request={**request, "encoding": Encoding.JSON, "message": b'{"name": "Alaska"}'})


def test_an_avro_json_message_refused_names_the_field(schemas: pubsub_v1.SchemaServiceClient) -> None:
    created = create(schemas, "states", Schema.Type.AVRO, json.dumps(STATE))
    request = {"parent": PROJECT, "name": created.name, "encoding": Encoding.JSON}
    with pytest.raises(exceptions.InvalidArgument, match=r"State\.post_abbr is <7>"):
        schemas.validate_message(request={**request, "message": b'{"name": "Alaska", "post_abbr": 7}'})
    with pytest.raises(exceptions.InvalidArgument, match="JSONDecodeError"):
        schemas.validate_message(request={**request, "message": b"not json"})
