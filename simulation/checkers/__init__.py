"""Checkers: pure functions over traces, shared by tests, the simulator and the Spark sweep.

The broker and subscriber clients write their history as notes (``EnqueueSent``, ``DeliveryReceived``,
...), which ``total_queue`` judges without asking the queue, as the Pub/Sub clients' notes are judged.
Also the readers a checker's verdict is told with: a queue's story (``queue_story``) and the
story of a whole run (``story_lines``).
"""

from ._broker import ClientView as ClientView
from ._broker import Receipt as Receipt
from ._broker import accounting as accounting
from ._broker import browser_completeness as browser_completeness
from ._broker import client_view as client_view
from ._broker import consumer_priority as consumer_priority
from ._broker import drained as drained
from ._broker import fairness as fairness
from ._broker import group_exclusivity as group_exclusivity
from ._broker import jain_index as jain_index
from ._broker import priority_order as priority_order
from ._broker import strict_order as strict_order
from ._consumer_credit import consumer_credit as consumer_credit
from ._dead_letter_target import dead_letter_target as dead_letter_target
from ._deliveries import delivery_count as delivery_count
from ._deliveries import delivery_limit as delivery_limit
from ._deliveries import exclusive_lease as exclusive_lease
from ._deliveries import expiry as expiry
from ._deliveries import length_limit as length_limit
from ._deliveries import not_before as not_before
from ._deliveries import selector_match as selector_match
from ._durable import EnqueueInDoubt as EnqueueInDoubt
from ._durable import acked_stays_acked as acked_stays_acked
from ._durable import client_counts as client_counts
from ._durable import durable_total_queue as durable_total_queue
from ._durable import found_order as found_order
from ._early_expiry import expiry_not_early as expiry_not_early
from ._flow_pause import flow_pause as flow_pause
from ._history import AckConfirmed as AckConfirmed
from ._history import CallbackHandled as CallbackHandled
from ._history import CallbackRefused as CallbackRefused
from ._history import ClientAnswer as ClientAnswer
from ._history import ConsumerAsked as ConsumerAsked
from ._history import DeliveryReceived as DeliveryReceived
from ._history import DeliverySettled as DeliverySettled
from ._history import EnqueueAnswered as EnqueueAnswered
from ._history import EnqueueSent as EnqueueSent
from ._history import FinalBrowseStarted as FinalBrowseStarted
from ._history import FoundAtEnd as FoundAtEnd
from ._history import before_final_browse as before_final_browse
from ._history import callback_answer as callback_answer
from ._history import total_queue as total_queue
from ._history import unsettled_by_clients as unsettled_by_clients
from ._kernel import kernel_checks as kernel_checks
from ._kernel import mailbox_fifo as mailbox_fifo
from ._kernel import nothing_vanishes as nothing_vanishes
from ._kernel import supervision as supervision
from ._kernel_notices import AskAbandoned as AskAbandoned
from ._kernel_notices import EscalationCause as EscalationCause
from ._kernel_notices import TimerCancelAnswered as TimerCancelAnswered
from ._kernel_notices import kernel_notices as kernel_notices
from ._lease_cap import lease_cap as lease_cap
from ._lease_extension import lease_extension as lease_extension
from ._lease_schedule import lease_schedule as lease_schedule
from ._liveness import liveness as liveness
from ._liveness import prompt_delivery as prompt_delivery
from ._liveness import queue_order as queue_order
from ._liveness import single_wakeup as single_wakeup
from ._liveness import stall as stall
from ._liveness import starvation as starvation
from ._paging import PagingAcked as PagingAcked
from ._paging import PagingConfirmed as PagingConfirmed
from ._paging import PagingDrained as PagingDrained
from ._paging import PagingReceived as PagingReceived
from ._paging import PagingSent as PagingSent
from ._paging import PagingStatus as PagingStatus
from ._paging import paging_counts as paging_counts
from ._paging import paging_no_loss as paging_no_loss
from ._paging import paging_order as paging_order
from ._paging import paging_ram as paging_ram
from ._promises import ack_confirms as ack_confirms
from ._promises import immediate_publish as immediate_publish
from ._promises import publish_outcomes as publish_outcomes
from ._promises import reconfigure as reconfigure
from ._promises import stale_nack as stale_nack
from ._pubsub import BatchReceived as BatchReceived
from ._pubsub import PublishDone as PublishDone
from ._pubsub import PublishSent as PublishSent
from ._pubsub import SeekDone as SeekDone
from ._pubsub import SeekSent as SeekSent
from ._pubsub import SettleDone as SettleDone
from ._pubsub import SettleSent as SettleSent
from ._pubsub import StreamBound as StreamBound
from ._pubsub import SubscriptionTerms as SubscriptionTerms
from ._pubsub import acks_from_receivers as acks_from_receivers
from ._pubsub import exactly_once as exactly_once
from ._pubsub import no_confirmed_loss as no_confirmed_loss
from ._pubsub_delivery import IdleStreamEnded as IdleStreamEnded
from ._pubsub_delivery import IdleStreamOpened as IdleStreamOpened
from ._pubsub_delivery import idle_stream as idle_stream
from ._pubsub_delivery import pull_fill as pull_fill
from ._pubsub_delivery import seek_replay as seek_replay
from ._pubsub_limits import LimitProbeDone as LimitProbeDone
from ._pubsub_limits import LimitProbeSent as LimitProbeSent
from ._pubsub_limits import ProbesFinished as ProbesFinished
from ._pubsub_limits import contained_failures as contained_failures
from ._pubsub_limits import request_limits as request_limits
from ._pubsub_promises import filter_respected as filter_respected
from ._pubsub_promises import generation_of as generation_of
from ._pubsub_promises import key_order as key_order
from ._pubsub_promises import seek_effect as seek_effect
from ._pubsub_promises import stream_flow as stream_flow
from ._queue_stats import QueueStatsRead as QueueStatsRead
from ._queue_stats import queue_stats as queue_stats
from ._queue_view import SharedTrace as SharedTrace
from ._queue_view import queue_paths as queue_paths
from ._queue_view import queue_story as queue_story
from ._ram_target import ram_under_target as ram_under_target
from ._restart_budget import SupervisionDeclared as SupervisionDeclared
from ._result import MAX_REPORTED as MAX_REPORTED
from ._result import CheckResult as CheckResult
from ._result import guarded as guarded
from ._result import raised as raised
from ._runs import runs_once as runs_once
from ._story import delivery_steps as delivery_steps
from ._story import story_lines as story_lines
from ._subscriber import all_settled as all_settled
from ._subscriber import flow_bound as flow_bound
from ._subscriber import lease_validity as lease_validity
from ._subscriber import no_loss as no_loss
from ._subscriber import ordering_keys as ordering_keys
from ._timers import timers as timers
from ._transactions import TxFinal as TxFinal
from ._transactions import TxHistory as TxHistory
from ._transactions import transaction_checks as transaction_checks
from ._transactions import tx_at_most_k as tx_at_most_k
from ._transactions import tx_atomicity as tx_atomicity
from ._transactions import tx_drained as tx_drained
from ._transactions import tx_history as tx_history
from ._transactions import tx_no_lock_left as tx_no_lock_left
from ._transactions import tx_no_loss as tx_no_loss
from ._transactions import tx_no_phantom as tx_no_phantom
from ._zookeeper import ephemerals_die_with_their_session as ephemerals_die_with_their_session
from ._zookeeper import every_call_answered_once as every_call_answered_once
from ._zookeeper import sequential_names_never_repeat as sequential_names_never_repeat
from ._zookeeper import zk_counts as zk_counts

