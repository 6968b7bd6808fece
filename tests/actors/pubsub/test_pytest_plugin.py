"""The shipped pytest plugin, run in a pytester project that has no conftest and no ``pytest_plugins`` line.

So each test here also shows that the plugin is registered through its ``pytest11`` entry point.
"""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest

pytest_plugins = ["pytester"]


def test_the_plugin_is_registered_through_a_pytest11_entry_point() -> None:
    plugins = {entry.name: entry.value for entry in entry_points(group="pytest11")}
    assert plugins.get("conveyor-pubsub") == "conveyor.actors.pubsub.pytest_plugin"


@pytest.mark.parametrize("fixture", ["pubsub_server", "pubsub_emulator", "pubsub_shared_server"])
def test_every_server_fixture_points_the_emulator_host_at_its_server_and_restores_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, fixture: str
) -> None:
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", "before:1")
    pytester.makepyfile(f"""
        import os

        def test_during({fixture}):
            address = {fixture} if isinstance({fixture}, str) else {fixture}.address
            assert address.startswith("127.0.0.1:")
            assert os.environ["PUBSUB_EMULATOR_HOST"] == address

        def test_after():
            assert os.environ["PUBSUB_EMULATOR_HOST"] == "before:1"
    """)
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=2)


def test_every_server_fixture_unsets_the_emulator_host_it_set(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PUBSUB_EMULATOR_HOST", raising=False)
    pytester.makepyfile("""
        import os
        import pytest

        @pytest.mark.parametrize("fixture", ["pubsub_server", "pubsub_emulator", "pubsub_shared_server"])
        def test_during(fixture, request):
            request.getfixturevalue(fixture)
            assert "PUBSUB_EMULATOR_HOST" in os.environ

        def test_after():
            assert "PUBSUB_EMULATOR_HOST" not in os.environ
    """)
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=4)


def test_the_shared_server_is_one_server_for_the_session_and_clean_for_each_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import threading

        import pytest
        from google.api_core import exceptions
        from google.cloud import pubsub_v1

        TOPIC, SUBSCRIPTION = "projects/p/topics/orders", "projects/p/subscriptions/billing"
        servers, streams = [], []

        def use(server):
            servers.append(server)
            publisher = pubsub_v1.PublisherClient()
            subscriber = pubsub_v1.SubscriberClient()
            assert list(publisher.list_topics(project="projects/p")) == []
            assert list(subscriber.list_subscriptions(project="projects/p")) == []
            publisher.create_topic(name=TOPIC)  # no AlreadyExists: the last test's topic is gone
            subscriber.create_subscription(name=SUBSCRIPTION, topic=TOPIC)
            publisher.publish(TOPIC, b"left behind").result(10)
            got = threading.Event()
            streams.append(subscriber.subscribe(SUBSCRIPTION, lambda message: got.set()))  # never acked
            assert got.wait(10)
            publisher.stop()

        def test_first(pubsub_shared_server):
            use(pubsub_shared_server)  # leaves its stream open

        def test_second(pubsub_shared_server):
            with pytest.raises(exceptions.NotFound):  # the reset ended the stream the first test left open
                streams[0].result(timeout=10)
            use(pubsub_shared_server)
            streams[1].cancel()
            streams[1].result(timeout=10)

        def test_both_had_the_same_server():
            assert len(servers) == 2 and servers[0] is servers[1]
    """)
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=3)
