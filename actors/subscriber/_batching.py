"""The dispatcher's request batching: ack, nack, modify-ack-deadline and drop requests, flushed together.

This is the sans-IO core of the dispatcher actor that seed 003 proposes (the Pub/Sub client's
``Dispatcher``, which runs a thread on a queue). Workers and the leaser send it requests; it
sends the server one batch at a time, when ``max_batch`` distinct ack ids are pending or when
the oldest pending request is ``max_delay_s`` old, whichever comes first.

Within one batch each ack id is sent at most once. The rule is that a later request for an ack
id supersedes an earlier one, with one exception: **once acked stays acked**. An ack is the
user's final word that the message was handled; a nack, modack or drop that arrives after it
in the same batch is a late echo (say, a lease extension that raced the callback), and letting
it win would make the server redeliver a message that was already processed. So a later ack
supersedes anything, but nothing supersedes an ack.

Drops never reach the server: a drop means "forget this message locally" (its lease ran out,
or the client is shutting down). They are still reported in the flush so the caller can
release the flow-control budget they held.

The batcher keeps no memory across flushes: a request for an id that was in an earlier flush
starts afresh. Keeping settled ids out is the lease table's job.

The class knows nothing of clocks, threads or I/O: callers pass ``now`` (seconds on any
monotonic clock), send the flushes it returns and set a timer for ``next_due_at``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeAlias, final

import attrs

from conveyor.actors.broker import DeliveryError
from conveyor.runtime import is_finite_number, quote
from conveyor.runtime.validators import fail, non_negative_number

from ._protocol import ACK_IDS, check_tuple

__all__ = [
    "AckRequest",
    "BatchedRequest",
    "DropRequest",
    "Flush",
    "ModAckRequest",
    "NackRequest",
    "RequestBatcher",
]


def _ack_id(instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str):
        msg = f"{type(instance).__name__}.{attribute.name} must be a str, got {quote(value)}"
        raise TypeError(msg)


def _attempt(_: object, attribute: attrs.Attribute[int], value: int) -> None:
    if type(value) is not int or value < 0:
        fail("NackRequest", attribute.name, "an int >= 0 (a delivery_count; 0: not known)", value)


@final
@attrs.frozen
class AckRequest:
    """Tell the server the message was handled, so it is never redelivered."""

    ack_id: str = attrs.field(validator=_ack_id)


@final
@attrs.frozen
class NackRequest:
    """Tell the server the message was abandoned, so it is redelivered (to any subscriber) now.

    ``attempt`` is the ``delivery_count`` of the delivery abandoned (0: not known, the current one):
    the server ignores a nack for a delivery older than the one it has made since (same ack id).
    ``error`` is why, when a callback raised (the queue keeps it for the dead letter).
    """

    ack_id: str = attrs.field(validator=_ack_id)
    attempt: int = attrs.field(default=0, validator=_attempt)
    error: DeliveryError | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.instance_of(DeliveryError))
    )


@final
@attrs.frozen
class ModAckRequest:
    """Tell the server to expect the message handled within ``seconds`` from now (lease extension)."""

    ack_id: str = attrs.field(validator=_ack_id)
    seconds: float = attrs.field(validator=non_negative_number)


@final
@attrs.frozen
class DropRequest:
    """Forget the message locally without telling the server; only flow control hears of it."""

    ack_id: str = attrs.field(validator=_ack_id)


_ACK = AckRequest("")
"""What the batcher holds for each ack id acked in the batch (``add_acks``): an ack carries nothing but its id,
which is the key it is held under."""
_ACK_ID_FIELD = attrs.fields(AckRequest).ack_id

BatchedRequest: TypeAlias = AckRequest | NackRequest | ModAckRequest | DropRequest
"""Any request the batcher accepts."""
_REQUEST_TYPES = frozenset((AckRequest, NackRequest, ModAckRequest, DropRequest))


@final
@attrs.frozen
class Flush:
    """One batch to carry out: send the acks, nacks and modacks to the server, release every id.

    Each ack id appears in at most one field, once. Within each field ids are in the order their
    deciding request was added (for an id acked before a later request, the ack's position).

    Attributes:
        acks: ids to acknowledge.
        nacks: ids to negatively acknowledge.
        modacks: ``(seconds, ids)`` pairs, one per distinct deadline, in the order each deadline
            was first seen in the batch.
        drops: ids to forget without telling the server (release their flow-control budget).
        nack_attempts: parallel to ``nacks``, the delivery each nack is for (``NackRequest.attempt``,
            0 if not known); empty when no nack named one.
        nack_errors: parallel to ``nacks``, why each failed (``NackRequest.error``, or None); empty
            when no nack said.
    """

    acks: tuple[str, ...] = ()
    nacks: tuple[str, ...] = ()
    modacks: tuple[tuple[float, tuple[str, ...]], ...] = ()
    drops: tuple[str, ...] = ()
    nack_attempts: tuple[int, ...] = ()
    nack_errors: tuple[DeliveryError | None, ...] = ()

    def __attrs_post_init__(self) -> None:
        for field in ("acks", "nacks", "drops"):
            check_tuple("Flush", field, getattr(self, field), str, ACK_IDS)
        modacks = self.modacks
        if type(modacks) is not tuple or not all(
            type(pair) is tuple and len(pair) == 2 and is_finite_number(pair[0]) and type(pair[1]) is tuple
            and all(type(ack_id) is str for ack_id in pair[1])
            for pair in modacks
        ):
            msg = f"Flush.modacks must be a tuple of (seconds, ack ids) pairs, got {quote(modacks)}"
            raise TypeError(msg)
        check_tuple("Flush", "nack_attempts", self.nack_attempts, int, "delivery counts (ints >= 0)")

    @property
    def size(self) -> int:
        """Return the number of distinct ack ids in the flush."""
        return len(self.acks) + len(self.nacks) + sum(len(ids) for _, ids in self.modacks) + len(self.drops)


def _flush_of(pending: dict[str, BatchedRequest]) -> Flush:
    acks: list[str] = []
    nacks: list[str] = []
    attempts: list[int] = []
    errors: list[DeliveryError | None] = []
    modacks: dict[float, list[str]] = {}
    drops: list[str] = []
    for ack_id, request in pending.items():
        kind = type(request)  # the four request classes are final: their type says which
        if kind is AckRequest:
            acks.append(ack_id)
        elif kind is ModAckRequest:
            seconds = float(request.seconds)  # type: ignore[union-attr]
            ids = modacks.get(seconds)
            if ids is None:
                modacks[seconds] = [ack_id]
            else:
                ids.append(ack_id)
        elif kind is NackRequest:
            nacks.append(ack_id)
            attempts.append(request.attempt)  # type: ignore[union-attr]
            errors.append(request.error)  # type: ignore[union-attr]
        else:
            drops.append(ack_id)
    return Flush(
        acks=tuple(acks),
        nacks=tuple(nacks),
        modacks=tuple((seconds, tuple(ids)) for seconds, ids in modacks.items()),
        drops=tuple(drops),
        nack_attempts=tuple(attempts) if any(attempts) else (),
        nack_errors=tuple(errors) if any(error is not None for error in errors) else (),
    )


@final
class RequestBatcher:
    """Collects dispatcher requests and decides when to flush them, by count or by age.

    Owned by one actor (the dispatcher), so it is unsynchronised.
    """

    __slots__ = ("_due_at", "_max_batch", "_max_delay_s", "_pending")

    def __init__(self, max_batch: int = 100, max_delay_s: float = 0.01) -> None:
        """Create an empty batcher.

        Args:
            max_batch: flush as soon as this many distinct ack ids are pending (>= 1).
            max_delay_s: flush once the oldest pending request is this many seconds old (>= 0).

        Raises:
            ValueError: ``max_batch`` < 1, or ``max_delay_s`` is negative or not finite.
            TypeError: ``max_batch`` is not an int or ``max_delay_s`` is not a number.
        """
        if not isinstance(max_batch, int) or isinstance(max_batch, bool):
            msg = f"RequestBatcher: max_batch must be an int >= 1, got {quote(max_batch)}"
            raise TypeError(msg)
        if max_batch < 1:
            msg = f"RequestBatcher: max_batch must be >= 1, got {quote(max_batch)}"
            raise ValueError(msg)
        if isinstance(max_delay_s, bool) or not isinstance(max_delay_s, (int, float)):
            msg = f"RequestBatcher: max_delay_s must be a number >= 0, got {quote(max_delay_s)}"
            raise TypeError(msg)
        if not is_finite_number(max_delay_s) or max_delay_s < 0:
            msg = f"RequestBatcher: max_delay_s must be a finite number >= 0, got {quote(max_delay_s)}"
            raise ValueError(msg)
        self._max_batch = max_batch
        self._max_delay_s = float(max_delay_s)
        self._pending: dict[str, BatchedRequest] = {}
        """The deciding request of each pending ack id, in the order it was added (an ack's may be ``_ACK``)."""
        self._due_at: float | None = None
        """When the oldest pending request is ``max_delay_s`` old; None when nothing is pending."""

    @property
    def max_batch(self) -> int:
        """Return the count of distinct ack ids that triggers a flush."""
        return self._max_batch

    @property
    def max_delay_s(self) -> float:
        """Return how old the oldest pending request may get before a flush is due."""
        return self._max_delay_s

    @property
    def pending_count(self) -> int:
        """Return the number of distinct ack ids waiting to be flushed."""
        return len(self._pending)

    def add(self, request: BatchedRequest, now: float) -> Flush | None:
        """Queue a request, superseding an earlier one for its ack id, and flush if the batch is full.

        Args:
            request: the request to queue.
            now: the current time; starts the delay if nothing was pending.

        Returns:
            A ``Flush`` of everything pending if this request made ``max_batch`` ids pending,
            else None.

        Raises:
            TypeError: ``request`` is not one of the four request types.
        """
        if type(request) not in _REQUEST_TYPES:  # the classes are final: their exact types
            msg = (
                f"RequestBatcher.add: expected an AckRequest, NackRequest, ModAckRequest or DropRequest, "
                f"got {request!r}"
            )
            raise TypeError(msg)
        pending = self._pending
        ack_id = request.ack_id
        earlier = pending.get(ack_id)
        if earlier is None:
            if not pending:
                self._due_at = now + self._max_delay_s
            pending[ack_id] = request
        elif not isinstance(earlier, AckRequest):
            # Re-insert so the id moves to the position of its deciding request.
            del pending[ack_id]
            pending[ack_id] = request
        if len(pending) >= self._max_batch:
            return self.flush()
        return None

    def add_acks(self, ack_ids: Iterable[str], now: float) -> list[Flush]:
        """Queue an ack of each of ``ack_ids`` in turn: ``add(AckRequest(ack_id), now)`` each, in one call.

        Returns:
            The flushes those adds returned, in order (none unless the batch filled up).

        Raises:
            TypeError: an ack id is not a str (those before it are queued).
        """
        flushes: list[Flush] = []
        pending = self._pending
        max_batch = self._max_batch
        for ack_id in ack_ids:
            earlier = pending.get(ack_id)
            if earlier is None:
                if type(ack_id) is not str:
                    _ack_id(_ACK, _ACK_ID_FIELD, ack_id)  # raises, naming the field
                if not pending:
                    self._due_at = now + self._max_delay_s
                pending[ack_id] = _ACK
            elif type(earlier) is not AckRequest:
                del pending[ack_id]
                pending[ack_id] = _ACK
            if len(pending) >= max_batch:
                flush = self.flush()
                assert flush is not None  # max_batch >= 1 ids pending
                flushes.append(flush)
                pending = self._pending
        return flushes

    def due(self, now: float) -> Flush | None:
        """Return a ``Flush`` of everything pending if the oldest request is at least ``max_delay_s`` old."""
        if self._due_at is None or now < self._due_at:
            return None
        return self.flush()

    def next_due_at(self) -> float | None:
        """Return when ``due`` will next flush (to set a timer for), or None if nothing is pending."""
        return self._due_at

    def flush(self) -> Flush | None:
        """Return a ``Flush`` of everything pending now, whatever its age (e.g. at shutdown), or None if empty."""
        if not self._pending:
            return None
        result = _flush_of(self._pending)
        self._pending = {}
        self._due_at = None
        return result

    def __repr__(self) -> str:
        """Show the settings and the pending count, for debugging."""
        return (
            f"<RequestBatcher pending={len(self._pending)} max_batch={self._max_batch} "
            f"max_delay_s={self._max_delay_s} due_at={self._due_at}>"
        )
