"""Planted bugs in the simulated ZooKeeper's model (issue 19, item 4), run by ``zk-basics``.

Each is a ``SimZooKeeper`` subclass given as ``Variant(zookeeper=...)``:

* ``LeavesOneEphemeral``: a session's end (expiry or close) deletes all its ephemeral nodes but the newest;
* ``ChildCountSequence``: a sequential node's number is its parent's child count, not its child version,
  so a name comes back once a sibling was deleted.
"""

from __future__ import annotations

from conveyor.simulation import SimZooKeeper


class LeavesOneEphemeral(SimZooKeeper):
    """Broken: the newest ephemeral node of an ended session stays (owned by a session that is gone)."""

    def ephemerals(self, session_id: int) -> list[str]:
        return super().ephemerals(session_id)[:-1]


class ChildCountSequence(SimZooKeeper):
    """Broken: sequential numbers count the children now there, so they repeat after a delete."""

    def sequence_number(self, parent_path: str) -> int:
        return self.child_count(parent_path)
