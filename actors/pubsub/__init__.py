"""A ``google.pubsub.v1`` gRPC front on the broker's actors: conveyor as an embeddable Pub/Sub emulator.

The topics and subscriptions are plain actors (the simulator runs them without any extra); the gRPC
server and transport (``PubSubServer``, ``PubSubTransport``, ``PubSubConsumer``, ``subscribe_remote``)
need the ``pubsub`` extra and are imported when first used.
"""

import typing

from conveyor.runtime.extras import lazy_exports as _lazy_exports

from ._ackid import AckId as AckId
from ._ackid import AckIdCodec as AckIdCodec
from ._containment import HandlerFailed as HandlerFailed
from ._edge import MODACK_MAX_S as MODACK_MAX_S
from ._edge import request_refusal as request_refusal
from ._filter import Filter as Filter
from ._filter import FilterError as FilterError
from ._filter import parse_filter as parse_filter
from ._limits import ACK_ID_MAX_BYTES as ACK_ID_MAX_BYTES
from ._limits import ACK_IDS_MAX as ACK_IDS_MAX
from ._limits import ATTRIBUTE_KEY_MAX_BYTES as ATTRIBUTE_KEY_MAX_BYTES
from ._limits import ATTRIBUTE_VALUE_MAX_BYTES as ATTRIBUTE_VALUE_MAX_BYTES
from ._limits import ATTRIBUTES_MAX as ATTRIBUTES_MAX
from ._limits import ORDERING_KEY_MAX_BYTES as ORDERING_KEY_MAX_BYTES
from ._limits import PUBLISH_MAX_BYTES as PUBLISH_MAX_BYTES
from ._limits import PUBLISH_MAX_MESSAGES as PUBLISH_MAX_MESSAGES
from ._memory import parse_byte_size as parse_byte_size
from ._model import Batch as Batch
from ._model import CreateSubscription as CreateSubscription
from ._model import CreateTopic as CreateTopic
from ._model import DeadLetterSettings as DeadLetterSettings
from ._model import Detach as Detach
from ._model import Done as Done
from ._model import Failed as Failed
from ._model import NextBatch as NextBatch
from ._model import OpenStream as OpenStream
from ._model import Publish as Publish
from ._model import PublishedIds as PublishedIds
from ._model import PubMessage as PubMessage
from ._model import PullMessages as PullMessages
from ._model import RetrySettings as RetrySettings
from ._model import Seek as Seek
from ._model import Settle as Settle
from ._model import SettleKind as SettleKind
from ._model import SettleOutcome as SettleOutcome
from ._model import StreamClosed as StreamClosed
from ._model import StreamOpened as StreamOpened
from ._model import StreamSettings as StreamSettings
from ._model import SubscriptionConfig as SubscriptionConfig
from ._model import TopicConfig as TopicConfig
from ._push import HttpPusher as HttpPusher
from ._push import PushActor as PushActor
from ._push import PushAnswered as PushAnswered
from ._push import Pusher as Pusher
from ._push import PushTerms as PushTerms
from ._push import push_terms as push_terms
from ._push import send_post as send_post
from ._push_core import ACK_STATUSES as ACK_STATUSES
from ._push_core import MAX_OUTSTANDING_PUSHES as MAX_OUTSTANDING_PUSHES
from ._push_core import HttpPost as HttpPost
from ._push_core import KeyGate as KeyGate
from ._push_core import PushBackoff as PushBackoff
from ._push_core import PushDelivery as PushDelivery
from ._push_core import PushSettings as PushSettings
from ._push_core import acknowledges as acknowledges
from ._push_core import push_request as push_request
from ._registry import PubSubRegistry as PubSubRegistry
from ._registry import SubscriptionFactory as SubscriptionFactory
from ._registry import TopicActor as TopicActor
from ._registry import TopicFactory as TopicFactory
from ._schema_actor import SchemaActor as SchemaActor
from ._schema_book import DELETED_SCHEMA as DELETED_SCHEMA
from ._schema_book import Revision as Revision
from ._schema_book import SchemaBook as SchemaBook
from ._schema_book import SchemaRefused as SchemaRefused
from ._schema_book import SchemaSettings as SchemaSettings
from ._seek_log import SeekLog as SeekLog
from ._seek_log import SeekLogState as SeekLogState
from ._snapshots import CreateSnapshot as CreateSnapshot
from ._snapshots import SeekSnapshot as SeekSnapshot
from ._snapshots import SnapshotConfig as SnapshotConfig
from ._snapshots import TopicSnapshots as TopicSnapshots
from ._subscription import IDLE_STREAM_S as IDLE_STREAM_S
from ._subscription import STREAM_RESPONSE_MAX as STREAM_RESPONSE_MAX
from ._subscription import Binding as Binding
from ._subscription import SubscriptionActor as SubscriptionActor
from ._subscription import stored_size as stored_size
from ._surface import DetachFromTopic as DetachFromTopic

