"""Scenarios: declarative workloads that run the same on the simulator, trio and threads."""

from ._broker import BrokerScenario as BrokerScenario
from ._broker import ClientPolicy as ClientPolicy
from ._broker import ScenarioClient as ScenarioClient
from ._broker import ScenarioPublisher as ScenarioPublisher
from ._broker import check_broker_run as check_broker_run
from ._broker import random_broker_scenario as random_broker_scenario
from ._broker import run_broker_simulation as run_broker_simulation
from ._broker import spawn_broker_scenario as spawn_broker_scenario
from ._subscriber import BurstPublisher as BurstPublisher
from ._subscriber import CallbackDurations as CallbackDurations
from ._subscriber import CallbackFailure as CallbackFailure
from ._subscriber import SubscriberScenario as SubscriberScenario
from ._subscriber import check_subscriber_run as check_subscriber_run
from ._subscriber import random_subscriber_scenario as random_subscriber_scenario
from ._subscriber import run_subscriber_simulation as run_subscriber_simulation
from ._subscriber import scenario_callback as scenario_callback

__all__ = [
    "BrokerScenario",
    "BurstPublisher",
    "CallbackDurations",
    "CallbackFailure",
    "ClientPolicy",
    "ScenarioClient",
    "ScenarioPublisher",
    "SubscriberScenario",
    "check_broker_run",
    "check_subscriber_run",
    "random_broker_scenario",
    "random_subscriber_scenario",
    "run_broker_simulation",
    "run_subscriber_simulation",
    "scenario_callback",
    "spawn_broker_scenario",
]
