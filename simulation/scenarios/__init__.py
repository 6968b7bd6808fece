"""Scenarios: declarative workloads that run the same on the simulator, trio and threads.

Also the shrinker, which replays a failing scenario run as smaller workloads and schedules, and
users' own scenarios: an ``ActorScenario`` (your actors and checkers) in your module, named
``module:NAME`` or installed under the ``conveyor.scenarios`` entry point group.
"""

from ._broker import BrokerScenario as BrokerScenario
from ._broker import ClientPolicy as ClientPolicy
from ._broker import ConnectionLost as ConnectionLost
from ._broker import ScenarioClient as ScenarioClient
from ._broker import ScenarioPublisher as ScenarioPublisher
from ._broker import check_broker_run as check_broker_run
from ._broker import random_broker_scenario as random_broker_scenario
from ._broker import run_broker_simulation as run_broker_simulation
from ._broker import spawn_broker_scenario as spawn_broker_scenario
from ._disk_store import disk_store_opener as disk_store_opener
from ._disk_store import open_disk_store as open_disk_store
from ._paging import PagingClient as PagingClient
from ._paging import PagingScenario as PagingScenario
from ._paging import PagingShell as PagingShell
from ._paging import check_paging_run as check_paging_run
from ._paging import random_paging_scenario as random_paging_scenario
from ._paging import run_paging_simulation as run_paging_simulation
from ._plugins import ENTRY_POINT_GROUP as ENTRY_POINT_GROUP
from ._plugins import ListedScenario as ListedScenario
from ._plugins import list_scenarios as list_scenarios
from ._plugins import parse_scenario_names as parse_scenario_names
from ._plugins import plugin_names as plugin_names
from ._plugins import scenario_search_path as scenario_search_path
from ._portfolio import FAULTS_OF as FAULTS_OF
from ._portfolio import PORTFOLIO_STRATEGIES as PORTFOLIO_STRATEGIES
from ._portfolio import PortfolioChoice as PortfolioChoice
from ._portfolio import portfolio_choice as portfolio_choice
from ._portfolio import run_portfolio as run_portfolio
from ._pubsub import PubSubScenario as PubSubScenario
from ._pubsub import SubscriptionPlan as SubscriptionPlan
from ._pubsub import check_pubsub_run as check_pubsub_run
from ._pubsub import random_pubsub_scenario as random_pubsub_scenario
from ._pubsub import run_pubsub_simulation as run_pubsub_simulation
from ._pubsub_clients import ClientPlan as ClientPlan
from ._pubsub_clients import FrontPublisher as FrontPublisher
from ._pubsub_clients import FrontSubscriber as FrontSubscriber
from ._pubsub_clients import PublisherPlan as PublisherPlan
from ._pubsub_clients import StopClient as StopClient
from ._registry import FAIRNESS_MIN_JAIN as FAIRNESS_MIN_JAIN
from ._registry import FAULT_PLANS as FAULT_PLANS
from ._registry import SCENARIOS as SCENARIOS
from ._registry import STEP_BUDGET as STEP_BUDGET
from ._registry import QueueFigures as QueueFigures
from ._registry import RunReport as RunReport
from ._registry import ScenarioRun as ScenarioRun
from ._registry import ScenarioSpec as ScenarioSpec
from ._registry import Variant as Variant
from ._registry import check_fault_plan as check_fault_plan
from ._registry import draw_faults as draw_faults
from ._registry import get_scenario as get_scenario
from ._registry import queue_figures as queue_figures
from ._registry import replay_command as replay_command
from ._registry import run_scenario as run_scenario
from ._registry import scenario_draws as scenario_draws
from ._registry import scenario_names as scenario_names
from ._registry import simulate_workload as simulate_workload
from ._shrink import STORY_STEPS as STORY_STEPS
from ._shrink import ShrinkResult as ShrinkResult
from ._shrink import shrink as shrink
from ._subscriber import BurstPublisher as BurstPublisher
from ._subscriber import CallbackDurations as CallbackDurations
from ._subscriber import CallbackFailure as CallbackFailure
from ._subscriber import SubscriberScenario as SubscriberScenario
from ._subscriber import check_subscriber_run as check_subscriber_run
from ._subscriber import random_subscriber_scenario as random_subscriber_scenario
from ._subscriber import run_subscriber_simulation as run_subscriber_simulation
from ._subscriber import scenario_callback as scenario_callback
from ._transactions import Audit as Audit
from ._transactions import TxAuditor as TxAuditor
from ._transactions import TxFigures as TxFigures
from ._transactions import TxMisuser as TxMisuser
from ._transactions import TxProducer as TxProducer
from ._transactions import TxScenario as TxScenario
from ._transactions import ZkTxSetup as ZkTxSetup
from ._transactions import check_tx_run as check_tx_run
from ._transactions import draw_tx_faults as draw_tx_faults
from ._transactions import failing_listener as failing_listener
from ._transactions import random_tx_scenario as random_tx_scenario
from ._transactions import run_tx_simulation as run_tx_simulation
from ._transactions import tx_figures as tx_figures
from ._transactions import tx_final as tx_final
from ._transactions import tx_stores as tx_stores
from ._tx_zk import random_tx_zk_scenario as random_tx_zk_scenario
from ._tx_zk import run_tx_zk_simulation as run_tx_zk_simulation
from ._user import ActorScenario as ActorScenario
from ._user import ActorWorkload as ActorWorkload
from ._user import Checker as Checker
from ._user import scenario_story as scenario_story

__all__ = [
    "ActorScenario",
    "ActorWorkload",
    "Checker",
    "scenario_story",
    "ENTRY_POINT_GROUP",
    "ListedScenario",
    "list_scenarios",
    "parse_scenario_names",
    "plugin_names",
    "scenario_search_path",
    "Audit",
    "TxAuditor",
    "TxFigures",
    "draw_tx_faults",
    "tx_figures",
    "tx_final",
    "TxMisuser",
    "TxProducer",
    "TxScenario",
    "check_tx_run",
    "failing_listener",
    "random_tx_scenario",
    "run_tx_simulation",
    "ZkTxSetup",
    "random_tx_zk_scenario",
    "run_tx_zk_simulation",
    "tx_stores",
    "FAULTS_OF",
    "FAIRNESS_MIN_JAIN",
    "FAULT_PLANS",
    "PORTFOLIO_STRATEGIES",
    "PortfolioChoice",
    "portfolio_choice",
    "run_portfolio",
    "SCENARIOS",
    "STEP_BUDGET",
    "STORY_STEPS",
    "QueueFigures",
    "RunReport",
    "ScenarioRun",
    "ScenarioSpec",
    "ShrinkResult",
    "Variant",
    "check_fault_plan",
    "draw_faults",
    "get_scenario",
    "scenario_draws",
    "queue_figures",
    "replay_command",
    "run_scenario",
    "scenario_names",
    "shrink",
    "simulate_workload",
    "BrokerScenario",
    "BurstPublisher",
    "CallbackDurations",
    "CallbackFailure",
    "ClientPlan",
    "ClientPolicy",
    "FrontPublisher",
    "FrontSubscriber",
    "PubSubScenario",
    "PublisherPlan",
    "StopClient",
    "SubscriptionPlan",
    "check_pubsub_run",
    "random_pubsub_scenario",
    "run_pubsub_simulation",
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
    "ConnectionLost",
    "disk_store_opener",
    "open_disk_store",
    "PagingClient",
    "PagingScenario",
    "PagingShell",
    "check_paging_run",
    "random_paging_scenario",
    "run_paging_simulation",
]
