"""Transactions over a queue (seed 004): a unit of work that takes and puts atomically, consume
policies, a per-queue DLQ and a listener container, on the broker's actors or on ZooKeeper."""

from ._api import AsyncTransaction as AsyncTransaction
from ._api import AsyncTxQueue as AsyncTxQueue
from ._api import SessionActor as SessionActor
from ._api import Transaction as Transaction
from ._api import TxQueue as TxQueue
from ._container import ContainerStats as ContainerStats
from ._container import ContainerStopped as ContainerStopped
from ._container import GetContainerStats as GetContainerStats
from ._container import ListenerConsumer as ListenerConsumer
from ._container import ListenerContainerActor as ListenerContainerActor
from ._container import QueueListenerContainer as QueueListenerContainer
from ._container import StopContainer as StopContainer
from ._policy import ItemMeta as ItemMeta
from ._policy import Released as Released
from ._policy import refuse_take as refuse_take
from ._policy import release as release
from ._protocol import CancelTake as CancelTake
from ._protocol import CommitTx as CommitTx
from ._protocol import DeadLetters as DeadLetters
from ._protocol import DeclareTxQueue as DeclareTxQueue
from ._protocol import GetTxStats as GetTxStats
from ._protocol import NothingTaken as NothingTaken
from ._protocol import QueueItems as QueueItems
from ._protocol import ReadDeadLetters as ReadDeadLetters
from ._protocol import ReadItems as ReadItems
from ._protocol import RollbackTx as RollbackTx
from ._protocol import TakeItem as TakeItem
from ._protocol import Taken as Taken
from ._protocol import TxAborted as TxAborted
from ._protocol import TxCommitted as TxCommitted
from ._protocol import TxQueueDeclared as TxQueueDeclared
from ._protocol import TxRefused as TxRefused
from ._protocol import TxRolledBack as TxRolledBack
from ._store import Aborted as Aborted
from ._store import Committed as Committed
from ._store import StoredItem as StoredItem
from ._store import StoredQueue as StoredQueue
from ._store import TxQueueStats as TxQueueStats
from ._store import TxStore as TxStore
from ._store import TxStoreSnapshot as TxStoreSnapshot
from ._store import UnknownQueue as UnknownQueue
from ._store_actor import TxStoreActor as TxStoreActor
from ._unit import TransactionError as TransactionError
from ._unit import TxState as TxState
from ._unit import UnitOfWork as UnitOfWork
from ._values import AtLeastOnce as AtLeastOnce
from ._values import ConsumeOnce as ConsumeOnce
from ._values import ConsumePolicy as ConsumePolicy
from ._values import ConsumeTimes as ConsumeTimes
from ._values import DeadLetter as DeadLetter
from ._values import ItemKey as ItemKey
from ._values import RedeliveryBackoff as RedeliveryBackoff
from ._values import TxItem as TxItem
from ._values import TxPut as TxPut
from ._values import TxQueueSettings as TxQueueSettings
from ._zk_backend import ZkTxBackend as ZkTxBackend
from ._zk_settings import settings_from_bytes as settings_from_bytes
from ._zk_settings import settings_to_bytes as settings_to_bytes

__all__ = [
    "Aborted",
    "AsyncTransaction",
    "AsyncTxQueue",
    "AtLeastOnce",
    "CancelTake",
    "CommitTx",
    "Committed",
    "ConsumeOnce",
    "ConsumePolicy",
    "ConsumeTimes",
    "ContainerStats",
    "ContainerStopped",
    "DeadLetter",
    "DeadLetters",
    "DeclareTxQueue",
    "GetContainerStats",
    "GetTxStats",
    "ItemKey",
    "ItemMeta",
    "ListenerConsumer",
    "ListenerContainerActor",
    "NothingTaken",
    "QueueListenerContainer",
    "QueueItems",
    "ReadDeadLetters",
    "ReadItems",
    "RedeliveryBackoff",
    "Released",
    "RollbackTx",
    "SessionActor",
    "StopContainer",
    "StoredItem",
    "StoredQueue",
    "TakeItem",
    "Taken",
    "Transaction",
    "TransactionError",
    "TxAborted",
    "TxCommitted",
    "TxItem",
    "TxPut",
    "TxQueue",
    "TxQueueDeclared",
    "TxQueueSettings",
    "TxQueueStats",
    "TxRefused",
    "TxRolledBack",
    "TxState",
    "TxStore",
    "TxStoreActor",
    "TxStoreSnapshot",
    "UnitOfWork",
    "UnknownQueue",
    "ZkTxBackend",
    "refuse_take",
    "release",
    "settings_from_bytes",
    "settings_to_bytes",
]
