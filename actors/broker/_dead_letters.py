"""The dead letters a durable paged queue owes: journaled when settled, so a crash cannot drop them.

A dead letter whose body is paged out waits for the body store's read (and every later dead
letter waits behind it, to keep their order). The settle is journaled at once, so if the queue
failed before the read came back, its restart had the entry settled and nothing left to send.
Now such a dead letter is owed: ``DeadLetterOwed`` is written in the same journal write as the
core call that settled it (``journal_calls(owing=...)``), the body stays in the store
(``BodyPager.keep``), ``DeadLetterSent`` is written just before the send, and a restarted
instance reads the bodies of the owed ones it recovered and sends them in order. One instance
sends each once (the write comes first: a failed write fails the handler before the send); across
a process crash one whose ``DeadLetterSent`` was not yet synced is sent again, as an unpaged
queue dead-letters again an entry whose unsynced settle the crash took back.
"""

from __future__ import annotations

from typing import final

import attrs

from conveyor.runtime import ActorRef

from ._values import Message


@final
@attrs.frozen
class DeadLetterOwed:
    """A dead letter a durable paged queue settled and has not sent: ``message`` (final headers, no body:
    the store keeps it under ``seq``, ``size`` bytes) goes to ``target`` once its body is read."""

    seq: int
    target: ActorRef
    message: Message
    size: int


@final
@attrs.frozen
class DeadLetterSent:
    """The owed dead letter ``seq`` is sent (or given up: the store lost the body of a publish never confirmed)."""

    seq: int