if typing.TYPE_CHECKING:
    from ._rest import RestBindError as RestBindError
    from ._server import PubSubServer as PubSubServer
    from ._transport import TRANSIT_ALLOWANCE_S as TRANSIT_ALLOWANCE_S
    from ._transport import PubSubConsumer as PubSubConsumer
    from ._transport import PubSubTransport as PubSubTransport
    from ._transport import Settlements as Settlements
    from ._transport import StreamHandle as StreamHandle
    from ._transport import stream_deadline_s as stream_deadline_s
    from ._transport import subscribe_remote as subscribe_remote
else:
    __getattr__ = _lazy_exports(__name__, "pubsub", {
        "._rest": ("RestBindError",),
        "._server": ("PubSubServer",),
        "._transport": ("PubSubConsumer", "PubSubTransport", "Settlements", "StreamHandle", "TRANSIT_ALLOWANCE_S",
                         "stream_deadline_s", "subscribe_remote"),
    })

__all__ = [
    "ACK_IDS_MAX",
    "ACK_ID_MAX_BYTES",
    "ATTRIBUTES_MAX",
    "IDLE_STREAM_S",
    "STREAM_RESPONSE_MAX",
    "ATTRIBUTE_KEY_MAX_BYTES",
    "ATTRIBUTE_VALUE_MAX_BYTES",
    "MODACK_MAX_S",
    "ORDERING_KEY_MAX_BYTES",
    "PUBLISH_MAX_BYTES",
    "PUBLISH_MAX_MESSAGES",
    "AckId",
    "AckIdCodec",
    "Batch",
    "Binding",
    "CreateSubscription",
    "DELETED_SCHEMA",
    "CreateTopic",
    "DeadLetterSettings",
    "Detach",
    "Done",
    "Failed",
    "Filter",
    "HandlerFailed",
    "FilterError",
    "NextBatch",
    "OpenStream",
    "PubMessage",
    "PubSubConsumer",
    "PubSubRegistry",
    "PubSubServer",
    "PubSubTransport",
    "Publish",
    "PublishedIds",
    "PullMessages",
    "RestBindError",
    "RetrySettings",
    "Revision",
    "SchemaActor",
    "SchemaBook",
    "SchemaRefused",
    "SchemaSettings",
    "Seek",
    "Settle",
    "SettleKind",
    "SettleOutcome",
    "StreamClosed",
    "StreamOpened",
    "StreamSettings",
    "SeekLog",
    "SeekLogState",
    "SubscriptionActor",
    "SubscriptionConfig",
    "SubscriptionFactory",
    "TopicActor",
    "TopicConfig",
    "TopicFactory",
    "parse_byte_size",
    "parse_filter",
    "request_refusal",
    "stored_size",
    "subscribe_remote",
    "Settlements",
    "StreamHandle",
    "TRANSIT_ALLOWANCE_S",
    "stream_deadline_s",
    "HttpPusher",
    "PushActor",
    "PushAnswered",
    "Pusher",
    "PushTerms",
    "push_terms",
    "send_post",
    "ACK_STATUSES",
    "MAX_OUTSTANDING_PUSHES",
    "HttpPost",
    "KeyGate",
    "PushBackoff",
    "PushDelivery",
    "PushSettings",
    "acknowledges",
    "push_request",
    "CreateSnapshot",
    "DetachFromTopic",
    "SeekSnapshot",
    "SnapshotConfig",
    "TopicSnapshots",
]
