"""One choice stream per run: recording is the seed's run, a stream replays exactly, past its end the simplest."""

from __future__ import annotations

import ast
import logging
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conveyor.simulation import ChoiceStream, StreamRandom, StreamStuck, active_stream, choice_stream, seeded_random
from conveyor.simulation.scenarios import STEP_BUDGET, BrokerScenario, run_scenario, scenario_names


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    logging.disable(logging.CRITICAL)  # scenario callbacks that fail on purpose log tracebacks
    yield
    logging.disable(logging.NOTSET)


def _recorded(name: str, seed: int) -> tuple[str, tuple[int, ...]]:
    stream = ChoiceStream()
    with choice_stream(stream):
        run = run_scenario(name, seed)
    return run.report.trace_hash, tuple(stream.drawn)


@pytest.mark.parametrize("name", scenario_names())
def test_recording_is_the_seeds_own_run_and_its_stream_replays_it(name: str) -> None:
    plain = run_scenario(name, 5).report.trace_hash
    recorded, drawn = _recorded(name, 5)
    assert recorded == plain  # workload, faults, clients and schedule all drawn through the stream
    replay = ChoiceStream(drawn)
    with choice_stream(replay):
        again = run_scenario(name, 5).report.trace_hash
    assert again == plain
    assert tuple(replay.drawn) == drawn


def test_the_stream_holds_the_workload_the_faults_the_clients_and_the_schedule() -> None:
    """Zeroing the first draws changes the workload: they are the build's, before anything runs."""
    _, drawn = _recorded("fairness", 2)
    built = run_scenario("fairness", 2).workload
    zeroed = ChoiceStream((0,) * 8 + drawn[8:])
    with choice_stream(zeroed):
        run = run_scenario("fairness", 2)
    assert run.workload != built
    assert isinstance(run.workload, BrokerScenario)
    assert len(run.workload.consumers) == 2  # randint(2, 8) at its simplest


@settings(max_examples=25, deadline=None, derandomize=True)
@given(st.lists(st.integers(0, 2**60), max_size=300))
def test_any_stream_replays_deterministically(choices: list[int]) -> None:
    hashes = []
    drawn = []
    for _ in range(2):
        stream = ChoiceStream(choices)
        with choice_stream(stream):
            hashes.append(run_scenario("consumer-priorities", 0).report.trace_hash)
        drawn.append(tuple(stream.drawn))
    assert hashes[0] == hashes[1]
    assert drawn[0] == drawn[1]
    assert all(value <= choice for value, choice in zip(drawn[0], choices, strict=False))  # clamped, never raised


@settings(max_examples=50, deadline=None)
@given(st.text(max_size=8), st.integers(1, 50))
def test_a_recording_generator_answers_as_the_seeded_one(key: str, size: int) -> None:
    plain = random.Random(key)
    streamed = StreamRandom(ChoiceStream(), key)
    population = list(range(size * 3))
    for generator in (plain, streamed):
        generator.shuffle(population)
    assert [plain.random(), plain.randint(1, size), plain.choice("abc"), plain.uniform(0, 2),
            plain.sample(range(size * 40), size), plain.randbytes(3), plain.getrandbits(70)] == [
        streamed.random(), streamed.randint(1, size), streamed.choice("abc"), streamed.uniform(0, 2),
        streamed.sample(range(size * 40), size), streamed.randbytes(3), streamed.getrandbits(70)]


def test_past_its_end_a_stream_takes_the_simplest_choice() -> None:
    stream = ChoiceStream([7, 2**60])
    generator = StreamRandom(stream, "k")
    assert generator.randrange(10) == 7
    assert generator.randrange(3) == 2  # clamped to the draw's largest
    assert generator.randint(5, 400) == 5  # past the end: the low end
    assert generator.choice("xyz") == "x"
    assert generator.random() > 0.999999  # a float's simplest is just below 1: random() < p is False
    assert generator.uniform(0.0, 2.0) > 1.999
    assert stream.drawn == [7, 2, 0, 0, 0, 0]


def test_a_run_looping_on_a_draw_past_the_end_raises_instead_of_hanging() -> None:
    generator = StreamRandom(ChoiceStream([]), "k")
    with pytest.raises(StreamStuck, match="loops on a draw"):
        generator.sample(range(10**6), 3)  # rejects a repeat: the simplest choice repeats for ever


def test_outside_a_block_generators_are_plain_and_inside_they_draw_from_the_stream() -> None:
    assert type(seeded_random("k")) is random.Random
    assert active_stream() is None
    stream = ChoiceStream([3])
    with choice_stream(stream):
        assert active_stream() is stream
        assert seeded_random("k").randrange(5) == 3
    assert active_stream() is None


def test_bad_choices_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="ChoiceStream choices must be ints >= 0"):
        ChoiceStream([1, -2])


def test_a_run_cut_off_by_its_step_budget_is_reported_as_such_not_as_a_violation() -> None:
    report = run_scenario("fairness", 1, max_steps=50).report
    assert report.cut_off and not report.ok
    budget = [line for line in report.violations if line.startswith(STEP_BUDGET + ":")]
    assert len(budget) == 1 and "budget of 50 delivery steps" in budget[0]
    assert not run_scenario("fairness", 1).report.cut_off


def test_scenarios_draw_through_seeded_random_so_every_draw_is_in_the_stream() -> None:
    """A ``random.Random(...)`` made directly in a scenario draws outside the stream, and cannot shrink."""
    from conveyor.simulation import scenarios

    offenders = []
    for path in sorted(Path(scenarios.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "Random"
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "random"
                    and "pubsub-ack-key" not in ast.unparse(node)):  # the front's HMAC key: not a choice
                offenders.append(f"{path.name}:{node.lineno}")
    assert offenders == [], "use conveyor.simulation.seeded_random(key) instead of random.Random(key)"
