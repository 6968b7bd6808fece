"""The broker: a strictly ordered queue, its consumer manager and consumers, as actors (seeds 000, 001)."""

from ._body_store import BodyStore as BodyStore
from ._body_store import MemoryBodyStore as MemoryBodyStore
from ._body_store import PageBatch as PageBatch
from ._body_store import PageDone as PageDone
from ._body_store import run_page_batch as run_page_batch
from ._broker import BrokerActor as BrokerActor
from ._broker import DeclareQueue as DeclareQueue
from ._broker import LookupQueue as LookupQueue
from ._broker import PublishTo as PublishTo
from ._broker import QueueDeclared as QueueDeclared
from ._broker import Refused as Refused
from ._client_protocol import Ack as Ack
from ._client_protocol import AckResult as AckResult
from ._client_protocol import BatchPublished as BatchPublished
from ._client_protocol import ConsumerStats as ConsumerStats
from ._client_protocol import Delivered as Delivered
from ._client_protocol import GetStats as GetStats
from ._client_protocol import ModifyAckDeadline as ModifyAckDeadline
from ._client_protocol import Nack as Nack
from ._client_protocol import Publish as Publish
from ._client_protocol import PublishBatch as PublishBatch
from ._client_protocol import Published as Published
from ._client_protocol import PublishRejected as PublishRejected
from ._client_protocol import Pull as Pull
from ._client_protocol import QueueStats as QueueStats
from ._client_protocol import Rejoin as Rejoin
from ._client_protocol import Rejoined as Rejoined
from ._client_protocol import Release as Release
from ._client_protocol import SetInterest as SetInterest
from ._client_protocol import Subscribe as Subscribe
from ._client_protocol import Subscribed as Subscribed
from ._client_protocol import Unsubscribe as Unsubscribe
from ._consumer import ConsumerActor as ConsumerActor
from ._consumer import ConsumerSettings as ConsumerSettings
from ._consumer import Resume as Resume
from ._consumer import Suspend as Suspend
from ._consumer_lists import ConsumerLists as ConsumerLists
from ._consumer_lists import ConsumerListStats as ConsumerListStats
from ._consumer_lists import ConsumerState as ConsumerState
from ._disk_body_store import DiskBodyStore as DiskBodyStore
from ._entries import DeltaChunk as DeltaChunk
from ._entries import EntryList as EntryList
from ._entries import EntryState as EntryState
from ._entries import priority_level as priority_level
from ._manager import ConsumerManagerActor as ConsumerManagerActor
from ._manager_protocol import AddConsumer as AddConsumer
from ._manager_protocol import ConsumerExhausted as ConsumerExhausted
from ._manager_protocol import InterestChanged as InterestChanged
from ._manager_protocol import NotifyWork as NotifyWork
from ._manager_protocol import RemoveConsumer as RemoveConsumer
from ._manager_protocol import WorkAvailable as WorkAvailable
from ._notes import BodiesInRam as BodiesInRam
from ._notes import EntryEnqueued as EntryEnqueued
from ._notes import EntryReturned as EntryReturned
from ._notes import EntrySettled as EntrySettled
from ._notes import QueueClosed as QueueClosed
from ._notes import QueueRecovered as QueueRecovered
from ._notes import StaleNackIgnored as StaleNackIgnored
from ._paging import BodyPager as BodyPager
from ._queue import ENTRY_RAM_BYTES as ENTRY_RAM_BYTES
from ._queue import PagingFailed as PagingFailed
from ._queue import QueueActor as QueueActor
from ._selectors import AllOf as AllOf
from ._selectors import AnyOf as AnyOf
from ._selectors import HeaderEquals as HeaderEquals
from ._selectors import HeaderExists as HeaderExists
from ._selectors import HeaderIn as HeaderIn
from ._selectors import MatchAll as MatchAll
from ._selectors import Not as Not
from ._selectors import Selector as Selector
from ._selectors import SelectorError as SelectorError
from ._selectors import parse_selector as parse_selector
from ._values import COMPACT_AFTER_EVENTS as COMPACT_AFTER_EVENTS
from ._values import DEAD_LETTER_QUEUE as DEAD_LETTER_QUEUE
from ._values import DEAD_LETTER_REASON as DEAD_LETTER_REASON
from ._values import DELIVERY_COUNT as DELIVERY_COUNT
from ._values import LAST_ERROR as LAST_ERROR
from ._values import LAST_ERROR_TYPE as LAST_ERROR_TYPE
from ._values import Delivery as Delivery
from ._values import DeliveryError as DeliveryError
from ._values import Message as Message
from ._values import Overflow as Overflow
from ._values import QueueConfig as QueueConfig
from ._values import Reconfigure as Reconfigure
from ._values import RetryPolicy as RetryPolicy
from ._values import delivery_unchecked as delivery_unchecked

__all__ = [
    "ENTRY_RAM_BYTES",
    "COMPACT_AFTER_EVENTS",
    "BrokerActor",
    "DeclareQueue",
    "LookupQueue",
    "PublishTo",
    "QueueDeclared",
    "Refused",
    "DEAD_LETTER_QUEUE",
    "DEAD_LETTER_REASON",
    "DELIVERY_COUNT",
    "LAST_ERROR",
    "LAST_ERROR_TYPE",
    "Ack",
    "AckResult",
    "AddConsumer",
    "AllOf",
    "AnyOf",
    "BatchPublished",
    "BodyPager",
    "BodyStore",
    "ConsumerExhausted",
    "ConsumerActor",
    "ConsumerListStats",
    "ConsumerLists",
    "ConsumerManagerActor",
    "ConsumerSettings",
    "ConsumerState",
    "ConsumerStats",
    "Delivered",
    "Delivery",
    "delivery_unchecked",
    "DeliveryError",
    "DeltaChunk",
    "DiskBodyStore",
    "EntryEnqueued",
    "EntryList",
    "EntryReturned",
    "EntrySettled",
    "EntryState",
    "GetStats",
    "HeaderEquals",
    "HeaderExists",
    "HeaderIn",
    "InterestChanged",
    "MatchAll",
    "MemoryBodyStore",
    "Message",
    "ModifyAckDeadline",
    "Nack",
    "Not",
    "Overflow",
    "PageBatch",
    "PageDone",
    "PagingFailed",
    "Publish",
    "PublishBatch",
    "PublishRejected",
    "Published",
    "QueueActor",
    "QueueClosed",
    "QueueConfig",
    "QueueRecovered",
    "BodiesInRam",
    "QueueStats",
    "Reconfigure",
    "Rejoin",
    "Rejoined",
    "Release",
    "RemoveConsumer",
    "Resume",
    "RetryPolicy",
    "SetInterest",
    "StaleNackIgnored",
    "Pull",
    "NotifyWork",
    "Selector",
    "SelectorError",
    "Subscribe",
    "Subscribed",
    "Suspend",
    "Unsubscribe",
    "WorkAvailable",
    "parse_selector",
    "run_page_batch",
    "priority_level",
]
