"""Push subscriptions, sans I/O: what a push endpoint is sent, what its answer means, when to push again.

Pure values and functions, no clock and no socket: ``PushSettings`` is a subscription's
``push_config``; ``push_request`` builds the HTTP POST Pub/Sub sends for one delivery (the JSON
envelope, or with ``no_wrapper`` the raw data and, with ``write_metadata``, the metadata and
attributes as headers); ``acknowledges`` reads the endpoint's status as an ack or a nack; and
``PushBackoff`` is the service's push backoff: after consecutive failures the subscription stops
pushing for 100 ms, doubling per failure up to 60 s, and any success ends it.
"""

from __future__ import annotations

import base64
import datetime
import json
from collections import deque
from typing import Any, Final, Generic, TypeVar, final
from urllib.parse import urlsplit

import attrs

ACK_STATUSES: Final = frozenset({102, 200, 201, 202, 204})
"""HTTP statuses a push endpoint acknowledges with (Pub/Sub's list); anything else is a nack."""
MIN_PUSH_BACKOFF_S: Final = 0.1
MAX_PUSH_BACKOFF_S: Final = 60.0
MAX_OUTSTANDING_PUSHES: Final = 16
"""Push requests a subscription has in flight at most (its binding's credit): the flow control."""
METADATA_PREFIX: Final = "x-goog-pubsub-"


@final
@attrs.frozen
class PushSettings:
    """A subscription's ``push_config``: where to POST, and in which form.

    ``attributes`` and the OIDC token settings are kept and echoed (conveyor sends no
    ``Authorization`` header: it has no Google key to sign a token with).
    """

    endpoint: str
    attributes: tuple[tuple[str, str], ...] = ()
    no_wrapper: bool = False
    write_metadata: bool = False
    oidc_service_account: str = ""
    oidc_audience: str = ""


def endpoint_refusal(endpoint: str) -> str | None:
    """Why ``endpoint`` cannot be pushed to (naming the field), or None for an absolute http(s) URL."""
    try:
        parts = urlsplit(endpoint)
    except ValueError as error:
        return f"push_config.push_endpoint: not a URL ({error}): {endpoint!r}"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"push_config.push_endpoint: must be an absolute http:// or https:// URL, got {endpoint!r}"
    return None


def acknowledges(status: int | None) -> bool:
    """Whether an endpoint's answer acks the message: one of ``ACK_STATUSES``; None (no answer) never does."""
    return status in ACK_STATUSES


@final
@attrs.frozen
class PushBackoff:
    """The push backoff: ``failures`` consecutive nacks so far; none pauses nothing."""

    failures: int = 0

    def after(self, acked: bool) -> PushBackoff:
        """The backoff once one more push was acked (reset) or not (one more failure)."""
        return PushBackoff(0) if acked else PushBackoff(self.failures + 1)

    def pause_s(self) -> float:
        """How long to start no new push: 0 without failures, else 100 ms doubling per failure, capped at 60 s."""
        if self.failures == 0:
            return 0.0
        exponent = min(self.failures - 1, 20)
        return min(MAX_PUSH_BACKOFF_S, MIN_PUSH_BACKOFF_S * float(2**exponent))


@final
@attrs.frozen
class PushDelivery:
    """One message to push, as the subscription handed it out."""

    subscription: str
    data: bytes
    attributes: tuple[tuple[str, str], ...]
    message_id: str
    publish_time_ns: int
    ordering_key: str = ""
    delivery_attempt: int | None = None
    """Set only when the subscription has a dead-letter policy (Pub/Sub's ``deliveryAttempt``)."""


@final
@attrs.frozen
class HttpPost:
    """A POST to make: the URL, its body and its headers (name, value) in order."""

    url: str
    body: bytes
    headers: tuple[tuple[str, str], ...]


def rfc3339(time_ns: int) -> str:
    """``time_ns`` (since the epoch) as Pub/Sub writes a publish time: UTC, nanoseconds, ``Z``."""
    seconds, nanos = divmod(time_ns, 1_000_000_000)
    moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{nanos:09d}Z"


def envelope(delivery: PushDelivery) -> dict[str, Any]:
    """The wrapped form's JSON object: ``message`` (both spellings of its ids and times) and ``subscription``."""
    published = rfc3339(delivery.publish_time_ns)
    message: dict[str, Any] = {
        "data": base64.b64encode(delivery.data).decode("ascii"),
        "attributes": dict(delivery.attributes),
        "messageId": delivery.message_id,
        "message_id": delivery.message_id,
        "publishTime": published,
        "publish_time": published,
    }
    if delivery.ordering_key:
        message["orderingKey"] = delivery.ordering_key
    wrapped: dict[str, Any] = {"message": message, "subscription": delivery.subscription}
    if delivery.delivery_attempt is not None:
        wrapped["deliveryAttempt"] = delivery.delivery_attempt
    return wrapped


def push_request(settings: PushSettings, delivery: PushDelivery) -> HttpPost:
    """The POST Pub/Sub makes for ``delivery`` under ``settings``."""
    if not settings.no_wrapper:
        body = json.dumps(envelope(delivery), separators=(",", ":")).encode()
        return HttpPost(settings.endpoint, body, (("Content-Type", "application/json"),))
    headers: list[tuple[str, str]] = []
    if settings.write_metadata:
        headers += [
            (METADATA_PREFIX + "subscription-name", delivery.subscription),
            (METADATA_PREFIX + "message-id", delivery.message_id),
            (METADATA_PREFIX + "publish-time", rfc3339(delivery.publish_time_ns)),
        ]
        if delivery.delivery_attempt is not None:
            headers.append((METADATA_PREFIX + "delivery-attempt", str(delivery.delivery_attempt)))
        if delivery.ordering_key:
            headers.append((METADATA_PREFIX + "ordering-key", delivery.ordering_key))
        headers += [(name, value) for name, value in delivery.attributes if _header_safe(name, value)]
    return HttpPost(settings.endpoint, delivery.data, tuple(headers))


