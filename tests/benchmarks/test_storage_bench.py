"""The storage benchmark runs on a tiny load and reports every figure (no timing assertions, no RabbitMQ)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conveyor.actors.storage import IndexEntry
from conveyor.benchmarks._storage_core import decode_entry, encode_entry
from conveyor.benchmarks._storage_throughput import memory_option
from conveyor.benchmarks.storage import main
from tests.benchmarks.figures import assert_figures


def test_main_reports_every_figure_and_draws_the_rss(tmp_path: Path) -> None:
    png = tmp_path / "rss.png"
    data = tmp_path / "data"
    data.mkdir()
    figures = main(messages=300, memory_messages=3000, size=256, memory_target_mib=1, rabbitmq=False,
                   png=str(png), directory=str(data))
    assert_figures(figures, (
        "conveyor_publish_per_s", "conveyor_consume_per_s", "conveyor_end_to_end_per_s", "ratio_end_to_end_vs_target",
        "core_peak_rss_mib", "core_peak_vs_limit", "broker_peak_rss_mib", "broker_peak_vs_limit",
        "reopen_clean_s", "reopen_crash_s", "reopen_crash_vs_limit", "disk_per_live_byte", "gc_disk_per_live_byte",
        "broker_reopen_s", "broker_reopen_vs_limit", "broker_reopen_peak_rss_mib",
    ))
    assert "rabbitmq_publish_per_s" not in figures
    assert figures["gc_disk_per_live_byte"] < figures["acked_disk_per_live_byte"]
    assert png.read_bytes().startswith(b"\x89PNG")
    assert list(data.iterdir()) == []  # every data directory removed


def test_an_index_record_reads_back_as_written() -> None:
    for entry in (IndexEntry(7, "m-7", 3, True, False, b"abc"), IndexEntry(2**40, "", 5000, False, False, None)):
        assert decode_entry(encode_entry(entry), delivered=False) == entry
    assert decode_entry(encode_entry(IndexEntry(1, "x", 1, True, False, b"y")), delivered=True).delivered


def test_a_memory_option_must_be_a_queue_config_field() -> None:
    with pytest.raises(ValueError, match="one of"):
        memory_option("no_such_field")
    assert memory_option("max_length") == "max_length"


def test_conveyors_side_runs_in_a_process_without_the_simulator_or_client_libraries() -> None:
    # Its garbage collector would walk their objects on every full collection of a run.
    code = ("import sys, conveyor.benchmarks._throughput_child; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'google', 'grpc', 'rich', 'matplotlib'}), "
            "any(m.startswith('conveyor.simulation') for m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["[]", "False"]
