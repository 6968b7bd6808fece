"""The consume policy's decisions as pure functions over an item's meta, for every backend.

An item's meta is two counters and a time: how often it was taken, how often a consumer rolled it
back on purpose, and when it may be offered again. The broker backend keeps the meta in
``TxStore``; the ZooKeeper backend keeps it in ``meta/meta-N`` and, because an ephemeral lock
vanishes with its session without anyone deciding anything, must also ask ``refuse_take`` before
it locks an item whose last taker died. Both ask these functions, so the rules have one home.
"""

from __future__ import annotations

from typing import final

import attrs

from ._values import AtLeastOnce, TxQueueSettings


@final
@attrs.frozen
class ItemMeta:
    """An item's meta: takes so far (this one included), deliberate rollbacks, not offered before ``not_before``."""

    takes: int = 0
    rollbacks: int = 0
    not_before: float = 0.0


@final
@attrs.frozen
class Released:
    """What a release makes of an item: its new meta, and ``dead_letter`` (why) if it goes to the DLQ."""

    meta: ItemMeta
    dead_letter: str | None


def refuse_take(settings: TxQueueSettings, meta: ItemMeta) -> str | None:
    """Why an unlocked item may not be taken again under the queue's policy (it belongs in the DLQ), or None."""
    policy = settings.policy
    if isinstance(policy, AtLeastOnce):
        if policy.max_rollbacks is not None and meta.rollbacks >= policy.max_rollbacks:
            return f"rolled back {meta.rollbacks} times (AtLeastOnce(max_rollbacks={policy.max_rollbacks}))"
        return None
    if meta.takes >= policy.times:
        return f"taken {meta.takes} times ({type(policy).__name__} allows {policy.times})"
    return None


def release(settings: TxQueueSettings, meta: ItemMeta, now: float, *, failed: bool, handed_over: bool) -> Released:
    """A lock on an item ends without a commit: count it, decide DLQ or backoff.

    ``failed``: a consumer rolled it back on purpose (counts toward ``AtLeastOnce.max_rollbacks``).
    ``handed_over=False``: user code never saw it, so its take is given back and nothing else changes.
    """
    if not handed_over:
        return Released(attrs.evolve(meta, takes=meta.takes - 1), None)
    after = attrs.evolve(meta, rollbacks=meta.rollbacks + (1 if failed else 0))
    reason = refuse_take(settings, after)
    if reason is None and settings.backoff is not None:
        after = attrs.evolve(after, not_before=now + settings.backoff.delay(after.takes))
    return Released(after, reason)
