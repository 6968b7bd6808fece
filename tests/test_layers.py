"""The layers of docs/architecture.md hold in the real import graph, and its diagram is that graph."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))

import layers  # tools/ is not a package: it is put on the path above


def test_no_import_runs_against_the_layers() -> None:
    assert layers.violations(layers.import_graph()) == []


def test_the_diagram_in_architecture_md_is_the_import_graph() -> None:
    assert layers.documented() == layers.mermaid(layers.import_graph()), "run python tools/layers.py --write"


def test_the_rule_can_fail() -> None:
    upward = {"conveyor.runtime": {"conveyor.actors.broker"}, "conveyor.simulation": {"conveyor.simulation.scenarios"}}
    sideways = {"conveyor.actors.broker": {"conveyor.actors.pubsub"}}
    assert layers.violations(upward) == [
        "conveyor.runtime imports conveyor.actors.broker, which is above it in LAYERS",
        "conveyor.simulation imports conveyor.simulation.scenarios, which is above it in LAYERS",
    ]
    assert layers.violations(sideways) == [
        "conveyor.actors.broker imports conveyor.actors.pubsub, which is after it in LAYERS",
    ]
    assert layers.violations({"conveyor.cli": {"conveyor.runtime", "conveyor.simulation.sweep"}}) == []
