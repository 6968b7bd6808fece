"""The Pub/Sub front's checkers on hand-written histories: each passes the right story and fails the wrong one.

A history is the clients' notes (what they published, were given and settled) beside the few
queue events ``acks_from_receivers`` reads (which settlements took effect, for whom). Each
test writes the smallest trace that shows one promise kept, then the same trace broken.
"""

from __future__ import annotations

from conveyor.actors.broker import (
    Delivered,
    Delivery,
    EntryEnqueued,
    EntryReturned,
    EntrySettled,
    Message,
    Subscribed,
)
from conveyor.actors.pubsub import Batch, PubMessage, SettleKind, parse_filter
from conveyor.runtime import EventKind, TraceEvent
from conveyor.simulation.checkers import (
    BatchReceived,
    PublishDone,
    PublishSent,
    SettleDone,
    SettleSent,
    SubscriptionTerms,
    acks_from_receivers,
    exactly_once,
    no_confirmed_loss,
)

TOPIC = "projects/p/topics/t"
SUB = "projects/p/subscriptions/a"
OTHER = "projects/p/subscriptions/b"
DEAD = "projects/p/topics/dead"
DEAD_SUB = "projects/p/subscriptions/dead"
QUEUE = "/pubsub/subscription-2/queue-0"
BINDING = "/pubsub/subscription-2/binding-1"
OTHER_BINDING = "/pubsub/subscription-3/binding-1"
MESSAGE = PubMessage(b"p0.0.0", (("colour", "red"),))


def note(client: str, value: object, time: float = 0.0) -> TraceEvent:
    return TraceEvent(EventKind.NOTE, time, client, None, value)


def published(*messages: PubMessage, ids: tuple[str, ...] = ("1",), failure: str = "") -> list[TraceEvent]:
    return [note("/publisher-0", PublishSent(TOPIC, messages)),
            note("/publisher-0", PublishDone(TOPIC, messages, () if failure else ids, failure))]


def given(client: str, ack_id: str, attempt: int = 1, subscription: str = SUB, binding: str = BINDING,
          message: PubMessage = MESSAGE, message_id: str = "1") -> TraceEvent:
    delivered = PubMessage(message.data, message.attributes, message.ordering_key, message.publish_time_ns, message_id)
    return note(client, BatchReceived(subscription, binding, ((ack_id, delivered, attempt),)))


def settled(client: str, *ack_ids: str, kind: SettleKind = SettleKind.ACK, subscription: str = SUB,
            invalid: tuple[str, ...] = ()) -> list[TraceEvent]:
    return [note(client, SettleSent(subscription, kind, 0, ack_ids)),
            note(client, SettleDone(subscription, kind, 0, ack_ids, invalid))]


TERMS = (SubscriptionTerms(SUB, TOPIC, parse_filter("")),)


# --- no_confirmed_loss ---------------------------------------------------------------------------------


def test_a_confirmed_message_given_and_acked_is_not_lost() -> None:
    trace = [*published(MESSAGE), given("/client-0", "id-1"), *settled("/client-0", "id-1")]
    result = no_confirmed_loss(trace, TERMS)
    assert result.ok, result.violations
    assert (result.metric("confirmed"), result.metric("lost")) == (1, 0)


def test_a_confirmed_message_never_given_or_never_acked_is_lost() -> None:
    never_given = no_confirmed_loss(published(MESSAGE), TERMS)
    assert never_given.violations == (
        "p0.0.0 (message 1), confirmed to its publisher, was never given to a client on projects/p/subscriptions/a",
    )
    never_acked = no_confirmed_loss([*published(MESSAGE), given("/client-0", "id-1")], TERMS)
    assert "given but never acked" in never_acked.violations[0]
    # An ack with an id the acking client was not given does not count.
    someone_else = no_confirmed_loss([*published(MESSAGE), given("/client-0", "id-1"), *settled("/client-1", "id-1")],
                                     TERMS)
    assert not someone_else.ok


def test_a_filter_that_refuses_a_message_expects_nothing_of_it() -> None:
    blue = (SubscriptionTerms(SUB, TOPIC, parse_filter('attributes.colour = "blue"')),)
    assert no_confirmed_loss(published(MESSAGE), blue).ok


def test_nothing_of_a_refused_publish_and_no_phantom_may_be_given() -> None:
    refused = no_confirmed_loss([*published(MESSAGE, failure="INVALID_ARGUMENT: messages[1]"),
                                 given("/client-0", "id-1"), *settled("/client-0", "id-1")], TERMS)
    assert "a message of a publish that was refused (INVALID_ARGUMENT: messages[1])" in refused.violations[0]
    phantom = no_confirmed_loss([given("/client-0", "id-1")], TERMS)
    assert "which no client published (a phantom)" in phantom.violations[0]
    renumbered = no_confirmed_loss([*published(MESSAGE), given("/client-0", "id-1", message_id="7"),
                                    *settled("/client-0", "id-1")], TERMS)
    assert "as message 7, but its topic had confirmed it as 1" in renumbered.violations[0]


