"""The subscription filter parser: the documented syntax, and errors that say where."""

from __future__ import annotations

import pytest

from conveyor.actors.pubsub import FilterError, parse_filter


@pytest.mark.parametrize(
    ("text", "attributes", "expected"),
    [
        ("", {}, True),
        ('attributes.color = "red"', {"color": "red"}, True),
        ('attributes.color = "red"', {"color": "blue"}, False),
        ('attributes.color = "red"', {}, False),
        ('attributes.color != "red"', {}, True),
        ('attributes.color != "red"', {"color": "red"}, False),
        ("attributes:color", {"color": ""}, True),
        ("attributes:color", {"size": "1"}, False),
        ("NOT attributes:color", {"size": "1"}, True),
        ("-attributes:color", {"color": "x"}, False),
        ('hasPrefix(attributes.region, "eu-")', {"region": "eu-west"}, True),
        ('hasPrefix(attributes.region, "eu-")', {"region": "us-east"}, False),
        ('hasPrefix(attributes.region, "eu-")', {}, False),
        ('attributes.a = "1" AND attributes.b = "2"', {"a": "1", "b": "2"}, True),
        ('attributes.a = "1" AND attributes.b = "2"', {"a": "1"}, False),
        ('attributes.a = "1" OR attributes.b = "2"', {"b": "2"}, True),
        ('(attributes.a = "1" OR attributes.b = "2") AND NOT attributes:skip', {"a": "1", "skip": "y"}, False),
        ('(attributes.a = "1" OR attributes.b = "2") AND NOT attributes:skip', {"a": "1"}, True),
        ("attributes.quote = 'it\\'s'", {"quote": "it's"}, True),
    ],
)
def test_filters_match_as_documented(text: str, attributes: dict[str, str], expected: bool) -> None:
    assert parse_filter(text).matches(attributes) is expected


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('attributes.a = "1" AND attributes.b = "2" OR attributes.c = "3"', "AND and OR mixed"),
        ("attributes.a = 1", "unexpected character '1' at character 14"),
        ('attributes.a == "1"', "expected a quoted string, found '='"),
        ('color = "red"', "expected attributes.KEY"),
        ('(attributes.a = "1"', "ended"),
        ('hasPrefix(attributes.a "x")', "expected ','"),
        ('attributes.a = "1" $', "unexpected character"),
        ("attributes:" + "k" * 300, "more than the 256 bytes"),
    ],
)
def test_bad_filters_name_the_problem(text: str, says: str) -> None:
    with pytest.raises(FilterError, match="filter") as caught:
        parse_filter(text)
    assert says in str(caught.value)
