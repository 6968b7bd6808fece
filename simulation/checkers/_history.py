"""The broker and subscriber clients' history, and the checker that judges a queue by it alone.

Jepsen's total-queue checker judges a queue from what its clients did and were told: what
publishers sent and had confirmed, against what consumers received and acknowledged, with a
final read of whatever is left. It never asks the queue what it enqueued: a queue that silently
drops a publish also drops its own note of it, and a checker that counts the queue's notes
(``accounting``) finds the books balanced. So the clients of the broker and subscriber
scenarios write their own history as trace notes, as the Pub/Sub front's clients do
(``_pubsub.py``):

* a publisher: ``EnqueueSent`` (the message ids of a publish, and the messages as sent) and
  ``EnqueueAnswered`` (which of them the queue confirmed, which it refused);
* a consumer client: ``ConsumerAsked`` (the selector it wants), when it starts;
* a consumer client, or a subscriber's user callback: ``DeliveryReceived`` (queue, consumer id,
  tag, message id, attempt, and whether the client meant to acquire it or only to browse) and
  ``DeliverySettled`` (what it answered: ``ack``, ``nack``, ``release``, or ``raised`` for a
  callback that raised);
* the final browse (``run_..._simulation`` after the run went quiet, when some sent message is
  not yet confirmed and acked): ``FinalBrowseStarted`` and one ``FoundAtEnd`` per message a
  browser found still in a queue (the scenario's queue, or its dead-letter queue).

``total_queue`` reads only these. A client's word about itself is what it intended (a consumer
client knows whether it meant to acquire), so a consumer that declared itself otherwise to the
queue is judged by what its client asked for, not by its declaration.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Final, Literal, final

import attrs

from conveyor.actors.broker import Message, Selector
from conveyor.runtime import EventKind, JobDone, JobFailed, TraceEvent

from ._result import CheckResult

ClientAnswer = Literal["ack", "nack", "release", "raised"]
"""What a client answered to a delivery (``raised``: a subscriber's callback raised)."""


@final
@attrs.frozen
class EnqueueSent:
    """Client history: a publisher sent ``queue`` a publish of these messages (their ids).

    ``messages``: the messages as the publisher sent them, when it says: their priority, group,
    delay and headers are what the order checkers judge a consumer's receipts by (never the
    queue's copy, which a broken queue may have changed), and their TTL what the publisher asked
    for, so a message whose TTL ran out may be missing at the end.
    """

    queue: str
    message_ids: tuple[str, ...]
    messages: tuple[Message, ...] = ()


@final
@attrs.frozen
class EnqueueAnswered:
    """Client history: the queue's answer to a publish: the ids it ``confirmed`` and those it ``refused``."""

    queue: str
    confirmed: tuple[str, ...]
    refused: tuple[str, ...] = ()


@final
@attrs.frozen
class ConsumerAsked:
    """Client history: a consumer client asked ``queue`` for the messages ``selector`` matches.

    What the client wanted, noted before its consumer subscribes: a consumer that declared
    another selector to the queue is judged by this one (``consumer_priority``).
    """

    queue: str
    selector: Selector
    acquiring: bool = True


@final
@attrs.frozen
class DeliveryReceived:
    """Client history: a client was given delivery ``attempt`` of ``message_id`` (``tag`` at ``queue``).

    ``acquiring`` is the client's own intent: False for a browser, which takes nothing.
    """

    queue: str
    consumer_id: int
    tag: int
    message_id: str
    attempt: int
    acquiring: bool = True


@final
@attrs.frozen
class DeliverySettled:
    """Client history: a client answered delivery ``attempt`` of ``message_id`` with ``outcome``."""

    queue: str
    consumer_id: int
    tag: int
    message_id: str
    attempt: int
    outcome: ClientAnswer


@final
@attrs.frozen
class AckConfirmed:
    """Client history: the queue confirmed these acks (``AckResult``), so they are on disk: never given again."""

    queue: str
    message_ids: tuple[str, ...]


@final
@attrs.frozen
class FinalBrowseStarted:
    """Client history: after the run went quiet, a browser started reading what is left in ``queue``.

    ``dead_letters``: the queue is a dead-letter queue (what is found there was dead-lettered).
    """

    queue: str
    dead_letters: bool = False


@final
@attrs.frozen
class FoundAtEnd:
    """Client history: the final browse found ``message_id`` (``tag``) still in ``queue``."""

    queue: str
    tag: int
    message_id: str


_NOTE: Final = EventKind.NOTE


@final
@attrs.frozen
class CallbackHandled:
    """Client history told by a callback client: its callback was given this delivery and returned (an ack).

    A callback runs as a job off its consumer's actor, with no context to note from: what it returns
    (or raises, as ``CallbackRefused``: a nack) is its word, in the trace as its job's outcome
    (``JOB_DONE`` at its consumer). ``callback_answer`` reads it back.
    """

    queue: str
    consumer_id: int
    tag: int
    message_id: str
    attempt: int


class CallbackRefused(Exception):
    """Raised by a scenario's callback to nack the delivery it names (``handled``)."""

    def __init__(self, handled: CallbackHandled) -> None:
        super().__init__(f"callback refused {handled.message_id} (delivery {handled.attempt})")
        self.handled = handled


def callback_answer(event: TraceEvent) -> tuple[str, CallbackHandled, ClientAnswer] | None:
    """A callback client's job outcome: (its client's path, the delivery it handled, ack or nack); None for any
    other event. The client is the consumer's parent (``/callback-0`` of ``/callback-0/consumer``)."""
    if event.kind is not EventKind.JOB_DONE or event.receiver is None:
        return None
    outcome = event.message
    if type(outcome) is JobDone and type(outcome.result) is CallbackHandled:
        return event.receiver.rpartition("/")[0], outcome.result, "ack"
    if type(outcome) is JobFailed and type(outcome.error) is CallbackRefused:
        return event.receiver.rpartition("/")[0], outcome.error.handled, "nack"
    return None


def before_final_browse(trace: Iterable[TraceEvent]) -> list[TraceEvent]:
    """The run's own events: the trace up to the first ``FinalBrowseStarted`` (the clients' closing read).

    A run's figures, story and delivery steps are of what it did, not of the browse that
    ``total_queue`` asked for after it went quiet.
    """
    events = trace if isinstance(trace, list) else list(trace)
    for index, event in enumerate(events):
        if event.kind is _NOTE and type(event.message) is FinalBrowseStarted:
            return events[:index]
    return events


@final
class _Ledger:
    """The clients' history of a run, read once: what was sent, answered, received, acked and left."""

    __slots__ = (
        "acked", "attempts", "browse_time", "browsed", "confirmed", "found", "given", "lapses_at", "left", "received",
        "refused", "sent", "twice",
    )

    def __init__(self, trace: Iterable[TraceEvent]) -> None:
        self.sent: dict[str, float] = {}  # message id -> when its publish was sent
        self.lapses_at: dict[str, float] = {}  # message id -> when its TTL ran out at the latest (sent + ttl)
        self.browse_time = 0.0  # when the final browse started
        self.confirmed: set[str] = set()
        self.refused: dict[str, float] = {}
        self.given: dict[tuple[str, str, int, int], str] = {}  # (client, queue, consumer, tag) -> message id
        self.received: dict[str, int] = defaultdict(int)  # message id -> acquiring receipts
        self.attempts: dict[tuple[str, str, int], tuple[str, int]] = {}  # (queue, id, attempt) -> (client, consumer)
        self.twice: list[str] = []  # one attempt given to two acquiring clients
        self.acked: dict[str, str] = {}  # message id -> the first client that acked a delivery it was given
        self.browsed: dict[str, bool] = {}  # queues the final browse read -> whether a dead-letter queue
        self.found: dict[str, str] = {}  # message id -> the queue the final browse found it in
        self.left: list[tuple[float, str, str, str]] = []  # (time, client, what, message id): given wrongly
        for event in trace:
            if event.kind is _NOTE:
                self._see(event)
            elif event.kind is EventKind.JOB_DONE and (answered := callback_answer(event)) is not None:
                client, handled, outcome = answered  # a callback client's receipt and answer, as notes would say
                self._see(TraceEvent(_NOTE, event.time, client, None, DeliveryReceived(
                    handled.queue, handled.consumer_id, handled.tag, handled.message_id, handled.attempt)))
                self._see(TraceEvent(_NOTE, event.time, client, None, DeliverySettled(
                    handled.queue, handled.consumer_id, handled.tag, handled.message_id, handled.attempt, outcome)))

    def _see(self, event: TraceEvent) -> None:
        note = event.message
        cls = type(note)
        client = event.sender or "?"
        if cls is DeliveryReceived:
            if note.acquiring:
                self.received[note.message_id] += 1
                self.given[(client, note.queue, note.consumer_id, note.tag)] = note.message_id
                self._one_taker(event.time, client, note)
            self._given_wrongly(event.time, client, "given", note.message_id)
        elif cls is DeliverySettled:
            if note.outcome == "ack":
                given = self.given.get((client, note.queue, note.consumer_id, note.tag))
                if given is not None:  # an ack of a delivery this client was given
                    self.acked.setdefault(given, client)
        elif cls is EnqueueSent:
            for message_id in note.message_ids:
                self.sent.setdefault(message_id, event.time)
            for sent in note.messages:
                if sent.ttl_s is not None and sent.message_id is not None:
                    self.lapses_at.setdefault(sent.message_id, event.time + sent.ttl_s)
        elif cls is EnqueueAnswered:
            self.confirmed.update(note.confirmed)
            for message_id in note.refused:
                self.refused.setdefault(message_id, event.time)
        elif cls is FinalBrowseStarted:
            if not self.browsed:
                self.browse_time = event.time
            self.browsed[note.queue] = note.dead_letters
        elif cls is FoundAtEnd:
            self.found.setdefault(note.message_id, note.queue)
            self._given_wrongly(event.time, client, "found at the end", note.message_id)

    def _one_taker(self, time: float, client: str, note: DeliveryReceived) -> None:
        """An attempt is one acquisition: the same attempt of a message given to two acquiring clients is a duplicate.

        Judged by the clients' intent, so a consumer that declared itself a browser to the queue
        (whose deliveries the queue and its notes then count as no acquisition) is still caught.
        """
        key = (note.queue, note.message_id, note.attempt)
        taker = (client, note.consumer_id)
        first = self.attempts.setdefault(key, taker)
        if first != taker:
            self.twice.append(
                f"t={time:g}: {client} (consumer {note.consumer_id}) was given attempt {note.attempt} of "
                f"{note.message_id}, already given to {first[0]} (consumer {first[1]}): two acquiring clients "
                "took one delivery"
            )

    def _given_wrongly(self, time: float, client: str, what: str, message_id: str) -> None:
        if message_id not in self.sent:
            self.left.append((time, client, f"{what}, but no publisher sent it (a phantom)", message_id))
        elif message_id in self.refused:
            self.left.append((time, client, f"{what}, but its publish was refused", message_id))

    def unsettled(self) -> frozenset[str]:
        """Sent messages the clients have not settled: never confirmed, or confirmed and acked by no receiver."""
        return frozenset(
            message_id for message_id in self.sent
            if message_id not in self.refused and (message_id not in self.confirmed or message_id not in self.acked)
        )


def unsettled_by_clients(trace: Iterable[TraceEvent]) -> frozenset[str]:
    """Message ids the clients' history leaves open: sent and not refused, yet not both confirmed and acked.

    A run whose clients left something open ends with a final browse (the scenarios' harness asks
    this, so a healthy run, where every publish was confirmed and acked, needs none).
    """
    return _Ledger(trace).unsettled()


def total_queue(trace: Iterable[TraceEvent]) -> CheckResult:
    """Jepsen's total queue, from the clients' history alone: every confirmed message was acked, or is still there.

    Every message a publisher had confirmed must have been acked by an acquiring client that was
    given it (an ack of a delivery it received), or be found by the final browse still in the
    queue or in its dead-letter queue. A publish neither confirmed nor refused by the time the run
    went quiet is a violation (the queue owes its publisher an answer); so is a message given or
    found that no publisher sent (a phantom) or whose publish was refused, and one delivery attempt
    of a message given to two acquiring clients (each acquisition is a new attempt). Redeliveries
    are allowed (at least once): they are counted, not judged. A message the publisher gave a TTL
    that ran out before the final browse (``sent + ttl``, a lower bound of its expiry) may be
    missing: it is counted as ``expired`` (``expiry`` checks it was not delivered after).

    Whether the run went quiet is read from the final browse: the harness browses only a quiet
    run, and only one whose clients left something open, so a run that every client settled needs
    no browse, and a run cut off before it went quiet has its open messages counted as
    ``unresolved`` (its report already says it never went quiet) rather than called lost.
    """
    ledger = _Ledger(trace)
    expired = 0
    violations = [f"t={time:g}: {client}: {message_id} {what}" for time, client, what, message_id in ledger.left]
    violations += ledger.twice
    finished = bool(ledger.browsed)
    lost = unanswered = unresolved = dead = still = 0
    for message_id, sent_at in ledger.sent.items():
        confirmed = message_id in ledger.confirmed
        acker = ledger.acked.get(message_id)
        if message_id in ledger.refused or (confirmed and acker is not None):
            continue
        if not finished:
            unresolved += 1
            continue
        where = ledger.found.get(message_id)
        if not confirmed:
            unanswered += 1
            seen = [f"acked by {acker}"] if acker is not None else []
            seen += [f"found in {where}"] if where is not None else []
            violations.append(f"{message_id}, sent at t={sent_at:g}, was never confirmed nor refused"
                              + (f", yet it was {' and '.join(seen)}" if seen else ", and no client acked or found it"))
        elif where is not None:
            if ledger.browsed.get(where, False):
                dead += 1
            else:
                still += 1
        elif ledger.lapses_at.get(message_id, ledger.browse_time + 1) <= ledger.browse_time:
            expired += 1  # its TTL ran out before the end: the queue may drop it (``expiry`` judges when)
        else:
            lost += 1
            fate = "given but never acked" if ledger.received.get(message_id) else "never given to a client"
            violations.append(f"{message_id} was confirmed to its publisher, {fate}, and not found at the end in "
                              f"{' or '.join(sorted(ledger.browsed))}")
    redelivered = sum(max(0, count - 1) for count in ledger.received.values())
    return CheckResult.of(
        "total_queue", violations, sent=len(ledger.sent), confirmed=len(ledger.confirmed),
        refused=len(ledger.refused), acked=len(ledger.acked), redelivered=redelivered, still_queued=still,
        dead_lettered=dead, expired=expired, lost=lost, unanswered=unanswered, unresolved=unresolved,
        phantoms=len(ledger.left), taken_twice=len(ledger.twice), browsed=float(finished),
    )
