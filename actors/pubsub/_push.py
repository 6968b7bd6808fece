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
from collections import deque
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
)
from ._protocol import Envelope
from ._push_core import (
    MAX_OUTSTANDING_PUSHES,
    HttpPost,
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
    connection = connection_type(parts.hostname or "", parts.port, timeout=timeout_s)
    try:
        connection.request("POST", path, body=request.body, headers=dict(request.headers))
        response = connection.getresponse()
        response.read()
        return response.status, ""
    except (OSError, http.client.HTTPException) as error:
        return None, f"{type(error).__name__}: {error}"
    finally:
        connection.close()


@final
class PushActor(Actor):
    """Pushes one subscription's messages to its endpoint (a child of its ``SubscriptionActor``).

    Args:
        subscription_name / subscription: the subscription, by name and by actor.
        settings: its ``push_config``.
        pusher: makes the requests off the actor.
        timeout_s: how long an endpoint has to answer (the subscription's ack deadline).
        max_outstanding: requests in flight at most (the stream's credit).
    """

    def __init__(
        self,
        subscription_name: str,
        subscription: ActorRef,
        settings: PushSettings,
        pusher: Pusher,
        timeout_s: float,
        max_outstanding: int = MAX_OUTSTANDING_PUSHES,
    ) -> None:
        self.subscription_name = subscription_name
        self.subscription = subscription
        self.settings = settings
        self.pusher = pusher
        self.timeout_s = timeout_s
        self.max_outstanding = max_outstanding
        self.binding: ActorRef | None = None
        self.asking = False
        self.backoff = PushBackoff()
        self.paused: TimerHandle | None = None
        self.paused_until = 0.0
        self.held: list[tuple[str, PushDelivery]] = []  # came during a pause (asked for before it): pushed after
        self.next_token = 0
        self.in_flight: dict[int, tuple[str, str]] = {}  # push token -> (the ack id it settles, its ordering key)
        self.ordered = False  # the subscription orders by key: one push in flight per key, the rest behind it
        self.behind: dict[str, deque[tuple[str, PushDelivery]]] = {}  # ordering key -> waiting, once one is in flight
        self.tell: Callable[[object], None] | None = None

    def on_start(self) -> None:
        """Open the stream the pushes come from."""
        self.tell = self.ctx.teller_for_threads(self.ctx.self_ref)
        self._open()

    def _open(self) -> None:
        settings = StreamSettings(self.subscription_name, int(self.timeout_s), self.max_outstanding, 0)
        self.ctx.send(self.subscription, Envelope(OpenStream(settings), self.ctx.self_ref))

    def on_stop(self) -> None:
        """Give back what is in flight (redelivered at once, to pull clients too) and end the stream."""
        waiting = [*self.held, *(pair for queue in self.behind.values() for pair in queue)]
        given_back = (*(ack_id for ack_id, _ in self.in_flight.values()), *(ack_id for ack_id, _ in waiting))
        if given_back:
            self._settle(SettleKind.MODACK, given_back)
            self.in_flight.clear()
            self.held = []
            self.behind.clear()
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
                                                    attempt if attempts else None))
                              for ack_id, pub, attempt in received]
                if self.paused is not None and deliveries:
                    self._hold(deliveries)
                else:
                    for ack_id, delivery in deliveries:
                        self._dispatch(ack_id, delivery)
                self._ask()
            case PushAnswered():
                self._answered(message)
            case _Resume():
                self.paused = None
                held, self.held = self.held, []
                for ack_id, delivery in held:
                    self._dispatch(ack_id, delivery)
                self._ask()
            case UsePushSettings(settings=settings, timeout_s=timeout_s):
                self.settings, self.timeout_s = settings, timeout_s
            case StreamClosed() | Failed():
                self.binding, self.asking = None, False
                self.ctx.schedule(_REOPEN_S, _Reopen())
            case _Reopen():
                if self.binding is None:
                    self._open()

    def _hold(self, deliveries: list[tuple[str, PushDelivery]]) -> None:
        """Keep deliveries until the backoff ends, their leases extended past it (so they do not lapse meanwhile)."""
        self.held.extend(deliveries)
        self._extend(tuple(ack_id for ack_id, _ in deliveries), self.paused_until - self.ctx.now() + self.timeout_s)

    def _extend(self, ack_ids: tuple[str, ...], seconds: float) -> None:
        """Extend the leases of deliveries that wait here (a deadline of at most Pub/Sub's 600 s)."""
        self._settle(SettleKind.MODACK, ack_ids, min(600, math.ceil(seconds) + 1))

    def _dispatch(self, ack_id: str, delivery: PushDelivery) -> None:
        """Push now, or (ordered, its key's previous message still in flight) queue it behind that one."""
        key = delivery.ordering_key if self.ordered else ""
        queue = self.behind.get(key) if key else None
        if queue is not None:
            queue.append((ack_id, delivery))
            self._extend((ack_id,), len(queue) * self.timeout_s + self.timeout_s)
            return
        if key:
            self.behind[key] = deque()
        self._push(ack_id, delivery, key)

    def _push(self, ack_id: str, delivery: PushDelivery, key: str) -> None:
        self.next_token += 1
        token = self.next_token
        self.in_flight[token] = (ack_id, key)
        assert self.tell is not None
        self.pusher.post(push_request(self.settings, delivery), self.timeout_s, token, self.tell)

    def _answered(self, answer: PushAnswered) -> None:
        pushed = self.in_flight.pop(answer.token, None)
        if pushed is None:
            return
        ack_id, key = pushed
        acked = acknowledges(answer.status)
        if not acked:
            logger.info("push to %s for %s failed: %s", self.settings.endpoint, self.subscription_name,
                        answer.status if answer.status is not None else answer.error)
        self._settle(SettleKind.ACK if acked else SettleKind.MODACK, (ack_id,))
        if key:
            self._next_of_key(key, acked)
        self.backoff = self.backoff.after(acked)
        pause = self.backoff.pause_s()
        if pause > 0 and self.paused is None:
            self.paused = self.ctx.schedule(pause, _Resume())
            self.paused_until = self.ctx.now() + pause
        self._ask()

    def _next_of_key(self, key: str, acked: bool) -> None:
        """After a keyed push: acked, push the key's next message; nacked, give back all behind it (order kept)."""
        queue = self.behind.get(key)
        if queue is None:
            return
        if not acked and queue:
            self._settle(SettleKind.MODACK, tuple(ack_id for ack_id, _ in queue))
            queue.clear()
        if not queue:
            del self.behind[key]
            return
        ack_id, delivery = queue.popleft()
        self._push(ack_id, delivery, key)

    def _settle(self, kind: SettleKind, ack_ids: tuple[str, ...], seconds: int = 0) -> None:
        """Ack, nack (a deadline of 0) or extend, through the subscription, as a client's Acknowledge would."""
        self.ctx.send(self.subscription, Envelope(Settle(self.subscription_name, kind, ack_ids, seconds), None))

    def _ask(self) -> None:
        """Ask the stream for more unless a request is out, the backoff pauses, or every push slot is taken."""
        if self.binding is None or self.asking or self.paused is not None:
            return
        waiting = sum(len(queue) for queue in self.behind.values())
        if len(self.in_flight) + len(self.held) + waiting >= self.max_outstanding:
            return
        self.asking = True
        self.ctx.send(self.binding, NextBatch(_ASK_WAIT_S))


@final
@attrs.frozen
class UsePushSettings:
    """Subscription -> its push actor: the subscription's push_config or ack deadline changed."""

    settings: PushSettings
    timeout_s: float


@final
@attrs.frozen
class _Resume:
    """Push actor's timer: the push backoff is over."""


@final
@attrs.frozen
class _Reopen:
    """Push actor's timer: open the stream again."""
