"""conveyor's optional parts and the error that names the one to install: the light install stays light.

``pip install conveyor`` brings the kernel, the broker, the subscriber and the simulator; each extra
(``pip install 'conveyor[spark]'``) brings the third-party packages of one feature. A package whose
public names need an extra exports them through ``lazy_exports``, so importing the package costs
nothing and touching such a name without its extra raises ``MissingExtra`` saying what to install.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Mapping

from ._errors import ConveyorError

__all__ = ["EXTRAS", "MissingExtra", "lazy_exports", "missing_modules", "require_extra"]

EXTRAS: Mapping[str, tuple[str, ...]] = {
    "spark": ("pyspark",),
    "pubsub": ("grpc", "grpc_status", "google.protobuf", "google.pubsub_v1", "google.cloud.pubsub_v1", "fastavro",
               "grpc_tools"),
    "plots": ("matplotlib",),
    "zookeeper": ("kazoo",),
    "metrics": ("opentelemetry.metrics", "opentelemetry.sdk.metrics"),
}
"""Each extra of ``pyproject.toml`` and the modules it brings (``all`` is every one of them)."""


class MissingExtra(ConveyorError, ImportError):
    """A feature needs an optional extra that is not installed; the message says how to install it."""

    def __init__(self, feature: str, extra: str, missing: tuple[str, ...] = ()) -> None:
        self.feature = feature
        self.extra = extra
        self.missing = missing
        packages = dict.fromkeys(module.partition(".")[0] for module in missing)  # grpc, google: not each module
        absent = f" ({', '.join(packages)} not installed)" if missing else ""
        super().__init__(f"{feature} needs the {extra!r} extra: pip install 'conveyor[{extra}]'{absent}")


def _known(extra: str) -> tuple[str, ...]:
    try:
        return EXTRAS[extra]
    except KeyError:
        raise ValueError(f"extra must be one of {', '.join(EXTRAS)}, got {extra!r}") from None


def _installed(module: str) -> bool:
    parts = module.split(".")
    prefixes = [".".join(parts[: depth + 1]) for depth in range(len(parts))]
    if any(prefix in sys.modules and sys.modules[prefix] is None for prefix in prefixes):
        return False  # set to None (blocked): ``import`` fails even with the module itself loaded
    if sys.modules.get(module) is not None:
        return True
    try:
        return importlib.util.find_spec(module) is not None  # None also for a module set to None in sys.modules
    except (ImportError, ValueError):  # a parent package (``google`` of ``google.pubsub_v1``) is missing
        return False


def missing_modules(extra: str) -> tuple[str, ...]:
    """The modules of ``extra`` that cannot be imported here (empty when it is installed); nothing is imported."""
    return tuple(module for module in _known(extra) if not _installed(module))


def require_extra(extra: str, feature: str) -> None:
    """Raise ``MissingExtra`` naming ``feature`` (``"conveyor sweep"``) when ``extra`` is not installed."""
    missing = missing_modules(extra)
    if missing:
        raise MissingExtra(feature, extra, missing)


def lazy_exports(package: str, extra: str, homes: Mapping[str, tuple[str, ...]]) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``package`` that imports the names of ``homes`` (module -> names) on first use.

    Assign it as ``__getattr__`` behind ``if not TYPE_CHECKING`` and import the same names under
    ``TYPE_CHECKING``, so type checkers see them as ordinary imports. Without ``extra`` installed,
    reading one of the names raises ``MissingExtra`` naming it; every other name is an ``AttributeError``.
    """
    _known(extra)
    home_of = {name: module for module, names in homes.items() for name in names}

    def get_attribute(name: str) -> object:
        home = home_of.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        try:
            module = importlib.import_module(home, package)
        except ModuleNotFoundError as error:
            missing = missing_modules(extra)
            if not missing:
                raise
            raise MissingExtra(f"{package}.{name}", extra, missing) from error
        value = getattr(module, name)
        setattr(sys.modules[package], name, value)  # later reads skip this function
        return value

    return get_attribute
