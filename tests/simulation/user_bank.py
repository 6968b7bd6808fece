"""A scenario a user writes in their own module: docs/simulation.md shows it word for word, first import to marker.

``conveyor simulate tests.simulation.user_bank:bank`` runs it; tests/simulation/test_user_scenarios.py
checks that it finds the planted lost update, that its printed replay command reproduces it and that
the shrinker reduces it to two tellers of one deposit each.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Iterator

import attrs

from conveyor.runtime import Actor, ActorRef, EventKind, TraceEvent
from conveyor.simulation import Delay, Fault, Simulation, seeded_random
from conveyor.simulation.checkers import CheckResult
from conveyor.simulation.scenarios import ActorScenario


@attrs.frozen
class Read:
    """Asks the account for its balance (it replies with an int)."""


@attrs.frozen
class Write:
    balance: int


@attrs.frozen
class Audited:
    """What the final audit read: noted, so that a checker sees it in the trace."""

    balance: int


class Account(Actor):
    def __init__(self) -> None:
        self.balance = 0

    def receive(self, message: object) -> None:
        if isinstance(message, Write):
            self.balance = message.balance
        else:
            self.ctx.reply(self.balance)


class Teller(Actor):
    """Deposits 1, ``deposits`` times, by reading the balance and writing it back plus one (the bug)."""

    def __init__(self, account: ActorRef, deposits: int) -> None:
        self.account = account
        self.left = deposits

    def on_start(self) -> None:
        self.ctx.send(self.account, Read())

    def receive(self, balance: int) -> None:
        self.ctx.send(self.account, Write(balance + 1))  # another teller may have written since we read
        self.left -= 1
        if self.left:
            self.ctx.send(self.account, Read())


class Auditor(Actor):
    def __init__(self, account: ActorRef) -> None:
        self.account = account

    def on_start(self) -> None:
        self.ctx.send(self.account, Read())

    def receive(self, balance: int) -> None:
        self.ctx.note(Audited(balance))


@attrs.frozen
class Deposits:
    """The workload: plain data drawn from the seed."""

    tellers: int
    deposits: int


def draw(seed: int) -> Deposits:
    rng = seeded_random(f"bank:{seed}")  # never random.Random: the shrinker shrinks what this draws
    return Deposits(tellers=rng.randint(1, 4), deposits=rng.randint(1, 5))


def spawn(sim: Simulation, work: Deposits) -> None:
    account = sim.spawn(Account, name="account")
    for index in range(work.tellers):
        sim.spawn(functools.partial(Teller, account, work.deposits), name=f"teller-{index}")


def audit(sim: Simulation, work: Deposits) -> None:
    """Once the tellers are done: read the account, for the checker."""
    account = sim.live_ref("/account")
    assert account is not None
    sim.spawn(functools.partial(Auditor, account), name="auditor")


def no_lost_deposits(trace: list[TraceEvent], work: Deposits) -> CheckResult:
    """The audited balance is every deposit made."""
    made = work.tellers * work.deposits
    audits = [event.message.balance for event in trace
              if event.kind is EventKind.NOTE and isinstance(event.message, Audited)]
    violations = [f"the account holds {balance} after {made} deposits of 1" for balance in audits if balance != made]
    if not audits:
        violations.append("no audit was noted")
    return CheckResult.of("no_lost_deposits", violations, deposits=made)


def delays(work: Deposits, rng: random.Random, plan: str) -> list[Fault]:
    """Fault plan ``delay``: one teller's messages to the account arrive late. Other plans: nothing."""
    if plan != "delay":
        return []
    teller = rng.randrange(work.tellers)
    return [Delay(f"/teller-{teller}", "/account", at_step=rng.randint(1, 10), duration_s=rng.uniform(0.1, 1.0))]


def simpler(work: Deposits) -> Iterator[Deposits]:
    """Smaller workloads for the shrinker, biggest cut first."""
    for tellers in range(1, work.tellers):
        yield attrs.evolve(work, tellers=tellers)
    for deposits in range(1, work.deposits):
        yield attrs.evolve(work, deposits=deposits)


BANK = ActorScenario(
    "bank", "tellers deposit by read-then-write: the account must hold every deposit",
    build=draw, spawn=spawn, checks=(no_lost_deposits,), finish=audit,
    draw_faults=delays, fault_rotation=("none", "delay"), simpler=simpler,
)
# --- end of the docs' example; what follows is for the tests only ---


NOT_A_SCENARIO = "a string"
"""What ``tests.simulation.user_bank:NOT_A_SCENARIO`` names: the error says so."""
