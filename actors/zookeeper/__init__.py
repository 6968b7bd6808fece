"""ZooKeeper sessions as actors (seed 004): a kazoo client owned by an actor that answers the kernel's
ZooKeeper session protocol (``conveyor.runtime.lowlevel.ZkCall`` and the rest), so nothing that uses
ZooKeeper blocks a handler or shares the client. ``LocalZooKeeper`` / ``LocalZooKeeperEnsemble`` start
real servers on loopback for tests and benchmarks (the ``pytest_plugin`` fixtures use them)."""

import typing

from conveyor.runtime.extras import lazy_exports as _lazy_exports

from ._local import LocalZooKeeper as LocalZooKeeper
from ._local import LocalZooKeeperEnsemble as LocalZooKeeperEnsemble
from ._local import ZooKeeperNotInstalled as ZooKeeperNotInstalled
from ._local import zookeeper_missing as zookeeper_missing

if typing.TYPE_CHECKING:
    from ._kazoo import KazooSession as KazooSession
    from ._kazoo import kazoo_transaction as kazoo_transaction
    from ._kazoo_select import kazoo_client as kazoo_client
else:  # kazoo comes with the ``zookeeper`` extra; the local servers need only Java and ZooKeeper's jar
    __getattr__ = _lazy_exports(__name__, "zookeeper", {"._kazoo": ("KazooSession", "kazoo_transaction"),
                                                   "._kazoo_select": ("kazoo_client",)})

__all__ = [
    "KazooSession",
    "LocalZooKeeper",
    "LocalZooKeeperEnsemble",
    "ZooKeeperNotInstalled",
    "kazoo_client",
    "kazoo_transaction",
    "zookeeper_missing",
]
