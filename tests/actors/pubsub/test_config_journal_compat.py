"""A data directory written by an earlier build still opens: configs journaled before a field existed load
with that field's default (the registry replays its journal of admin calls at start)."""

from __future__ import annotations

import pickle

from conveyor.actors.pubsub import SubscriptionConfig, TopicConfig


def test_a_subscription_journaled_before_push_existed_loads_as_a_pull_subscription() -> None:
    config = SubscriptionConfig("projects/p/subscriptions/s", "projects/p/topics/t", ack_deadline_s=30)
    state = config.__getstate__()
    del state["push"], state["filter"]  # as an earlier build wrote it (and a factory default)
    old = SubscriptionConfig.__new__(SubscriptionConfig)
    old.__setstate__(state)
    assert old == config and old.push is None
    assert pickle.loads(pickle.dumps(old)) == config


def test_a_topic_journaled_before_schemas_existed_loads_without_one() -> None:
    config = TopicConfig("projects/p/topics/t")
    state = config.__getstate__()
    del state["schema"]
    old = TopicConfig.__new__(TopicConfig)
    old.__setstate__(state)
    assert old == config
