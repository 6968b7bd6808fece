"""Push subscriptions on actors: ``PushActor`` consumes a subscription as a stream does and POSTs what it gets.

A push subscription's ``SubscriptionActor`` spawns one ``PushActor``. It opens a stream on its
subscription (a ``Binding`` whose credit, ``MAX_OUTSTANDING_PUSHES``, bounds the requests in
flight), hands each delivery to a ``Pusher`` (the I/O, off the actor: ``HttpPusher``'s own
threads) and gets a ``PushAnswered`` back as a message. ``_push_core`` decides the rest: an
acking status acks through the subscription (so its Seek log and exactly-once confirmations see
it), anything else nacks (the queue's retry policy and dead-letter policy apply) and starts the
push backoff, during which the actor asks its stream for nothing.
"""

from __future__ import annotations

import http.client
import logging
import math
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, final
from urllib.parse import urlsplit

import attrs

from conveyor.runtime import Actor, ActorRef, TimerHandle

from ._model import (
    Batch,
    Detach,
    Failed,
    NextBatch,
    OpenStream,
    Settle,
    SettleKind,
    StreamClosed,
    StreamOpened,
    StreamSettings,
    SubscriptionConfig,
)
from ._protocol import Envelope
from ._push_core import (
    MAX_OUTSTANDING_PUSHES,
    HttpPost,
    KeyGate,
    PushBackoff,
    PushDelivery,
    PushSettings,
    acknowledges,
    push_request,
)

logger = logging.getLogger("conveyor.pubsub.push")
_ASK_WAIT_S = 30.0  # a NextBatch waits this long for a message before an empty answer (then asked again)
_REOPEN_S = 1.0  # after the stream closed or could not open, open it again this much later


@final
@attrs.frozen
class PushAnswered:
    """Pusher -> push actor: the endpoint's answer to push ``token``: its status, or None and why (no answer)."""

    token: int
    status: int | None
    error: str = ""


class Pusher(Protocol):
    """Makes push requests off the actor; ``tell`` gets the ``PushAnswered`` (from any thread)."""

    def post(self, request: HttpPost, timeout_s: float, token: int, tell: Callable[[object], None]) -> None:
        """Start ``request`` (without blocking); ``tell(PushAnswered(token, ...))`` once it is answered."""
        ...


@final
class HttpPusher:
    """``Pusher`` over ``http.client`` on its own threads (a slow endpoint never holds the actors' job workers).

    Args:
        workers: threads making requests (requests beyond wait their turn).
        max_timeout_s: the longest a request waits for its answer, whatever the subscription's
            ack deadline (tests make it short so a timeout test takes less than the 10 s minimum).
    """

    def __init__(self, workers: int = 16, max_timeout_s: float | None = None) -> None:
        if type(workers) is not int or workers < 1:
            msg = f"HttpPusher workers must be an int >= 1, got {workers!r}"
            raise ValueError(msg)
        if max_timeout_s is not None and not max_timeout_s > 0:
            msg = f"HttpPusher max_timeout_s must be > 0 or None, got {max_timeout_s!r}"
            raise ValueError(msg)
        self.max_timeout_s = max_timeout_s
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="conveyor-push")
        self._closed = threading.Event()

    def post(self, request: HttpPost, timeout_s: float, token: int, tell: Callable[[object], None]) -> None:
        """Queue ``request`` on the pusher's threads; a closed pusher answers nothing."""
        if self._closed.is_set():
            return
        if self.max_timeout_s is not None:
            timeout_s = min(timeout_s, self.max_timeout_s)
        try:
            self._executor.submit(self._run, request, timeout_s, token, tell)
        except RuntimeError:  # shut down meanwhile
            return

    def _run(self, request: HttpPost, timeout_s: float, token: int, tell: Callable[[object], None]) -> None:
        status, error = send_post(request, timeout_s)
        if not self._closed.is_set():
            tell(PushAnswered(token, status, error))

    def close(self) -> None:
        """Stop making requests (those under way finish; their answers are dropped)."""
        self._closed.set()
        self._executor.shutdown(wait=False, cancel_futures=True)


def send_post(request: HttpPost, timeout_s: float) -> tuple[int | None, str]:
    """POST ``request``, blocking up to ``timeout_s`` per socket operation: (status, "") or (None, why)."""
    parts = urlsplit(request.url)
    connection_type = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    # http.client sends str header values as latin-1: anything else (an attribute in UTF-8) goes as its bytes.
    headers = {name: value if value.isascii() else value.encode() for name, value in request.headers}
    try:
        connection = connection_type(parts.hostname or "", parts.port, timeout=timeout_s)
    except (ValueError, OSError) as error:
        return None, f"{type(error).__name__}: {error}"
    try:
        connection.request("POST", path, body=request.body, headers=headers)
        response = connection.getresponse()
        response.read()
        return response.status, ""
    except Exception as error:  # noqa: BLE001 - any failure to get an answer is a nack, never a lost slot
        return None, f"{type(error).__name__}: {error}"
    finally:
        connection.close()


