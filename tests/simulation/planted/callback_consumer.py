"""A planted bug in the consumer's callback path (issue 17, item 1): the promise that a callback client's
callback runs as a job per delivery, returning acks it and raising nacks it with the error.

Plugged in through ``Variant(consumer=...)``, which builds the ``/callback-k`` clients' consumers too.
"""

from __future__ import annotations

from typing import Any

from conveyor.actors.broker import ConsumerActor
from conveyor.runtime import JobDone, JobFailed


class AcksFailedCallbacks(ConsumerActor):  # type: ignore[misc]  # a planted bug may break a final class
    """Broken: a callback that raised is taken for one that returned, so its delivery is acked, not nacked.

    The credit still comes back, but the message the callback refused leaves the queue as settled:
    no redelivery, no dead letter, though its client never handled it.
    """

    def receive(self, message: Any) -> None:
        """Treat a failed job as a done one; everything else as the real consumer does."""
        if type(message) is JobFailed:
            message = JobDone(message.job_id, None)
        super().receive(message)
