"""The scenario registry: every built-in scenario runs green, reports sanely, and replays bit for bit."""

from __future__ import annotations

import pytest

from conveyor.runtime import EventKind
from conveyor.simulation import Crash, FaultApplied
from conveyor.simulation.scenarios import (
    FAULT_PLANS,
    check_fault_plan,
    queue_figures,
    replay_command,
    run_scenario,
    scenario_names,
)


@pytest.mark.parametrize("name", scenario_names())
@pytest.mark.parametrize("strategy", ["random", "pct"])
def test_every_scenario_is_green_and_reports_what_happened(name: str, strategy: str) -> None:
    run = run_scenario(name, seed=3, strategy=strategy)
    report = run.report
    assert report.ok, report.violations
    assert report.published > 0
    assert report.delivered >= report.acked > 0
    if name == "zk-basics":  # calls sent, answered, answered without an error: each answered once
        assert report.delivered == report.published
        return
    consumers = getattr(run.workload, "consumers", ())
    if any(getattr(run.workload, "ttls", ())) or (consumers and all(p.crash_after for p in consumers)):
        # a swarm seed with TTLs (the rest expired), or consumers that all leave early (the rest is left)
        assert report.acked + report.dead_lettered <= report.published
    else:
        assert report.acked + report.dead_lettered == report.published
    assert report.steps == run.sim.steps
    assert report.trace_hash == run.sim.trace_hash()
    assert report.replay_command.startswith(f"conveyor replay {name} --seed 3 --strategy {strategy}")


def test_the_recorded_schedule_replays_the_run_bit_for_bit() -> None:
    first = run_scenario("priorities", seed=11, strategy="pct", depth=2, faults="crash,delay")
    again = run_scenario("priorities", seed=11, strategy="pct", depth=2, faults="crash,delay")
    replayed = run_scenario("priorities", seed=11, faults="crash,delay", schedule=first.sim.schedule)
    assert again.report == first.report
    assert replayed.report.trace_hash == first.report.trace_hash


def test_fault_plans_are_drawn_from_the_seed_and_recorded_in_the_trace() -> None:
    run = run_scenario("crash-recovery", seed=5)
    applied = [event.message for event in run.sim.trace if event.kind is EventKind.FAULT]
    assert applied, "the crash-recovery scenario crashes at least one client"
    assert all(isinstance(item, FaultApplied) and isinstance(item.fault, Crash) for item in applied)
    assert run.report.faults == "crash"
    assert run.report.ok, run.report.violations


def test_queue_figures_count_redeliveries_and_the_in_flight_peak() -> None:
    run = run_scenario("priorities", seed=2, faults="never-ack")
    figures = queue_figures(run.sim.trace)
    assert figures.redelivered > 0  # the client that never acks has its leases lapse
    assert 0 < figures.max_outstanding <= figures.delivered
    assert figures.latencies_ms and min(figures.latencies_ms) >= 0


def test_bad_names_are_refused_with_the_allowed_values() -> None:
    with pytest.raises(ValueError, match="unknown scenario 'nope'; choose one of: fairness"):
        run_scenario("nope", 1)
    with pytest.raises(ValueError, match="unknown strategy 'dfs'"):
        run_scenario("fairness", 1, strategy="dfs")
    with pytest.raises(ValueError, match="unknown fault plan 'fire'"):
        check_fault_plan("crash,fire")
    assert check_fault_plan("none,crash") == "crash"
    for empty in ("", " ", "crash,", ",,"):  # refused, never read as no faults
        with pytest.raises(ValueError, match=r"empty fault plan in .*; choose one or more \(comma separated\) of: "):
            check_fault_plan(empty)
    assert set(FAULT_PLANS) >= {
        "none", "crash", "pause", "delay", "never-ack", "failing-job", "queue-crash", "disk-error",
    }


def test_replay_command_names_only_what_matters() -> None:
    assert replay_command("groups", 4, "random", 3, "none") == "conveyor replay groups --seed 4 --strategy random"
    assert replay_command("crash-recovery", 4, "random", 3, "crash") == (
        "conveyor replay crash-recovery --seed 4 --strategy random"
    )
    assert replay_command("crash-recovery", 4, "random", 3, "none") == (
        "conveyor replay crash-recovery --seed 4 --strategy random --faults none"
    )
    assert (
        replay_command("groups", 4, "pct", 2, "crash,pause")
        == "conveyor replay groups --seed 4 --strategy pct --depth 2 --faults crash+pause"
    )


@pytest.mark.parametrize("name", ["fairness", "consumer-priorities", "selectors"])
def test_checkers_give_the_same_verdicts_on_a_trace_read_back_from_a_file(name: str) -> None:
    """A stored trace keeps only the paths of refs; Subscribe (whose consumer must be a live ref) is
    rebuilt around that path, so the queue's consumers are still seen (it used to read back as a
    raw record, and fairness saw 0 consumers)."""
    import io

    from conveyor.runtime._trace import RefPath, read_jsonl, write_jsonl
    from conveyor.simulation.checkers import consumer_priority, fairness

    run = run_scenario(name, seed=5)
    stored = io.StringIO()
    write_jsonl(run.sim.trace, stored)
    stored.seek(0)
    back = read_jsonl(stored)
    subscribes = [e.message for e in back if type(e.message).__name__ == "Subscribe"]
    assert subscribes and all(type(m.consumer) is RefPath for m in subscribes)
    for checker in (fairness, consumer_priority):
        original, read_back = checker(run.sim.trace, "/queue"), checker(back, "/queue")
        assert read_back == original
    assert fairness(back, "/queue").metric("consumers") > 0