@final
class PushActor(Actor):
    """Pushes one subscription's messages to its endpoint (a child of its ``SubscriptionActor``).

    Args:
        subscription_name / subscription: the subscription, by name and by actor.
        pusher: makes the requests off the actor.
        terms: what it needs of the subscription's config (``PushTerms``).
        max_outstanding: requests in flight at most (the stream's credit).
    """

    def __init__(
        self,
        subscription_name: str,
        subscription: ActorRef,
        pusher: Pusher,
        terms: PushTerms,
        max_outstanding: int = MAX_OUTSTANDING_PUSHES,
    ) -> None:
        self.subscription_name = subscription_name
        self.subscription = subscription
        self.pusher = pusher
        self.settings, self.timeout_s = terms.settings, terms.timeout_s
        self.redelivery_s, self.last_attempt = terms.redelivery_s, terms.last_attempt
        self.max_outstanding = max_outstanding
        self.binding: ActorRef | None = None
        self.asking = False
        self.backoff = PushBackoff()
        self.paused: TimerHandle | None = None
        self.paused_until = 0.0
        self.held: list[tuple[str, PushDelivery, int]] = []  # came during a pause (asked for before it): pushed after
        self.next_token = 0
        self.in_flight: dict[int, tuple[str, PushDelivery, int]] = {}  # push token -> (ack id, delivery, attempt)
        self.ordered = False  # the subscription orders by key: the gate keeps each key's pushes in order
        self.gate: KeyGate[tuple[str, PushDelivery, int]] = KeyGate()
        self.tell: Callable[[object], None] | None = None

    def on_start(self) -> None:
        """Open the stream the pushes come from."""
        self.tell = self.ctx.teller_for_threads(self.ctx.self_ref)
        self._open()

    def _open(self) -> None:
        # Ack deadline 0: the subscription's own (the simulator runs deadlines below the stream's 10 s minimum).
        settings = StreamSettings(self.subscription_name, 0, self.max_outstanding, 0)
        self.ctx.send(self.subscription, Envelope(OpenStream(settings), self.ctx.self_ref))

    def on_stop(self) -> None:
        """Give back what is in flight (redelivered at once, to pull clients too) and end the stream."""
        waiting = [*self.held, *self.in_flight.values(), *self.gate.drain()]
        if waiting:
            self._settle(SettleKind.MODACK, tuple(ack_id for ack_id, _, _ in waiting))
            self.in_flight.clear()
            self.held = []
        if self.binding is not None:
            self.ctx.send(self.binding, Detach())

    def receive(self, message: Any) -> None:
        """Deliveries in, POSTs out, answers back as acks and nacks."""
        match message:
            case StreamOpened(binding=binding):
                self.binding = binding
                self._ask()
            case Batch(received=received, delivery_attempts=attempts, ordering=ordering):
                self.asking = False
                self.ordered = ordering
                deliveries = [(ack_id, PushDelivery(self.subscription_name, pub.data, pub.attributes, pub.message_id,
                                                    pub.publish_time_ns, pub.ordering_key,
                                                    attempt if attempts else None), attempt)
                              for ack_id, pub, attempt in received]
                if self.paused is not None and deliveries:
                    self._hold(deliveries)
                else:
                    for pushed in deliveries:
                        self._dispatch(pushed)
                self._ask()
            case PushAnswered():
                self._answered(message)
            case _Resume():
                self.paused = None
                held, self.held = self.held, []
                for pushed in held:
                    self._dispatch(pushed)
                self._ask()
            case PushTerms(settings=settings, timeout_s=timeout_s):
                self.settings, self.timeout_s = settings, timeout_s
                self.redelivery_s, self.last_attempt = message.redelivery_s, message.last_attempt
            case _KeyWaitOver(key=key):
                if self.paused is not None:  # its message may be held, or not yet asked for: wait past the pause
                    wait_s = self.paused_until - self.ctx.now() + self.redelivery_s + self.timeout_s
                    self.gate.postpone(key, self.ctx.now() + wait_s)
                    self.ctx.schedule(wait_s, _KeyWaitOver(key))
                    return
                for pushed in self.gate.expire(key, self.ctx.now()):
                    self._push(pushed)
                self._ask()
            case StreamClosed() | Failed():
                self.binding, self.asking = None, False
                self.ctx.schedule(_REOPEN_S, _Reopen())
            case _Reopen():
                if self.binding is None:
                    self._open()

    def _hold(self, deliveries: list[tuple[str, PushDelivery, int]]) -> None:
        """Keep deliveries until the backoff ends, their leases extended past it (so they do not lapse meanwhile)."""
        self.held.extend(deliveries)
        self._extend(tuple(ack_id for ack_id, _, _ in deliveries), self.paused_until - self.ctx.now() + self.timeout_s)

    def _extend(self, ack_ids: tuple[str, ...], seconds: float) -> None:
        """Extend the leases of deliveries that wait here (a deadline of at most Pub/Sub's 600 s)."""
        self._settle(SettleKind.MODACK, ack_ids, min(600, math.ceil(seconds) + 1))

    def _dispatch(self, pushed: tuple[str, PushDelivery, int]) -> None:
        """Push now, or (ordered) once the gate lets its key go on; a waiting delivery's lease is extended."""
        ack_id, delivery, _ = pushed
        key = delivery.ordering_key if self.ordered else ""
        now_pushed = self.gate.admit(key, delivery.message_id, pushed, self.ctx.now())
        for item in now_pushed:
            self._push(item)
        if not now_pushed:
            waiting = len(self.gate.keys[key].waiting)
            self._extend((ack_id,), waiting * self.timeout_s + self.redelivery_s + self.timeout_s)

    def _push(self, pushed: tuple[str, PushDelivery, int]) -> None:
        self.next_token += 1
        token = self.next_token
        self.in_flight[token] = pushed
        delivery = pushed[1]
        assert self.tell is not None
        self.pusher.post(push_request(self.settings, delivery), self.timeout_s, token, self.tell)

    def _answered(self, answer: PushAnswered) -> None:
        pushed = self.in_flight.pop(answer.token, None)
        if pushed is None:
            return
        ack_id, delivery, attempt = pushed
        acked = acknowledges(answer.status)
        if not acked:
            logger.info("push to %s for %s failed: %s", self.settings.endpoint, self.subscription_name,
                        answer.status if answer.status is not None else answer.error)
        self._settle(SettleKind.ACK if acked else SettleKind.MODACK, (ack_id,))
        self.backoff = self.backoff.after(acked)
        pause = self.backoff.pause_s()
        if self.ordered and delivery.ordering_key:
            self._next_of_key(delivery, acked, attempt, pause)
        if pause > 0 and self.paused is None:
            self.paused = self.ctx.schedule(pause, _Resume())
            self.paused_until = self.ctx.now() + pause
        self._ask()

    def _next_of_key(self, delivery: PushDelivery, acked: bool, attempt: int, pause_s: float) -> None:
        """After a keyed push: push the key's next message, or (nacked) wait for this one to come back first."""
        key = delivery.ordering_key
        comes_back = self.last_attempt is None or attempt < self.last_attempt
        wait_s = pause_s + self.redelivery_s + self.timeout_s
        for item in self.gate.finished(key, delivery.message_id, acked, comes_back, self.ctx.now() + wait_s):
            self._push(item)
        if not acked and comes_back:
            self.ctx.schedule(wait_s, _KeyWaitOver(key))
            waiting = self.gate.keys[key].waiting
            if waiting:  # kept in their order until it is back: their leases must outlast the wait
                self._extend(tuple(ack_id for _, (ack_id, _, _) in waiting), wait_s + len(waiting) * self.timeout_s)

    def _settle(self, kind: SettleKind, ack_ids: tuple[str, ...], seconds: int = 0) -> None:
        """Ack, nack (a deadline of 0) or extend, through the subscription, as a client's Acknowledge would."""
        self.ctx.send(self.subscription, Envelope(Settle(self.subscription_name, kind, ack_ids, seconds), None))

    def _ask(self) -> None:
        """Ask the stream for more unless a request is out, the backoff pauses, or every push slot is taken."""
        if self.binding is None or self.asking or self.paused is not None:
            return
        if len(self.in_flight) + len(self.held) + self.gate.waiting() >= self.max_outstanding:
            return
        self.asking = True
        self.ctx.send(self.binding, NextBatch(_ASK_WAIT_S))


