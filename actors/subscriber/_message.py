"""SubscriberMessage: what the user's callback receives, with ack / nack / modify_ack_deadline.

It lives in the worker thread, not in an actor: its methods send ``Settlement`` to the
subscription's manager through a thread-safe teller, so they may be called during
the callback or later, from any thread.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import final

from conveyor.actors.broker import Delivery, DeliveryError
from conveyor.runtime import ConveyorError, is_finite_number, quote

from ._protocol import AckResponse, AckWithResponse, Settlement, SettlementKind, ack_id_of, settlement_of


@final
class SubscriberMessage:
    """One received message as user code sees it."""

    __slots__ = (
        "_ask",
        "_attributes",
        "_message",
        "_settle",
        "_settled",
        "ack_id",
        "data",
        "delivery_attempt",
        "ordering_key",
        "tag",
    )

    def __init__(
        self,
        delivery: Delivery,
        settle: Callable[[object], None],
        ask: Callable[..., object] | None = None,
        ack_id: str | None = None,
    ) -> None:
        """Wrap ``delivery`` for a callback; ``ack_id`` is its ack id if the caller has it already."""
        message = delivery.message
        self._message = message
        self._attributes: dict[str, str | int | float | bool] | None = None
        self.data = message.body
        self.ordering_key = message.group or ""
        self.delivery_attempt = delivery.delivery_count
        self.ack_id = ack_id_of(delivery) if ack_id is None else ack_id
        self.tag = delivery.tag
        self._settle = settle
        self._ask = ask
        self._settled: SettlementKind | None = None

    @property
    def attributes(self) -> dict[str, str | int | float | bool]:
        """The message's attributes (its headers), as a dict made on first use: most callbacks never read it."""
        attributes = self._attributes
        if attributes is None:
            attributes = self._attributes = self._message.header_map()
        return attributes

    def ack(self) -> None:
        """Acknowledge: the queue forgets the message. Idempotent."""
        self._send(SettlementKind.ACK)

    def nack(self, error: BaseException | None = None) -> None:
        """Give the message back for redelivery (after the queue's retry backoff).

        ``error``, if given, says why: its type and text reach the queue with the nack, and the
        message's dead letter carries the last one (``LAST_ERROR_TYPE``, ``LAST_ERROR``). A
        callback that raises is nacked with what it raised.
        """
        if error is None:
            self._send(SettlementKind.NACK)
            return
        if not isinstance(error, BaseException):
            msg = f"nack error must be an exception (or None), got {type(error).__qualname__}"
            raise TypeError(msg)
        if self._settled is None:
            self._settled = SettlementKind.NACK
            self._settle(Settlement(SettlementKind.NACK, self.ack_id, error=DeliveryError.of(error)))

    def ack_with_response(self, timeout: float = 30.0) -> bool:
        """Ack and wait until the queue confirms it; False if the lease had lapsed (exactly-once use).

        Raises:
            ConveyorError: the system cannot block a callback for an answer (the Simulation).
        """
        if self._ask is None:
            msg = "ack_with_response() needs a system that can answer a worker thread (trio or threads)"
            raise ConveyorError(msg)
        response = self._ask(AckWithResponse(self.ack_id), timeout=timeout)
        assert isinstance(response, AckResponse)
        self._settled = SettlementKind.ACK  # only now: a failed ask leaves the message to be settled
        return response.success

    def drop(self) -> None:
        """Stop managing the message without telling the queue (its lease will lapse)."""
        self._send(SettlementKind.DROP)

    def modify_ack_deadline(self, seconds: float) -> None:
        """Ask for ``seconds`` more before the lease lapses (0 nacks, as in Pub/Sub)."""
        if not is_finite_number(seconds):
            msg = f"modify_ack_deadline seconds must be a finite number from 0 to 600, got {quote(seconds)}"
            raise ValueError(msg)
        if not 0 <= seconds <= 600:
            msg = f"modify_ack_deadline seconds must be from 0 to 600, got {quote(seconds)}"
            raise ValueError(msg)
        if seconds == 0:
            # Pub/Sub's nack, and this message's decision: an ack or drop after it changes nothing, and
            # the key handler must hear of a nack (CallbackEnded.nacked) to hold the key's later messages.
            self._send(SettlementKind.NACK)
            return
        self._settle(Settlement(SettlementKind.MODACK, self.ack_id, float(seconds)))

    @property
    def settled(self) -> bool:
        """True once ack, nack or drop was called."""
        return self._settled is not None

    @property
    def decision(self) -> SettlementKind | None:
        """ACK, NACK or DROP once decided, else None."""
        return self._settled

    def _send(self, kind: SettlementKind) -> None:
        if self._settled is not None:
            return  # the first decision stands, as in Pub/Sub
        self._settled = kind
        self._settle(settlement_of(kind, self.ack_id))  # kind is ours and ack_id a str: no check needed

    def __repr__(self) -> str:
        return f"<SubscriberMessage {self.ack_id} attempt={self.delivery_attempt} {len(self.data)} bytes>"
