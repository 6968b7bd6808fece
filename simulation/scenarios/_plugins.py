"""Users' scenarios by name: ``module:NAME`` in any importable module, and installed plugins by their own name.

``get_scenario`` looks here for a name the built-in registry does not hold. ``mypkg.scenarios:bank``
imports ``mypkg.scenarios`` and takes its attribute ``bank`` (or the one scenario there whose
``name`` is ``bank``): an ``ActorScenario`` (your actors and checkers) or a ``ScenarioSpec`` (a
built-in family's workload drawn your way). A distribution can also install scenarios under the
``conveyor.scenarios`` entry point group (``bank = "mypkg.scenarios:BANK"``): they are then named
by the entry point's name alone, and listed by ``conveyor simulate --list``. ``all`` stays the
built-in scenarios (conveyor's own gate must not change with what else is installed); ``plugins``
names every installed one.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Iterable
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from types import ModuleType
from typing import Any, final

import attrs

from ._registry import SCENARIOS, ScenarioSpec, check_fault_plan, get_scenario
from ._user import ActorScenario, build_actor_workload

ENTRY_POINT_GROUP = "conveyor.scenarios"
"""The entry point group whose entries name installed scenarios (an ``ActorScenario`` or ``ScenarioSpec`` each)."""
ALL = "all"
"""In a list of scenario names: every built-in scenario."""
PLUGINS = "plugins"
"""In a list of scenario names: every scenario installed under ``ENTRY_POINT_GROUP``."""
FORMS = ("a scenario is NAME (a built-in one or an installed plugin's: conveyor simulate --list) or MODULE:NAME "
         "(an ActorScenario or ScenarioSpec in an importable module, e.g. mypkg.scenarios:bank)")
"""The forms a scenario name may take, for error messages."""


def as_scenario_spec(value: object, where: str) -> ScenarioSpec:
    """``value`` as the registry runs it: a ``ScenarioSpec`` as it is, an ``ActorScenario`` as its ``actors`` family.

    Raises:
        ValueError: ``value`` is neither (the message names what it is), or names an unknown fault plan.
    """
    if isinstance(value, ScenarioSpec):
        return value
    if isinstance(value, ActorScenario):
        try:
            plans = (check_fault_plan(value.default_faults), *(check_fault_plan(p) for p in value.fault_rotation))
        except ValueError as error:
            msg = f"{where}: {error}"
            raise ValueError(msg) from None
        return ScenarioSpec(value.name, value.summary, "actors", functools.partial(build_actor_workload, value),
                            default_faults=plans[0], fault_rotation=plans[1:] or ("none",))
    msg = f"{where} is {_described(value)}, not a scenario (an ActorScenario or a ScenarioSpec); {FORMS}"
    raise ValueError(msg)


def _described(value: object) -> str:
    shown = repr(value)
    return f"a {type(value).__name__} ({shown if len(shown) <= 60 else shown[:57] + '...'})"


def _module_scenarios(module: ModuleType) -> dict[str, ActorScenario[Any] | ScenarioSpec]:
    """The module's scenarios by attribute name (those of its public attributes that are one)."""
    return {attribute: value for attribute, value in vars(module).items()
            if not attribute.startswith("_") and isinstance(value, ActorScenario | ScenarioSpec)}


def _import(module_name: str, name: str) -> ModuleType:
    try:
        return importlib.import_module(module_name)
    except Exception as error:  # any failure to import is the user's module's, and said so
        msg = f"scenario {name!r}: module {module_name!r} does not import ({type(error).__name__}: {error}); {FORMS}"
        raise ValueError(msg) from error


def _from_module(module_name: str, attribute: str, name: str) -> ScenarioSpec:
    """Scenario ``attribute`` of the module: its attribute by that name, else the one scenario of that ``name``."""
    module = _import(module_name, name)
    found = _module_scenarios(module)
    named = [spec for spec in found.values() if spec.name == attribute]
    if attribute in found:
        return as_scenario_spec(found[attribute], f"scenario {name!r}")
    if len(named) == 1:
        return as_scenario_spec(named[0], f"scenario {name!r}")
    listed = ", ".join(key if spec.name == key else f"{key} (named {spec.name})" for key, spec in found.items())
    if hasattr(module, attribute):
        what = f"is {_described(getattr(module, attribute))}, not a scenario (an ActorScenario or a ScenarioSpec)"
    else:
        what = f"is missing: module {module_name!r} has no attribute {attribute!r} and no scenario of that name"
    msg = f"scenario {name!r}: {module_name}.{attribute} {what}; scenarios there: {listed or 'none'}; {FORMS}"
    raise ValueError(msg)


def _plugin_entry_points() -> dict[str, EntryPoint]:
    """The installed scenarios' entry points by name (the first of a name; none that a built-in name hides)."""
    found: dict[str, EntryPoint] = {}
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        if entry.name not in SCENARIOS:
            found.setdefault(entry.name, entry)
    return found


