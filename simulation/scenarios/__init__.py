"""Scenarios: declarative workloads that run the same on the simulator, trio and threads."""

from ._broker import BrokerScenario as BrokerScenario
from ._broker import ClientPolicy as ClientPolicy
from ._broker import ScenarioClient as ScenarioClient
from ._broker import ScenarioPublisher as ScenarioPublisher
from ._broker import check_broker_run as check_broker_run
from ._broker import random_broker_scenario as random_broker_scenario
from ._broker import run_broker_simulation as run_broker_simulation
from ._broker import spawn_broker_scenario as spawn_broker_scenario

__all__ = [
    "BrokerScenario",
    "ClientPolicy",
    "ScenarioClient",
    "ScenarioPublisher",
    "check_broker_run",
    "random_broker_scenario",
    "run_broker_simulation",
    "spawn_broker_scenario",
]
