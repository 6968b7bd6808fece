"""The transactions benchmark runs on a tiny load and reports every figure (no timing assertions).

Its ZooKeeper rows start a local server: ``make test`` installs ZooKeeper first.
"""

from __future__ import annotations

from conveyor.benchmarks.transactions import main
from tests.benchmarks.figures import assert_figures


def test_main_reports_every_figure() -> None:
    figures = main(transactions=80, repeat=1, zk_transactions=40)
    assert_figures(figures, ("tx_per_s_1_clients", "tx_per_s_8_clients", "tx_per_s_1_clients_durable",
                             "tx_per_s_8_clients_durable", "tx_per_s_1_clients_ratio_to_target",
                             "tx_per_s_1_clients_per_cpu_s", "zk_raw_kazoo_tx_per_s", "zk_tx_per_s_1_worker",
                             "zk_tx_per_s_8_concurrent", "zk_1_worker_ratio_to_raw_kazoo",
                             "zk_8_concurrent_ratio_to_raw_kazoo", "zk_tx_per_s_1_worker_bodies_read",
                             "zk_tx_per_s_8_concurrent_bodies_read", "zk_calls_per_tx", "load_average_1_min"),
                   every_figure=True)
