"""The one check every benchmark smoke test makes: each expected figure is there, a positive float."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping


def assert_figures(figures: Mapping[str, float], expected: Iterable[str], *, every_figure: bool = False) -> None:
    """Every ``expected`` key is present; the checked ones (all, with ``every_figure``) are positive finite floats."""
    expected = tuple(expected)
    missing = [key for key in expected if key not in figures]
    assert not missing, f"missing figures: {missing}"
    for key in figures if every_figure else expected:
        value = figures[key]
        assert isinstance(value, float), f"{key} is {type(value).__qualname__}"
        assert math.isfinite(value), f"{key} = {value}"
        assert value > 0, f"{key} = {value}"
