"""The subscriber client as actors (seed 003): flow control, leases, ordering keys, batched dispatch."""

from ._api import Subscription as Subscription
from ._api import subscribe as subscribe
from ._components import Dispatcher as Dispatcher
from ._components import FlowNote as FlowNote
from ._components import Heartbeater as Heartbeater
from ._components import Leaser as Leaser
from ._components import LoadController as LoadController
from ._components import OrderedKeyHandler as OrderedKeyHandler
from ._components import WorkerPool as WorkerPool
from ._manager import StreamingPullManager as StreamingPullManager
from ._message import SubscriberMessage as SubscriberMessage
from ._protocol import Cancel as Cancel
from ._settings import FlowControl as FlowControl

__all__ = [
    "Cancel",
    "Dispatcher",
    "FlowControl",
    "FlowNote",
    "Heartbeater",
    "Leaser",
    "LoadController",
    "OrderedKeyHandler",
    "StreamingPullManager",
    "SubscriberMessage",
    "Subscription",
    "WorkerPool",
    "subscribe",
]
