"""Tests of the declarative message selectors: type-aware matching, parsing, limits and round trips."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conveyor.actors.broker import _selectors
from conveyor.actors.broker._selectors import (
    MAX_DEPTH,
    MAX_NODES,
    AllOf,
    AnyOf,
    HeaderEquals,
    HeaderExists,
    HeaderIn,
    HeaderValue,
    MatchAll,
    Not,
    Selector,
    SelectorError,
    check_limits,
    parse_selector,
)
from conveyor.runtime import ConveyorError

RED = HeaderEquals("color", "red")
BIG = HeaderExists("big")


def error_for(data: object) -> str:
    """Return the message ``parse_selector`` raises for ``data``."""
    with pytest.raises(SelectorError) as caught:
        parse_selector(data)
    return str(caught.value)


def nested_nots(depth: int) -> dict[str, object] | None:
    """Return selector data of ``depth`` nodes: ``depth - 1`` nots around a MatchAll."""
    data: dict[str, object] | None = None
    for _ in range(depth - 1):
        data = {"not": data}
    return data


# --- type-aware equality ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "value", "expected"),
    [
        (True, True, True),
        (False, False, True),
        (True, 1, False),
        (1, True, False),
        (False, 0, False),
        (0.0, False, False),
        (1, 1.0, True),
        (1.0, 1, True),
        (0, -0.0, True),
        (2**53 + 1, float(2**53), False),
        ("1", 1, False),
        (1, "1", False),
        ("True", True, False),
        ("red", "red", True),
        ("red", "Red", False),
        (math.nan, 1.0, False),
        (math.inf, math.inf, True),
    ],
)
def test_header_equals_is_type_aware(header: HeaderValue, value: HeaderValue, expected: bool) -> None:
    assert HeaderEquals("k", value).matches({"k": header}) is expected
    assert HeaderIn("k", [value]).matches({"k": header}) is expected


def test_header_equals_needs_the_header() -> None:
    assert not HeaderEquals("k", 1).matches({})
    assert not HeaderEquals("k", 1).matches({"other": 1})


def test_values_of_other_types_in_the_headers_never_match_and_never_raise() -> None:
    odd: Mapping[str, object] = {"k": [1], "n": None, "b": b"1"}
    for key in odd:
        assert not HeaderEquals(key, 1).matches(odd)  # type: ignore[arg-type]
        assert not HeaderIn(key, [1, "1"]).matches(odd)  # type: ignore[arg-type]
        assert HeaderExists(key).matches(odd)  # type: ignore[arg-type]


def test_selector_equality_and_hash_follow_the_same_rule() -> None:
    assert HeaderEquals("k", 1) == HeaderEquals("k", 1.0)
    assert hash(HeaderEquals("k", 1)) == hash(HeaderEquals("k", 1.0))
    assert HeaderEquals("k", 1) != HeaderEquals("k", True)
    assert HeaderEquals("k", 0) != HeaderEquals("k", False)
    assert HeaderEquals("k", 1) != HeaderEquals("k", "1")
    assert HeaderIn("k", [1]) != HeaderIn("k", [True])
    assert HeaderIn("k", [1, "a"]) == HeaderIn("k", ["a", 1.0])
    assert hash(HeaderIn("k", [1, "a"])) == hash(HeaderIn("k", ["a", 1.0]))
    assert len({HeaderEquals("k", 1), HeaderEquals("k", True), HeaderEquals("k", 1.0)}) == 2


# --- each class ------------------------------------------------------------------------------------------------------


def test_header_in() -> None:
    selector = HeaderIn("color", ["red", "blue", 3])
    assert selector.values == frozenset({"red", "blue", 3})
    assert selector.matches({"color": "red"})
    assert selector.matches({"color": 3.0})
    assert not selector.matches({"color": "3"})
    assert not selector.matches({"color": "green"})
    assert not selector.matches({"shade": "red"})
    flags = HeaderIn("flag", [True])
    assert flags.matches({"flag": True})
    assert not flags.matches({"flag": 1})
    assert not flags.matches({"flag": False})


def test_header_in_accepts_any_iterable_and_merges_equal_numbers() -> None:
    assert HeaderIn("k", (v for v in [1, 2])) == HeaderIn("k", {2, 1}) == HeaderIn("k", (1, 2.0, 2))
    assert HeaderIn("k", [1, 1.0]).values == frozenset({1})
    assert HeaderIn("k", [1, 2]).to_data() == {"in": ["k", [1, 2]]}


def test_header_in_refuses_a_bool_next_to_the_number_it_would_merge_with() -> None:
    message = "HeaderIn.values holds both True (at [0]) and 1 (at [2]), which a frozenset keeps as one value"
    with pytest.raises(SelectorError, match=re.escape(message)):
        HeaderIn("k", [True, "x", 1])
    with pytest.raises(SelectorError, match=re.escape("holds both 0.0 (at [0]) and False (at [1])")):
        HeaderIn("k", [0.0, False])
    assert HeaderIn("k", [True, 0]).matches({"k": 0})
    assert HeaderIn("k", [True, 0]).matches({"k": True})
    assert not HeaderIn("k", [True, 0]).matches({"k": False})


def test_header_in_to_data_is_sorted_by_kind_then_value() -> None:
    selector = HeaderIn("k", ["b", 2.5, "a", True, -1, False])
    assert selector.to_data() == {"in": ["k", [False, True, -1, 2.5, "a", "b"]]}


def test_header_exists_ignores_the_value() -> None:
    for value in ("", 0, False, 0.0, "x"):
        assert HeaderExists("k").matches({"k": value})
    assert not HeaderExists("k").matches({"K": 1})


def test_combinators() -> None:
    red_and_big = AllOf([RED, BIG])
    red_or_big = AnyOf([RED, BIG])
    cases: list[tuple[dict[str, HeaderValue], bool, bool]] = [
        ({"color": "red", "big": True}, True, True),
        ({"color": "red"}, False, True),
        ({"big": False}, False, True),
        ({"color": "blue"}, False, False),
    ]
    for headers, both, either in cases:
        assert red_and_big.matches(headers) is both
        assert red_or_big.matches(headers) is either
        assert Not(red_and_big).matches(headers) is not both
    assert AllOf([RED]).matches({"color": "red"})
    assert not AnyOf([Not(MatchAll())]).matches({})


def test_combinators_convert_any_iterable_to_a_tuple() -> None:
    pair: list[Selector] = [RED, BIG]
    assert AllOf(selector for selector in pair).selectors == (RED, BIG)
    assert AnyOf([RED]).selectors == (RED,)
    assert AllOf([RED, BIG]) != AllOf([BIG, RED])


def test_match_all() -> None:
    assert MatchAll().matches({})
    assert MatchAll().matches({"k": 1})
    assert MatchAll() == MatchAll()
    assert MatchAll().to_data() == {}


def test_selectors_are_frozen() -> None:
    with pytest.raises(AttributeError):
        RED.key = "shade"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: HeaderEquals(3, 1), "HeaderEquals.key must be a non-empty str, got 3"),  # type: ignore[arg-type]
        (lambda: HeaderEquals("", 1), "HeaderEquals.key must be a non-empty str, got ''"),
        (lambda: HeaderEquals("k", None), "HeaderEquals.value must be a str, int, float or bool, got None"),  # type: ignore[arg-type]
        (lambda: HeaderEquals("k", math.nan), "HeaderEquals.value must not be NaN"),
        (lambda: HeaderIn(None, [1]), "HeaderIn.key must be a non-empty str, got None"),  # type: ignore[arg-type]
        (lambda: HeaderIn("k", []), "HeaderIn.values must hold at least one value, got none"),
        (lambda: HeaderIn("k", "red"), "HeaderIn.values must be an iterable of values (e.g. a list), got 'red'"),
        (lambda: HeaderIn("k", 3), "HeaderIn.values must be an iterable of values (e.g. a list), got 3"),  # type: ignore[arg-type]
        (lambda: HeaderIn("k", [1, b"x"]), "HeaderIn.values[1] must be a str, int, float or bool, got b'x'"),  # type: ignore[list-item]
        (lambda: HeaderIn("k", [math.nan]), "HeaderIn.values[0] must not be NaN"),
        (lambda: HeaderExists(""), "HeaderExists.key must be a non-empty str, got ''"),
        (lambda: AllOf([]), "AllOf.selectors must hold at least one selector, got none"),
        (lambda: AnyOf(()), "AnyOf.selectors must hold at least one selector, got none"),
        (lambda: AllOf(RED), "AllOf.selectors must be an iterable of selectors (e.g. a list), got HeaderEquals("),  # type: ignore[arg-type]
        (lambda: AnyOf([RED, "red"]), "AnyOf.selectors[1] must be a Selector, got 'red'"),  # type: ignore[list-item]
        (
            lambda: AllOf([{"exists": "k"}]),  # type: ignore[list-item]
            "AllOf.selectors[0] must be a Selector, got {'exists': 'k'}; build Selectors from data with parse_selector",
        ),
        (lambda: Not(None), "Not.selector must be a Selector, got None; build Selectors from data with parse_selector"),  # type: ignore[arg-type]
    ],
)
def test_construction_errors_name_the_field(build: object, message: str) -> None:
    assert callable(build)
    with pytest.raises(SelectorError, match=re.escape(message)):
        build()


def test_selector_error_is_a_conveyor_error_and_a_value_error() -> None:
    assert issubclass(SelectorError, ConveyorError)
    assert issubclass(SelectorError, ValueError)


# --- parsing ---------------------------------------------------------------------------------------------------------


def test_parse_each_form() -> None:
    assert parse_selector(None) == MatchAll()
    assert parse_selector({}) == MatchAll()
    assert parse_selector({"eq": ["color", "red"]}) == RED
    assert parse_selector({"eq": ("color", "red")}) == RED
    assert parse_selector({"in": ["color", ["red", "blue"]]}) == HeaderIn("color", ["blue", "red"])
    assert parse_selector({"exists": "big"}) == BIG
    assert parse_selector({"and": [{"eq": ["color", "red"]}, {"exists": "big"}]}) == AllOf([RED, BIG])
    assert parse_selector({"or": [{"eq": ["color", "red"]}, None]}) == AnyOf([RED, MatchAll()])
    assert parse_selector({"not": {"exists": "big"}}) == Not(BIG)


def test_parse_keeps_built_selectors() -> None:
    built = AllOf([RED, Not(BIG)])
    assert parse_selector(built) is built
    parsed = parse_selector({"or": [built, {"exists": "x"}]})
    assert isinstance(parsed, AnyOf)
    assert parsed.selectors[0] is built


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"equals": ["color", "red"]},
            "selector: unknown operator 'equals'; expected one of 'and', 'eq', 'exists', 'in', 'not', 'or'",
        ),
        (
            {"not": {1: "x"}},
            "selector.not: unknown operator 1; expected one of 'and', 'eq', 'exists', 'in', 'not', 'or'",
        ),
        (
            {"eq": ["a", 1], "exists": "b"},
            "selector: expected exactly one operator per dict, got 2: 'eq', 'exists'; combine them with 'and'",
        ),
        ({"and": [{"exists": "a"}, {"eq": ["color"]}]}, "selector.and[1].eq: expected [key, value], got ['color']"),
        ({"eq": ["a", 1, 2]}, "selector.eq: expected [key, value], got ['a', 1, 2]"),
        ({"eq": "color=red"}, "selector.eq: expected [key, value], got 'color=red'"),
        ({"in": ["a"]}, "selector.in: expected [key, [value, ...]], got ['a']"),
        ({"in": ["a", "red"]}, "selector.in[1]: expected a list of values, got 'red'"),
        ({"in": ["a", []]}, "selector.in[1]: the list must hold at least one value, got none"),
        ({"in": ["a", [1, None]]}, "selector.in[1][1]: the value must be a str, int, float or bool, got None"),
        ({"in": ["a", [False, 0]]}, "selector.in[1]: the list holds both False (at [0]) and 0 (at [1])"),
        ({"eq": [3, "red"]}, "selector.eq[0]: the key must be a non-empty str, got 3"),
        ({"in": [None, ["red"]]}, "selector.in[0]: the key must be a non-empty str, got None"),
        ({"or": [{"exists": ""}]}, "selector.or[0].exists: the key must be a non-empty str, got ''"),
        ({"eq": ["a", [1]]}, "selector.eq[1]: the value must be a str, int, float or bool, got [1]"),
        ({"eq": ["a", math.nan]}, "selector.eq[1]: the value must not be NaN"),
        ({"and": []}, "selector.and: expected a non-empty list of selectors, got []"),
        ({"or": []}, "selector.or: expected a non-empty list of selectors, got []"),
        ({"or": {"exists": "a"}}, "selector.or: expected a non-empty list of selectors, got {'exists': 'a'}"),
        (5, "selector: expected a selector (a dict with one operator, {} or None), got 5"),
        ({"not": ["exists", "a"]}, "selector.not: expected a selector (a dict with one operator, {} or None), got"),
    ],
)
def test_parse_errors_name_the_path(data: object, message: str) -> None:
    assert error_for(data).startswith(message)


def test_error_messages_abbreviate_huge_data() -> None:
    assert len(error_for({"eq": ["k" * 10_000]})) < 200


def test_depth_limit() -> None:
    check_limits(parse_selector(nested_nots(MAX_DEPTH)))
    message = error_for(nested_nots(MAX_DEPTH + 1))
    assert message == "selector" + ".not" * MAX_DEPTH + (
        f": the selector nests deeper than {MAX_DEPTH} levels (the limit); flatten it"
    )


def test_depth_limit_counts_an_and_as_a_level() -> None:
    data: object = {"exists": "a"}
    for _ in range(MAX_DEPTH - 1):
        data = {"and": [{"exists": "b"}, data]}
    parse_selector(data)
    assert error_for({"or": [data]}).endswith(f"nests deeper than {MAX_DEPTH} levels (the limit); flatten it")


def test_node_limit() -> None:
    leaf = {"exists": "a"}
    assert isinstance(parse_selector({"or": [leaf] * (MAX_NODES - 1)}), AnyOf)
    message = error_for({"or": [leaf] * MAX_NODES})
    assert message.startswith(f"selector.or[{MAX_NODES - 1}]: the selector has more than {MAX_NODES} nodes")


def test_node_limit_stops_early_on_huge_input() -> None:
    message = error_for({"and": [None] * 1_000_000})
    assert message.startswith(f"selector.and[{MAX_NODES - 1}]: the selector has more than")


def test_limits_apply_to_built_selectors_too() -> None:
    chain: Selector = MatchAll()
    for _ in range(10_000):  # far deeper than Python's recursion limit
        chain = Not(chain)
    with pytest.raises(SelectorError, match=f"nests deeper than {MAX_DEPTH} levels"):
        check_limits(chain)
    with pytest.raises(SelectorError, match=f"nests deeper than {MAX_DEPTH} levels"):
        parse_selector(chain)
    wide = AllOf([BIG] * MAX_NODES)
    with pytest.raises(SelectorError, match=re.escape(f"selector.and[{MAX_NODES - 1}]: the selector has more than")):
        check_limits(wide)
    # nodes: not, or, None, and, then the and's children, so child MAX_NODES - 4 is node MAX_NODES + 1
    with pytest.raises(SelectorError, match=re.escape(f"selector.not.or[1].and[{MAX_NODES - 4}]: the selector has")):
        parse_selector({"not": {"or": [None, wide]}})
    with pytest.raises(SelectorError, match=re.escape("check_limits expects a Selector, got {}")):
        check_limits({})  # type: ignore[arg-type]


def test_exports() -> None:
    public = {name for name in vars(_selectors) if not name.startswith("_")}
    assert set(_selectors.__all__) <= public
    assert len(_selectors.__all__) == len(set(_selectors.__all__))
    assert set(_selectors.__all__) >= {
        "AllOf",
        "AnyOf",
        "HeaderEquals",
        "HeaderExists",
        "HeaderIn",
        "HeaderValue",
        "MatchAll",
        "Not",
        "Selector",
        "SelectorError",
        "check_limits",
        "parse_selector",
    }


# --- properties ------------------------------------------------------------------------------------------------------

KEYS = ("a", "b", "c")
# Values chosen to collide across types: True/1/1.0/"1", False/0/-0.0/"0".
VALUES: st.SearchStrategy[HeaderValue] = st.one_of(
    st.booleans(),
    st.integers(-1, 2),
    st.sampled_from([0.0, -0.0, 1.0, 1.5, 2.0, math.inf]),
    st.sampled_from(["0", "1", "a", "True", ""]),
    st.floats(allow_nan=False),
    st.text(max_size=3),
)


def without_merged_numbers(values: list[HeaderValue]) -> list[HeaderValue]:
    """Drop every number that equals a bool in ``values``, which HeaderIn refuses to hold together."""
    bools = [value for value in values if isinstance(value, bool)]
    return [value for value in values if isinstance(value, (bool, str)) or all(value != flag for flag in bools)]


LEAVES: st.SearchStrategy[Selector] = st.one_of(
    st.builds(HeaderExists, st.sampled_from(KEYS)),
    st.builds(HeaderEquals, st.sampled_from(KEYS), VALUES),
    st.builds(HeaderIn, st.sampled_from(KEYS), st.lists(VALUES, min_size=1, max_size=5).map(without_merged_numbers)),
    st.just(MatchAll()),
)


def selectors(depth: int) -> st.SearchStrategy[Selector]:
    """Return a strategy for selector trees at most ``depth + 1`` levels deep."""
    if depth == 0:
        return LEAVES
    below = selectors(depth - 1)
    return st.one_of(
        LEAVES,
        st.lists(below, min_size=1, max_size=3).map(AllOf),
        st.lists(below, min_size=1, max_size=3).map(AnyOf),
        below.map(Not),
    )


SELECTORS = selectors(4)
HEADERS: st.SearchStrategy[dict[str, HeaderValue]] = st.dictionaries(st.sampled_from(KEYS), VALUES)


def same_value(found: object, wanted: object) -> bool:
    """The reference rule, written as a table of types rather than the module's classes."""
    numbers = (int, float)
    if type(found) is bool or type(wanted) is bool:
        return type(found) is type(wanted) and found == wanted
    if type(found) is str or type(wanted) is str:
        return type(found) is type(wanted) and found == wanted
    return isinstance(found, numbers) and isinstance(wanted, numbers) and found == wanted