def _load_plugin(entry: EntryPoint) -> ScenarioSpec:
    where = f"plugin scenario {entry.name!r} ({entry.value}, entry point group {ENTRY_POINT_GROUP})"
    try:
        value = entry.load()
    except Exception as error:  # a broken plugin is named, not a crash of the command
        msg = f"{where} does not load ({type(error).__name__}: {error})"
        raise ValueError(msg) from error
    spec = as_scenario_spec(value, where)
    return spec if spec.name == entry.name else attrs.evolve(spec, name=entry.name)


def plugin_names() -> tuple[str, ...]:
    """The names of the scenarios installed under ``ENTRY_POINT_GROUP``, sorted."""
    return tuple(sorted(_plugin_entry_points()))


@functools.cache
def find_scenario(name: str) -> ScenarioSpec:
    """A scenario the built-in registry does not hold: ``module:NAME``, or an installed plugin's by its name.

    Raises:
        ValueError: the module does not import, holds no such scenario or something else by that name,
            or no plugin has that name; the message says what was found and the forms a name may take.
    """
    module_name, colon, attribute = name.partition(":")
    if colon:
        if not module_name.strip() or not attribute.strip():
            msg = f"scenario {name!r} names no {'module' if not module_name.strip() else 'scenario'}; {FORMS}"
            raise ValueError(msg)
        return _from_module(module_name.strip(), attribute.strip(), name)
    entry = _plugin_entry_points().get(name)
    if entry is None:
        raise _unknown(name)
    return _load_plugin(entry)


def _unknown(name: str, words: tuple[str, ...] = ()) -> ValueError:
    """The error for a plain name nothing holds: the built-ins (and ``words``), the plugins, the MODULE:NAME form."""
    plugins = plugin_names()
    msg = (f"unknown scenario {name!r}; choose one of: {', '.join((*SCENARIOS, *words))}"
           f"{'; installed plugins: ' + ', '.join(plugins) if plugins else ''}; or name one as MODULE:NAME "
           f"(an ActorScenario or ScenarioSpec in an importable module: mypkg.scenarios:bank)")
    return ValueError(msg)


@final
@attrs.frozen
class ListedScenario:
    """One line of ``conveyor simulate --list``: a scenario's name, where it comes from and its summary."""

    name: str
    origin: str
    summary: str


def list_scenarios() -> tuple[ListedScenario, ...]:
    """The built-in scenarios, then the installed plugins' (a plugin that fails to load says why in its summary)."""
    listed = [ListedScenario(spec.name, "built-in", spec.summary) for spec in SCENARIOS.values()]
    for name, entry in sorted(_plugin_entry_points().items()):
        origin = f"plugin {entry.dist.name if entry.dist is not None else '?'} ({entry.value})"
        try:
            summary = find_scenario(name).summary
        except ValueError as error:
            summary = f"BROKEN: {error}"
        listed.append(ListedScenario(name, origin, summary))
    return tuple(listed)


def parse_scenario_names(text: str) -> tuple[str, ...]:
    """Comma-separated scenario names, each checked: ``all`` (the built-ins), ``plugins``, NAME or MODULE:NAME.

    Raises:
        ValueError: an empty entry, or a name ``get_scenario`` does not find (the message says why).
    """
    parts = [part.strip() for part in text.split(",")]
    if "" in parts:
        msg = (f"empty scenario name in {text[:60]!r}; give one or more (comma separated): {ALL} (every built-in "
               f"scenario), {PLUGINS} (every installed plugin's), or names; {FORMS}")
        raise ValueError(msg)
    names: list[str] = []
    for part in parts:
        if part == ALL:
            names.extend(SCENARIOS)
        elif part == PLUGINS:
            names.extend(name for name in plugin_names() if get_scenario(name))  # a broken one says why
        elif ":" not in part and part not in SCENARIOS and part not in _plugin_entry_points():
            raise _unknown(part, (ALL, PLUGINS))
        else:
            get_scenario(part)
            names.append(part)
    return tuple(dict.fromkeys(names))


def scenario_search_path(names: Iterable[str]) -> tuple[str, ...]:
    """The folders the ``module:NAME`` scenarios' modules were imported from, for processes that start afresh.

    A Spark executor's Python starts with its own ``sys.path``; putting these folders on it lets it
    import the same modules as the driver (same machine: local mode). Resolves each name first.
    """
    folders: list[str] = []
    for name in names:
        module_name, colon, _ = name.partition(":")
        if not colon:
            continue
        get_scenario(name)
        top = sys.modules.get(module_name.strip().split(".")[0])
        where = getattr(top, "__file__", None)
        if where is None:  # a namespace package: the folder above its first portion
            portions = list(getattr(top, "__path__", ()))
            folder = Path(portions[0]).parent if portions else None
        else:
            path = Path(where)
            folder = path.parent.parent if path.name == "__init__.py" else path.parent
        if folder is not None:
            folders.append(str(folder.resolve()))
    return tuple(dict.fromkeys(folders))
