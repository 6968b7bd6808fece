"""The Prometheus text conveyor serves reads back as the figures it was made of, whatever the names."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from conveyor.actors.broker import QueueStats
from conveyor.actors.metrics import (
    QUEUE_INSTRUMENTS,
    ConveyorMetrics,
    observations,
    prometheus_name,
    prometheus_text,
)

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)\{queue="((?:[^"\\]|\\.)*)"\} (\S+)$')


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n"}.get(m.group(1), m.group(1)), value)


def parse(text: str) -> tuple[dict[str, str], dict[tuple[str, str], float]]:
    """A small reader of the text format: family types, and (sample name, queue label) -> value."""
    types: dict[str, str] = {}
    samples: dict[tuple[str, str], float] = {}
    for line in text.split("\n"):  # the format's only line break (str.splitlines knows a dozen)
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            types[name] = kind
        elif line and not line.startswith("#"):
            found = _SAMPLE.match(line)
            assert found is not None, line
            samples[(found.group(1), _unescape(found.group(2)))] = float(found.group(3))
    return types, samples


counts = st.integers(min_value=0, max_value=10**12)
queue_stats = st.builds(
    QueueStats, queue=st.text(max_size=20), depth=counts, in_flight=counts, published=counts, delivered=counts,
    acked=counts, redelivered=counts, dead_lettered=counts, expired=counts, rejected=counts,
    consumers=st.just(()), returned=counts,
)


_shown: list[QueueStats] = []
_reader = InMemoryMetricReader()
_metrics = ConveyorMetrics(queues=lambda: _shown, meter_provider=MeterProvider(metric_readers=[_reader]))


@given(st.lists(queue_stats, max_size=4, unique_by=lambda s: s.queue))
def test_every_observation_reads_back_from_the_text_with_its_type(stats: list[QueueStats]) -> None:
    _shown[:] = stats  # one provider for every example: building one costs more than the test
    snapshot = _metrics.refresh()
    reader = _reader
    types, samples = parse(prometheus_text(reader.get_metrics_data()))
    expected = {}
    for instrument, value, attributes in observations(snapshot):
        name = prometheus_name(instrument.name) + ("_total" if instrument.kind == "counter" else "")
        assert types[name] == instrument.kind
        expected[(name, attributes["queue"])] = float(value)
    assert samples == expected


def test_the_names_are_the_documented_ones() -> None:
    stats = QueueStats("q", 1, 2, 3, 4, 5, 6, 7, 8, 9, (), returned=10)
    reader = InMemoryMetricReader()
    ConveyorMetrics(queues=lambda: [stats], meter_provider=MeterProvider(metric_readers=[reader]))
    _, samples = parse(prometheus_text(reader.get_metrics_data()))
    assert samples == {
        ("conveyor_queue_depth", "q"): 1, ("conveyor_queue_in_flight", "q"): 2,
        ("conveyor_queue_published_total", "q"): 3, ("conveyor_queue_deliveries_total", "q"): 4,
        ("conveyor_queue_acks_total", "q"): 5, ("conveyor_queue_redeliveries_total", "q"): 6,
        ("conveyor_queue_dead_letters_total", "q"): 7, ("conveyor_queue_expired_total", "q"): 8,
        ("conveyor_queue_rejected_total", "q"): 9, ("conveyor_queue_nacks_total", "q"): 10,
    }
    assert len(QUEUE_INSTRUMENTS) == len(samples)


def test_one_collection_asks_the_actors_once_and_a_stale_snapshot_is_taken_again() -> None:
    asked: list[int] = []
    now = [0.0]

    def queues() -> list[QueueStats]:
        asked.append(1)
        return [QueueStats("q", len(asked), 0, 0, 0, 0, 0, 0, 0, 0, ())]

    reader = InMemoryMetricReader()
    ConveyorMetrics(queues=queues, meter_provider=MeterProvider(metric_readers=[reader]), max_age_s=5.0,
                    clock=lambda: now[0])
    _, first = parse(prometheus_text(reader.get_metrics_data()))
    assert len(asked) == 1 and first[("conveyor_queue_depth", "q")] == 1
    now[0] = 6.0
    _, second = parse(prometheus_text(reader.get_metrics_data()))
    assert len(asked) == 2 and second[("conveyor_queue_depth", "q")] == 2


def test_no_source_and_a_bad_max_age_are_refused_naming_them() -> None:
    import pytest

    with pytest.raises(ValueError, match="queues=, subscribers="):
        ConveyorMetrics()
    with pytest.raises(ValueError, match="max_age_s must be a finite number"):
        ConveyorMetrics(queues=list, max_age_s=float("nan"))
