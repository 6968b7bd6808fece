"""Recording traces for the analysis tests: a broker workload on TrioSystem, ThreadSystem or the simulator, traced."""

from __future__ import annotations

import json
import time
from pathlib import Path

import trio

from conveyor.actors.broker import GetStats, QueueStats
from conveyor.runtime import ThreadSystem, TraceEvent, TrioSystem, write_jsonl
from conveyor.simulation import Simulation
from conveyor.simulation.scenarios import BrokerScenario, ClientPolicy, spawn_broker_scenario


def workload(messages: int, consumers: int = 4, *, browsers: int = 0, nacks: bool = False) -> BrokerScenario:
    """Equal consumers that ack (some nack and release too with ``nacks``), priorities 0/4/9, long leases."""
    policy = ClientPolicy(nack=0.05, release=0.05) if nacks else ClientPolicy()
    return BrokerScenario(
        messages=messages,
        consumers=(policy,) * consumers,
        priorities=(0, 4, 9),
        browsers=browsers,
        publish_span_s=0.2,
        ack_deadline_s=600.0,
        prefetch=20,
        retry=None,
    )


async def _trio_run(scenario: BrokerScenario, seed: int) -> list[TraceEvent]:
    async with TrioSystem(trace=True, seed=seed) as system:
        queue = spawn_broker_scenario(system, scenario)
        with trio.fail_after(600):
            while True:
                await trio.sleep(0.05)
                await system.wait_quiet()
                stats: QueueStats = await system.ask(queue, GetStats())
                if stats.acked + stats.dead_lettered == scenario.messages:
                    break
        system.shutdown()  # the queues note what they still hold (QueueClosed), for accounting
    return system.trace


def record_trio(scenario: BrokerScenario, seed: int = 1) -> list[TraceEvent]:
    """Run ``scenario`` on a TrioSystem with tracing until every message settled; return the trace."""
    return trio.run(_trio_run, scenario, seed)


def record_threads(scenario: BrokerScenario, seed: int = 1) -> list[TraceEvent]:
    """The same on a ThreadSystem."""
    system = ThreadSystem(trace=True, seed=seed)
    queue = spawn_broker_scenario(system, scenario)
    deadline = time.monotonic() + 120
    while True:
        assert time.monotonic() < deadline, "the threaded run did not settle within 120 s"
        system.wait_quiet(10)
        stats: QueueStats = system.ask(queue, GetStats())
        if stats.acked + stats.dead_lettered == scenario.messages:
            break
        time.sleep(0.01)
    system.shutdown()
    return list(system.trace)


def record_simulated(scenario: BrokerScenario, seed: int = 1) -> list[TraceEvent]:
    """The same in the simulator: the same trace for the same seed, whatever the machine's load.

    A real-time run's fairness is the OS scheduler's (under load one consumer can get twice
    another's share); a test that needs every verdict "ok" records here.
    """
    sim = Simulation(seed=seed)
    queue = spawn_broker_scenario(sim, scenario)
    assert sim.run().quiet, "the simulated run did not come to rest"
    stats: QueueStats = sim.ask(queue, GetStats())
    assert stats.acked + stats.dead_lettered == scenario.messages, stats
    sim.shutdown()
    return list(sim.trace)


def save(trace: list[TraceEvent], path: Path) -> Path:
    """Write ``trace`` as JSON Lines at ``path``."""
    write_jsonl(trace, path)
    return path


def swap_first_deliveries(source: Path, target: Path, queue: str = "/queue") -> tuple[int, int]:
    """Copy a trace with an injected ordering violation; return the two tags exchanged (lower first).

    Two first deliveries to one consumer at one priority, in two different ``Delivered``
    events, have their tags exchanged, and so does every other mention of those two tags in
    the queue's own events (enqueue, return, settle notes, its close). The copy is a
    consistent story of a queue that numbered the two messages the other way round: nothing
    is lost or held twice, but the consumer now gets the higher tag before the lower one.
    """
    lines = source.read_text(encoding="utf-8").splitlines()
    events = [json.loads(line) for line in lines]
    first_seen: dict[tuple[int, int], tuple[int, int]] = {}
    pair: tuple[int, int] | None = None
    for number, event in enumerate(events):
        message = event["message"]
        if event["kind"] != "sent" or event["sender"] != queue or not _is(message, "Delivered"):
            continue
        for delivery in message["fields"]["deliveries"]["$tuple"]:
            fields = delivery["fields"]
            inner = fields["message"]["fields"]
            if fields["delivery_count"] != 1 or inner["delay_s"] or inner["group"] is not None:
                continue
            key = (fields["consumer_id"], inner["priority"])
            earlier = first_seen.setdefault(key, (number, fields["tag"]))
            if earlier[0] != number:
                pair = (earlier[1], fields["tag"])
                break
        if pair is not None:
            break
    if pair is None:
        msg = f"{source} has no two first deliveries to one consumer at one priority in different events"
        raise AssertionError(msg)
    low, high = pair
    exchange = {low: high, high: low}
    for number, event in enumerate(events):
        if event["sender"] == queue and event["kind"] in ("sent", "note") and _relabel(event["message"], exchange):
            lines[number] = json.dumps(event, sort_keys=True, separators=(",", ":"))
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return low, high


def _is(message: object, name: str) -> bool:
    return isinstance(message, dict) and str(message.get("$type", "")).endswith(f":{name}")


def _relabel(message: object, exchange: dict[int, int]) -> bool:
    """Exchange tags in a queue's message in place (Delivered's deliveries, Entry* notes, QueueClosed)."""
    changed = False
    if not isinstance(message, dict) or "fields" not in message:
        return changed
    fields = message["fields"]
    if _is(message, "Delivered"):
        for delivery in fields["deliveries"]["$tuple"]:
            changed |= _relabel(delivery, exchange)
    elif any(_is(message, name) for name in ("Delivery", "EntryEnqueued", "EntrySettled", "EntryReturned")):
        if fields["tag"] in exchange:
            fields["tag"] = exchange[fields["tag"]]
            changed = True
    elif _is(message, "QueueClosed"):
        remaining = fields["remaining"]["$tuple"]
        fields["remaining"]["$tuple"] = [exchange.get(tag, tag) for tag in remaining]
        changed = remaining != fields["remaining"]["$tuple"]
    return changed
