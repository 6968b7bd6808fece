"""The broker: a strictly ordered queue, its consumer manager and consumers, as actors (seeds 000, 001)."""

from ._broker import BrokerActor as BrokerActor
from ._broker import DeclareQueue as DeclareQueue
from ._broker import LookupQueue as LookupQueue
from ._broker import PublishTo as PublishTo
from ._broker import QueueDeclared as QueueDeclared
from ._broker import Refused as Refused
from ._consumer import ConsumerActor as ConsumerActor
from ._consumer import ConsumerSettings as ConsumerSettings
from ._consumer import Resume as Resume
from ._consumer import Suspend as Suspend
from ._consumer_lists import ConsumerLists as ConsumerLists
from ._consumer_lists import ConsumerListStats as ConsumerListStats
from ._consumer_lists import ConsumerState as ConsumerState
from ._entries import EntryList as EntryList
from ._entries import EntryState as EntryState
from ._entries import priority_level as priority_level
from ._manager import ConsumerManagerActor as ConsumerManagerActor
from ._model import DEAD_LETTER_QUEUE as DEAD_LETTER_QUEUE
from ._model import DEAD_LETTER_REASON as DEAD_LETTER_REASON
from ._model import DELIVERY_COUNT as DELIVERY_COUNT
from ._model import LAST_ERROR as LAST_ERROR
from ._model import LAST_ERROR_TYPE as LAST_ERROR_TYPE
from ._model import Ack as Ack
from ._model import AckResult as AckResult
from ._model import AddConsumer as AddConsumer
from ._model import BatchPublished as BatchPublished
from ._model import ConsumerExhausted as ConsumerExhausted
from ._model import ConsumerStats as ConsumerStats
from ._model import Delivered as Delivered
from ._model import Delivery as Delivery
from ._model import DeliveryError as DeliveryError
from ._model import EntryEnqueued as EntryEnqueued
from ._model import EntryReturned as EntryReturned
from ._model import EntrySettled as EntrySettled
from ._model import GetStats as GetStats
from ._model import InterestChanged as InterestChanged
from ._model import Message as Message
from ._model import ModifyAckDeadline as ModifyAckDeadline
from ._model import Nack as Nack
from ._model import NotifyWork as NotifyWork
from ._model import Overflow as Overflow
from ._model import Publish as Publish
from ._model import PublishBatch as PublishBatch
from ._model import Published as Published
from ._model import PublishRejected as PublishRejected
from ._model import Pull as Pull
from ._model import QueueClosed as QueueClosed
from ._model import QueueConfig as QueueConfig
from ._model import QueueRecovered as QueueRecovered
from ._model import QueueStats as QueueStats
from ._model import Reconfigure as Reconfigure
from ._model import Rejoin as Rejoin
from ._model import Rejoined as Rejoined
from ._model import Release as Release
from ._model import RemoveConsumer as RemoveConsumer
from ._model import RetryPolicy as RetryPolicy
from ._model import SetInterest as SetInterest
from ._model import StaleNackIgnored as StaleNackIgnored
from ._model import Subscribe as Subscribe
from ._model import Subscribed as Subscribed
from ._model import Unsubscribe as Unsubscribe
from ._model import WorkAvailable as WorkAvailable
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

__all__ = [
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
    "DeliveryError",
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
    "Message",
    "ModifyAckDeadline",
    "Nack",
    "Not",
    "Overflow",
    "Publish",
    "PublishBatch",
    "PublishRejected",
    "Published",
    "QueueActor",
    "QueueClosed",
    "QueueConfig",
    "QueueRecovered",
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
    "priority_level",
]
