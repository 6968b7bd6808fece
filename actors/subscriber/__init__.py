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
from ._flow import FlowStats as FlowStats
from ._manager import CALLBACKS_PER_JOB as CALLBACKS_PER_JOB
from ._manager import StreamingPullManager as StreamingPullManager
from ._manager import SubscriptionFailed as SubscriptionFailed
from ._message import SubscriberMessage as SubscriberMessage
from ._parts import EXTENSION_ROUTE as EXTENSION_ROUTE
from ._parts import SETTLEMENT_ROUTE as SETTLEMENT_ROUTE
from ._parts import Part as Part
from ._protocol import CallbackEnded as CallbackEnded
from ._protocol import CallbackStarted as CallbackStarted
from ._protocol import Cancel as Cancel
from ._protocol import Deliveries as Deliveries
from ._protocol import Done as Done
from ._protocol import Dones as Dones
from ._protocol import GetFlowStats as GetFlowStats
from ._protocol import GetSubscriptionStats as GetSubscriptionStats
from ._protocol import Received as Received
from ._protocol import ReceivedBatch as ReceivedBatch
from ._protocol import Run as Run
from ._protocol import RunBatch as RunBatch
from ._protocol import RunsEnded as RunsEnded
from ._protocol import SourceGone as SourceGone
from ._protocol import SubscriptionStats as SubscriptionStats
from ._pull import PulledBatch as PulledBatch
from ._pull import PullRequest as PullRequest
from ._pull import PullSession as PullSession
from ._pull import acknowledge as acknowledge
from ._pull import nack_pulled as nack_pulled
from ._pull import pull as pull
from ._pull import pull_async as pull_async
from ._pull import start_pull as start_pull
from ._settings import FlowControl as FlowControl

__all__ = [
    "CALLBACKS_PER_JOB",
    "EXTENSION_ROUTE",
    "SETTLEMENT_ROUTE",
    "CallbackEnded",
    "CallbackStarted",
    "Cancel",
    "Deliveries",
    "Dispatcher",
    "Done",
    "Dones",
    "FlowControl",
    "FlowNote",
    "FlowStats",
    "GetFlowStats",
    "GetSubscriptionStats",
    "Heartbeater",
    "Leaser",
    "LoadController",
    "Part",
    "OrderedKeyHandler",
    "PullRequest",
    "PullSession",
    "PulledBatch",
    "Received",
    "ReceivedBatch",
    "Run",
    "RunBatch",
    "RunsEnded",
    "StreamingPullManager",
    "SubscriberMessage",
    "SourceGone",
    "Subscription",
    "SubscriptionFailed",
    "SubscriptionStats",
    "WorkerPool",
    "acknowledge",
    "nack_pulled",
    "pull",
    "pull_async",
    "start_pull",
    "subscribe",
]