def reference_matches(data: object, headers: Mapping[str, object]) -> bool:
    """Evaluate selector data (``to_data`` output) directly, independently of the selector classes."""
    assert isinstance(data, dict)
    if not data:
        return True
    assert len(data) == 1
    [(operator, argument)] = data.items()
    if operator == "eq":
        key, wanted = argument
        return key in headers and same_value(headers[key], wanted)
    if operator == "in":
        key, wanted_values = argument
        return key in headers and any(same_value(headers[key], wanted) for wanted in wanted_values)
    if operator == "exists":
        return argument in headers
    if operator == "and":
        return all(reference_matches(child, headers) for child in argument)
    if operator == "or":
        return any(reference_matches(child, headers) for child in argument)
    assert operator == "not"
    return not reference_matches(argument, headers)


@given(SELECTORS, HEADERS)
def test_matches_agrees_with_the_reference_evaluator(selector: Selector, headers: dict[str, HeaderValue]) -> None:
    assert selector.matches(headers) is reference_matches(selector.to_data(), headers)


def mentioned_values(data: object) -> list[object]:
    """Collect every value that selector data compares with, so headers can be built to hit them."""
    assert isinstance(data, dict)
    found: list[object] = []
    for operator, argument in data.items():
        if operator == "eq":
            found.append(argument[1])
        elif operator == "in":
            found.extend(argument[1])
        elif operator in ("and", "or"):
            for child in argument:
                found.extend(mentioned_values(child))
        elif operator == "not":
            found.extend(mentioned_values(argument))
    return found


@given(SELECTORS, st.data())
def test_headers_built_from_the_selector_agree_with_the_reference(selector: Selector, data: st.DataObject) -> None:
    # Random headers rarely hit an "in" list; draw header values from the selector's own values so they do.
    selector_data = selector.to_data()
    mentioned = [value for value in mentioned_values(selector_data) if isinstance(value, (str, int, float))]
    pool: list[HeaderValue] = [*mentioned, True, False, 0, 1, 1.0, "1"]
    headers = data.draw(st.dictionaries(st.sampled_from(KEYS), st.sampled_from(pool)))
    assert selector.matches(headers) is reference_matches(selector_data, headers)


@given(SELECTORS)
def test_round_trip(selector: Selector) -> None:
    data = selector.to_data()
    again = parse_selector(data)
    assert again == selector
    assert hash(again) == hash(selector)
    assert again.to_data() == data
    assert parse_selector(json.loads(json.dumps(data))) == selector


@given(SELECTORS, HEADERS)
def test_equal_selectors_match_alike(selector: Selector, headers: dict[str, HeaderValue]) -> None:
    again = parse_selector(json.loads(json.dumps(selector.to_data())))
    assert again.matches(headers) is selector.matches(headers)
