"""Planted bugs in the ZooKeeper backend of transactions (issue 19), each a ``ZkTxBackend`` subclass for
``Variant(zk_tx_backend=...)``, run by ``tx-zk``:

* ``ZkLocksNotEphemeral``: ``lock-N`` is created persistent, so it outlives its session;
* ``ZkPutsBeforeTakesChecked``: a commit in two steps, its puts written before its takes are checked;
* ``ZkCountsPerSession``: a take is counted in the backend's memory, not in ``meta-N`` (K per session);
* ``ZkRollbackKeepsLocks``: a failed transaction's rollback answers but leaves its locks.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import attrs

from conveyor.actors.transactions import CommitTx, RollbackTx, TxRolledBack, ZkTxBackend
from conveyor.runtime.lowlevel import ZkCreate, ZkMulti, ZkSetData


def _rewritten(operation: Any, rewrite: Callable[[Any], Any]) -> Any:
    """``rewrite`` applied to ``operation``, or to each write of a multi (a fresh item's take is one)."""
    if isinstance(operation, ZkMulti):
        return attrs.evolve(operation, operations=tuple(rewrite(write) for write in operation.operations))
    return rewrite(operation)


def _persistent_lock(operation: Any) -> Any:
    if isinstance(operation, ZkCreate) and operation.ephemeral and "/locks/lock-" in operation.path:
        return attrs.evolve(operation, ephemeral=False)
    return operation


def _count_uncounted(operation: Any) -> Any:
    if isinstance(operation, ZkSetData | ZkCreate) and "/meta/meta-" in operation.path:
        takes, rollbacks, not_before = json.loads(operation.data)
        return attrs.evolve(operation, data=json.dumps([takes - 1, rollbacks, not_before]).encode())
    return operation


class ZkLocksNotEphemeral(ZkTxBackend):
    """Broken: every lock is created persistent; a session that expires holding locks leaves them for ever."""

    def _call(self, operation: Any, then: Any) -> None:
        super()._call(_rewritten(operation, _persistent_lock), then)


class ZkPutsBeforeTakesChecked(ZkTxBackend):
    """Broken: a commit writes its puts first (one multi), then checks and removes its takes (another)."""

    def _commit(self, request: CommitTx) -> None:
        creates = tuple(ZkCreate(self._path(put.queue, "items", "item-"), put.body, sequential=True)
                        for put in request.puts if put.queue in self.settings)
        if creates:
            self._call(ZkMulti(creates), lambda _: None)
        super()._commit(attrs.evolve(request, puts=()))


class ZkCountsPerSession(ZkTxBackend):
    """Broken: a take's count stays in the backend's memory; ``meta-N`` keeps the count from before the take, so a
    session that expires holding an item takes its count with it. A fresh item's first take (one multi creating
    ``meta-N``) is left counted: uncounted too, the run jams (found by ``tx_drained``, not ``tx_at_most_k``)."""

    def _call(self, operation: Any, then: Any) -> None:
        super()._call(_count_uncounted(operation), then)  # not inside a fresh take's multi: see its docstring


class ZkRollbackKeepsLocks(ZkTxBackend):
    """Broken: a failed transaction's rollback answers, forgets what it held, and leaves the locks in ZooKeeper."""

    def receive(self, message: Any) -> None:
        if type(message) is RollbackTx and message.failed:
            held = self.held.pop((message.session, message.tx), [])
            self.ctx.reply(TxRolledBack(message.tx, tuple(item.key for item in held)))
            return
        super().receive(message)
