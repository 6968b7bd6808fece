"""Deterministic simulation of conveyor's actors: virtual time, chosen interleavings, replay.

This package is the simulator backend and imports only ``conveyor.runtime``. The domain
verification built on it lives in its subpackages, which import it through these names:
``checkers`` (pure functions over traces, and the story of a run), ``scenarios`` (workloads,
the registry, the shrinker) and ``sweep`` (many runs on Spark).
"""

from ._channel import Channel as Channel
from ._choices import ChoiceStream as ChoiceStream
from ._choices import StreamRandom as StreamRandom
from ._choices import StreamStuck as StreamStuck
from ._choices import active_stream as active_stream
from ._choices import choice_stream as choice_stream
from ._choices import seeded_random as seeded_random
from ._disk import DiskFaults as DiskFaults
from ._disk import SimDisk as SimDisk
from ._disk_journal import OpenStore as OpenStore
from ._disk_journal import SimJournal as SimJournal
from ._disk_journal import SteppedJournalStore as SteppedJournalStore
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
from ._faults import ProcessCrash as ProcessCrash
from ._faults import covers as covers
from ._faults import never_acks as never_acks
from ._simulation import RunResult as RunResult
from ._simulation import Simulation as Simulation
from ._simulation import uniform_job_duration as uniform_job_duration
from ._strategies import PCT as PCT
from ._strategies import STRATEGY_NAMES as STRATEGY_NAMES
from ._strategies import HypothesisStrategy as HypothesisStrategy
from ._strategies import RandomWalk as RandomWalk
from ._strategies import Replay as Replay
from ._strategies import ReplayDivergence as ReplayDivergence
from ._strategies import RoundRobin as RoundRobin
from ._strategies import Strategy as Strategy
from ._strategies import strategy_from_name as strategy_from_name
from ._zk_model import SEQUENCE_DIGITS as SEQUENCE_DIGITS
from ._zk_model import SimZooKeeper as SimZooKeeper
from ._zk_model import WatchDelivery as WatchDelivery
from ._zk_model import ZkOutcome as ZkOutcome
from ._zk_session import EndZkFaults as EndZkFaults
from ._zk_session import ExpireZkSession as ExpireZkSession
from ._zk_session import SimZkSession as SimZkSession
from ._zk_session import SimZooKeeperEnsemble as SimZooKeeperEnsemble
from ._zk_session import ZkFaultInjected as ZkFaultInjected
from ._zk_session import ZkFaults as ZkFaults
from ._zk_session import ZkServerActor as ZkServerActor
from ._zk_session import ZkSessionEnded as ZkSessionEnded

__all__ = [
    "Channel",
    "ChoiceStream",
    "Crash",
    "CrashAmong",
    "Delay",
    "DiskFaults",
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
    "OpenStore",
    "Pause",
    "ProcessCrash",
    "never_acks",
    "PCT",
    "RandomWalk",
    "STRATEGY_NAMES",
    "Replay",
    "ReplayDivergence",
    "RoundRobin",
    "RunResult",
    "SimDisk",
    "SimJournal",
    "Simulation",
    "SteppedJournalStore",
    "Strategy",
    "StreamRandom",
    "StreamStuck",
    "active_stream",
    "choice_stream",
    "covers",
    "explore",
    "seeded_random",
    "strategy_from_name",
    "uniform_job_duration",
    "SEQUENCE_DIGITS",
    "EndZkFaults",
    "ExpireZkSession",
    "SimZkSession",
    "SimZooKeeper",
    "SimZooKeeperEnsemble",
    "WatchDelivery",
    "ZkFaultInjected",
    "ZkSessionEnded",
    "ZkFaults",
    "ZkOutcome",
    "ZkServerActor",
]