def _header_safe(name: str, value: str) -> bool:
    """Whether an attribute can go out as an HTTP header: a token name, a value without line breaks."""
    return bool(name) and name.isascii() and all(c.isalnum() or c in "-_." for c in name) \
        and "\r" not in value and "\n" not in value


def settings_from_pb(push_config: Any) -> PushSettings | None:
    """``PushSettings`` from a ``PushConfig`` message (None when it names no endpoint: a pull subscription).

    Raises:
        ValueError: a bad endpoint, naming the field.
    """
    endpoint = push_config.push_endpoint
    if not endpoint:
        return None
    refused = endpoint_refusal(endpoint)
    if refused is not None:
        raise ValueError(refused)
    no_wrapper = push_config.HasField("no_wrapper")
    return PushSettings(
        endpoint,
        tuple(sorted(push_config.attributes.items())),
        no_wrapper,
        no_wrapper and push_config.no_wrapper.write_metadata,
        push_config.oidc_token.service_account_email,
        push_config.oidc_token.audience,
    )


def settings_into_pb(settings: PushSettings, push_config: Any) -> None:
    """Write ``settings`` into a ``PushConfig`` message (the inverse of ``settings_from_pb``)."""
    push_config.push_endpoint = settings.endpoint
    push_config.attributes.update(dict(settings.attributes))
    if settings.no_wrapper:
        push_config.no_wrapper.write_metadata = settings.write_metadata
    if settings.oidc_service_account or settings.oidc_audience:
        push_config.oidc_token.service_account_email = settings.oidc_service_account
        push_config.oidc_token.audience = settings.oidc_audience


Item = TypeVar("Item")


@attrs.define
class _KeyState(Generic[Item]):
    """One ordering key at the push actor: the message pushed now, those waiting, the nacked one awaited."""

    in_flight: str | None = None
    waiting: deque[tuple[str, Item]] = attrs.field(factory=deque)  # (message id, item), arrival order
    awaited: str | None = None  # nacked: its key pushes nothing else until it is back, or until ``until``
    until: float = 0.0


class KeyGate(Generic[Item]):
    """Ordered push, sans I/O: one push in flight per ordering key, and a nacked message pushed again first.

    Items are opaque (the actor's deliveries); the caller passes the clock. ``admit`` says whether
    an arriving message goes out now or waits behind its key (in arrival order, which is publish
    order for first deliveries). After an ack the key's next message goes; after a nack the key
    waits for the nacked message to come back (``admit`` of it pushes it first), at most until
    ``until``, which ``expire`` enforces: it may never come back (dead-lettered, seeked past).
    """

    def __init__(self) -> None:
        self.keys: dict[str, _KeyState[Item]] = {}

    def admit(self, key: str, message_id: str, item: Item, now: float) -> list[Item]:
        """The items to push now for an arriving message (itself, or none: it waits behind its key)."""
        if not key:
            return [item]
        state = self.keys.setdefault(key, _KeyState[Item]())
        if state.awaited is not None:
            if message_id != state.awaited and now < state.until:
                self._wait(state, message_id, item)
                return []
            state.awaited = None
        if state.in_flight is not None:
            self._wait(state, message_id, item)
            return []
        state.in_flight = message_id
        return [item]

    @staticmethod
    def _wait(state: _KeyState[Item], message_id: str, item: Item) -> None:
        """Queue ``item``; a message redelivered while it waited takes its old place (its old item is stale)."""
        for index, (waiting_id, _) in enumerate(state.waiting):
            if waiting_id == message_id:
                state.waiting[index] = (message_id, item)
                return
        state.waiting.append((message_id, item))

    def finished(self, key: str, message_id: str, acked: bool, comes_back: bool, until: float) -> list[Item]:
        """The items to push now that the push of ``message_id`` was answered.

        ``comes_back``: a nacked message will be delivered again (not dead-lettered); its key then
        waits for it until ``until``, its other messages kept in their order.
        """
        state = self.keys.get(key)
        if not key or state is None or state.in_flight != message_id:
            return []
        state.in_flight = None
        if not acked and comes_back:
            state.awaited, state.until = message_id, until
            return []
        return self._next(key, state)

    def postpone(self, key: str, until: float) -> None:
        """Wait longer for the key's nacked message (the actor paused, so it could not have come back yet)."""
        state = self.keys.get(key)
        if state is not None and state.awaited is not None:
            state.until = max(state.until, until)

    def expire(self, key: str, now: float) -> list[Item]:
        """The items to push once the key's wait for a nacked message is over (it did not come back in time)."""
        state = self.keys.get(key)
        if state is None or state.awaited is None or now < state.until:
            return []
        state.awaited = None
        return self._next(key, state)

    def _next(self, key: str, state: _KeyState[Item]) -> list[Item]:
        if state.in_flight is None and state.waiting:
            message_id, item = state.waiting.popleft()
            state.in_flight = message_id
            return [item]
        self._forget_if_idle(key, state)
        return []

    def _forget_if_idle(self, key: str, state: _KeyState[Item]) -> None:
        if state.in_flight is None and not state.waiting and state.awaited is None:
            del self.keys[key]

    def waiting(self) -> int:
        """How many messages wait behind their keys."""
        return sum(len(state.waiting) for state in self.keys.values())

    def drain(self) -> list[Item]:
        """Every waiting item, forgotten (the actor stops and gives them back)."""
        items = [item for state in self.keys.values() for _, item in state.waiting]
        self.keys.clear()
        return items
