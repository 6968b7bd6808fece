"""Whether an ack's cost depends on how many messages wait behind it: the queue's entry list, shallow and deep.

Ordering keys make acks come out of publish order. Until the eighth session a priority level whose head
passed 1,024 settled entries rebuilt the list of everything after them whenever one settled entry lay
further on: a walk over the whole backlog every 1,024 acks (0.70 us a take+ack at 10,000 messages
queued, 3.95 us at 300,000). This takes batches of 1,000 and acks each batch out of order (its first
entry one batch late, the rest newest first), at a shallow and at a deep backlog, and prints the
per-message cost of each and their ratio: near 1 when the cost is independent of the depth.
"""

from __future__ import annotations

import argparse
import gc
import time

from conveyor.actors.broker import EntryList, MatchAll, Message

BATCH = 1000
BODY = Message(b"x" * 100)


def _ns_per_message(depth: int) -> float:
    """Publish ``depth`` messages, then take and ack them all out of order: ns per take+ack."""
    entries = EntryList()
    entries.add_consumer(1, MatchAll(), 0, True)
    for _ in range(depth):
        entries.publish(BODY, 0.0)
    gc.collect()
    settled = 0
    late: list[int] = []
    start = time.perf_counter_ns()
    while True:
        taken, _, _ = entries.take(1, 0.0, BATCH, 10**12, 1e12)
        if not taken:
            break
        seqs = [entry.seq for entry in taken]
        entries.ack(1, seqs[:0:-1])  # all but the first, newest first
        entries.ack(1, late)  # the previous batch's first, a batch late
        settled += len(seqs) - 1 + len(late)
        late = seqs[:1]
    entries.ack(1, late)
    settled += len(late)
    elapsed = time.perf_counter_ns() - start
    if settled != depth or entries.snapshot().entries:
        msg = f"ackdepth: settled {settled} of {depth} messages, or some are left in the entry list"
        raise RuntimeError(msg)
    return elapsed / depth


def main(shallow: int = 10_000, deep: int = 300_000, repeat: int = 3) -> dict[str, float]:
    """Measure take+ack per message at both depths (best of ``repeat`` each); print and return the figures."""
    if not 0 < shallow < deep:
        msg = f"ackdepth: need 0 < shallow < deep, got shallow={shallow}, deep={deep}"
        raise ValueError(msg)
    figures = {
        "shallow_ns_per_message": min(_ns_per_message(shallow) for _ in range(repeat)),
        "deep_ns_per_message": min(_ns_per_message(deep) for _ in range(repeat)),
    }
    figures["deep_over_shallow"] = figures["deep_ns_per_message"] / figures["shallow_ns_per_message"]
    print(f"entry list, acks out of order in batches of {BATCH:,}, best of {repeat} (ns per take+ack)")
    print(f"  {shallow:,} queued: {figures['shallow_ns_per_message']:,.0f}   {deep:,} queued: "
          f"{figures['deep_ns_per_message']:,.0f}   ratio {figures['deep_over_shallow']:.2f}x (1.0: independent "
          "of the depth)")
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--shallow", type=int, default=10_000, help="messages queued, the shallow case")
    parser.add_argument("--deep", type=int, default=300_000, help="messages queued, the deep case")
    parser.add_argument("--repeat", type=int, default=3, help="rounds per depth; the best is reported")
    arguments = parser.parse_args()
    main(shallow=arguments.shallow, deep=arguments.deep, repeat=arguments.repeat)
