"""KazooSession on a three-node ZooKeeper ensemble with one member killed (``make test-slow``)."""

from __future__ import annotations

import uuid

import pytest

from conveyor.actors.zookeeper import LocalZooKeeperEnsemble
from conveyor.runtime.lowlevel import ZkCreate, ZkExists, ZkGetData, ZkNode, ZkSetData, ZkWatchSession
from tests.actors.zookeeper.test_kazoo_session import Session, harness  # noqa: F401  (the fixture, by name)
from tests.conftest import Harness

pytestmark = pytest.mark.slow


async def test_the_session_lives_through_the_loss_of_the_leader(harness: Harness,  # noqa: F811
                                                                 zookeeper_ensemble: LocalZooKeeperEnsemble) -> None:
    root = f"/ensemble-{uuid.uuid4().hex[:12]}"
    zk = Session(harness, zookeeper_ensemble.address, timeout=6.0)
    zk.ref.tell(ZkWatchSession(zk.inbox))
    await zk.ok(ZkCreate(f"{root}/lock", b"held", ephemeral=True, make_parents=True))
    session_id = (await zk.wait_for_state("connected")).session_id

    leader = zookeeper_ensemble.leader()
    assert leader is not None
    zookeeper_ensemble.kill(leader)
    for _ in range(20):  # the two others elect a new leader; a write caught in the switch is connection_loss
        reply = await zk.call(ZkSetData(f"{root}/lock", b"still held"))
        if reply.error != "connection_loss":
            break
    assert reply.error is None, reply
    node = await zk.ok(ZkGetData(f"{root}/lock"))
    assert isinstance(node, ZkNode) and (node.data, node.ephemeral_owner) == (b"still held", session_id)
    assert "expired" not in zk.states()

    zookeeper_ensemble.start_member(leader)
    other = Session(harness, f"127.0.0.1:{zookeeper_ensemble.ports[leader]}")  # the one that came back
    assert await other.ok(ZkExists(f"{root}/lock")) == ZkNode(b"", node.version, session_id)
