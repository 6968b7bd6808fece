"""What sealing ack ids costs: conveyor's sealed ids beside the unsealed layout they replaced, in one run.

Issue 15 made every ack id carry a keyed BLAKE2b seal, verified before a settlement counts. This
measures, per id, issuing (when a batch goes out) and reading back (when an ack or nack comes in)
both ways: the sealed ``AckIdCodec`` and the old ``binding-epoch-tag-message_id`` f-string and
split, which anyone could forge. It prints the ratios, and the sealed cost beside the front's
per-message CPU that ``benchmarks/pubsub.py`` measures (tens of microseconds).
"""

from __future__ import annotations

import argparse
import secrets
import time
from collections.abc import Callable

from conveyor.actors.pubsub import AckId, AckIdCodec


def _best_ns_per_call(run: Callable[[], int], repeat: int) -> float:
    """The best of ``repeat`` rounds of ``run`` (which returns how many calls it made), in ns per call."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter_ns()
        calls = run()
        best = min(best, (time.perf_counter_ns() - start) / calls)
    return best


def main(ids: int = 100_000, repeat: int = 5) -> dict[str, float]:
    """Measure issuing and reading ``ids`` ids both ways; print and return the figures."""
    codec = AckIdCodec(secrets.token_bytes(32))
    deliveries = [AckId(7, 0, 3, tag, 1, str(10**12 + tag)) for tag in range(1, ids + 1)]
    sealed = [codec.issue(d) for d in deliveries]
    plain = [f"{d.binding}-0-{d.tag}-{d.message_id}" for d in deliveries]
    if [codec.read(text) for text in sealed] != deliveries:
        msg = "ackids: a sealed id did not read back as the delivery it was issued for"
        raise RuntimeError(msg)

    def issue_sealed() -> int:
        issue = codec.issue
        for delivery in deliveries:
            issue(delivery)
        return ids

    def issue_plain() -> int:
        for d in deliveries:
            f"{d.binding}-0-{d.tag}-{d.message_id}"
        return ids

    def read_sealed() -> int:
        read = codec.read
        for text in sealed:
            read(text)
        return ids

    def read_plain() -> int:
        for text in plain:
            parts = text.split("-", 3)
            if parts[0].isdecimal() and parts[1].isdecimal() and parts[2].isdecimal():
                (int(parts[0]), int(parts[1]), int(parts[2]), parts[3])
        return ids

    figures = {
        "issue_sealed_ns": _best_ns_per_call(issue_sealed, repeat),
        "issue_plain_ns": _best_ns_per_call(issue_plain, repeat),
        "read_sealed_ns": _best_ns_per_call(read_sealed, repeat),
        "read_plain_ns": _best_ns_per_call(read_plain, repeat),
    }
    figures["issue_ratio"] = figures["issue_sealed_ns"] / figures["issue_plain_ns"]
    figures["read_ratio"] = figures["read_sealed_ns"] / figures["read_plain_ns"]
    figures["sealed_us_per_delivery"] = (figures["issue_sealed_ns"] + figures["read_sealed_ns"]) / 1000.0
    print(f"ack ids, {ids:,} per round, best of {repeat} (ns per id)")
    print(f"  issue: sealed {figures['issue_sealed_ns']:,.0f}  unsealed {figures['issue_plain_ns']:,.0f}  "
          f"ratio {figures['issue_ratio']:.2f}x")
    print(f"  read:  sealed {figures['read_sealed_ns']:,.0f}  unsealed {figures['read_plain_ns']:,.0f}  "
          f"ratio {figures['read_ratio']:.2f}x")
    print(f"  a delivery's id issued and read back, sealed: {figures['sealed_us_per_delivery']:.2f} us "
          "(the front spends tens of us of CPU per message: benchmarks/pubsub.py)")
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--ids", type=int, default=100_000, help="ids per round")
    parser.add_argument("--repeat", type=int, default=5, help="rounds; the best is reported")
    arguments = parser.parse_args()
    main(ids=arguments.ids, repeat=arguments.repeat)
