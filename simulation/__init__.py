"""Deterministic simulation of conveyor's actors: virtual time, chosen interleavings, replay."""

from ._channel import Channel as Channel
from ._simulation import RunResult as RunResult
from ._simulation import Simulation as Simulation
from ._simulation import uniform_job_duration as uniform_job_duration
from ._strategies import RandomWalk as RandomWalk
from ._strategies import Replay as Replay
from ._strategies import ReplayDivergence as ReplayDivergence
from ._strategies import RoundRobin as RoundRobin
from ._strategies import Strategy as Strategy
from ._strategies import strategy_from_name as strategy_from_name

__all__ = [
    "Channel",
    "RandomWalk",
    "Replay",
    "ReplayDivergence",
    "RoundRobin",
    "RunResult",
    "Simulation",
    "Strategy",
    "strategy_from_name",
    "uniform_job_duration",
]
