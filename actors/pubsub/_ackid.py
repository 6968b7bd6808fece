"""Ack ids: what one delivery's id names, sealed with a keyed hash so that nobody can forge or guess one.

An ack id names the subscription (its incarnation: a subscription deleted and created again gets
a new number), the subscription's queue generation (a Seek starts a new one), the binding that
delivered it (one StreamingPull or Pull), the delivery (broker tag and attempt) and the message.
A keyed BLAKE2b hash of those fields, under a key drawn when the server starts, seals them: an id
of another subscription, of a deleted one, of an earlier server, or one made up by a client does
not verify, and the actors ignore it (or report it invalid on an exactly-once subscription)
before it can settle, nack or extend anything. This module is sans-IO: the key comes in.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
from collections.abc import Sequence
from typing import Any, Final, final

import attrs

from conveyor.runtime.lowlevel import checked_when_built, unchecked_builder

SEAL_BYTES: Final = 12
"""Bytes of the keyed hash in an ack id: 96 bits, so a guess verifies with probability 2**-96."""
KEY_BYTES: Final = 32
"""Bytes of the key; BLAKE2b takes up to 64."""
MAX_ACK_ID_CHARS: Final = 512
"""No id this server issues is longer; longer text is refused before it is parsed."""
_FIELDS: Final = 6  # five numbers, then the message id


@final
@checked_when_built
@attrs.frozen
class AckId:
    """The delivery an ack id names."""

    subscription: int
    """The subscription's incarnation number (the registry's, never reused while it runs)."""
    generation: int
    """The subscription's queue generation: a Seek rebuilds the queue, and older ids stop counting."""
    binding: int
    """The StreamingPull or Pull that was given the delivery."""
    tag: int
    """The broker's delivery tag (a redelivery to the same binding may keep it)."""
    attempt: int
    """The broker's delivery count: tells this delivery from a later one under the same tag."""
    message_id: str


ack_id_unchecked = unchecked_builder(AckId, ("subscription", "generation", "binding", "tag", "attempt",
                                             "message_id"))
"""``AckId(...)`` without its checks, for a binding's own numbers and a message id the queue holds (one per
delivery)."""


def _check_key(_: object, attribute: attrs.Attribute[bytes], value: bytes) -> None:
    if type(value) is not bytes or not 16 <= len(value) <= 64:
        shown = f"{len(value)} bytes" if type(value) is bytes else type(value).__qualname__
        msg = f"AckIdCodec.{attribute.name} must be bytes, 16 to 64 of them, got {shown}"
        raise ValueError(msg)


@final
@attrs.frozen
class AckIdCodec:
    """Issues ack ids and reads them back, verifying the seal; one key per server start.

    An id reads ``subscription-generation-binding-tag-attempt-message_id.seal``, the seal in hex.
    """

    key: bytes = attrs.field(validator=_check_key, repr=False)
    _keyed: Any = attrs.field(init=False, eq=False, repr=False)
    """BLAKE2b with the key already absorbed: each seal copies it, 30% cheaper than keying anew."""

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_keyed", hashlib.blake2b(key=self.key, digest_size=SEAL_BYTES))

    def _seal(self, body: str) -> str:
        hasher = self._keyed.copy()
        hasher.update(body.encode())
        return str(hasher.hexdigest())

    def issue(self, ack_id: AckId) -> str:
        """The text of ``ack_id``, sealed."""
        body = (f"{ack_id.subscription}-{ack_id.generation}-{ack_id.binding}-{ack_id.tag}-{ack_id.attempt}-"
                f"{ack_id.message_id}")
        return f"{body}.{self._seal(body)}"

    def read(self, text: str) -> AckId | None:
        """The delivery ``text`` names, or None if it is not an id this codec issued (malformed or forged)."""
        split = _split(text)
        if split is None:
            return None
        body, parts, seal = split
        if not hmac.compare_digest(seal, self._seal(body)):
            return None
        subscription, generation, binding, tag, attempt = map(int, parts[:-1])
        return AckId(subscription, generation, binding, tag, attempt, parts[-1])


def _split(text: str) -> tuple[str, list[str], str] | None:
    """(sealed body, its fields, seal) of a text with an ack id's shape, or None."""
    if len(text) > MAX_ACK_ID_CHARS:
        return None
    body, dot, seal = text.rpartition(".")
    if not dot or len(seal) != 2 * SEAL_BYTES:
        return None
    parts = body.split("-", _FIELDS - 1)
    if len(parts) != _FIELDS:
        return None
    numbers = parts[:-1]  # each non-empty, all decimal digits: two C-level passes, not a generator
    if not all(numbers) or not "".join(numbers).isdecimal():
        return None
    return body, parts, seal


def looks_like_ack_id(text: str) -> bool:
    """Whether ``text`` has an ack id's shape (the seal is not checked: only the key's holder can)."""
    return _split(text) is not None


@final
class AckIdReader:
    """Reads ack ids through a codec, remembering the last ``capacity`` it verified, oldest forgotten first.

    A delivery's id is read twice as a rule (its receipt deadline change, then its ack): the second
    read is a lookup, not a hash. What it answers is exactly ``codec.read``'s (a pure function of
    the text under one key); an id that does not verify is never remembered, and ``take`` reads an id
    whose message is being settled and forgets it. Owned by one actor (a subscription), so it is unsynchronised.
    """

    __slots__ = ("_capacity", "_codec", "_known")

    def __init__(self, codec: AckIdCodec, capacity: int = 20_000) -> None:
        if type(capacity) is not int or capacity < 0:
            msg = f"AckIdReader capacity must be an int >= 0, got {capacity!r}"
            raise ValueError(msg)
        self._codec = codec
        self._capacity = capacity
        self._known: dict[str, AckId] = {}

    def read(self, text: str) -> AckId | None:
        """``codec.read(text)``, from memory when this id was verified lately."""
        known = self._known
        ack_id = known.get(text)
        if ack_id is not None:
            return ack_id
        ack_id = self._codec.read(text)
        if ack_id is not None and self._capacity:
            known[text] = ack_id
            if len(known) > self._capacity:
                del known[next(iter(known))]
        return ack_id

    def learn(self, texts: Sequence[str], ack_ids: Sequence[AckId]) -> None:
        """Remember ids this subscription's bindings just issued (``codec.issue``'s texts and what they name).

        Their acks are then a lookup: an issued id verifies by construction, so what ``read`` answers is
        still exactly ``codec.read``'s.
        """
        if not self._capacity:
            return
        known = self._known
        known.update(zip(texts, ack_ids, strict=True))
        excess = len(known) - self._capacity
        if excess > 0:
            for text in list(itertools.islice(known, excess)):
                del known[text]

    def take(self, text: str) -> AckId | None:
        """``codec.read(text)`` for an id whose message is being settled: it is not remembered any more."""
        ack_id = self._known.pop(text, None)
        return ack_id if ack_id is not None else self._codec.read(text)

    def __len__(self) -> int:
        """Return how many verified ids are remembered."""
        return len(self._known)
