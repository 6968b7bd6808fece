"""The runtime's second public face, as ``trio.lowlevel`` is trio's: for backends and actor libraries.

Actor code needs only ``conveyor.runtime``. A backend (the simulator, a disk or ZooKeeper
store to come) or a library of message types imports from here: the ``Backend`` protocol it
implements, the cells it moves messages into, the timer queue and the ``TimerFired`` it
delivers, the store hook, the ``JournalStore`` a disk store implements, and the immutability
declarations for message classes, and the ZooKeeper session protocol (``ZkCall`` / ``ZkReply``
and the rest) that a session actor of any backend answers. Each name is exported once: the journal, jobs' messages and
the trace types live in ``conveyor.runtime``.
(A module, not a package, so its re-exports are named by ``__all__`` alone.)
"""

from ._backend import Backend, StoreHook
from ._cell import ActorCell, CellBase, PromiseCell, fail_promise_if_asked
from ._immutability import checked_when_built, register_immutable_type, slot_setters, unchecked_builder
from ._journal import JournalStore, WriteKind
from ._messages import TimerFired
from ._timers import TimerQueue
from ._zookeeper import (
    ZK_ERROR_CODES,
    ZK_MAX_DATA_BYTES,
    ZkCall,
    ZkCheck,
    ZkClose,
    ZkCreate,
    ZkDelete,
    ZkErrorCode,
    ZkExists,
    ZkGetChildren,
    ZkGetData,
    ZkMulti,
    ZkMultiFailed,
    ZkNode,
    ZkOperation,
    ZkReply,
    ZkSessionEvent,
    ZkSessionState,
    ZkSetData,
    ZkWatchFired,
    ZkWatchKind,
    ZkWatchSession,
    ZkWrite,
    zk_operation_problem,
)

__all__ = [
    "ActorCell",
    "Backend",
    "CellBase",
    "JournalStore",
    "PromiseCell",
    "StoreHook",
    "TimerFired",
    "TimerQueue",
    "WriteKind",
    "ZK_ERROR_CODES",
    "ZK_MAX_DATA_BYTES",
    "ZkCall",
    "ZkCheck",
    "ZkClose",
    "ZkCreate",
    "ZkDelete",
    "ZkErrorCode",
    "ZkExists",
    "ZkGetChildren",
    "ZkGetData",
    "ZkMulti",
    "ZkMultiFailed",
    "ZkNode",
    "ZkOperation",
    "ZkReply",
    "ZkSessionEvent",
    "ZkSessionState",
    "ZkSetData",
    "ZkWatchFired",
    "ZkWatchKind",
    "ZkWatchSession",
    "ZkWrite",
    "checked_when_built",
    "fail_promise_if_asked",
    "register_immutable_type",
    "slot_setters",
    "unchecked_builder",
    "zk_operation_problem",
]