@final
@attrs.frozen
class PushTerms:
    """What a push actor needs of its subscription's config; sent again to it when they change.

    Attributes:
        settings: the ``push_config``.
        timeout_s: how long an endpoint has to answer (the subscription's ack deadline).
        redelivery_s: how long a nacked message may take to come back (the retry policy's maximum
            backoff): an ordering key waits that long (plus ``timeout_s``) for it, then goes on.
        last_attempt: the dead-letter policy's ``max_delivery_attempts`` (a nack of that attempt
            dead-letters the message, which never comes back); None without a policy.
    """

    settings: PushSettings
    timeout_s: float
    redelivery_s: float = 0.0
    last_attempt: int | None = None


def push_terms(config: SubscriptionConfig) -> PushTerms | None:
    """The push terms of a subscription's config; None for a pull subscription."""
    if config.push is None:
        return None
    return PushTerms(config.push, float(config.ack_deadline_s), config.retry.max_backoff_s if config.retry else 0.0,
                     config.dead_letter.max_delivery_attempts if config.dead_letter else None)


@final
@attrs.frozen
class _Resume:
    """Push actor's timer: the push backoff is over."""


@final
@attrs.frozen
class _KeyWaitOver:
    """Push actor's timer: the key's wait for its nacked message to come back may be over."""

    key: str


@final
@attrs.frozen
class _Reopen:
    """Push actor's timer: open the stream again."""
