"""Pub/Sub's request limits, as the front enforces them, and short quotes of client values for errors.

One home for every limit: each says where it comes from. Most are Pub/Sub's published resource
limits (cloud.google.com/pubsub/quotas); where Pub/Sub publishes none, the limit is conveyor's and
says why. docs/pubsub.md ("Limits") lists them all.

Errors quote at most a short prefix of a client's value: a whole 100,000-character name in a
status message made the status itself exceed gRPC's metadata limit, so the client saw
RESOURCE_EXHAUSTED instead of the INVALID_ARGUMENT that named its mistake.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final, final

import attrs

PUBLISH_MAX_MESSAGES: Final = 1_000
"""Messages per Publish request (Pub/Sub: "Publish request: 1,000 messages")."""
PUBLISH_MAX_BYTES: Final = 10_000_000
"""Bytes of a Publish request (Pub/Sub: "10 MB (total size)"; Google's Python client caps its batches at
``_SERVER_PUBLISH_MAX_BYTES = 10 * 1000 * 1000``)."""
ATTRIBUTES_MAX: Final = 100
"""Attributes per message (Pub/Sub)."""
ATTRIBUTE_KEY_MAX_BYTES: Final = 256
"""UTF-8 bytes of an attribute key (Pub/Sub)."""
ATTRIBUTE_VALUE_MAX_BYTES: Final = 1_024
"""UTF-8 bytes of an attribute value (Pub/Sub)."""
ORDERING_KEY_MAX_BYTES: Final = 1_024
"""UTF-8 bytes of an ordering key (Pub/Sub: 1 KB)."""
ACK_REQUEST_MAX_BYTES: Final = 512 * 1024
"""Bytes of an Acknowledge or ModifyAckDeadline request (Pub/Sub's 512 KB; Google's clients send at most
1,000 ids per call to stay under it). Applied to each StreamingPull request too, whose ack-id lists are
the same (conveyor's choice: Pub/Sub publishes no separate limit for them)."""
ACK_IDS_MAX: Final = 10_000
"""Ack ids per list of one request (conveyor's: Pub/Sub bounds only the request's size, but 512 KB of
short ids would still be 170,000 parsed objects; Google's clients send at most 1,000 per call, Go's
2,500, conveyor's transport 2,500)."""
ACK_ID_MAX_BYTES: Final = 1_024
"""Bytes of one ack id (conveyor's: far above any id it issues, or Pub/Sub's of about 180 characters)."""
ERROR_INFO_MAX_BYTES: Final = 4_096
"""Serialized bytes of an exactly-once ``ErrorInfo`` (conveyor's: it travels base64 in the status
trailer, which gRPC clients cap at 8 KiB by default; over it the client sees RESOURCE_EXHAUSTED)."""
STATUS_MESSAGE_MAX_BYTES: Final = 1_024
"""UTF-8 bytes of any status message the front sends (conveyor's, for the same trailer limit)."""
QUOTE_CHARS: Final = 40
"""Characters of a client's value that an error quotes."""


def quote(value: str, limit: int = QUOTE_CHARS) -> str:
    """``value`` in double quotes; past ``limit`` characters, its prefix and its length instead."""
    if len(value) <= limit:
        return json.dumps(value, ensure_ascii=False)
    return f"{json.dumps(value[:limit], ensure_ascii=False)[:-1]}...\" ({len(value)} characters)"


def clip(text: str, limit: int = STATUS_MESSAGE_MAX_BYTES) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes (a last guard on every status message)."""
    encoded = text.encode()
    if len(encoded) <= limit:
        return text
    return encoded[:limit - 16].decode(errors="ignore") + " ... (truncated)"


@final
@attrs.frozen
class Oversize:
    """A request refused by its size before it was parsed: what a size-limited deserializer hands on."""

    size: int
    limit: str

    def describe(self) -> str:
        """The error: the request's size and the limit it broke."""
        return f"the request is {self.size} bytes, over {self.limit}"


PUBLISH_LIMIT: Final = f"Pub/Sub's {PUBLISH_MAX_BYTES:,}-byte (10 MB) Publish request limit"
ACK_LIMIT: Final = (f"Pub/Sub's {ACK_REQUEST_MAX_BYTES:,}-byte (512 KiB) limit for Acknowledge and "
                    "ModifyAckDeadline requests")
STREAM_LIMIT: Final = (f"the {ACK_REQUEST_MAX_BYTES:,}-byte (512 KiB) limit for StreamingPull requests "
                       "(Pub/Sub's for Acknowledge)")


def size_limited(parse: Callable[[bytes], Any], max_bytes: int, limit: str) -> Callable[[bytes], Any]:
    """A gRPC request deserializer that refuses a request over ``max_bytes`` before parsing a byte of it.

    The refusal is an ``Oversize`` value the handler turns into INVALID_ARGUMENT: an Acknowledge of a
    million ids is never turned into a million objects.
    """

    def deserialize(raw: bytes) -> Any:
        if len(raw) > max_bytes:
            return Oversize(len(raw), limit)
        return parse(raw)

    return deserialize
