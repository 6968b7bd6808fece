"""``conveyor.runtime.extras``: a missing extra is named with its pip line; lazy names import once, on first use."""

from __future__ import annotations

import sys
import types

import pytest

from conveyor.runtime.extras import EXTRAS, MissingExtra, lazy_exports, missing_modules, require_extra


def test_the_message_names_the_feature_the_extra_and_the_pip_line() -> None:
    error = MissingExtra("conveyor sweep", "spark", ("pyspark",))
    assert str(error) == "conveyor sweep needs the 'spark' extra: pip install 'conveyor[spark]' (pyspark not installed)"
    assert isinstance(error, ImportError)
    assert (error.feature, error.extra, error.missing) == ("conveyor sweep", "spark", ("pyspark",))


def test_the_message_names_each_missing_top_level_package_once() -> None:
    error = MissingExtra("conveyor serve", "pubsub", ("grpc", "google.protobuf", "google.pubsub_v1"))
    assert str(error).endswith("(grpc, google not installed)")


def test_a_module_set_to_none_counts_as_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "kazoo", None)
    assert missing_modules("zookeeper") == ("kazoo",)
    said = r"^KazooSession needs the 'zookeeper' extra: pip install 'conveyor\[zookeeper\]' \(kazoo not installed\)$"
    with pytest.raises(MissingExtra, match=said):
        require_extra("zookeeper", "KazooSession")


def test_a_missing_parent_package_counts_as_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "google", None)
    assert {"google.protobuf", "google.pubsub_v1", "google.cloud.pubsub_v1"} <= set(missing_modules("pubsub"))


def test_installed_extras_pass() -> None:
    """The dev venv has every extra (``make install`` installs ``.[all,dev]``)."""
    for extra in EXTRAS:
        assert missing_modules(extra) == ()
        require_extra(extra, "anything")


def test_an_unknown_extra_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match="extra must be one of spark, pubsub, plots, zookeeper, metrics, got 'sprak'"):
        missing_modules("sprak")
    with pytest.raises(ValueError, match="got 'sprak'"):
        lazy_exports("somewhere", "sprak", {})


def _package_with(monkeypatch: pytest.MonkeyPatch, extra: str) -> types.ModuleType:
    """A throwaway package ``lazy_pkg`` whose ``dumps`` is lazily exported from its ``.json_home`` module."""
    package = types.ModuleType("lazy_pkg")
    package.__path__ = []
    home = types.ModuleType("lazy_pkg.json_home")
    home.dumps = lambda value: f"<{value}>"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "lazy_pkg", package)
    monkeypatch.setitem(sys.modules, "lazy_pkg.json_home", home)
    setattr(package, "__getattr__", lazy_exports("lazy_pkg", extra, {".json_home": ("dumps",)}))  # noqa: B010
    return package


def test_a_lazy_name_is_imported_on_first_use_and_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    package = _package_with(monkeypatch, "plots")
    assert "dumps" not in vars(package)
    assert package.dumps(1) == "<1>"
    assert "dumps" in vars(package)  # the second read is a plain attribute


def test_an_unknown_name_is_an_attribute_error(monkeypatch: pytest.MonkeyPatch) -> None:
    package = _package_with(monkeypatch, "plots")
    with pytest.raises(AttributeError, match="module 'lazy_pkg' has no attribute 'loads'"):
        _ = package.loads


def test_a_lazy_name_without_its_extra_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    package = _package_with(monkeypatch, "plots")
    monkeypatch.setitem(sys.modules, "lazy_pkg.json_home", None)  # its home fails to import ...
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # ... because the extra is missing
    with pytest.raises(MissingExtra, match=r"^lazy_pkg.dumps needs the 'plots' extra: pip install 'conveyor\[plots\]'"):
        _ = package.dumps


def test_a_home_that_fails_for_another_reason_raises_its_own_error(monkeypatch: pytest.MonkeyPatch) -> None:
    package = _package_with(monkeypatch, "plots")
    monkeypatch.setitem(sys.modules, "lazy_pkg.json_home", None)  # plots installed: not the extra's fault
    with pytest.raises(ModuleNotFoundError) as caught:
        _ = package.dumps
    assert not isinstance(caught.value, MissingExtra)