__all__ = [
    "MAX_REPORTED",
    "TxFinal",
    "TxHistory",
    "transaction_checks",
    "tx_at_most_k",
    "tx_atomicity",
    "tx_drained",
    "tx_history",
    "tx_no_lock_left",
    "tx_no_loss",
    "tx_no_phantom",
    "BatchReceived",
    "CheckResult",
    "ClientAnswer",
    "ClientView",
    "ConsumerAsked",
    "DeliveryReceived",
    "DeliverySettled",
    "AckConfirmed",
    "acked_stays_acked",
    "dead_letter_target",
    "EnqueueAnswered",
    "EnqueueSent",
    "FinalBrowseStarted",
    "FoundAtEnd",
    "PublishDone",
    "PublishSent",
    "Receipt",
    "SettleDone",
    "SettleSent",
    "SharedTrace",
    "StreamBound",
    "SupervisionDeclared",
    "SubscriptionTerms",
    "acks_from_receivers",
    "exactly_once",
    "no_confirmed_loss",
    "accounting",
    "all_settled",
    "before_final_browse",
    "browser_completeness",
    "client_view",
    "consumer_credit",
    "consumer_priority",
    "delivery_count",
    "delivery_limit",
    "delivery_steps",
    "drained",
    "exclusive_lease",
    "expiry",
    "expiry_not_early",
    "ram_under_target",
    "fairness",
    "flow_bound",
    "flow_pause",
    "group_exclusivity",
    "guarded",
    "jain_index",
    "kernel_checks",
    "kernel_notices",
    "AskAbandoned",
    "EscalationCause",
    "TimerCancelAnswered",
    "lease_extension",
    "lease_validity",
    "mailbox_fifo",
    "length_limit",
    "liveness",
    "no_loss",
    "nothing_vanishes",
    "not_before",
    "ordering_keys",
    "priority_order",
    "prompt_delivery",
    "queue_paths",
    "queue_order",
    "queue_story",
    "raised",
    "runs_once",
    "selector_match",
    "single_wakeup",
    "stall",
    "starvation",
    "story_lines",
    "strict_order",
    "total_queue",
    "unsettled_by_clients",
    "supervision",
    "timers",
    "lease_cap",
    "EnqueueInDoubt",
    "durable_total_queue",
    "found_order",
    "PagingAcked",
    "PagingConfirmed",
    "PagingDrained",
    "PagingReceived",
    "PagingSent",
    "PagingStatus",
    "paging_no_loss",
    "ephemerals_die_with_their_session",
    "every_call_answered_once",
    "zk_counts",
    "sequential_names_never_repeat",
    "paging_order",
    "paging_ram",
    "client_counts",
    "paging_counts",
    "ack_confirms",
    "immediate_publish",
    "publish_outcomes",
    "reconfigure",
    "stale_nack",
    "SeekDone",
    "SeekSent",
    "filter_respected",
    "generation_of",
    "key_order",
    "seek_effect",
    "stream_flow",
    "QueueStatsRead",
    "queue_stats",
    "CallbackHandled",
    "CallbackRefused",
    "callback_answer",
    "lease_schedule",
    "LimitProbeDone",
    "LimitProbeSent",
    "ProbesFinished",
    "request_limits",
    "IdleStreamEnded",
    "IdleStreamOpened",
    "idle_stream",
    "pull_fill",
    "seek_replay",
    "contained_failures",
]
