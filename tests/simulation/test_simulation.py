"""The simulator's own promises: determinism, replay, virtual time, strategies."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conveyor.runtime import Actor, ActorRef, AskTimeout, EventKind, JobDone, dumps_jsonl
from conveyor.simulation import (
    RandomWalk,
    Replay,
    ReplayDivergence,
    RoundRobin,
    Simulation,
    Strategy,
    strategy_from_name,
    uniform_job_duration,
)
from tests.runtime.actors import Get, Recorder


@attrs.frozen
class Hop:
    """A token travelling through a network; ``ttl`` hops remain."""

    origin: int
    ttl: int


@attrs.frozen
class Wire:
    peers: tuple[ActorRef, ...]


@attrs.frozen
class Tick:
    pass


class Node(Actor):
    """Forwards tokens to a peer chosen with ``ctx.random``; sometimes uses timers and jobs."""

    def __init__(self, index: int, use_timers: bool, use_jobs: bool) -> None:
        self.index = index
        self.use_timers = use_timers
        self.use_jobs = use_jobs
        self.peers: tuple[ActorRef, ...] = ()
        self.seen = 0

    def receive(self, message: Any) -> None:
        match message:
            case Wire(peers=peers):
                self.peers = peers
                if self.use_timers:
                    self.ctx.schedule(self.ctx.random.uniform(0, 0.01), Tick())
            case Hop(origin=origin, ttl=ttl):
                self.seen += 1
                if ttl > 0 and self.peers:
                    target = self.peers[self.ctx.random.randrange(len(self.peers))]
                    self.ctx.send(target, Hop(origin, ttl - 1))
                if self.use_jobs and ttl % 3 == 0:
                    self.ctx.run_job(abs, ttl)
            case Tick():
                if self.peers:
                    self.ctx.send(self.peers[0], Hop(self.index, 2))
            case JobDone():
                pass
            case Get():
                self.ctx.reply(self.seen)


@attrs.frozen
class Network:
    nodes: int
    tokens: tuple[tuple[int, int], ...]  # (start node, ttl)
    use_timers: bool
    use_jobs: bool


networks = st.builds(
    Network,
    nodes=st.integers(2, 5),
    tokens=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 12)), min_size=1, max_size=6).map(tuple),
    use_timers=st.booleans(),
    use_jobs=st.booleans(),
)


def run_network(network: Network, seed: int, strategy: Strategy | None = None) -> Simulation:
    sim = Simulation(seed=seed, strategy=strategy)

    def node(index: int) -> Callable[[], Node]:
        return lambda: Node(index, network.use_timers, network.use_jobs)

    refs = tuple(sim.spawn(node(i), name=f"node-{i}") for i in range(network.nodes))
    for ref in refs:
        ref.tell(Wire(refs))
    for start, ttl in network.tokens:
        refs[start % network.nodes].tell(Hop(start, ttl))
    result = sim.run(max_steps=10_000)
    assert result.quiet
    return sim


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(network=networks, seed=st.integers(0, 2**32))
def test_same_seed_same_trace_and_replay_reproduces_it(network: Network, seed: int) -> None:
    first = run_network(network, seed)
    again = run_network(network, seed)
    replayed = run_network(network, seed, Replay(first.schedule))
    assert dumps_jsonl(again.trace) == dumps_jsonl(first.trace)
    assert replayed.trace_hash() == first.trace_hash()
    assert replayed.schedule == first.schedule


@settings(max_examples=30, deadline=None)
@given(network=networks, seed=st.integers(0, 2**32))
def test_round_robin_is_deterministic_and_replayable(network: Network, seed: int) -> None:
    first = run_network(network, seed, RoundRobin())
    again = run_network(network, seed, RoundRobin())
    replayed = run_network(network, seed, Replay(first.schedule))
    assert again.trace_hash() == first.trace_hash() == replayed.trace_hash()


def test_different_seeds_explore_different_interleavings() -> None:
    network = Network(nodes=4, tokens=((0, 10), (1, 10), (2, 10)), use_timers=False, use_jobs=False)
    hashes = {run_network(network, seed).trace_hash() for seed in range(20)}
    assert len(hashes) > 10


def test_replay_of_a_schedule_against_other_actors_fails_loudly() -> None:
    network = Network(nodes=4, tokens=((0, 10), (1, 10)), use_timers=False, use_jobs=False)
    recorded = run_network(network, 3)
    assert len(recorded.schedule) > 3
    bigger = [choice + 50 for choice in recorded.schedule]
    with pytest.raises(ReplayDivergence, match="replay diverged at choice 0"):
        run_network(network, 3, Replay(bigger))


def test_clock_jumps_to_the_next_timer_when_nothing_is_ready() -> None:
    class Alarm(Actor):
        def __init__(self) -> None:
            self.rang_at: list[float] = []

        def on_start(self) -> None:
            self.ctx.schedule(30.0, "ring")
            self.ctx.schedule(3600.0, "ring")

        def receive(self, message: Any) -> None:
            if message == "ring":
                self.rang_at.append(self.ctx.now())
            else:
                self.ctx.reply(tuple(self.rang_at))

    sim = Simulation(seed=1)
    alarm = sim.spawn(Alarm)
    result = sim.run(until=100.0)
    assert result.quiet and result.time == 100.0
    assert sim.ask(alarm, "when?") == (30.0,)
    sim.run()
    assert sim.now() == 3600.0
    assert sim.ask(alarm, "when?") == (30.0, 3600.0)


def test_max_steps_bounds_a_run() -> None:
    sim = Simulation(seed=1)
    recorder = sim.spawn(Recorder)
    for n in range(10):
        recorder.tell(n)
    result = sim.run(max_steps=4)
    assert result.steps == 4 and not result.quiet
    rest = sim.run()
    assert rest.quiet and sim.steps == 11  # Start + 10 messages
    with pytest.raises(ValueError, match="max_steps"):
        sim.run(max_steps=-1)


def test_job_durations_are_virtual_and_drawn_from_the_seed() -> None:
    class Worker(Actor):
        def __init__(self) -> None:
            self.finished: list[float] = []

        def on_start(self) -> None:
            for n in range(3):
                self.ctx.run_job(abs, -n)

        def receive(self, message: Any) -> None:
            if isinstance(message, JobDone):
                self.finished.append(self.ctx.now())
            else:
                self.ctx.reply(tuple(self.finished))

    def finish_times(seed: int) -> tuple[float, ...]:
        sim = Simulation(seed=seed, job_duration=uniform_job_duration(1.0, 2.0))
        worker = sim.spawn(Worker)
        sim.run()
        times: tuple[float, ...] = sim.ask(worker, "times")
        return times

    times = finish_times(5)
    assert len(times) == 3 and all(1.0 <= t <= 2.0 for t in times)
    assert finish_times(5) == times
    assert finish_times(6) != times


def test_ask_in_simulation_times_out_in_virtual_time() -> None:
    class Late(Actor):
        def receive(self, message: Any) -> None:
            if message == "q":
                self.ctx.schedule(10.0, "answer-later")
            # never replies

    sim = Simulation(seed=1)
    late = sim.spawn(Late)
    with pytest.raises(AskTimeout, match=r"1\.0 virtual seconds"):
        sim.ask(late, "q", timeout=1.0)
    assert sim.now() == 1.0


def test_round_robin_cycles_over_channels() -> None:
    sim = Simulation(seed=0, strategy=RoundRobin())
    recorders = [sim.spawn(Recorder, name=f"r{i}") for i in range(3)]
    sim.run()
    for recorder in recorders:
        for n in range(3):
            recorder.tell(n)
    sim.run()
    delivered = [e.receiver for e in sim.trace if e.kind is EventKind.DELIVERED and isinstance(e.message, int)]
    # Round robin continues where the previous run left off; every window of three serves all three.
    assert len(delivered) == 9
    assert all(len(set(delivered[i : i + 3])) == 3 for i in range(7))


def test_strategy_from_name() -> None:
    assert isinstance(strategy_from_name("random", 1), RandomWalk)
    assert isinstance(strategy_from_name("round-robin", 1), RoundRobin)
    assert strategy_from_name("pct", 1, depth=4).name == "pct"
    with pytest.raises(ValueError, match="unknown strategy 'dfs'; choose one of: random, pct, round-robin"):
        strategy_from_name("dfs", 1)


def test_ready_channels_are_visible_for_strategies() -> None:
    sim = Simulation(seed=0)
    a = sim.spawn(Recorder, name="a")
    sim.spawn(Recorder, name="b")
    sim.run()
    a.tell(1)
    a.tell(2)
    (channel,) = sim.ready_channels
    assert channel.sender_name == "<outside>" and channel.receiver_name == "/a"
    assert sim.pending == 2
    assert sim.ask(a, Get()) in {(1, 2), (1,), ()}


# --- Simulation(...) refuses bad arguments at the call (issue 15, item 7d) -------------------------


@pytest.mark.parametrize(
    ("arguments", "error", "pattern"),
    [
        ({"seed": "7"}, TypeError, r"Simulation seed must be an int, got '7'"),
        ({"seed": True}, TypeError, r"Simulation seed must be an int, got True"),
        ({"seed": 1.5}, TypeError, r"Simulation seed must be an int, got 1\.5"),
        (
            {"strategy": "pct"},
            TypeError,
            r"Simulation strategy must be None or a Strategy \(RandomWalk, PCT, RoundRobin, Replay, "
            r"HypothesisStrategy: a name and a choose\(ready\) method\), got 'pct'; "
            r"strategy_from_name\('pct', seed\) builds one by name",
        ),
        ({"strategy": RandomWalk}, TypeError, r"Simulation strategy must be None or a Strategy .*, got <class"),
        ({"trace": "yes"}, TypeError, r"Simulation trace must be True or False, got 'yes'"),
        ({"trace": None}, TypeError, r"Simulation trace must be True or False, got None"),
        ({"job_duration": 0.5}, TypeError, r"Simulation job_duration must be None or a callable .*, got 0\.5"),
        ({"supervisor_strategy": "restart"}, TypeError, r"supervisor_strategy must be a SupervisorStrategy"),
        ({"faults": "crash"}, TypeError, r"faults\[0\] must be one of Crash"),
        ({"seed": "x" * 100_000}, TypeError, r"got 'xxxx.*\.\.\. \(100002 characters\)"),
    ],
)
def test_bad_arguments_are_refused_at_the_call(arguments: dict[str, Any], error: type[Exception], pattern: str) -> None:
    with pytest.raises(error, match=pattern):
        Simulation(**arguments)


def test_a_strategy_need_not_be_one_of_ours() -> None:
    class First:
        name = "first"

        def choose(self, ready: Any) -> int:
            return 0

    sim = Simulation(seed=1, strategy=First(), trace=False, job_duration=uniform_job_duration(1.0, 1.0))
    assert sim.strategy.name == "first"
