"""Runs the simulator failed before their bug was fixed: each must now pass every checker.

A regression suite of real findings, each replayed bit for bit by its seed (see docs/simulation.md).
"""

from __future__ import annotations

import pytest

from conveyor.simulation.scenarios import run_scenario

FOUND = [
    # A durable queue compacted its journal between two writes of one handler; the second write
    # failed, and the restarted queue kept the snapshot of half the handler's work without being
    # handed the request again: a nacked message was lost (seed 159: m4; the others likewise).
    ("broker-swarm", 159, "random", "disk-error"),
    ("broker-swarm", 40, "random", "disk-error"),
    ("broker-swarm", 231, "random", "disk-error"),
    ("broker-swarm", 254, "random", "disk-error"),
    ("broker-swarm", 261, "random", "disk-error"),
    # An exactly-once ack of a delivery whose lease had lapsed reached the queue after it gave the
    # message out again under the same tag: the queue acked the newer delivery and the client was told
    # its ack succeeded, then was given the message again. Acks now name their attempt (``Ack.attempts``).
    ("pubsub-crash", 261, "pct:2", "crash,queue-crash,pause,delay"),
    # A durable paged queue's dead letter waiting for its body's read died with the queue: the settle was
    # journaled, nothing remembered to send it (seed 24 first, then 38, 157, 199 and 283 once the swarms
    # paged durable queues under queue-crash). Dead letters owed are now journaled (``_dead_letters``).
    ("paged-swarm", 24, "random", "queue-crash"),
    ("paged-swarm", 38, "random", "queue-crash"),
    ("paged-swarm", 157, "pct:2", "queue-crash"),
    ("paged-swarm", 199, "pct", "queue-crash"),
    ("paged-swarm", 283, "pct", "queue-crash"),
    # Not the system's bugs but the judges' (2026-11-26), each now fixed in the checker or harness:
    # stall blamed the queue for consumers whose own clients held their credit (ignored deliveries
    # whose leases lapsed); dead_letter_target judged a paged queue's dead letter by its send, not its
    # decision; and a process crash during the final browse forgot the browser, which found nothing.
    ("broker-swarm", 431, "pct", "pause"),
    ("broker-swarm", 948, "random", "queue-crash"),
    ("paged-swarm", 948, "random", "queue-crash"),
    ("paged-swarm", 830, "random", "pause"),
    ("durable-crash", 319, "pct", "process-crash,pause"),
    ("durable-crash", 167, "pct", "process-crash,disk-error"),
    # ZkTxBackend left a lock for good (tx_no_lock_left, 2026-11-26): seed 30, its delete of a lock on an item
    # committed away meanwhile was lost to the connection and never repeated; seeds 68, 56 and 27, a lock create
    # sent on a session that expired reached the server on the new one, and no transaction claimed it. Lost
    # deletes are now checked and repeated (``_unlock``), and such locks found by their uuid (``_drop_stale``).
    ("tx-zk", 30, "random", "crash,queue-crash"),
    ("tx-zk", 68, "random", "crash,queue-crash"),
    ("tx-zk", 56, "random", "crash,queue-crash"),
    ("tx-zk", 27, "pct", "crash,queue-crash,delay"),
    # Seed 128 after the merge with the one-multi take: ``_drop_stale``'s read of such a lock was itself lost to
    # the connection, and the lock stayed; the read is now repeated.
    ("tx-zk", 128, "random", "crash,queue-crash"),
]


@pytest.mark.parametrize(("scenario", "seed", "strategy", "faults"), FOUND)
def test_the_run_now_passes(scenario: str, seed: int, strategy: str, faults: str | None) -> None:
    strategy, _, depth = strategy.partition(":")  # "pct:2": PCT at depth 2; plain "pct": depth 5
    depth_of = int(depth or (5 if strategy == "pct" else 3))
    report = run_scenario(scenario, seed, strategy=strategy, depth=depth_of, faults=faults, hash_trace=False).report
    assert not report.violations, report.violations


def test_no_fault_strikes_the_final_browse() -> None:
    """The final browse measures the state the run left: faults end with the run (``Simulation.end_faults``)."""
    trace = run_scenario("durable-crash", 319, strategy="pct", depth=5, faults="process-crash,pause").sim.trace
    started = next(event.time for event in trace if type(event.message).__name__ == "FinalBrowseStarted")
    faults = [event for event in trace if event.kind.value == "fault"]
    assert faults, "the run had its crashes"
    assert all(event.time < started for event in faults)
