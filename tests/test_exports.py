"""Public names are exported once, and code imports another package's modules only through its public faces.

As trio's ``_tests/test_exports.py``: every public object has one public home (``conveyor.runtime``
or ``conveyor.runtime.lowlevel``, not both), and a private module (``_x.py``) is imported only
from inside its own package.
"""

from __future__ import annotations

import ast
import importlib
import types
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CODE = {
    "runtime": "conveyor.runtime",
    "actors": "conveyor.actors",
    "simulation": "conveyor.simulation",
    "cli": "conveyor.cli",
    "benchmarks": "conveyor.benchmarks",
}
"""Each code folder and the import name ``pyproject.toml`` maps it to."""
PUBLIC_MODULES = (
    "conveyor.runtime",
    "conveyor.runtime.lowlevel",
    "conveyor.runtime.validators",
    "conveyor.runtime.extras",
    "conveyor.actors",
    "conveyor.actors.broker",
    "conveyor.actors.storage",
    "conveyor.actors.subscriber",
    "conveyor.actors.pubsub",
    "conveyor.simulation",
    "conveyor.simulation.checkers",
    "conveyor.simulation.scenarios",
    "conveyor.simulation.sweep",
    "conveyor.cli",
)



def _module_name(path: Path, root: Path = ROOT) -> str:
    relative = path.relative_to(root).with_suffix("")
    parts = [CODE[relative.parts[0]], *relative.parts[1:]]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _private_imports(root: Path = ROOT) -> set[tuple[str, str]]:
    """(file, private module) for every import of a ``_x`` module from outside the package that holds it."""
    found: set[tuple[str, str]] = set()
    for folder in CODE:
        for path in sorted((root / folder).rglob("*.py")):
            name = _module_name(path, root)
            package = name if path.name == "__init__.py" else name.rpartition(".")[0]
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    targets = [node.module]
                elif isinstance(node, ast.Import):
                    targets = [alias.name for alias in node.names]
                else:
                    continue
                for target in targets:
                    parts = target.split(".")
                    if parts[0] != "conveyor":
                        continue
                    for depth, part in enumerate(parts):
                        if part.startswith("_") and ".".join(parts[:depth]) != package:
                            found.add((str(path.relative_to(root)), ".".join(parts[: depth + 1])))
                            break
    return found


def _exports(module_name: str) -> list[str]:
    return list(getattr(importlib.import_module(module_name), "__all__", ()))


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_all_names_exist_once(module_name: str) -> None:
    module = importlib.import_module(module_name)
    names = _exports(module_name)
    assert len(names) == len(set(names)), f"{module_name}.__all__ repeats a name"
    assert [name for name in names if not hasattr(module, name)] == []


def test_every_public_object_has_one_public_home() -> None:
    homes: dict[int, list[str]] = defaultdict(list)
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in _exports(module_name):
            value = getattr(module, name)
            if callable(value):  # classes and functions; constants may be equal by chance
                homes[id(value)].append(f"{module_name}.{name}")
    assert [paths for paths in homes.values() if len(paths) > 1] == []


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_all_lists_every_public_name(module_name: str) -> None:
    """A package lists everything public it holds; a plain module (validators), what it defines."""
    module = importlib.import_module(module_name)
    package = Path(module.__file__ or "").name == "__init__.py"
    public = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType) and name != "annotations"
        and (package or getattr(value, "__module__", module_name) == module_name)
    }
    assert sorted(public - set(_exports(module_name))) == []


def test_lowlevel_holds_what_backends_and_message_libraries_need() -> None:
    assert {
        "Backend",
        "StoreHook",
        "CellBase",
        "ActorCell",
        "PromiseCell",
        "TimerQueue",
        "TimerFired",
        "register_immutable_type",
        "checked_when_built",
    } <= set(_exports("conveyor.runtime.lowlevel"))


def test_no_code_outside_the_runtime_imports_its_private_modules() -> None:
    assert sorted(hit for hit in _private_imports() if hit[1].startswith("conveyor.runtime.")) == []


def test_no_private_import_crosses_a_package_boundary() -> None:
    assert sorted(_private_imports()) == []


def test_the_check_sees_a_crossing(tmp_path: Path) -> None:
    scenarios = tmp_path / "simulation" / "scenarios"
    scenarios.mkdir(parents=True)
    (scenarios / "_x.py").write_text("from conveyor.simulation._simulation import Simulation\n"
                                     "from conveyor.simulation.scenarios._registry import SCENARIOS\n")
    for folder in CODE:
        (tmp_path / folder).mkdir(exist_ok=True)
    assert _private_imports(tmp_path) == {("simulation/scenarios/_x.py", "conveyor.simulation._simulation")}
    assert _module_name(ROOT / "simulation" / "scenarios" / "__init__.py") == "conveyor.simulation.scenarios"