def test_a_dead_lettered_message_counts_once_acked_on_the_dead_letter_topic() -> None:
    terms = (SubscriptionTerms(SUB, TOPIC, parse_filter(""), dead_letter_topic=DEAD),
             SubscriptionTerms(DEAD_SUB, DEAD, parse_filter("")))
    forwarded = PubMessage(MESSAGE.data, (*MESSAGE.attributes, ("CloudPubSubDeadLetterSourceSubscription", "a")))
    history = [*published(MESSAGE), given("/client-0", "id-1"), *settled("/client-0", "id-1", kind=SettleKind.MODACK),
               given("/dlq", "dl-1", subscription=DEAD_SUB, binding="/pubsub/subscription-4/binding-1",
                     message=forwarded, message_id="2000")]
    assert not no_confirmed_loss(history, terms).ok  # given on the dead-letter topic, not acked yet
    assert no_confirmed_loss([*history, *settled("/dlq", "dl-1", subscription=DEAD_SUB)], terms).ok


# --- acks_from_receivers -------------------------------------------------------------------------------


def queue_events(outcome: object, attempt: int = 1) -> list[TraceEvent]:
    """The queue of subscription ``SUB`` enqueues message 1 as tag 1, delivers it to binding 1's consumer, settles."""
    broker = Message(b"p0.0.0", message_id="1")
    return [
        TraceEvent(EventKind.SENT, 0.0, QUEUE, f"{BINDING}/consumer-0", Subscribed("queue-0", 1)),
        note(QUEUE, EntryEnqueued("queue-0", 1, broker)),
        TraceEvent(EventKind.SENT, 0.0, QUEUE, f"{BINDING}/consumer-0",
                   Delivered("queue-0", (Delivery("queue-0", 1, broker, attempt, 10.0, 1),), True)),
        note(QUEUE, outcome, 0.5),
    ]


ACKED = EntrySettled("queue-0", 1, "acked", 1)
NACKED = EntryReturned("queue-0", 1, 1, "nack")


def test_a_settlement_backed_by_the_client_given_that_delivery_passes() -> None:
    *setup, effect = queue_events(ACKED)
    trace = [*setup, given("/client-0", "id-1"), *settled("/client-0", "id-1"), effect]
    result = acks_from_receivers(trace)
    assert result.ok, result.violations
    assert result.metric("checked") == 1


def test_an_ack_nobody_given_the_delivery_sent_is_a_violation() -> None:
    *setup, effect = queue_events(ACKED)
    forged = [*setup, given("/client-0", "id-1"),
              given("/forger", "b-id-1", subscription=OTHER, binding=OTHER_BINDING),  # given on b, sent on a
              *settled("/forger", "b-id-1"), effect]
    result = acks_from_receivers(forged)
    assert result.violations == (
        "t=0.5: /pubsub/subscription-2/queue-0 acked message 1 (tag 1, delivery 1) held by "
        "/pubsub/subscription-2/binding-1, but no client given an ack id of it by that binding had acked it on "
        "projects/p/subscriptions/a",
    )
    late = [*setup, given("/client-0", "id-1"), effect, *settled("/client-0", "id-1")]  # sent after it took effect
    assert not acks_from_receivers(late).ok


def test_a_nack_must_name_the_very_delivery_it_returned() -> None:
    *setup, effect = queue_events(NACKED, attempt=2)
    current = [*setup, given("/client-0", "id-2", attempt=2), *settled("/client-0", "id-2", kind=SettleKind.MODACK),
               effect]
    assert acks_from_receivers(current).ok
    stale = [*setup, given("/client-0", "id-1", attempt=1),
             *settled("/client-0", "id-1", kind=SettleKind.MODACK), effect]
    assert not acks_from_receivers(stale).ok  # a nack of delivery 1 took delivery 2 back


# --- exactly_once --------------------------------------------------------------------------------------


def batch_sent(binding: str, client: str, attempt: int, time: float) -> TraceEvent:
    delivered = PubMessage(MESSAGE.data, MESSAGE.attributes, message_id="1")
    return TraceEvent(EventKind.SENT, time, binding, client, Batch((("id", delivered, attempt),), True))


EXACT = (SubscriptionTerms(SUB, TOPIC, parse_filter(""), exactly_once=True),)


def test_nothing_is_given_again_after_a_confirmed_ack() -> None:
    history = [batch_sent(BINDING, "/client-0", 1, 0.0), given("/client-0", "id-1"),
               *settled("/client-0", "id-1")]
    assert exactly_once(history, EXACT).ok
    again = exactly_once([*history, batch_sent("/pubsub/subscription-2/binding-2", "/client-1", 2, 3.0)], EXACT)
    assert again.violations == (
        "t=3: /pubsub/subscription-2/binding-2 gave /client-1 message 1 (p0.0.0, attempt 2) on "
        "projects/p/subscriptions/a after /client-0's ack of it was confirmed at t=0",
    )


def test_an_ack_reported_invalid_or_a_plain_subscription_promises_nothing_more() -> None:
    refused = [batch_sent(BINDING, "/client-0", 1, 0.0), given("/client-0", "id-1"),
               *settled("/client-0", "id-1", invalid=("id-1",)), batch_sent(BINDING, "/client-0", 2, 3.0)]
    assert exactly_once(refused, EXACT).ok
    plain = [batch_sent(BINDING, "/client-0", 1, 0.0), given("/client-0", "id-1"), *settled("/client-0", "id-1"),
             batch_sent(BINDING, "/client-0", 2, 3.0)]
    assert exactly_once(plain, TERMS).ok
