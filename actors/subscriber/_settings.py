"""FlowControl: the subscriber's limits, validated at construction (seed 003's flow control)."""

from __future__ import annotations

from typing import final

import attrs

from conveyor.runtime import is_finite_number, quote
from conveyor.runtime.validators import fail, positive_int, positive_seconds

MIB = 1024 * 1024
MIN_EXTENSION_S = 2.0
"""Shortest lease extension allowed (the Pub/Sub service's own minimum is 10 s)."""
MIN_HEARTBEAT_S = 1.0
"""Shortest heartbeat period: a stream's keep-alive needs no more, and a period near 0 would spin a CPU."""


def check_subscriber_settings(
    callback: object, workers: object, heartbeat_s: object, await_callbacks_on_shutdown: object,
    callbacks_per_job: object,
) -> None:
    """Refuse a bad argument of ``subscribe()`` (or of a ``StreamingPullManager``), naming it.

    One home for the checks, so ``subscribe()`` runs them at the call, before anything is
    spawned, and a manager built another way (a subclass, the Pub/Sub transport's) runs the same.

    Raises:
        TypeError: ``callback`` is not callable, ``heartbeat_s`` is not a number, or
            ``await_callbacks_on_shutdown`` is not a bool.
        ValueError: ``workers`` or ``callbacks_per_job`` is not an int >= 1, or ``heartbeat_s`` is
            not finite or below ``MIN_HEARTBEAT_S``.
    """
    if not callable(callback):
        msg = f"subscribe() callback must be callable, got {quote(callback)}"
        raise TypeError(msg)
    if type(workers) is not int or workers < 1:
        msg = f"subscribe() workers must be an int >= 1, got {quote(workers)}"
        raise ValueError(msg)
    heartbeat = f"subscribe() heartbeat_s must be a finite number of seconds >= {MIN_HEARTBEAT_S}"
    if isinstance(heartbeat_s, bool) or not isinstance(heartbeat_s, (int, float)):
        msg = f"{heartbeat}, got {quote(heartbeat_s)}"
        raise TypeError(msg)
    if not is_finite_number(heartbeat_s) or heartbeat_s < MIN_HEARTBEAT_S:
        msg = f"{heartbeat}, got {quote(heartbeat_s)}"
        raise ValueError(msg)
    if type(await_callbacks_on_shutdown) is not bool:
        msg = f"subscribe() await_callbacks_on_shutdown must be True or False, got {quote(await_callbacks_on_shutdown)}"
        raise TypeError(msg)
    if type(callbacks_per_job) is not int or callbacks_per_job < 1:
        msg = f"subscribe() callbacks_per_job must be an int >= 1, got {quote(callbacks_per_job)}"
        raise ValueError(msg)


@final
@attrs.frozen
class FlowControl:
    """How much a subscriber holds unfinished, and how its leases are extended.

    Attributes:
        max_messages: most unfinished messages (being processed, waiting for a worker, or on
            hold behind an ordering key: all count, unlike the seed's client).
        max_bytes: most unfinished bytes.
        max_lease_duration_s: a message is no longer extended (left to expire and be
            redelivered) once it has been leased this long.
        min_duration_per_lease_extension_s: shortest extension asked of the server.
        max_duration_per_lease_extension_s: longest extension asked of the server.
        resume_threshold: the stream pauses at load >= 1 and resumes once load < this.
    """

    max_messages: int = attrs.field(default=1000, validator=positive_int)
    max_bytes: int = attrs.field(default=100 * MIB, validator=positive_int)
    max_lease_duration_s: float = attrs.field(default=3600.0, validator=positive_seconds)
    min_duration_per_lease_extension_s: float = attrs.field(default=10.0, validator=positive_seconds)
    max_duration_per_lease_extension_s: float = attrs.field(default=600.0, validator=positive_seconds)
    resume_threshold: float = attrs.field(default=0.8)

    @resume_threshold.validator
    def _check_threshold(self, attribute: attrs.Attribute[float], value: float) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
            fail("FlowControl", "resume_threshold", "a number in (0, 1]", value)

    def __attrs_post_init__(self) -> None:
        if self.min_duration_per_lease_extension_s < MIN_EXTENSION_S:
            # The leaser re-checks at 0.9 x extension - 1 s: shorter extensions would spin.
            fail("FlowControl", "min_duration_per_lease_extension_s", f">= {MIN_EXTENSION_S} seconds",
                 self.min_duration_per_lease_extension_s)
        if self.max_duration_per_lease_extension_s < self.min_duration_per_lease_extension_s:
            fail(
                "FlowControl",
                "max_duration_per_lease_extension_s",
                f">= min_duration_per_lease_extension_s ({self.min_duration_per_lease_extension_s})",
                self.max_duration_per_lease_extension_s,
            )
