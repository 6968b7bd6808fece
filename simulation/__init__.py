"""Deterministic simulation of conveyor's actors: virtual time, chosen interleavings, replay."""

from ._channel import Channel as Channel
from ._explore import ExploreFailure as ExploreFailure
from ._explore import ExploreResult as ExploreResult
from ._explore import ExploringStrategy as ExploringStrategy
from ._explore import explore as explore
from ._faults import Crash as Crash
from ._faults import CrashAmong as CrashAmong
from ._faults import Delay as Delay
from ._faults import Drop as Drop
from ._faults import FailJob as FailJob
from ._faults import FailWrite as FailWrite
from ._faults import Fault as Fault
from ._faults import FaultApplied as FaultApplied
from ._faults import InjectedFault as InjectedFault
from ._faults import Pause as Pause
from ._faults import never_acks as never_acks
from ._shrink import ShrinkResult as ShrinkResult
from ._shrink import shrink as shrink
from ._simulation import RunResult as RunResult
from ._simulation import Simulation as Simulation
from ._simulation import uniform_job_duration as uniform_job_duration
from ._story import delivery_steps as delivery_steps
from ._story import story_lines as story_lines
from ._strategies import PCT as PCT
from ._strategies import STRATEGY_NAMES as STRATEGY_NAMES
from ._strategies import HypothesisStrategy as HypothesisStrategy
from ._strategies import RandomWalk as RandomWalk
from ._strategies import Replay as Replay
from ._strategies import ReplayDivergence as ReplayDivergence
from ._strategies import RoundRobin as RoundRobin
from ._strategies import Strategy as Strategy
from ._strategies import strategy_from_name as strategy_from_name

__all__ = [
    "Channel",
    "Crash",
    "CrashAmong",
    "Delay",
    "Drop",
    "ExploreFailure",
    "ExploreResult",
    "ExploringStrategy",
    "FailJob",
    "FailWrite",
    "Fault",
    "FaultApplied",
    "HypothesisStrategy",
    "InjectedFault",
    "Pause",
    "never_acks",
    "PCT",
    "RandomWalk",
    "STRATEGY_NAMES",
    "Replay",
    "ReplayDivergence",
    "RoundRobin",
    "RunResult",
    "ShrinkResult",
    "Simulation",
    "Strategy",
    "delivery_steps",
    "explore",
    "shrink",
    "story_lines",
    "strategy_from_name",
    "uniform_job_duration",
]
