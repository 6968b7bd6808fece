"""A ``google.pubsub.v1`` gRPC front on the broker's actors: conveyor as an embeddable Pub/Sub emulator."""

from ._filter import Filter as Filter
from ._filter import FilterError as FilterError
from ._filter import parse_filter as parse_filter
from ._memory import parse_byte_size as parse_byte_size
from ._model import PubMessage as PubMessage
from ._model import SubscriptionConfig as SubscriptionConfig
from ._model import TopicConfig as TopicConfig
from ._registry import PubSubRegistry as PubSubRegistry
from ._registry import TopicActor as TopicActor
from ._server import PubSubServer as PubSubServer
from ._subscription import Binding as Binding
from ._subscription import SubscriptionActor as SubscriptionActor
from ._transport import PubSubConsumer as PubSubConsumer
from ._transport import PubSubTransport as PubSubTransport
from ._transport import subscribe_remote as subscribe_remote

__all__ = [
    "Binding",
    "Filter",
    "FilterError",
    "PubMessage",
    "PubSubConsumer",
    "PubSubRegistry",
    "PubSubServer",
    "PubSubTransport",
    "SubscriptionActor",
    "SubscriptionConfig",
    "TopicActor",
    "TopicConfig",
    "parse_byte_size",
    "parse_filter",
    "subscribe_remote",
]
